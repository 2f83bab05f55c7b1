//! The SDK calls: secrets read, created and updated in Secrets Manager, the stack created,
//! updated or left alone in CloudFormation, waited for, deleted. Each step first reads
//! what exists and only writes what differs, so that a repeated run is a no-op.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region};
use aws_sdk_cloudformation::config::{ProvideCredentials as _, SharedCredentialsProvider};
use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_sdk_cloudformation::types::{Capability, Parameter, Stack, Tag};
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};

use crate::error::{Error, aws};
use crate::plan::{
    Change, Deleted, Deployment, Keys, Outcome, SECRETS, Step, TEMPLATE, secret_name,
    stack_parameters,
};

/// Where the AWS APIs are: `endpoint` overrides every service's (a local emulator),
/// `region` the SDK's own choice. Credentials come from the SDK's usual chain.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// Deploys and deletes Toren's stack and secrets.
pub struct Deployer {
    cfn: aws_sdk_cloudformation::Client,
    sm: aws_sdk_secretsmanager::Client,
    /// The SDK's credential chain, asked once before the first call.
    credentials: Option<SharedCredentialsProvider>,
    poll: Duration,
    give_up: Duration,
}

/// A secret as it is in Secrets Manager.
struct Existing {
    arn: String,
    value: Option<String>,
}

impl Deployer {
    /// Clients for `target` (HTTPS through rustls on ring).
    pub async fn connect(target: &Target) -> Self {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
        if let Some(endpoint) = &target.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        if let Some(region) = &target.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let config = loader.load().await;
        Self {
            cfn: aws_sdk_cloudformation::Client::new(&config),
            sm: aws_sdk_secretsmanager::Client::new(&config),
            credentials: config.credentials_provider(),
            poll: Duration::from_secs(5),
            give_up: Duration::from_secs(3600),
        }
    }

    /// Fails unless the SDK's chain finds credentials (variables, profile, SSO, instance
    /// role): without them every call would fail the same way, each with a longer message.
    async fn require_credentials(&self) -> Result<(), Error> {
        let Some(provider) = &self.credentials else {
            return Err(Error::NoCredentials {
                reason: "the SDK has no credential provider".to_owned(),
            });
        };
        provider
            .provide_credentials()
            .await
            .map(drop)
            .map_err(|e| Error::NoCredentials {
                reason: crate::error::causes(&e),
            })
    }

    /// How often a stack under way is looked at (5 s by default).
    #[must_use]
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Stores the secrets and creates or updates the stack; with `dry_run`, only reads
    /// and says what it would do.
    pub async fn deploy(
        &self,
        deployment: &Deployment,
        keys: &Keys,
        dry_run: bool,
    ) -> Result<Outcome, Error> {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        let e2b = given(&keys.e2b_api_key).ok_or(Error::MissingKey("E2B_API_KEY"))?;
        self.require_credentials().await?;
        let stack = &deployment.stack;
        let mut steps = Vec::new();
        let mut arns = BTreeMap::new();
        let mut pending_arn = false;
        for (short, _) in SECRETS {
            let name = secret_name(stack, short);
            let existing = self.secret(&name).await?;
            let wanted = match *short {
                "database-password" => None,
                "api-token" => given(&keys.api_token),
                "e2b-api-key" => Some(e2b.clone()),
                "anthropic-api-key" => given(&keys.anthropic_api_key),
                _ => given(&keys.openai_api_key),
            };
            let change = match (&existing, &wanted) {
                (Some(_), None) => Change::Unchanged,
                (Some(e), Some(w)) if e.value.as_deref() == Some(w.as_str()) => Change::Unchanged,
                (Some(_), Some(_)) => Change::Update,
                (None, Some(_)) => Change::Create,
                // Made here: the database password, and an API token nobody gave.
                (None, None) if matches!(*short, "database-password" | "api-token") => {
                    Change::Create
                }
                (None, None) => continue,
            };
            steps.push(Step {
                what: format!("secret {name}"),
                change,
            });
            let arn = match (change, existing, dry_run) {
                (_, Some(e), true) | (Change::Unchanged, Some(e), false) => Some(e.arn),
                (_, None, true) => {
                    pending_arn = true;
                    None
                }
                (_, Some(e), false) => {
                    let value = wanted.unwrap_or_default();
                    self.sm
                        .put_secret_value()
                        .secret_id(&e.arn)
                        .secret_string(value)
                        .send()
                        .await
                        .map_err(|e| aws("PutSecretValue", &e))?;
                    Some(e.arn)
                }
                (_, None, false) => {
                    let value = match wanted {
                        Some(v) => v,
                        None => {
                            self.random(if *short == "api-token" { 48 } else { 32 })
                                .await?
                        }
                    };
                    let made = self
                        .sm
                        .create_secret()
                        .name(&name)
                        .description(format!("Toren ({stack}): {short}, read by its ECS tasks"))
                        .secret_string(value)
                        .tags(
                            aws_sdk_secretsmanager::types::Tag::builder()
                                .key("toren:stack")
                                .value(stack)
                                .build(),
                        )
                        .send()
                        .await
                        .map_err(|e| aws("CreateSecret", &e))?;
                    made.arn
                }
            };
            if let Some(arn) = arn {
                arns.insert((*short).to_owned(), arn);
            }
        }

        let parameters = stack_parameters(deployment, &arns);
        let current = self.stack(stack).await?;
        let change = match &current {
            None => Change::Create,
            // A secret it needs is still to be made: its ARN is new.
            Some(_) if pending_arn => Change::Update,
            Some(s) => {
                let template = self
                    .cfn
                    .get_template()
                    .stack_name(stack)
                    .send()
                    .await
                    .map_err(|e| aws("GetTemplate", &e))?
                    .template_body
                    .unwrap_or_default();
                if template == TEMPLATE && same_parameters(s, &parameters) {
                    Change::Unchanged
                } else {
                    Change::Update
                }
            }
        };
        let mut api_url = current.as_ref().and_then(api_url_of);
        if !dry_run && change != Change::Unchanged {
            let params: Vec<Parameter> = parameters
                .iter()
                .map(|(k, v)| {
                    Parameter::builder()
                        .parameter_key(k)
                        .parameter_value(v)
                        .build()
                })
                .collect();
            let tag = Tag::builder().key("toren:stack").value(stack).build();
            let done = if change == Change::Create {
                self.cfn
                    .create_stack()
                    .stack_name(stack)
                    .template_body(TEMPLATE)
                    .set_parameters(Some(params))
                    .capabilities(Capability::CapabilityIam)
                    .tags(tag)
                    .send()
                    .await
                    .map_err(|e| aws("CreateStack", &e))?;
                true
            } else {
                match self
                    .cfn
                    .update_stack()
                    .stack_name(stack)
                    .template_body(TEMPLATE)
                    .set_parameters(Some(params))
                    .capabilities(Capability::CapabilityIam)
                    .tags(tag)
                    .send()
                    .await
                {
                    Ok(_) => true,
                    Err(e) if e.message().is_some_and(|m| m.contains("No updates")) => false,
                    Err(e) => return Err(aws("UpdateStack", &e)),
                }
            };
            if done {
                let settled = self.wait(stack, false).await?;
                api_url = settled.as_ref().and_then(api_url_of);
            }
            steps.push(Step {
                what: format!("stack {stack}"),
                change: if done { change } else { Change::Unchanged },
            });
        } else {
            steps.push(Step {
                what: format!("stack {stack}"),
                change,
            });
        }
        Ok(Outcome {
            steps,
            api_url,
            api_token_secret: secret_name(stack, "api-token"),
            dry_run,
        })
    }

    /// Deletes the stack (RDS leaves its final snapshot) and, with `delete_secrets`,
    /// schedules the secrets for deletion (7 days' recovery window); otherwise keeps them.
    pub async fn delete(&self, stack: &str, delete_secrets: bool) -> Result<Deleted, Error> {
        self.require_credentials().await?;
        let stack_deleted = if self.stack(stack).await?.is_some() {
            self.cfn
                .delete_stack()
                .stack_name(stack)
                .send()
                .await
                .map_err(|e| aws("DeleteStack", &e))?;
            self.wait(stack, true).await?;
            true
        } else {
            false
        };
        let mut deleted = Deleted {
            stack_deleted,
            secrets_deleted: Vec::new(),
            secrets_kept: Vec::new(),
        };
        for (short, _) in SECRETS {
            let name = secret_name(stack, short);
            if self.secret(&name).await?.is_none() {
                continue;
            }
            if delete_secrets {
                self.sm
                    .delete_secret()
                    .secret_id(&name)
                    .recovery_window_in_days(7)
                    .send()
                    .await
                    .map_err(|e| aws("DeleteSecret", &e))?;
                deleted.secrets_deleted.push(name);
            } else {
                deleted.secrets_kept.push(name);
            }
        }
        Ok(deleted)
    }

    /// The secret `name` with its value, if it exists (one scheduled for deletion counts
    /// as absent).
    async fn secret(&self, name: &str) -> Result<Option<Existing>, Error> {
        let described = match self.sm.describe_secret().secret_id(name).send().await {
            Ok(d) => d,
            Err(e) if e.code() == Some("ResourceNotFoundException") => return Ok(None),
            Err(e) => return Err(aws("DescribeSecret", &e)),
        };
        if described.deleted_date.is_some() {
            return Ok(None);
        }
        let arn = described.arn.unwrap_or_else(|| name.to_owned());
        let value = self
            .sm
            .get_secret_value()
            .secret_id(&arn)
            .send()
            .await
            .map_err(|e| aws("GetSecretValue", &e))?
            .secret_string;
        Ok(Some(Existing { arn, value }))
    }

    /// A random secret of `len` letters and digits, from Secrets Manager.
    async fn random(&self, len: i64) -> Result<String, Error> {
        self.sm
            .get_random_password()
            .password_length(len)
            .exclude_punctuation(true)
            .send()
            .await
            .map_err(|e| aws("GetRandomPassword", &e))?
            .random_password
            .ok_or_else(|| Error::Aws {
                action: "GetRandomPassword",
                message: "no password in the answer".to_owned(),
            })
    }

    /// The stack, if it exists (deleted stacks do not).
    async fn stack(&self, stack: &str) -> Result<Option<Stack>, Error> {
        match self.cfn.describe_stacks().stack_name(stack).send().await {
            Ok(out) => Ok(out
                .stacks
                .unwrap_or_default()
                .into_iter()
                .next()
                .filter(|s| status(s) != "DELETE_COMPLETE")),
            Err(e) if e.message().is_some_and(|m| m.contains("does not exist")) => Ok(None),
            Err(e) => Err(aws("DescribeStacks", &e)),
        }
    }

    /// Waits for the stack to settle; fails on a failed or rolled-back end.
    async fn wait(&self, stack: &str, deleting: bool) -> Result<Option<Stack>, Error> {
        let started = Instant::now();
        loop {
            let current = self.stack(stack).await?;
            let Some(s) = current else {
                return if deleting {
                    Ok(None)
                } else {
                    Err(Error::StackFailed {
                        stack: stack.to_owned(),
                        status: "gone".to_owned(),
                        reason: None,
                    })
                };
            };
            let now = status(&s);
            if !now.ends_with("_IN_PROGRESS") {
                let ok = matches!(now.as_str(), "CREATE_COMPLETE" | "UPDATE_COMPLETE");
                return if ok && !deleting {
                    Ok(Some(s))
                } else {
                    Err(Error::StackFailed {
                        stack: stack.to_owned(),
                        status: now,
                        reason: s.stack_status_reason,
                    })
                };
            }
            if started.elapsed() > self.give_up {
                return Err(Error::Timeout {
                    stack: stack.to_owned(),
                    status: now,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tracing::info!(stack, status = %now, "waiting for the stack");
            tokio::time::sleep(self.poll).await;
        }
    }
}

fn status(s: &Stack) -> String {
    s.stack_status
        .as_ref()
        .map(|s| s.as_str().to_owned())
        .unwrap_or_default()
}

fn api_url_of(s: &Stack) -> Option<String> {
    s.outputs()
        .iter()
        .find(|o| o.output_key() == Some("ApiUrl"))
        .and_then(|o| o.output_value().map(str::to_owned))
}

/// Whether the stack's parameters are `wanted`. A list parameter may come back in the
/// form `['a', 'b']` (as moto reports them) rather than `a,b`; both read the same.
fn same_parameters(s: &Stack, wanted: &BTreeMap<String, String>) -> bool {
    let have: BTreeMap<String, String> = s
        .parameters()
        .iter()
        .filter_map(|p| {
            Some((
                p.parameter_key()?.to_owned(),
                normalise(p.parameter_value().unwrap_or_default()),
            ))
        })
        .collect();
    wanted
        .iter()
        .all(|(k, v)| have.get(k).map(String::as_str) == Some(normalise(v).as_str()))
}

fn normalise(value: &str) -> String {
    match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        Some(inner) => inner
            .split(',')
            .map(|item| item.trim().trim_matches('\'').trim_matches('"'))
            .collect::<Vec<_>>()
            .join(","),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn list_parameters_read_the_same_in_either_form() {
        assert_eq!(normalise("['']"), "");
        assert_eq!(normalise("['subnet-1', 'subnet-2']"), "subnet-1,subnet-2");
        assert_eq!(normalise("subnet-1,subnet-2"), "subnet-1,subnet-2");
        assert_eq!(normalise("x:1"), "x:1");
    }
}

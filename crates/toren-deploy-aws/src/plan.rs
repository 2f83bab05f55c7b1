//! The pure parts of a deployment: what it is given, the secrets' names, the stack's
//! parameters, and what a run did (or, dry, would do).

use std::collections::BTreeMap;
use std::fmt;

/// The CloudFormation template, `deploy/aws/toren.yaml`.
pub const TEMPLATE: &str = include_str!("../../../deploy/aws/toren.yaml");

/// What to deploy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployment {
    /// The stack's name; also the secrets' prefix (`toren/<stack>/…`).
    pub stack: String,
    /// The Toren image the tasks run (e.g. an ECR URI).
    pub image: String,
    /// The ACM certificate of the HTTPS listener.
    pub certificate_arn: String,
    /// An existing VPC, else the stack makes one.
    pub vpc: Option<GivenVpc>,
    /// How many worker tasks.
    pub workers: u32,
}

/// An existing network to deploy into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenVpc {
    pub vpc_id: String,
    /// Public subnets for the load balancer (two or more).
    pub public_subnets: Vec<String>,
    /// Private subnets with a NAT route for the tasks and the database (two or more).
    pub private_subnets: Vec<String>,
}

/// The secret values, from the operator's environment. Empty values count as absent.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keys {
    pub anthropic_api_key: Option<String>,
    pub openai_api_key: Option<String>,
    pub e2b_api_key: Option<String>,
    /// `TOREN_API_TOKEN`; one is made (and kept) when none is given.
    pub api_token: Option<String>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |v: &Option<String>| if v.is_some() { "set" } else { "unset" };
        f.debug_struct("Keys")
            .field("anthropic_api_key", &set(&self.anthropic_api_key))
            .field("openai_api_key", &set(&self.openai_api_key))
            .field("e2b_api_key", &set(&self.e2b_api_key))
            .field("api_token", &set(&self.api_token))
            .finish()
    }
}

/// The secrets a deployment keeps, by short name: (name, the stack parameter that gets
/// its ARN).
pub(crate) const SECRETS: &[(&str, &str)] = &[
    ("database-password", "DbPasswordSecretArn"),
    ("api-token", "ApiTokenSecretArn"),
    ("e2b-api-key", "E2bKeySecretArn"),
    ("anthropic-api-key", "AnthropicKeySecretArn"),
    ("openai-api-key", "OpenaiKeySecretArn"),
];

/// The Secrets Manager name of a deployment's secret.
pub fn secret_name(stack: &str, short: &str) -> String {
    format!("toren/{stack}/{short}")
}

/// The stack's parameters, given the ARNs of the secrets by short name (an absent
/// optional secret passes an empty ARN).
pub fn stack_parameters(
    deployment: &Deployment,
    arns: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut p = BTreeMap::new();
    p.insert("ImageUri".to_owned(), deployment.image.clone());
    p.insert(
        "CertificateArn".to_owned(),
        deployment.certificate_arn.clone(),
    );
    let (vpc, public, private) = match &deployment.vpc {
        Some(v) => (
            v.vpc_id.clone(),
            v.public_subnets.join(","),
            v.private_subnets.join(","),
        ),
        None => (String::new(), String::new(), String::new()),
    };
    p.insert("VpcId".to_owned(), vpc);
    p.insert("PublicSubnetIds".to_owned(), public);
    p.insert("PrivateSubnetIds".to_owned(), private);
    p.insert("WorkerCount".to_owned(), deployment.workers.to_string());
    for (short, parameter) in SECRETS {
        p.insert(
            (*parameter).to_owned(),
            arns.get(*short).cloned().unwrap_or_default(),
        );
    }
    p
}

/// What happened to one thing (or would, in a dry run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Create,
    Update,
    Unchanged,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Change::Create => "create",
            Change::Update => "update",
            Change::Unchanged => "unchanged",
        })
    }
}

/// One thing a deployment made, changed or left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// e.g. `secret toren/prod/e2b-api-key`, `stack prod`.
    pub what: String,
    pub change: Change,
}

/// What a deployment did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub steps: Vec<Step>,
    /// The API's address (the stack's `ApiUrl` output), when the stack exists.
    pub api_url: Option<String>,
    /// The secret holding the API token (its name, never its value).
    pub api_token_secret: String,
    /// Nothing was changed: a dry run.
    pub dry_run: bool,
}

impl Outcome {
    /// Whether this run changed (or would change) anything.
    pub fn changed(&self) -> bool {
        self.steps.iter().any(|s| s.change != Change::Unchanged)
    }
}

/// What `delete` removed and what it kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deleted {
    /// The stack was there and is gone.
    pub stack_deleted: bool,
    /// Secrets scheduled for deletion (with `delete_secrets`).
    pub secrets_deleted: Vec<String>,
    /// Secrets kept.
    pub secrets_kept: Vec<String>,
}

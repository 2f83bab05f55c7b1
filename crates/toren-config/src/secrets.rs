//! `sandbox.secrets` of an agent file: credentials the egress proxy adds to requests to
//! named hosts, so their values never enter the sandbox:
//!
//! ```yaml
//! sandbox:
//!   network: [api.github.com]
//!   secrets:
//!     GITHUB_TOKEN: {hosts: [api.github.com], header: "Authorization: Bearer ${value}"}
//! ```
//!
//! Each key is the operator's environment variable holding the value (read by the binary
//! at run creation, never here). Its hosts are exact names (no `*.` pattern: the proxy
//! terminates TLS for exactly these names) and each must be allowed by the same sandbox's
//! `network` list: a secret never widens what the sandbox may reach, and without a host
//! list there is no proxy to add it. The header is `Name: template` with `${value}` once.
//! A secret may not also be granted in `env` (that would put its value in the sandbox).
//! Errors point at the offending key or value. `agent_file` calls in here.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;
use toren_protocol::{EgressPolicy, HostPattern, HostVerdict, SECRET_PLACEHOLDER, SecretRule};

use crate::agent_file::{Checker, Problems, is_env_name};
use crate::env_vars;
use crate::error::Result;

const SECRETS_HELP: &str = "e.g. `secrets: {GITHUB_TOKEN: {hosts: [api.github.com], header: \
                            \"Authorization: Bearer ${value}\"}}`";

/// `secrets:` as written: each variable name with its rule, positions kept.
#[derive(Debug, Default)]
pub(crate) struct RawSecrets(Vec<(Spanned<String>, Spanned<RawSecret>)>);

/// One secret's rule as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSecret {
    #[serde(default)]
    hosts: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    header: Option<Spanned<String>>,
}

impl<'de> Deserialize<'de> for RawSecrets {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SecretsVisitor;

        impl<'de> Visitor<'de> for SecretsVisitor {
            type Value = RawSecrets;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of variable names to `{hosts, header}`")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawSecrets, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<Spanned<String>, Spanned<RawSecret>>()? {
                    entries.push(entry);
                }
                Ok(RawSecrets(entries))
            }
        }

        deserializer.deserialize_map(SecretsVisitor)
    }
}

/// Header names the proxy owns or that would change how a request is framed.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
];

impl Checker<'_> {
    /// The secrets of `secrets:`, checked against the sandbox's `egress` list and `env`.
    pub(crate) fn secrets(
        &self,
        raw: Spanned<RawSecrets>,
        egress: Option<&EgressPolicy>,
        env: &[String],
    ) -> Result<Vec<SecretRule>> {
        let Some(egress) = egress else {
            return Err(self.error_with_help(
                raw.referenced,
                "`secrets` need `network` to be a list of hosts: the egress proxy adds them, \
                 and it runs only for a host list",
                "e.g. `network: [api.github.com]` beside the secret for api.github.com",
            ));
        };
        // Every secret is checked even when one is wrong.
        let mut problems = Problems::default();
        let mut rules: Vec<SecretRule> = Vec::with_capacity(raw.value.0.len());
        for (name, rule) in raw.value.0 {
            rules.extend(problems.keep(self.secret(&name, rule, egress, env)));
        }
        problems.into_result(rules)
    }

    fn secret(
        &self,
        name: &Spanned<String>,
        rule: Spanned<RawSecret>,
        egress: &EgressPolicy,
        env: &[String],
    ) -> Result<SecretRule> {
        let value = name.value.as_str();
        if !is_env_name(value) {
            return Err(self.error_with_help(
                name.referenced,
                format!("`{value}` is not a valid environment variable name"),
                "a secret is named by the operator's variable that holds it \
                 (`[A-Za-z_][A-Za-z0-9_]*`)",
            ));
        }
        if env_vars::is_reserved(value) {
            return Err(self.error(
                name.referenced,
                format!("`{value}` is one of Toren's own variables and is never sent anywhere"),
            ));
        }
        if env.iter().any(|granted| granted == value) {
            return Err(self.error_with_help(
                name.referenced,
                format!("`{value}` is both granted in `env` and injected as a secret"),
                "remove it from `env`: a granted variable's value enters the sandbox, an \
                 injected secret's never does",
            ));
        }
        let at = rule.referenced;
        let hosts = match rule.value.hosts {
            Some(hosts) if !hosts.value.is_empty() => self.secret_hosts(value, hosts, egress)?,
            Some(hosts) => {
                return Err(self.error(hosts.referenced, format!("secret `{value}` lists no host")));
            }
            None => {
                return Err(self.error_with_help(
                    at,
                    format!("secret `{value}` needs `hosts`: the hosts it is sent to"),
                    SECRETS_HELP,
                ));
            }
        };
        let Some(header) = rule.value.header else {
            return Err(self.error_with_help(
                at,
                format!("secret `{value}` needs `header`: how it is sent"),
                SECRETS_HELP,
            ));
        };
        let (header_name, template) = self.secret_header(&header)?;
        Ok(SecretRule {
            name: value.to_owned(),
            hosts,
            header: header_name,
            template,
        })
    }

    fn secret_hosts(
        &self,
        secret: &str,
        hosts: Spanned<Vec<Spanned<String>>>,
        egress: &EgressPolicy,
    ) -> Result<Vec<HostPattern>> {
        let mut patterns = Vec::with_capacity(hosts.value.len());
        for host in hosts.value {
            let at = host.referenced;
            if host.value.contains('*') {
                return Err(self.error_with_help(
                    at,
                    format!(
                        "secret `{secret}`: `{}` is a pattern; a secret names exact hosts",
                        host.value
                    ),
                    "the proxy terminates TLS for exactly the hosts a secret names; list each",
                ));
            }
            let pattern = HostPattern::parse(&host.value).map_err(|why| {
                self.error(
                    at,
                    format!(
                        "secret `{secret}`: `{}` is not a host name: {why}",
                        host.value
                    ),
                )
            })?;
            if egress.decide(pattern.as_str()) != HostVerdict::Allow {
                return Err(self.error_with_help(
                    at,
                    format!("secret `{secret}` is for `{pattern}`, which `network` does not allow"),
                    "add the host to `network`: a secret never widens what the sandbox reaches",
                ));
            }
            if patterns.contains(&pattern) {
                return Err(self.error(at, format!("secret `{secret}` lists `{pattern}` twice")));
            }
            patterns.push(pattern);
        }
        Ok(patterns)
    }

    /// `Name: template` split and checked.
    fn secret_header(&self, header: &Spanned<String>) -> Result<(String, String)> {
        let at = header.referenced;
        let help = "e.g. `header: \"Authorization: Bearer ${value}\"`";
        let Some((name, template)) = header.value.split_once(':') else {
            return Err(self.error_with_help(
                at,
                format!("`header` must be `Name: value`, found {:?}", header.value),
                help,
            ));
        };
        let name = name.trim();
        let template = template.trim();
        let token = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
        if !token {
            return Err(self.error_with_help(
                at,
                format!("`{name}` is not a valid header name"),
                help,
            ));
        }
        if FORBIDDEN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(self.error(
                at,
                format!("`{name}` is a header the proxy owns; a secret cannot set it"),
            ));
        }
        if template.chars().any(char::is_control) {
            return Err(self.error(
                at,
                "`header` must not contain control characters (a line break would start \
                 another header)",
            ));
        }
        if template.matches(SECRET_PLACEHOLDER).count() != 1 {
            return Err(self.error_with_help(
                at,
                format!("`header` must contain `{SECRET_PLACEHOLDER}` exactly once"),
                help,
            ));
        }
        Ok((name.to_owned(), template.to_owned()))
    }
}

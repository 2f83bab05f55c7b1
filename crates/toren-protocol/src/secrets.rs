//! Secrets the egress proxy injects (`sandbox.secrets` of an agent file): the
//! operator's variable `name` is read by the proxy, outside the sandbox, and added as a
//! request header to every request to one of `hosts`, so the value never enters the
//! sandbox. Pinned inside [`crate::EgressPolicy::secrets`]: names, hosts and the header
//! template only, never a value. `toren-config` validates them (exact host names, each
//! allowed by the same policy's list; a header with `${value}` once); `toren-egress`
//! terminates TLS for exactly these hosts to add the header. No I/O here.

use serde::{Deserialize, Serialize};

use crate::HostPattern;

/// The placeholder a header template carries exactly once.
pub const SECRET_PLACEHOLDER: &str = "${value}";

/// One injected secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRule {
    /// The operator's environment variable holding the value.
    pub name: String,
    /// The exact host names (no `*.` pattern) the header is added for.
    pub hosts: Vec<HostPattern>,
    /// The header's name, e.g. `Authorization`.
    pub header: String,
    /// The header's value with [`SECRET_PLACEHOLDER`] where the secret goes, e.g.
    /// `Bearer ${value}`.
    pub template: String,
}

impl SecretRule {
    /// Whether requests to `host` get this secret.
    pub fn applies_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|pattern| pattern.matches(host))
    }

    /// The header's value with `value` in place of the placeholder.
    pub fn render(&self, value: &str) -> String {
        self.template.replacen(SECRET_PLACEHOLDER, value, 1)
    }
}

impl crate::EgressPolicy {
    /// Whether the proxy terminates TLS for `host` (some secret is injected there).
    pub fn intercepts(&self, host: &str) -> bool {
        self.secrets.iter().any(|secret| secret.applies_to(host))
    }

    /// The secrets injected for `host`, in the order the agent file lists them.
    pub fn secrets_for<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a SecretRule> {
        self.secrets
            .iter()
            .filter(move |secret| secret.applies_to(host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> SecretRule {
        SecretRule {
            name: "GITHUB_TOKEN".to_owned(),
            hosts: vec![HostPattern::parse("api.github.com").unwrap()],
            header: "Authorization".to_owned(),
            template: "Bearer ${value}".to_owned(),
        }
    }

    #[test]
    fn a_rule_applies_to_its_hosts_only_and_renders_the_value_once() {
        let rule = rule();
        assert!(rule.applies_to("API.github.com."));
        assert!(!rule.applies_to("github.com"));
        assert!(!rule.applies_to("uploads.github.com"));
        assert_eq!(rule.render("t0k${value}"), "Bearer t0k${value}");
        let policy = crate::EgressPolicy {
            allow: rule.hosts.clone(),
            ask: false,
            secrets: vec![rule],
        };
        assert!(policy.intercepts("api.github.com"));
        assert!(!policy.intercepts("pypi.org"));
        assert_eq!(policy.secrets_for("api.github.com").count(), 1);
    }

    #[test]
    fn secrets_are_pinned_without_values_and_old_policies_read_with_none() {
        let policy = crate::EgressPolicy {
            allow: rule().hosts,
            ask: false,
            secrets: vec![rule()],
        };
        let json = serde_json::to_value(&policy).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "allow": ["api.github.com"], "ask": false,
                "secrets": [{"name": "GITHUB_TOKEN", "hosts": ["api.github.com"],
                             "header": "Authorization", "template": "Bearer ${value}"}]
            })
        );
        let old: crate::EgressPolicy =
            serde_json::from_value(serde_json::json!({"allow": ["pypi.org"], "ask": true}))
                .unwrap();
        assert!(old.secrets.is_empty());
        let written = serde_json::to_value(&old).unwrap();
        assert_eq!(written.get("secrets"), None, "no secrets: not written");
    }
}

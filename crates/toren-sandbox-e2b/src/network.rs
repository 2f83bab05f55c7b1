//! The `network` object of E2B's create request for a run whose agent lists hosts
//! (`network: [pypi.org, "*.github.com"]`), as a pure function of the pinned
//! [`EgressPolicy`] and the values of its injected secrets.
//!
//! On E2B the service's own egress firewall is the sandbox's only way out; no Toren proxy
//! runs. The sandbox is created with `allow_internet_access: false` (E2B then denies
//! `0.0.0.0/0`) and `network: {allowOut: [the hosts and patterns], denyOut: ["0.0.0.0/0"]}`,
//! exactly as E2B documents an allow-list (its API refuses domains in `allowOut` without
//! `0.0.0.0/0` in `denyOut`). E2B matches the HTTP `Host` header on port 80 and the TLS SNI
//! on port 443, dials the name itself, and refuses a name that resolves to a private,
//! loopback or link-local address (its `DeniedSandboxCIDRs`); every other port is matched
//! by address only, so denied. Private and metadata ranges are not repeated in `denyOut`:
//! E2B gives an allowed entry precedence over every denied one, so they would change
//! nothing (SECURITY.md says what E2B's own list covers).
//!
//! Injected secrets (`sandbox.secrets`) become E2B's per-domain transform rules
//! (`rules: {host: [{transform: {headers: {Name: value}}}]}`): E2B's egress proxy adds the
//! header to HTTP and HTTPS requests to that host (terminating TLS with the platform CA its
//! templates trust). The value goes to E2B's control plane in this body and nowhere else:
//! never in `envVars`, a command or an upload.
//!
//! What E2B cannot do is refused here, naming the fix, never widened or silently dropped:
//! `ask` (no hook holds a connection while a person decides), a secret without its value,
//! two secrets setting one header of one host, a value that is not a header value or that
//! holds E2B's own `${e2b.` placeholder syntax, and more secret hosts or headers than E2B
//! takes.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toren_protocol::EgressPolicy;

/// E2B's name for all IPv4 traffic (`ALL_TRAFFIC` in its SDKs).
pub const ALL_TRAFFIC: &str = "0.0.0.0/0";
/// E2B's limits on transform rules (`infra`'s `sandbox_create.go`).
const MAX_RULE_DOMAINS: usize = 10;
const MAX_HEADERS_PER_RULE: usize = 20;
const MAX_HEADER_VALUE: usize = 2048;
/// The start of E2B's placeholders (`${e2b.secrets.NAME}`, `${e2b.identity.tokens.NAME}`),
/// which its proxy would replace in a header value.
const E2B_PLACEHOLDER: &str = "${e2b.";

/// The create request's `network` for `egress`, with the secrets' `values` (`(name,
/// value)`); `Err` says why E2B cannot keep the policy, in words that name the fix.
pub fn create_network(egress: &EgressPolicy, values: &[(String, String)]) -> Result<Value, String> {
    if egress.ask {
        return Err(
            "the agent asks about hosts outside its list (`network: {allow: [...], ask: true}`), \
             and E2B's firewall cannot hold a connection while a person decides; list every \
             host the agent needs (`network: [...]`), or run it on the local or docker backend \
             (TOREN_SANDBOX=local|docker), where a host is asked about"
                .to_owned(),
        );
    }
    let mut allow: Vec<&str> = Vec::with_capacity(egress.allow.len());
    for pattern in &egress.allow {
        if !allow.contains(&pattern.as_str()) {
            allow.push(pattern.as_str());
        }
    }
    let mut network = json!({
        "allowOut": allow,
        "denyOut": [ALL_TRAFFIC],
    });
    let rules = rules(egress, values)?;
    if !rules.is_empty() {
        network["rules"] = json!(rules);
    }
    Ok(network)
}

/// `rules` by host: one rule per host (E2B takes at most one), holding every header the
/// secrets add there.
fn rules(
    egress: &EgressPolicy,
    values: &[(String, String)],
) -> Result<BTreeMap<String, Value>, String> {
    let mut headers: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for secret in &egress.secrets {
        let value = values
            .iter()
            .find(|(name, _)| *name == secret.name)
            .map(|(_, value)| value)
            .ok_or_else(|| {
                format!(
                    "the secret {} is not set in the environment of the process that drives \
                     the run; set it there",
                    secret.name
                )
            })?;
        let rendered = secret.render(value);
        let valid = !value.is_empty()
            && rendered.len() <= MAX_HEADER_VALUE
            && rendered
                .bytes()
                .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f));
        if !valid {
            return Err(format!(
                "the secret {} does not make a header value E2B takes (empty, a control \
                 character such as a newline, or more than {MAX_HEADER_VALUE} bytes); check \
                 its value",
                secret.name
            ));
        }
        if rendered.contains(E2B_PLACEHOLDER) {
            return Err(format!(
                "the secret {}'s header holds `{E2B_PLACEHOLDER}`, which E2B's proxy would \
                 replace with one of its own secrets; check its value",
                secret.name
            ));
        }
        for host in &secret.hosts {
            let set = headers.entry(host.as_str().to_owned()).or_default();
            if set
                .keys()
                .any(|name| name.eq_ignore_ascii_case(&secret.header))
            {
                return Err(format!(
                    "two secrets set the header {} for {host}, and E2B adds one value per \
                     header; keep one of them",
                    secret.header
                ));
            }
            set.insert(secret.header.clone(), rendered.clone());
            if set.len() > MAX_HEADERS_PER_RULE {
                return Err(format!(
                    "more than {MAX_HEADERS_PER_RULE} secret headers for {host}, the most E2B \
                     takes for one host"
                ));
            }
        }
    }
    if headers.len() > MAX_RULE_DOMAINS {
        return Err(format!(
            "secrets for {} hosts, and E2B takes transform rules for at most \
             {MAX_RULE_DOMAINS}; use fewer hosts, or the local or docker backend",
            headers.len()
        ));
    }
    Ok(headers
        .into_iter()
        .map(|(host, headers)| (host, json!([{"transform": {"headers": headers}}])))
        .collect())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use toren_protocol::{HostPattern, SecretRule};

    use super::*;

    fn hosts(names: &[&str]) -> Vec<HostPattern> {
        names
            .iter()
            .map(|n| HostPattern::parse(n).unwrap())
            .collect()
    }

    fn secret(name: &str, on: &[&str], header: &str, template: &str) -> SecretRule {
        SecretRule {
            name: name.to_owned(),
            hosts: hosts(on),
            header: header.to_owned(),
            template: template.to_owned(),
        }
    }

    fn values(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_host_list_is_an_allow_list_with_all_other_traffic_denied() {
        let egress = EgressPolicy {
            allow: hosts(&[
                "pypi.org",
                "*.github.com",
                "PyPI.org.",
                "files.pythonhosted.org",
            ]),
            ask: false,
            secrets: Vec::new(),
        };
        assert_eq!(
            create_network(&egress, &[]).unwrap(),
            json!({
                "allowOut": ["pypi.org", "*.github.com", "files.pythonhosted.org"],
                "denyOut": ["0.0.0.0/0"],
            })
        );
    }

    #[test]
    fn secrets_become_one_header_rule_per_host() {
        let egress = EgressPolicy {
            allow: hosts(&["api.github.com", "uploads.github.com", "api.openai.com"]),
            ask: false,
            secrets: vec![
                secret(
                    "GITHUB_TOKEN",
                    &["api.github.com", "uploads.github.com"],
                    "Authorization",
                    "Bearer ${value}",
                ),
                secret(
                    "OPENAI_KEY",
                    &["api.openai.com"],
                    "Authorization",
                    "Bearer ${value}",
                ),
                secret("GH_TRACE", &["api.github.com"], "X-Trace", "${value}"),
            ],
        };
        let got = create_network(
            &egress,
            &values(&[
                ("GITHUB_TOKEN", "ghp_abc"),
                ("OPENAI_KEY", "sk-1"),
                ("GH_TRACE", "on"),
                ("UNUSED", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({
                "allowOut": ["api.github.com", "uploads.github.com", "api.openai.com"],
                "denyOut": ["0.0.0.0/0"],
                "rules": {
                    "api.github.com": [{"transform": {"headers": {
                        "Authorization": "Bearer ghp_abc",
                        "X-Trace": "on",
                    }}}],
                    "api.openai.com": [{"transform": {"headers": {"Authorization": "Bearer sk-1"}}}],
                    "uploads.github.com": [{"transform": {"headers": {"Authorization": "Bearer ghp_abc"}}}],
                },
            })
        );
    }

    #[test]
    fn what_e2b_cannot_keep_is_refused_naming_the_fix() {
        let base = EgressPolicy {
            allow: hosts(&["api.test"]),
            ask: false,
            secrets: vec![secret(
                "TOKEN",
                &["api.test"],
                "Authorization",
                "Bearer ${value}",
            )],
        };
        let refused = |egress: &EgressPolicy, vals: &[(&str, &str)]| {
            create_network(egress, &values(vals)).unwrap_err()
        };

        let ask = EgressPolicy {
            ask: true,
            secrets: Vec::new(),
            ..base.clone()
        };
        let why = refused(&ask, &[]);
        assert!(why.contains("cannot hold a connection"), "{why}");
        assert!(why.contains("TOREN_SANDBOX=local|docker"), "{why}");

        let why = refused(&base, &[]);
        assert!(why.contains("TOKEN is not set"), "{why}");
        for bad in ["a\r\nX-Evil: 1", "", &"x".repeat(3000)] {
            let why = refused(&base, &[("TOKEN", bad)]);
            assert!(why.contains("does not make a header value"), "{why}");
            assert!(
                bad.is_empty() || !why.contains(bad),
                "the value is not shown: {why}"
            );
        }
        let why = refused(&base, &[("TOKEN", "${e2b.secrets.OTHER}")]);
        assert!(why.contains("E2B's proxy would replace"), "{why}");

        let twice = EgressPolicy {
            secrets: vec![
                secret("TOKEN", &["api.test"], "Authorization", "Bearer ${value}"),
                secret("OTHER", &["api.test"], "authorization", "${value}"),
            ],
            ..base
        };
        let why = refused(&twice, &[("TOKEN", "a"), ("OTHER", "b")]);
        assert!(why.contains("two secrets set the header"), "{why}");

        let names: Vec<String> = (0..11).map(|i| format!("h{i}.test")).collect();
        let many = EgressPolicy {
            allow: names
                .iter()
                .map(|n| HostPattern::parse(n).unwrap())
                .collect(),
            ask: false,
            secrets: vec![SecretRule {
                hosts: names
                    .iter()
                    .map(|n| HostPattern::parse(n).unwrap())
                    .collect(),
                ..secret("TOKEN", &[], "Authorization", "${value}")
            }],
        };
        let why = refused(&many, &[("TOKEN", "a")]);
        assert!(why.contains("at most 10"), "{why}");
    }
}

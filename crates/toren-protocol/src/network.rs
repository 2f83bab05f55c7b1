//! The network policy by host: which hosts a sandbox may reach through Toren's egress
//! proxy, and whether a host outside the list is asked about or refused.
//!
//! `toren-config` parses the agent file's `network: [hosts…]` / `network: {allow, ask}`
//! into an [`EgressPolicy`], the run pins it in [`crate::ResolvedPolicy::egress`], and
//! `toren-egress` decides each connection with [`EgressPolicy::decide`]. No I/O here.
//!
//! Matching rules (documented in SECURITY.md): names compare case-insensitively, with one
//! trailing dot ignored. A plain pattern (`pypi.org`) matches exactly that name. A pattern
//! `*.github.com` matches every name strictly under `github.com` (`api.github.com`,
//! `a.b.github.com`) and not `github.com` itself: list the apex too if it is wanted. A `*`
//! anywhere else, a port, a path or an IP address is refused when the file is read.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The hosts a sandbox may reach through the egress proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressPolicy {
    /// Hosts and `*.` patterns that are allowed without asking.
    #[serde(default)]
    pub allow: Vec<HostPattern>,
    /// `true`: a host outside `allow` is held and asked about; `false`: it is refused.
    #[serde(default)]
    pub ask: bool,
    /// Secrets the proxy adds to requests to some of the allowed hosts
    /// (`sandbox.secrets`); empty in policies pinned before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<crate::SecretRule>,
}

/// What the policy says about one requested host, before any address check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostVerdict {
    /// The host matches a pattern in `allow`.
    Allow,
    /// Not listed, and the policy asks.
    Ask,
    /// Not listed, and the policy refuses.
    Deny,
}

impl EgressPolicy {
    /// The verdict for `host` (a name as requested, any case, maybe with a trailing dot).
    pub fn decide(&self, host: &str) -> HostVerdict {
        if self.allow.iter().any(|pattern| pattern.matches(host)) {
            HostVerdict::Allow
        } else if self.ask {
            HostVerdict::Ask
        } else {
            HostVerdict::Deny
        }
    }
}

impl crate::ResolvedPolicy {
    /// The pinned network policy in one word for people: `true`, `false`, or the hosts
    /// (`[pypi.org,*.github.com]`, with `+ask` when others are asked about).
    pub fn network_label(&self) -> String {
        match &self.egress {
            None => self.network.to_string(),
            Some(egress) => {
                let hosts: Vec<&str> = egress.allow.iter().map(HostPattern::as_str).collect();
                let ask = if egress.ask { "+ask" } else { "" };
                let secrets: Vec<&str> = egress.secrets.iter().map(|s| s.name.as_str()).collect();
                let secrets = if secrets.is_empty() {
                    String::new()
                } else {
                    format!("+secrets[{}]", secrets.join(","))
                };
                format!("[{}]{ask}{secrets}", hosts.join(","))
            }
        }
    }
}

/// A host name or a `*.domain` pattern, validated and lower-cased.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HostPattern(String);

impl HostPattern {
    /// Validates and normalises a pattern as written in an agent file; the error says why
    /// it is refused, in words fit for a diagnostic.
    pub fn parse(text: &str) -> Result<Self, String> {
        let lowered = text.trim_end_matches('.').to_ascii_lowercase();
        let (wildcard, name) = match lowered.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, lowered.as_str()),
        };
        if name.is_empty() {
            return Err("it names no host".to_owned());
        }
        if name.contains('*') {
            return Err("`*` is only allowed as a leading `*.` (e.g. `*.github.com`)".to_owned());
        }
        if let Some(bad) = name
            .chars()
            .find(|c| matches!(c, ':' | '/' | '@' | '[' | ']'))
        {
            return Err(format!(
                "a host is a name only, without scheme, port or path (found {bad:?})"
            ));
        }
        if name.parse::<std::net::IpAddr>().is_ok() || is_dotted_numbers(name) {
            return Err(
                "IP addresses are not allowed; name the host (the proxy resolves it and refuses \
                 private addresses)"
                    .to_owned(),
            );
        }
        for label in name.split('.') {
            let valid = !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !label.starts_with('-')
                && !label.ends_with('-');
            if !valid {
                return Err(format!(
                    "`{label}` is not a valid host label (letters, digits, `-`, at most 63)"
                ));
            }
        }
        if wildcard && !name.contains('.') {
            return Err(format!(
                "`*.{name}` would match a whole top-level domain; name a domain under it"
            ));
        }
        Ok(Self(lowered))
    }

    /// The pattern as pinned (`*.github.com`, `pypi.org`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `host` is matched: see the module doc for the rules.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self.0.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            None => host == self.0,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `1.2.3.4`-like names that are not valid IPv4 text but that resolvers still read as
/// numbers (`127.1`, `0x7f.1`): refused as patterns too.
fn is_dotted_numbers(name: &str) -> bool {
    name.split('.').all(|label| {
        !label.is_empty()
            && (label.chars().all(|c| c.is_ascii_digit())
                || label
                    .strip_prefix("0x")
                    .is_some_and(|hex| hex.chars().all(|c| c.is_ascii_hexdigit())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> HostPattern {
        HostPattern::parse(text).unwrap_or_else(|why| panic!("{text}: {why}"))
    }

    #[test]
    fn a_leading_star_matches_subdomains_and_not_the_apex() {
        let p = pattern("*.GitHub.com");
        assert_eq!(p.as_str(), "*.github.com");
        assert!(p.matches("api.github.com"));
        assert!(p.matches("a.b.github.com."));
        assert!(p.matches("API.GITHUB.COM"));
        assert!(!p.matches("github.com"));
        assert!(!p.matches("evilgithub.com"));
        assert!(!p.matches(".github.com"));
        assert!(!p.matches("github.com.evil.org"));
    }

    #[test]
    fn a_plain_pattern_matches_exactly_its_name() {
        let p = pattern("pypi.org.");
        assert!(p.matches("pypi.org"));
        assert!(p.matches("PyPI.org."));
        assert!(!p.matches("files.pypi.org"));
        assert!(!p.matches("pypi.org.evil.net"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "*.",
            "*",
            "a.*.com",
            "pypi.org:443",
            "https://pypi.org",
            "127.0.0.1",
            "127.1",
            "::1",
            "[::1]",
            "*.com",
            "-a.com",
            "a..com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_verdict_follows_the_list_then_ask() {
        let mut policy = EgressPolicy {
            allow: vec![pattern("pypi.org"), pattern("*.npmjs.org")],
            ask: false,
            secrets: Vec::new(),
        };
        assert_eq!(policy.decide("registry.npmjs.org"), HostVerdict::Allow);
        assert_eq!(policy.decide("evil.org"), HostVerdict::Deny);
        policy.ask = true;
        assert_eq!(policy.decide("evil.org"), HostVerdict::Ask);
        assert_eq!(policy.decide("pypi.org"), HostVerdict::Allow);
    }

    #[test]
    fn the_pinned_policy_round_trips_and_old_policies_without_it_still_read() {
        let policy = EgressPolicy {
            allow: vec![pattern("*.github.com")],
            ask: true,
            secrets: Vec::new(),
        };
        let json = serde_json::to_value(&policy).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"allow": ["*.github.com"], "ask": true})
        );
        let back: EgressPolicy = serde_json::from_value(json).unwrap();
        assert_eq!(back, policy);
        // A policy pinned before `egress` existed: `network: bool` only.
        let old: crate::ResolvedPolicy = serde_json::from_value(serde_json::json!({
            "backend": "local", "network": true, "approval": "never", "env": []
        }))
        .unwrap();
        assert_eq!((old.network, &old.egress), (true, &None));
        assert_eq!(old.network_label(), "true");
        let pinned = crate::ResolvedPolicy {
            checkpoints: Default::default(),
            network: false,
            egress: Some(EgressPolicy {
                allow: vec![pattern("pypi.org"), pattern("*.github.com")],
                ask: true,
                secrets: Vec::new(),
            }),
            ..old.clone()
        };
        assert_eq!(pinned.network_label(), "[pypi.org,*.github.com]+ask");
        let new = serde_json::to_value(&old).unwrap();
        assert_eq!(
            new.get("egress"),
            None,
            "absent egress is not written: {new}"
        );
    }
}

//! The events of network access by host: a host outside the agent's list that
//! the sandbox tried to reach and a person is asked about ([`HostApprovalRequested`],
//! answered by the same `approval_decided` as a tool call, addressed by the request's
//! [`id`](HostApprovalRequested::id)), and the connections the egress proxy judged
//! ([`EgressConnections`], several per event so a busy install does not write one event
//! per connection).
//!
//! An approval's subject is either a tool call (`approval_requested`, its id the call's)
//! or a host (`host_approval_requested`, its id [`host_approval_id`]: `host:<name>`).
//! Both are decided through the one `decide_approval` of the store, first decision wins.

use serde::{Deserialize, Serialize};

use crate::ApprovalRequested;

/// The prefix of a host approval's id; no tool call id has it (`RunState::admit` gives a
/// call that came with one an id of Toren's).
pub const HOST_APPROVAL_PREFIX: &str = "host:";

/// The `tool` a host approval shows as when a surface knows only tool approvals.
pub const NETWORK_SUBJECT: &str = "network";

/// The id of the approval for `host` in a run: one per host, so a decision holds for the
/// whole run (and a resumed one) and a request left unanswered is found again.
pub fn host_approval_id(host: &str) -> String {
    format!("{HOST_APPROVAL_PREFIX}{}", host.to_ascii_lowercase())
}

/// Whether `id` names a host approval (not a tool call).
pub fn is_host_approval_id(id: &str) -> bool {
    id.starts_with(HOST_APPROVAL_PREFIX)
}

/// The sandbox tried to reach a host outside the list and the policy asks: the connection
/// is held while a person decides (allow the host for this run, or deny it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostApprovalRequested {
    /// The approval's id, which decisions name: [`host_approval_id`] of `host`.
    pub id: String,
    /// The host as requested (lower-cased).
    pub host: String,
    /// The port of the connection that asked (the decision is for the host, any port).
    pub port: u16,
    /// The tool call that was running when the sandbox connected, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// That call's command (for `bash`), as it was approved or ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl HostApprovalRequested {
    /// A request for `host`, made while `call` (id, command) ran.
    pub fn new(host: &str, port: u16, call: Option<(String, String)>) -> Self {
        let host = host.to_ascii_lowercase();
        let (call_id, command) = match call {
            Some((id, command)) => (Some(id), Some(command)),
            None => (None, None),
        };
        Self {
            id: host_approval_id(&host),
            host,
            port,
            call_id,
            command,
        }
    }

    /// One line for people, e.g. `network access to pypi.org:443 (from bash call c3: pip
    /// install x)`. Raw: a surface renders it through `toren-display`, since the host and
    /// the command come from the sandbox and the model.
    pub fn summary(&self) -> String {
        let mut line = format!("network access to {}:{}", self.host, self.port);
        match (&self.call_id, &self.command) {
            (Some(call), Some(command)) => {
                line.push_str(&format!(" (from bash call {call}: {command})"));
            }
            (Some(call), None) => line.push_str(&format!(" (from call {call})")),
            _ => {}
        }
        line
    }

    /// The request as a surface that shows only tool approvals sees it: tool `network`,
    /// the [`summary`](Self::summary) as what is approved, its id as the call id (a
    /// decision on that id answers this request).
    pub fn as_approval(&self) -> ApprovalRequested {
        ApprovalRequested {
            call_id: self.id.clone(),
            tool: NETWORK_SUBJECT.to_owned(),
            command: self.summary(),
            attempt: 1,
        }
    }
}

/// Connections the egress proxy judged, each recorded once: refused ones when refused,
/// allowed ones when they closed (with the bytes they carried).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressConnections {
    pub connections: Vec<EgressConnection>,
}

/// One connection attempt through the egress proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressConnection {
    /// The host as requested (lower-cased), and the port.
    pub host: String,
    pub port: u16,
    /// `CONNECT`, or the plain HTTP method.
    pub method: String,
    /// What the proxy did.
    pub outcome: ConnectionOutcome,
    /// Why it was refused (the message the sandbox got), for a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The address connected to, for an allowed connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Bytes from the sandbox to the host, and back.
    #[serde(default)]
    pub bytes_up: u64,
    #[serde(default)]
    pub bytes_down: u64,
    /// The tool call that was running, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// Whether a connection went through, and on whose word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionOutcome {
    /// The host is on the list.
    Allowed,
    /// Not on the list; a person allowed the host (asked now or earlier in the run).
    Approved,
    /// Refused: not listed, denied by a person, a forbidden address, unreachable…
    Denied,
    /// Not on the list and nobody answered in time: refused, the request stays open.
    Unanswered,
}

impl ConnectionOutcome {
    /// The word people read: `allowed`, `approved`, `denied`, `unanswered`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Unanswered => "unanswered",
        }
    }
}

impl EgressConnection {
    /// One line for people, e.g. `CONNECT pypi.org:443 allowed (↑1.2 kB ↓30 kB)` or
    /// `CONNECT evil.org:443 denied: this host is not in the agent's network list`. Raw:
    /// render it through `toren-display`.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} {}:{} {}",
            self.method,
            self.host,
            self.port,
            self.outcome.as_str()
        );
        if let Some(reason) = &self.reason {
            line.push_str(": ");
            line.push_str(reason);
        } else {
            line.push_str(&format!(" (↑{} B ↓{} B)", self.bytes_up, self.bytes_down));
        }
        if let Some(call) = &self.call_id {
            line.push_str(&format!(" [call {call}]"));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_request_names_its_host_and_the_call_that_made_it() {
        let request = HostApprovalRequested::new(
            "PyPI.org",
            443,
            Some(("c3".into(), "pip install x".into())),
        );
        assert_eq!(request.id, "host:pypi.org");
        assert!(is_host_approval_id(&request.id));
        assert!(!is_host_approval_id("toolu_1"));
        assert_eq!(
            request.summary(),
            "network access to pypi.org:443 (from bash call c3: pip install x)"
        );
        assert_eq!(
            request.as_approval(),
            ApprovalRequested {
                call_id: "host:pypi.org".into(),
                tool: "network".into(),
                command: "network access to pypi.org:443 (from bash call c3: pip install x)".into(),
                attempt: 1,
            }
        );
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": "host:pypi.org", "host": "pypi.org", "port": 443,
                "call_id": "c3", "command": "pip install x"})
        );
        let bare: HostApprovalRequested =
            serde_json::from_str(r#"{"id":"host:a.org","host":"a.org","port":80}"#).unwrap();
        assert_eq!(bare, HostApprovalRequested::new("a.org", 80, None));
        assert_eq!(bare.summary(), "network access to a.org:80");
    }

    #[test]
    fn a_connection_decodes_with_only_its_required_fields() {
        let old: EgressConnection = serde_json::from_str(
            r#"{"host":"pypi.org","port":443,"method":"CONNECT","outcome":"allowed"}"#,
        )
        .unwrap();
        assert_eq!(
            (old.bytes_up, old.bytes_down, old.call_id.clone()),
            (0, 0, None)
        );
        assert_eq!(old.summary(), "CONNECT pypi.org:443 allowed (↑0 B ↓0 B)");
        let refused = EgressConnection {
            outcome: ConnectionOutcome::Denied,
            reason: Some("a human denied this host".into()),
            call_id: Some("c1".into()),
            ..old
        };
        assert_eq!(
            refused.summary(),
            "CONNECT pypi.org:443 denied: a human denied this host [call c1]"
        );
    }
}

//! What the proxy decided about each request ([`Decision`], handed to a [`Recorder`]) and
//! how a host outside the list is asked about ([`Approver`]; [`DenyAll`] until the worker
//! implements one that records an approval request and waits for a human).

use std::net::SocketAddr;

/// One request the proxy judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The host as requested, lower-cased, without brackets.
    pub host: String,
    pub port: u16,
    /// `CONNECT` or the plain HTTP method.
    pub method: String,
    pub outcome: Outcome,
}

/// Whether the request went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Connected to `address`; `approved` when a human allowed the host on `ask`.
    Allowed {
        address: SocketAddr,
        approved: bool,
    },
    Refused(Refusal),
}

/// Why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The host is not in the list and the policy does not ask.
    NotListed,
    /// The approver said no.
    DeniedOnAsk,
    /// The name resolved to (or is) an address the proxy never connects to.
    ForbiddenAddress { address: SocketAddr, reason: String },
    /// The name did not resolve.
    Unresolved(String),
    /// Every checked address refused the connection.
    Unreachable(String),
    /// Not a request the proxy serves (origin-form, no port, Host mismatch, …).
    BadRequest(String),
    /// Nobody answered the ask in time; the request stays open, so a later connection
    /// to the host gets the answer once given. The text says how to answer.
    Unanswered(String),
}

impl Refusal {
    /// The HTTP status the client gets.
    pub fn status(&self) -> u16 {
        match self {
            Self::NotListed
            | Self::DeniedOnAsk
            | Self::ForbiddenAddress { .. }
            | Self::Unanswered(_) => 403,
            Self::Unresolved(_) | Self::Unreachable(_) => 502,
            Self::BadRequest(_) => 400,
        }
    }

    /// One line for the client and the log.
    pub fn message(&self) -> String {
        match self {
            Self::NotListed => "this host is not in the agent's network list".to_owned(),
            Self::DeniedOnAsk => "a human denied this host".to_owned(),
            Self::ForbiddenAddress { address, reason } => {
                format!("{address} is {reason}; the proxy never connects there")
            }
            Self::Unresolved(why) => format!("the name did not resolve: {why}"),
            Self::Unreachable(why) => format!("no address could be reached: {why}"),
            Self::BadRequest(why) | Self::Unanswered(why) => why.clone(),
        }
    }
}

/// A host outside the list, waiting for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskRequest {
    pub host: String,
    pub port: u16,
}

/// An approver's answer about one host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Allow the host for the run.
    Allow,
    /// Refuse the host for the run.
    Deny,
    /// No answer in time: this connection is refused with the text (which says how to
    /// answer), nothing is remembered, and the next connection to the host asks again.
    Unanswered(String),
}

/// Answers `ask` requests; the connection is held until it returns. The proxy remembers
/// an allow or a deny per host for the proxy's lifetime (one run), so it is asked once
/// per host, unless the answer was [`Answer::Unanswered`].
#[async_trait::async_trait]
pub trait Approver: Send + Sync + 'static {
    /// `true`: allow this host for the run.
    async fn approve(&self, request: AskRequest) -> bool;

    /// What the proxy calls: by default [`approve`](Self::approve)'s yes or no. An
    /// approver that gives up waiting overrides it to say so.
    async fn answer(&self, request: AskRequest) -> Answer {
        if self.approve(request).await {
            Answer::Allow
        } else {
            Answer::Deny
        }
    }
}

/// The approver until a human one is wired in: refuses everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAll;

#[async_trait::async_trait]
impl Approver for DenyAll {
    async fn approve(&self, _request: AskRequest) -> bool {
        false
    }
}

/// What an allowed connection carried, counted on the proxy's side of the upstream
/// connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Bytes sent to the host (from the sandbox), and received from it.
    pub up: u64,
    pub down: u64,
}

/// Receives every decision (the worker journals them).
pub trait Recorder: Send + Sync + 'static {
    /// Each request, once judged (before any byte is relayed).
    fn record(&self, decision: Decision);

    /// An allowed request's upstream connection closed (its tunnel or forwarded
    /// exchange ended, or the proxy stopped), with what it carried. `decision` is the one
    /// [`record`](Self::record) got. By default nothing.
    fn closed(&self, _decision: Decision, _traffic: Traffic) {}
}

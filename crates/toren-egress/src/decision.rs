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
}

impl Refusal {
    /// The HTTP status the client gets.
    pub fn status(&self) -> u16 {
        match self {
            Self::NotListed | Self::DeniedOnAsk | Self::ForbiddenAddress { .. } => 403,
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
            Self::BadRequest(why) => why.clone(),
        }
    }
}

/// A host outside the list, waiting for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AskRequest {
    pub host: String,
    pub port: u16,
}

/// Answers `ask` requests; the connection is held until it returns. The proxy remembers
/// the answer per host for the proxy's lifetime (one run), so it is asked once per host.
#[async_trait::async_trait]
pub trait Approver: Send + Sync + 'static {
    /// `true`: allow this host for the run.
    async fn approve(&self, request: AskRequest) -> bool;
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

/// Receives every decision (the worker will journal them).
pub trait Recorder: Send + Sync + 'static {
    fn record(&self, decision: Decision);
}

//! Toren's egress proxy: the only way out of a sandbox whose agent file lists hosts
//! (`network: [pypi.org, "*.github.com"]`).
//!
//! It runs outside the sandbox and speaks HTTP/1.1 proxying: `CONNECT host:port` for
//! HTTPS (bytes passed through, no TLS interception, matched on the requested host) and
//! absolute-form plain HTTP (`GET http://host/path`, matched on the URI's host, which must
//! agree with `Host`). For each request it asks the pinned [`toren_protocol::EgressPolicy`]
//! for a verdict, holds the connection on `ask` while an [`Approver`] answers, resolves
//! the name itself through a [`Resolver`], refuses every loopback, private, link-local,
//! CGNAT, multicast, unspecified and metadata address ([`address::forbidden_reason`]) even
//! for an allowed name or an IP literal, connects to exactly the address it checked, and
//! hands a [`Decision`] for every request to a [`Recorder`].
//!
//! Neighbours: `toren-protocol` (the policy), the sandbox backends (which bind the proxy's
//! unix socket into the sandbox; not wired yet), the worker (a future approver/recorder).

pub mod address;
mod counted;
mod decision;
mod error;
mod intercept;
mod proxy;
mod resolve;
mod tls;

pub use decision::{
    Answer, Approver, AskRequest, Decision, DenyAll, Outcome, Recorder, Refusal, Traffic,
};
pub use error::Error;
pub use intercept::Interception;
pub use proxy::{MAX_CONNECTIONS, Proxy, ProxyConfig};
pub use resolve::{Resolver, SystemResolver};
pub use tls::{RunCa, UpstreamTrust};

//! `toren deploy-aws`: Toren's AWS tier. The secrets (model keys, the E2B key, the API
//! token, the database password) are stored in Secrets Manager under
//! `toren/<stack>/<name>`; the CloudFormation stack of `deploy/aws/toren.yaml` (compiled
//! in) gets only their ARNs, and its tasks read them through ECS secrets. Every step is
//! compared with what exists first, so a second run with the same inputs changes nothing;
//! `dry_run` only reads; `delete` removes the stack and says what stays (the database's
//! final snapshot; the secrets unless asked).
//!
//! `plan` holds the pure parts (names, parameters, what differs), `aws` the SDK calls.
//! The caller (the binary's wiring) resolves the keys and the endpoint; credentials and
//! region come from the SDK's usual chain.

mod aws;
mod error;
mod plan;

pub use aws::{Deployer, Target};
pub use error::Error;
pub use plan::{
    Change, Deleted, Deployment, GivenVpc, Keys, Outcome, Step, TEMPLATE, secret_name,
    stack_parameters,
};

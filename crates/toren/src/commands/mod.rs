//! One module per subcommand.

pub(crate) mod approve;
pub(crate) mod budget;
pub(crate) mod chat;
pub(crate) mod check;
pub(crate) mod deploy_aws;
pub(crate) mod diff;
pub(crate) mod events;
pub(crate) mod host;
pub(crate) mod resume;
pub(crate) mod rewind;
pub(crate) mod run;
pub(crate) mod runs;
pub(crate) mod sandbox;
pub(crate) mod serve;
pub(crate) mod sessions;
pub(crate) mod telegram;
pub(crate) mod worker;

use toren_protocol::RunId;
use toren_runtime::RunService;

use crate::exit::Failure;

/// The run a command line names: its id, a unique prefix of it, or `last`.
pub(crate) async fn resolve_run(service: &RunService, arg: &str) -> Result<RunId, Failure> {
    service.resolve_run(arg).await.map_err(Failure::usage)
}

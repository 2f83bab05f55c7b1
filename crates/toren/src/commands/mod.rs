//! One module per subcommand.

pub(crate) mod approve;
pub(crate) mod budget;
pub(crate) mod chat;
pub(crate) mod check;
pub(crate) mod deploy_aws;
pub(crate) mod diff;
pub(crate) mod events;
pub(crate) mod host;
pub(crate) mod pool;
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

use crate::exit::Failure;

/// Parses a run id given on the command line.
pub(crate) fn parse_run_id(arg: &str) -> Result<RunId, Failure> {
    arg.parse().map_err(Failure::usage)
}

//! Agent files and runtime settings.
//!
//! [`load_agent`] reads an `agent.yaml` into a [`toren_protocol::AgentSpec`]; every problem
//! in the file is reported as `file:line:col: error: message` with the offending line
//! underneath ([`Diagnostic`]). [`AgentRef`] / [`find_agent`] find an agent by path or by
//! name in the agents directory. [`Settings::from_lookup`] resolves the runtime settings
//! from the environment variables declared in [`env_vars`], through a lookup function the
//! binary supplies — this crate never reads the environment itself.

mod agent_file;
mod budget;
mod checkpoints;
mod context_tokens;
mod diagnostic;
pub mod env_vars;
mod error;
mod limits;
mod lookup;
mod network;
mod raw;
mod secrets;
mod settings;
mod telegram;
mod yaml_errors;

pub use agent_file::{MAX_NAME_LEN, PROVIDERS, load_agent, parse_agent};
pub use budget::MAX_USD;
pub use checkpoints::MAX_CHECKPOINTS_KEPT;
pub use context_tokens::{MAX_CONTEXT_TOKENS, MIN_CONTEXT_TOKENS};
pub use diagnostic::{Diagnostic, Position};
pub use env_vars::{ENV_VARS, EnvVar};
pub use error::{Error, Result};
pub use limits::{MAX_CPU_SECS, MAX_PIDS, MIN_MEMORY, MIN_PIDS};
pub use lookup::{AGENT_FILE_NAME, AgentEntry, AgentRef, find_agent, list_agents, resolve_agent};
pub use settings::{
    AGENT_CONCURRENCY_RANGE, APPROVAL_POLL_RANGE, DATABASE_POOL_SIZE_RANGE, LEASE_TTL_RANGE,
    MAX_TOKENS_RANGE, QueueChoice, SandboxChoice, Secret, Settings, UNNAMED_USER,
};
pub use telegram::{
    TELEGRAM_API_URL, TELEGRAM_BOT_TOKEN, TOREN_TELEGRAM_AGENT, TOREN_TELEGRAM_GROUPS,
    TOREN_TELEGRAM_USERS, TelegramSettings,
};

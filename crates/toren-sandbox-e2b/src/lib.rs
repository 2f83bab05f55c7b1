//! The E2B sandbox backend.
//!
//! One E2B sandbox (a Firecracker microVM) per run, or per session with its turns sharing
//! it. Opening a run's sandbox lists this installation's sandboxes by metadata
//! (`toren_key`, `toren_instance`) and connects to the one found — the sandbox a dead
//! worker left running, or a finished turn left paused (`connect` resumes it) — else
//! creates one (`templateID` from `sandbox.image`, default [`DEFAULT_TEMPLATE`];
//! `secure: true`; `allow_internet_access` from `network`, and for a host list E2B's own
//! allow-list and header rules (`network`: `allowOut`, `denyOut: ["0.0.0.0/0"]`, a rule
//! per host an injected secret is for; `ask` refused); metadata naming the run, the
//! key, the instance and the host workspace; an explicit lifetime, refreshed every third
//! of it while a process holds the sandbox). Its id is what `sandbox_provisioned` records.
//! A sandbox found gone (404, 502) is replaced by a new one, into which the files the
//! run's file tools last wrote are restored when the journal holds their exact content
//! (`restore`); the next command's output and the run's log say the old one's files were
//! lost and list what was and was not restored. A resuming worker that reconnects to the
//! recorded sandbox says so in the log (`SandboxOrigin::Reconnected`). At the end of a run its sandbox is killed;
//! a session turn's is paused. The reaper's rules are `plan_reap` (finished runs'
//! sandboxes, removed sessions', day-old ones of unknown runs and sessions; never a live
//! run's or a live session's).
//!
//! Commands run through envd's `process.Process/Start` (`process`), a Connect stream over
//! JSON spoken by hand (`client`; no E2B crate): no deadline is sent to envd, Toren's own
//! timeout kills the command's whole process group, output goes into the same head+tail
//! capture as the other backends, exit codes are exact; `sandbox.limits` bound each command
//! as rlimits, and what a command left running in the VM ends with it. The command's
//! environment is exactly PATH, HOME, LANG and the granted names (envd's additions are
//! dropped before it starts); the E2B key and every other runtime credential stay on the
//! control plane.
//!
//! File tools work on the VM's `/workspace` (`files`): each path is resolved in the VM and
//! refused there when it leads outside (`..`, absolute paths, symlinks the agent made) or
//! is not a regular file; the bytes move through envd's `/files`. The run's host
//! workspace directory (pinned like every backend's) holds only the project the run
//! started as, if any (`seed`: put into each sandbox made for the run): the VM's disk is
//! the workspace.

mod backend;
mod client;
mod error;
mod files;
mod network;
mod process;
mod reaper;
mod restore;
mod sandbox;
mod seed;

pub use backend::{DEFAULT_LIFETIME, DEFAULT_TEMPLATE, E2bBackend, E2bSettings};
pub use client::{Client, CreateRequest, ENVD_PORT, Endpoints, SandboxInfo, create_body};
pub use error::{Error, Result, check_key};
pub use network::{ALL_TRAFFIC, create_network};
pub use reaper::{ORPHAN_AGE, ReapReason, RunLiveness, SessionLiveness, TorenSandbox, plan_reap};
pub use sandbox::{META_INSTANCE, META_KEY, META_RUN, META_WORKSPACE};

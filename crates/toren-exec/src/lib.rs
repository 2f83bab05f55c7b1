//! `toren-exec`, the sandbox helper.
//!
//! A small static binary that a sandbox container runs as its PID 1, bind-mounted
//! read-only from the host, so any image works unchanged. It reads JSON-lines requests on
//! its stdin (attached by the docker backend) and runs each as `bash -c <command>` — or
//! `/bin/sh -c` in an image without bash — in a new process group with exactly the given
//! environment, working directory, timeout and output limit, and answers each on stdout
//! with the exact exit code and the interleaved output, head and tail kept. A trivial
//! command costs a process spawn instead of a `docker exec`.
//!
//! As PID 1 it reaps every zombie in the container, and after each command, when no other
//! command runs, kills every other process in the container, so daemons a command started
//! (`setsid`, `nohup`, double forks) do not outlive it. (That includes processes someone
//! started with `docker exec`.) A cancel line (`{"cancel": ID}`) kills one command's
//! process group, for a backend that stopped waiting for it. It exits when its stdin
//! ends, killing what still runs.
//!
//! The local backend runs it the same way, as PID 1 of the bubblewrap sandbox it keeps for
//! a run (bound read-only at `/.toren-exec`, inside the sandbox's cgroup). Its requests may
//! carry rlimits of their own ([`protocol::Limited`]) for hosts where no cgroup bounds the
//! commands.
//!
//! The wire format is [`protocol`]; build the static binary with
//! `scripts/build-exec-helper`.

mod capture;
mod cgroup;
mod children;
mod command;
mod descriptors;
mod error;
mod forward;
pub mod protocol;
mod running;
mod serve;

pub use capture::Capture;
pub use descriptors::close_inherited_on_exec;
pub use error::{Error, Result};
pub use forward::forward;
pub use serve::{SHELLS, pick_shell, serve};

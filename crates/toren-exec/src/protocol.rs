//! The wire format between a sandbox backend and the helper: one JSON object per line in
//! each direction. The backend writes [`Request`]s (and [`Cancel`]s of requests it no longer
//! waits for) to the helper's stdin; the helper writes one [`Response`] per request to its
//! stdout, in completion order, matched by `id`.
//! Nothing else is ever written to stdout; the helper's own diagnostics go to stderr.
//!
//! Granted variables travel inside requests, so the container's configuration holds no
//! secret and no value ever appears in an argv.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

/// Bumped when a change would confuse a peer built from an older version.
pub const PROTOCOL_VERSION: u32 = 1;

/// Run one shell command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Chosen by the backend, unique among its requests; echoed in the response.
    pub id: String,
    /// Run as `<shell> -c <command>` (bash when the image has it, else `/bin/sh`).
    pub command: String,
    /// The working directory.
    pub cwd: String,
    /// The command's whole environment: nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// After this many milliseconds the command's process group is killed.
    pub timeout_ms: u64,
    /// At most this many bytes of output are kept (head and tail).
    pub output_limit: usize,
    /// `RLIMIT_CPU` of the command's processes, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_secs: Option<u64>,
}

/// A [`Request`] with limits of its own, on one line as
/// `{"request": {...}, "limits": {...}}`. The local backend's warm sandbox sends these;
/// a container's limits are the container's, and docker sends plain requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limited {
    pub request: Request,
    pub limits: Limits,
}

/// Limits the helper applies to one command besides `cpu_secs`: the rlimits that stand in
/// for a cgroup on a host where none can be used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `RLIMIT_DATA` of the command's processes, in bytes (where no cgroup bounds memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_bytes: Option<u64>,
    /// `RLIMIT_NPROC` of the command's processes (where no cgroup bounds their number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc: Option<u64>,
}

impl Limits {
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Stop a running command early: its process group is killed, as at its timeout, and its
/// [`Response`] follows as usual (killed by signal 9). The backend sends it when it stops
/// waiting for the answer (the caller went away), so that nothing it asked for runs on
/// unwatched. An id that is not running is ignored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cancel {
    /// The `id` of the [`Request`] to stop.
    pub cancel: String,
}

/// What became of one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Response {
    /// The command ran (and maybe timed out or was killed).
    Finished(Finished),
    /// The command could not be started, or the request was malformed.
    Failed { id: String, error: String },
}

impl Response {
    /// The id of the request this answers (empty if the request had none).
    pub fn id(&self) -> &str {
        match self {
            Self::Finished(f) => &f.id,
            Self::Failed { id, .. } => id,
        }
    }
}

/// A command that ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub id: String,
    /// The shell's exit code; `None` if it was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the shell, if one did.
    pub signal: Option<i32>,
    /// stdout and stderr interleaved in arrival order, lossily decoded, head and tail kept
    /// with a line in the middle stating how much was cut.
    pub output: String,
    pub truncated: bool,
    pub timed_out: bool,
    /// How often the kernel's OOM killer struck in the helper's cgroup while the command
    /// ran (0 where the helper cannot tell).
    #[serde(default)]
    pub oom_kills: u64,
    /// How often a fork failed at the cgroup's process limit while the command ran.
    #[serde(default)]
    pub pids_max_hits: u64,
    /// How long the command took, in milliseconds.
    pub elapsed_ms: u64,
}

/// Writes `value` as one line of JSON and flushes.
pub fn write_line<T: Serialize>(out: &mut impl Write, value: &T) -> io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_request_reads_from_the_documented_shape() {
        let line = r#"{"id":"a1","command":"true","cwd":"/workspace","env":[["PATH","/bin"]],"timeout_ms":5000,"output_limit":100}"#;
        let req: Request = serde_json::from_str(line).unwrap();
        assert_eq!(
            req,
            Request {
                id: "a1".into(),
                command: "true".into(),
                cwd: "/workspace".into(),
                env: vec![("PATH".into(), "/bin".into())],
                timeout_ms: 5000,
                output_limit: 100,
                cpu_secs: None,
            }
        );
    }

    #[test]
    fn a_limited_request_is_not_a_request_and_carries_only_the_limits_set() {
        let limited = Limited {
            request: Request {
                id: "a".into(),
                command: "true".into(),
                cwd: "/".into(),
                env: vec![],
                timeout_ms: 1,
                output_limit: 1,
                cpu_secs: None,
            },
            limits: Limits {
                data_bytes: None,
                nproc: Some(100),
            },
        };
        let line = serde_json::to_string(&limited).unwrap();
        assert!(line.ends_with(r#""limits":{"nproc":100}}"#), "{line}");
        assert_eq!(serde_json::from_str::<Limited>(&line).unwrap(), limited);
        assert!(serde_json::from_str::<Request>(&line).is_err());
        let plain = serde_json::to_string(&limited.request).unwrap();
        assert!(serde_json::from_str::<Limited>(&plain).is_err());
        assert!(Limits::default().is_empty());
    }

    #[test]
    fn responses_are_tagged_and_one_line() {
        let mut out = Vec::new();
        write_line(
            &mut out,
            &Response::Failed {
                id: "x".into(),
                error: "two\nlines".into(),
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"kind\":\"failed\",\"id\":\"x\",\"error\":\"two\\nlines\"}\n"
        );
    }
}

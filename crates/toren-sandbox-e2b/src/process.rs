//! One command in a sandbox through envd's `process.Process/Start`, a Connect server
//! stream over JSON: one request envelope out (no `Connect-Timeout-Ms`, so envd sets no
//! deadline of its own; `Keepalive-Ping-Interval: 50`), then envelopes in — `start{pid}`,
//! `data` (base64 stdout/stderr, fed to the head+tail [`Capture`]), `keepalive`, `end`,
//! and the end-of-stream frame. Toren's own timeout ends it: the command's whole process
//! group is killed by a second command (`kill -KILL -- -PID`: the command runs under
//! `setsid`, so its pid is its group's), with everything else it left in the VM, and its
//! pid by `SendSignal` as well. A command that ends takes what it left running with it.
//!
//! The command's environment is exactly `env` (PATH, HOME, LANG and the granted names):
//! the wrapper drops whatever envd adds (`USER`, `E2B_SANDBOX_ID`, …) before the command
//! starts; only names travel in its argv, values only in `envs`.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use futures::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};
use toren_exec::Capture;
use toren_protocol::ResourceLimits;

use crate::client::{Client, envd_error};
use crate::error::{Error, Result};

/// The largest envelope accepted (envd's chunks are at most 32 KiB).
const MAX_FRAME: usize = 16 * 1024 * 1024;
/// Silence longer than this means the stream is wedged (envd pings every 50 s).
const IDLE: Duration = Duration::from_secs(120);

/// Ends every process of the user but the sweeping shell's own ancestors (envd and the
/// VM's init are root's and out of reach anyway), twice, for what forked meanwhile: in a
/// VM that runs one command of the run at a time, every other process of the user is a
/// command's leftover (a daemon, `setsid` and `nohup` children included), as the other
/// backends end everything a command started. Only in an E2B VM, which `/.e2b` marks
/// (E2B's template build writes it into every template): elsewhere the user's processes
/// may not all be the run's. No single quote (it goes inside the wrapper's).
macro_rules! sweep {
    () => {
        r#"if [ -e /.e2b ]; then for r in 1 2; do a=" "; q=$$; while [ -r /proc/$q/status ] && [ "$q" != 0 ]; do a="$a$q "; v=; while read -r k v; do [ "$k" = PPid: ] && break; done < /proc/$q/status; q=$v; done; for d in /proc/[0-9]*; do p=${d#/proc/}; case "$a" in *" $p "*) continue;; esac; [ -O "$d" ] && kill -KILL "$p" 2>/dev/null; done; done; fi"#
    };
}

/// Runs the command (`$1`) under `sandbox.limits` as rlimits, as the local backend does
/// without cgroups: `$2` more processes of the user than it already runs
/// (`RLIMIT_NPROC`, which counts them all; the default user of an E2B VM is no root, so it
/// binds), `$3` KiB of data per process (`RLIMIT_DATA`), `$4` seconds of CPU per process;
/// where the VM's hard limit is lower, that (without a fork: no `$(ulimit -H)`). In a
/// subshell, so the sweep after it is not limited.
macro_rules! limited {
    () => {
        r#"n=0; for d in /proc/[0-9]*; do [ -O "$d" ] && n=$((n+1)); done; (lim() { ulimit -S -H "$1" "$2" 2>/dev/null || ulimit -S "$1" hard; }; lim -u $((n + $2)); lim -d $3; lim -t $4; exec /bin/bash -c "$1")"#
    };
}

/// Keeps only the names given after the command and its limits, then, in a session of its
/// own, runs it under the limits (`limited!`), ends what it left running (`sweep!`; its
/// leftovers would also hold its output open, and envd ends the stream only when nothing
/// does) and exits as it did (a signal's death as 128 + N, as bash reports it). The
/// exported names are found without a fork: every variable by its first character
/// (`${!A@}`…; a name starts with a letter or `_`), those whose attributes hold `x`
/// (`${!v@a}`, bash 4.4+), where `$(compgen -e)` forked a subshell per command.
const WRAPPER: &str = concat!(
    r#"c=$1; l="$2 $3 $4"; shift 4; keep=" PATH HOME LANG $* "; "#,
    r#"for v in ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} ${!H@} ${!I@} ${!J@} ${!K@} ${!L@} ${!M@} ${!N@} ${!O@} ${!P@} ${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} ${!Z@} "#,
    r#"${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} ${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} ${!o@} ${!p@} ${!q@} ${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} ${!_@}; "#,
    r#"do case "${!v@a}" in *x*) case "$keep" in *" $v "*) ;; *) unset "$v";; esac;; esac; done; exec setsid /bin/bash -c '"#,
    limited!(),
    "; s=$?; ",
    sweep!(),
    r#"; exit $s' toren "$c" $l"#
);

/// Toren's timeout: the command's process group (its session's: the wrapper's pid is the
/// group's), then whatever else of it is left (`sweep!`).
const KILL: &str = concat!(r#"kill -KILL -- "$1" 2>/dev/null; "#, sweep!(), "; exit 0");

/// How a command ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// It exited (`None`: killed by a signal).
    Exited(Option<i32>),
    /// Toren's timeout struck and the group was killed.
    TimedOut,
    /// The stream broke before the end; the command was killed to be sure.
    Broken(Error),
}

impl Ended {
    /// How it ended, in a few words for a message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Exited(Some(code)) => format!("exit code {code}"),
            Self::Exited(None) => "killed by a signal".into(),
            Self::TimedOut => "timed out".into(),
            Self::Broken(err) => format!("the stream broke: {err}"),
        }
    }
}

/// What a command printed and how it ended.
pub(crate) struct Ran {
    pub(crate) ended: Ended,
    pub(crate) output: String,
    pub(crate) truncated: bool,
}

/// Where a command runs.
pub(crate) struct Target<'a> {
    pub(crate) client: &'a Client,
    pub(crate) id: &'a str,
    pub(crate) token: Option<&'a str>,
}

/// The request message of `command` under exactly `env` and `limits`, in `cwd`.
pub(crate) fn start_message(
    command: &str,
    env: &[(String, String)],
    limits: &ResourceLimits,
    cwd: &str,
) -> Value {
    let envs: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut args = vec![
        "-c".to_owned(),
        WRAPPER.to_owned(),
        "toren".to_owned(),
        command.to_owned(),
        limits.pids.to_string(),
        (limits.memory / 1024).max(1).to_string(),
        limits.cpu_secs.max(1).to_string(),
    ];
    args.extend(env.iter().map(|(k, _)| k.clone()));
    json!({"process": {"cmd": "/bin/bash", "args": args, "envs": envs, "cwd": cwd}, "stdin": false})
}

/// A script of Toren's own (no granted variables), with `args` as `$1`….
pub(crate) fn script_message(script: &str, args: &[&str]) -> Value {
    let mut argv = vec!["-c".to_owned(), script.to_owned(), "toren".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    json!({"process": {"cmd": "/bin/bash", "args": argv, "envs": {"PATH": toren_sandbox::SANDBOX_PATH}, "cwd": "/"}, "stdin": false})
}

fn frame(message: &Value) -> Vec<u8> {
    let payload = serde_json::to_vec(message).unwrap_or_default();
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(0);
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(&payload);
    out
}

/// Splits complete envelopes off `buf`: (flags, payload).
fn take_frames(buf: &mut Vec<u8>) -> std::result::Result<Vec<(u8, Vec<u8>)>, String> {
    let mut frames = Vec::new();
    loop {
        if buf.len() < 5 {
            return Ok(frames);
        }
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if len > MAX_FRAME {
            return Err(format!("sent a frame of {len} bytes"));
        }
        if buf.len() < 5 + len {
            return Ok(frames);
        }
        let flags = buf[0];
        let payload = buf[5..5 + len].to_vec();
        buf.drain(..5 + len);
        frames.push((flags, payload));
    }
}

/// Runs one command: starts it, streams its output into a capture of `limit` bytes, and
/// stops it at `timeout`. `user` picks envd's user (`Authorization: Basic`), else its default.
pub(crate) async fn run(
    target: &Target<'_>,
    message: &Value,
    timeout: Duration,
    limit: usize,
    user: Option<&str>,
) -> Result<Ran> {
    let mut request = target
        .client
        .envd(
            Method::POST,
            "/process.Process/Start",
            target.id,
            target.token,
        )
        .header("Content-Type", "application/connect+json")
        .header("Connect-Protocol-Version", "1")
        .header("Connect-Content-Encoding", "identity")
        .header("Keepalive-Ping-Interval", "50")
        .body(frame(message));
    if let Some(user) = user {
        request = request.header(
            "Authorization",
            format!("Basic {}", B64.encode(format!("{user}:"))),
        );
    }
    let url = target.client.endpoints().sandbox_url.clone();
    let response = match request.send().await {
        Ok(response) => response,
        // No connection was made, so the command did not start: worth trying again.
        Err(e) if e.is_connect() => {
            return Err(Error::Network {
                url,
                detail: e.to_string(),
            });
        }
        // The request may have reached envd: the command may be running, unseen.
        Err(e) => {
            return Ok(Ran {
                ended: Ended::Broken(Error::Network {
                    url,
                    detail: format!("the request to start the command failed: {e}"),
                }),
                output: String::new(),
                truncated: false,
            });
        }
    };
    let status = response.status();
    if !status.is_success() {
        let body = response.bytes().await.unwrap_or_default();
        return Err(envd_error(target.id, "start a command", status, &body));
    }
    let mut body = response.bytes_stream();
    let mut buf = Vec::new();
    let mut capture = Capture::new(limit);
    let mut pid: Option<u32> = None;
    let deadline = tokio::time::Instant::now() + timeout;
    let protocol = |why: String| Error::Protocol {
        id: target.id.to_owned(),
        why,
    };
    let ended = 'stream: loop {
        let next = tokio::select! {
            next = tokio::time::timeout(IDLE, body.next()) => next,
            () = tokio::time::sleep_until(deadline) => {
                kill(target, pid).await;
                break 'stream Ended::TimedOut;
            }
        };
        let chunk = match next {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(Some(Err(e))) => {
                kill(target, pid).await;
                break Ended::Broken(Error::Network {
                    url: url.clone(),
                    detail: format!("the command's stream broke: {e}"),
                });
            }
            Ok(None) => {
                kill(target, pid).await;
                break Ended::Broken(protocol(
                    "ended the command's stream without its end".into(),
                ));
            }
            Err(_) => {
                kill(target, pid).await;
                break Ended::Broken(protocol(format!(
                    "sent nothing for {} s, not even a keepalive",
                    IDLE.as_secs()
                )));
            }
        };
        buf.extend_from_slice(&chunk);
        let frames = take_frames(&mut buf).map_err(protocol)?;
        for (flags, payload) in frames {
            let value: Value = serde_json::from_slice(&payload)
                .map_err(|e| protocol(format!("sent a frame that is not JSON: {e}")))?;
            if flags & 0x02 != 0 {
                if let Some(error) = value.get("error") {
                    let code = error["code"].as_str().unwrap_or("unknown");
                    let message = error["message"].as_str().unwrap_or_default();
                    break 'stream Ended::Broken(Error::Api {
                        what: "run a command".into(),
                        status: 200,
                        message: format!("{code}: {message}"),
                    });
                }
                break 'stream Ended::Broken(protocol(
                    "ended the stream before the command's end".into(),
                ));
            }
            let event = &value["event"];
            if let Some(start) = event.get("start") {
                pid = start["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
            } else if let Some(data) = event.get("data") {
                for key in ["stdout", "stderr", "pty"] {
                    if let Some(text) = data.get(key).and_then(Value::as_str) {
                        let bytes = B64.decode(text).map_err(|e| {
                            protocol(format!("sent output that is not base64: {e}"))
                        })?;
                        capture.push(&bytes);
                    }
                }
            } else if let Some(end) = event.get("end") {
                break 'stream Ended::Exited(exit_code(end));
            }
        }
    };
    let (output, truncated) = capture.finish();
    Ok(Ran {
        ended,
        output,
        truncated,
    })
}

/// The exit code of envd's `end` event, as the other backends report it: the code of a
/// command that exited (`exited`, `exitCode`; both omitted when false and 0), and for one
/// killed by signal N (`exitCode: -1`, `exited` false, `status: "signal: killed"`, Go's
/// `ProcessState`) 128 + N, as bash reports a child killed so and the local backend
/// reports its shell killed so. `None` for a signal whose name is not Go's.
fn exit_code(end: &Value) -> Option<i32> {
    if end["exited"].as_bool().unwrap_or(false) {
        return Some(
            end["exitCode"]
                .as_i64()
                .map_or(0, |code| i32::try_from(code).unwrap_or(-1)),
        );
    }
    let status = end["status"].as_str().unwrap_or_default();
    let name = status.strip_prefix("signal: ")?;
    let name = name.strip_suffix(" (core dumped)").unwrap_or(name);
    signal_number(name).map(|n| 128 + n)
}

/// The Linux signal Go's `syscall.Signal.String()` calls `name`.
fn signal_number(name: &str) -> Option<i32> {
    const NAMES: [&str; 31] = [
        "hangup",
        "interrupt",
        "quit",
        "illegal instruction",
        "trace/breakpoint trap",
        "aborted",
        "bus error",
        "floating point exception",
        "killed",
        "user defined signal 1",
        "segmentation fault",
        "user defined signal 2",
        "broken pipe",
        "alarm clock",
        "terminated",
        "stack fault",
        "child exited",
        "continued",
        "stopped (signal)",
        "stopped",
        "stopped (tty input)",
        "stopped (tty output)",
        "urgent I/O condition",
        "CPU time limit exceeded",
        "file size limit exceeded",
        "virtual timer expired",
        "profiling timer expired",
        "window changed",
        "I/O possible",
        "power failure",
        "bad system call",
    ];
    if let Some(n) = name.strip_prefix("signal ") {
        return n.parse().ok();
    }
    let index = NAMES.iter().position(|known| *known == name)?;
    i32::try_from(index + 1).ok()
}

/// Ends every process of the default user in the VM (`sweep!`), e.g. a dead worker's
/// command still running in the sandbox another worker reconnects to. Failures are logged:
/// the next command runs either way.
pub(crate) async fn end_leftovers(target: &Target<'_>) {
    let message = script_message(concat!(sweep!(), "; exit 0"), &[]);
    if let Err(err) = Box::pin(run(target, &message, Duration::from_secs(30), 1024, None)).await {
        tracing::warn!(%err, sandbox = target.id, "could not end what was left running");
    }
}

/// Kills the command's whole process group (and the command itself, in case the group
/// kill could not run). Failures are logged: the sandbox may be gone.
async fn kill(target: &Target<'_>, pid: Option<u32>) {
    // 0 is a command that had ended before envd looked (`kill -- -0` would be the killer's
    // own group) and 1 the VM's init: neither is ever signalled.
    let Some(pid) = pid.filter(|p| *p > 1) else {
        return;
    };
    let group = format!("-{pid}");
    let message = script_message(KILL, &[&group]);
    let group = Box::pin(run(target, &message, Duration::from_secs(10), 1024, None));
    if let Err(err) = group.await {
        tracing::warn!(%err, sandbox = target.id, pid, "could not kill a command's process group");
    }
    let signal = json!({"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"});
    let _ = target
        .client
        .unary(
            target.id,
            target.token,
            "process.Process/SendSignal",
            &signal,
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_events_give_exact_codes_and_a_signal_as_128_plus_its_number() {
        let code = |end: Value| exit_code(&end);
        // As envd sends them (`handler.go` `Wait`: Go's ProcessState).
        assert_eq!(
            code(json!({"exited": true, "status": "exit status 0"})),
            Some(0)
        );
        assert_eq!(
            code(
                json!({"exitCode": 3, "exited": true, "status": "exit status 3", "error": "exit status 3"})
            ),
            Some(3)
        );
        assert_eq!(
            code(json!({"exitCode": -1, "status": "signal: killed", "error": "signal: killed"})),
            Some(137)
        );
        assert_eq!(
            code(json!({"exitCode": -1, "status": "signal: terminated"})),
            Some(143)
        );
        assert_eq!(
            code(json!({"exitCode": -1, "status": "signal: segmentation fault (core dumped)"})),
            Some(139)
        );
        assert_eq!(
            code(json!({"exitCode": -1, "status": "signal: bad system call"})),
            Some(159)
        );
        assert_eq!(
            code(json!({"exitCode": -1, "status": "signal: signal 34"})),
            Some(162)
        );
        // Killed, but by nothing a name says.
        assert_eq!(code(json!({"exitCode": -1, "status": "signal: ?"})), None);
        assert_eq!(code(json!({"exitCode": -1})), None);
    }

    #[test]
    fn frames_are_split_across_chunks() {
        let mut all = frame(&json!({"a": 1}));
        all.extend(frame(&json!({"b": 2})));
        let mut rest = all.split_off(7);
        let mut buf = all;
        assert_eq!(take_frames(&mut buf).unwrap().len(), 0);
        buf.append(&mut rest);
        let frames = take_frames(&mut buf).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].1, br#"{"a":1}"#);
        assert!(buf.is_empty());
    }
}

//! The helper's main loop: pick the shell once, start the reaper, then read requests from
//! the input line by line and run each on a thread of its own, so a long command does not
//! hold up the next; every response is written whole under one lock. A cancel line kills
//! the named request's process group (see `running`). When the input ends
//! (the backend went away), every running command is killed, answered (as killed) and the
//! loop returns.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use crate::children::Children;
use crate::command;
use crate::error::{Error, Result};
use crate::protocol::{Cancel, Limited, Limits, PROTOCOL_VERSION, Request, Response, write_line};
use crate::running::Running;

/// The shells a command may run under, in order of preference: bash when the image has it
/// (the `bash` tool's semantics), else the POSIX shell every image has.
pub const SHELLS: [&str; 2] = ["/bin/bash", "/bin/sh"];

/// The shell commands run under here: the first of [`SHELLS`] that is a file.
pub fn pick_shell() -> Result<PathBuf> {
    SHELLS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or(Error::NoShell)
}

/// Serves requests from `input` until it ends, answering on `output`.
pub fn serve(input: impl BufRead, output: impl Write + Send + 'static) -> Result<()> {
    let shell = pick_shell()?;
    if std::process::id() != 1 {
        // Orphans of our commands come to us rather than to the machine's init, so we can
        // reap them as PID 1 would.
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| Error::Setup {
            what: "become a child subreaper",
            source: e.into(),
        })?;
    }
    let children = Arc::new(Children::default());
    let reaper = Arc::clone(&children);
    thread::Builder::new()
        .name("reaper".into())
        .spawn(move || reaper.reap())
        .map_err(|source| Error::Setup {
            what: "start the reaper thread",
            source,
        })?;
    diag(format_args!(
        "ready (protocol {PROTOCOL_VERSION}, shell {})",
        shell.display()
    ));

    let output = Arc::new(Mutex::new(output));
    let shell: Arc<Path> = shell.into();
    let commands = Arc::new(Running::default());
    let mut running = Vec::new();
    for line in input.lines() {
        let line = line.map_err(|source| Error::Io {
            what: "read a request",
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        if let Ok(Cancel { cancel }) = serde_json::from_str::<Cancel>(&line) {
            commands.cancel(&cancel, &children);
            continue;
        }
        let parsed = serde_json::from_str::<Limited>(&line)
            .map(|l| (l.request, l.limits))
            .or_else(|_| serde_json::from_str::<Request>(&line).map(|r| (r, Limits::default())));
        let (request, limits) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => {
                let response = Response::Failed {
                    id: id_of(&line),
                    error: format!("malformed request: {err}"),
                };
                respond(&output, &response)?;
                continue;
            }
        };
        let slot = commands.register(&request.id);
        let (children, shell, output, commands) = (
            Arc::clone(&children),
            Arc::clone(&shell),
            Arc::clone(&output),
            Arc::clone(&commands),
        );
        running.retain(|t: &thread::JoinHandle<()>| !t.is_finished());
        let thread = thread::Builder::new()
            .name(format!("cmd-{}", request.id))
            .spawn(move || {
                let response = command::run(&request, &limits, &shell, &children, &slot);
                if let Err(err) = respond(&output, &response) {
                    diag(format_args!("cannot answer request {}: {err}", request.id));
                }
                commands.finish(&request.id, &slot);
            })
            .map_err(|source| Error::Setup {
                what: "start a command thread",
                source,
            })?;
        running.push(thread);
    }
    children.kill_all();
    for thread in running {
        let _ = thread.join();
    }
    Ok(())
}

/// One line of the helper's own diagnostics, on stderr (stdout carries only responses).
pub(crate) fn diag(message: std::fmt::Arguments<'_>) {
    #[expect(clippy::print_stderr, reason = "stderr is the helper's log")]
    {
        eprintln!("toren-exec: {message}");
    }
}

fn respond(output: &Mutex<impl Write>, response: &Response) -> Result<()> {
    let mut out = output.lock().unwrap_or_else(PoisonError::into_inner);
    write_line(&mut *out, response).map_err(|source| Error::Io {
        what: "write a response",
        source,
    })
}

/// The `id` of a request (plain or limited) that does not parse as a whole, if it has one.
fn id_of(line: &str) -> String {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| {
            let request = v.get("request").unwrap_or(&v);
            request.get("id")?.as_str().map(str::to_owned)
        })
        .unwrap_or_default()
}

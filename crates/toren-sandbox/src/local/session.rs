//! The connection to a kept sandbox's helper over its stdio: requests go out as JSON lines
//! on its stdin; a reader task splits its stdout into lines, decodes each as a response and
//! hands it to whoever waits for that id; another passes its stderr (the helper's and
//! bubblewrap's diagnostics) to the log and keeps the last lines for error messages. When
//! stdout ends — the sandbox died or was killed — the session is closed and every waiter
//! learns it at once. A caller that stops waiting for an answer (its future dropped: the
//! run was stopped) makes the session send the helper a cancel of that request, which kills
//! the command's process group. The docker backend's `session` is the same conversation
//! over a container's attach stream.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use std::pin::Pin;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use toren_exec::protocol::{Cancel, Limited, Response};

/// The most a single response line may hold before the session is declared broken; far
/// above any output limit the tools use.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// How many of the last diagnostic lines are kept for error messages.
const KEPT_DIAGNOSTICS: usize = 20;

/// What the helper says on stderr once it serves requests.
const READY: &str = "toren-exec: ready";

/// Why a request got no response.
#[derive(Debug)]
pub(crate) enum Lost {
    /// The sandbox ended before the answer came.
    Closed,
    /// Writing the request failed.
    Write(std::io::Error),
}

/// An attached helper.
pub(crate) struct Session {
    input: Arc<tokio::sync::Mutex<ChildStdin>>,
    shared: Arc<Mutex<Shared>>,
    readers: [JoinHandle<()>; 2],
    next: AtomicU64,
}

#[derive(Default)]
struct Shared {
    waiters: HashMap<String, oneshot::Sender<Response>>,
    closed: bool,
    /// The last lines of stderr.
    diagnostics: VecDeque<String>,
    /// Told once when the helper says it is ready (or stderr ends first: `false`).
    ready: Option<oneshot::Sender<bool>>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session {
    /// Takes over the helper's stdio; the receiver learns whether it became ready.
    pub(crate) fn new(
        stdin: ChildStdin,
        stdout: ChildStdout,
        stderr: ChildStderr,
    ) -> (Self, oneshot::Receiver<bool>) {
        let (ready, became_ready) = oneshot::channel();
        let shared = Arc::new(Mutex::new(Shared {
            ready: Some(ready),
            ..Shared::default()
        }));
        let readers = [
            tokio::spawn(read_responses(stdout, Arc::clone(&shared))),
            tokio::spawn(read_diagnostics(stderr, Arc::clone(&shared))),
        ];
        let session = Self {
            input: Arc::new(tokio::sync::Mutex::new(stdin)),
            shared,
            readers,
            next: AtomicU64::new(0),
        };
        (session, became_ready)
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.shared).closed
    }

    /// The last diagnostic lines (bubblewrap's or the helper's), joined.
    pub(crate) fn diagnostics(&self) -> String {
        let shared = lock(&self.shared);
        shared
            .diagnostics
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A fresh request id.
    pub(crate) fn next_id(&self) -> String {
        self.next.fetch_add(1, Ordering::Relaxed).to_string()
    }

    /// Sends `req` and waits for its response (no deadline: the caller sets one).
    pub(crate) async fn call(&self, req: &Limited) -> Result<Response, Lost> {
        let id = req.request.id.as_str();
        let (sender, receiver) = oneshot::channel();
        {
            let mut shared = lock(&self.shared);
            if shared.closed {
                return Err(Lost::Closed);
            }
            shared.waiters.insert(id.to_owned(), sender);
        }
        let mut line = serde_json::to_vec(req).map_err(|e| Lost::Write(e.into()))?;
        line.push(b'\n');
        // From here on, if this future is dropped the request may be running: cancel it.
        let mut waiting = Waiting {
            session: self,
            id,
            done: false,
        };
        let written = {
            let mut input = self.input.lock().await;
            match input.write_all(&line).await {
                Ok(()) => input.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            waiting.done = true;
            lock(&self.shared).waiters.remove(id);
            return Err(Lost::Write(e));
        }
        let answer = receiver.await.map_err(|_| Lost::Closed);
        waiting.done = true;
        lock(&self.shared).waiters.remove(id);
        answer
    }

    /// Tells the helper to kill request `id`'s command. This runs from a destructor, maybe
    /// just before the process exits (its runtime then drops pending tasks), so the line is
    /// written on the spot when the pipe takes it without waiting, as it nearly always
    /// does; only what it does not take goes out from a task. The line starts with a
    /// newline, which ends whatever part of a request line a dropped write left behind (the
    /// helper skips empty lines).
    fn cancel(&self, id: &str) {
        if lock(&self.shared).closed {
            return;
        }
        let Ok(json) = serde_json::to_vec(&Cancel {
            cancel: id.to_owned(),
        }) else {
            return;
        };
        let mut line = b"\n".to_vec();
        line.extend(json);
        line.push(b'\n');
        let held = Arc::clone(&self.input).try_lock_owned().ok();
        let held = match held {
            Some(mut held) => {
                let written = write_now(Pin::new(&mut *held), &line);
                line.drain(..written);
                if line.is_empty() {
                    tracing::debug!(id, "cancelled a command nobody waits for");
                    return;
                }
                Some(held)
            }
            None => None,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(id, "cannot cancel a command outside the runtime");
            return;
        };
        let (input, id) = (Arc::clone(&self.input), id.to_owned());
        runtime.spawn(async move {
            // The rest under the lock already held, if any: no other line may cut into it.
            let sent = match held {
                Some(mut held) => held.write_all(&line).await,
                None => input.lock().await.write_all(&line).await,
            };
            match sent {
                Ok(()) => tracing::debug!(%id, "cancelled a command nobody waits for"),
                Err(err) => tracing::warn!(%id, %err, "could not cancel a command"),
            }
        });
    }

    /// Stops listening; waiters learn the session closed.
    pub(crate) fn close(&self) {
        for reader in &self.readers {
            reader.abort();
        }
        close(&self.shared);
    }
}

fn close(shared: &Mutex<Shared>) {
    let mut shared = lock(shared);
    shared.closed = true;
    shared.waiters.clear();
    if let Some(ready) = shared.ready.take() {
        let _ = ready.send(false);
    }
}

/// A request that may be running in the helper while its caller waits for the answer.
struct Waiting<'a> {
    session: &'a Session,
    id: &'a str,
    /// Answered, or known not to have reached the helper.
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.done {
            lock(&self.session.shared).waiters.remove(self.id);
            self.session.cancel(self.id);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

/// Writes what `output` takes of `bytes` without waiting; returns how much. A pipe's
/// writes are unbuffered, so what it took needs no flush.
fn write_now(mut output: Pin<&mut ChildStdin>, bytes: &[u8]) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < bytes.len() {
        match output.as_mut().poll_write(&mut cx, &bytes[written..]) {
            Poll::Ready(Ok(n)) if n > 0 => written += n,
            Poll::Ready(_) | Poll::Pending => break,
        }
    }
    written
}

/// Reads response lines until stdout ends, then closes the session.
async fn read_responses(stdout: ChildStdout, shared: Arc<Mutex<Shared>>) {
    let mut lines = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_line(&mut lines, &mut line).await {
            Ok(true) => deliver(&line, &shared),
            Ok(false) => break,
            Err(err) => {
                tracing::warn!(%err, "the sandbox helper's output broke off");
                break;
            }
        }
    }
    tracing::debug!("the sandbox helper's output ended");
    close(&shared);
}

/// Passes stderr lines to the log, keeps the last ones, and notices the ready line.
async fn read_diagnostics(stderr: ChildStderr, shared: Arc<Mutex<Shared>>) {
    let mut lines = BufReader::new(stderr);
    let mut line = Vec::new();
    while let Ok(true) = read_line(&mut lines, &mut line).await {
        let text = String::from_utf8_lossy(&line).into_owned();
        line.clear();
        tracing::debug!("sandbox: {text}");
        let mut shared = lock(&shared);
        if text.starts_with(READY)
            && let Some(ready) = shared.ready.take()
        {
            let _ = ready.send(true);
        }
        if shared.diagnostics.len() == KEPT_DIAGNOSTICS {
            shared.diagnostics.pop_front();
        }
        shared.diagnostics.push_back(text);
    }
    if let Some(ready) = lock(&shared).ready.take() {
        let _ = ready.send(false);
    }
}

/// One line into `line` (without its newline); `false` at the end of the stream.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let n = (&mut *reader)
        .take(u64::try_from(MAX_LINE).unwrap_or(u64::MAX))
        .read_until(b'\n', line)
        .await?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        Ok(true)
    } else if line.len() >= MAX_LINE {
        Err(std::io::Error::other("a line longer than any answer"))
    } else {
        // The stream ended inside a line.
        Ok(!line.is_empty())
    }
}

fn deliver(line: &[u8], shared: &Mutex<Shared>) {
    match serde_json::from_slice::<Response>(line) {
        Ok(response) => {
            let waiter = lock(shared).waiters.remove(response.id());
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send(response);
                }
                None => tracing::debug!(id = response.id(), "unclaimed response"),
            }
        }
        Err(err) => tracing::warn!(
            %err,
            line = %String::from_utf8_lossy(&line[..line.len().min(200)]),
            "the sandbox helper wrote something that is not a response"
        ),
    }
}

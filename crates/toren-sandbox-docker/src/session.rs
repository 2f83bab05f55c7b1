//! One attached connection to a container's helper: requests go out as JSON lines on the
//! container's stdin; a reader task splits the container's stdout into lines, decodes each
//! as a response and hands it to whoever waits for that id. The helper's stderr (its own
//! diagnostics) goes to the log. When the stream ends — the container stopped or was
//! removed — the session is closed and every waiter learns it at once. A caller that stops
//! waiting for an answer (its future dropped: the run was stopped) makes the session send
//! the helper a cancel of that request, which kills the command's process group: the
//! container's stdin outlives this connection, so nothing else would stop it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bollard::container::{AttachContainerResults, LogOutput};
use futures::StreamExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use toren_exec::protocol::{Cancel, Request, Response};

/// The most a single response line may hold before the session is declared broken; far
/// above any output limit the tools use.
const MAX_LINE: usize = 64 * 1024 * 1024;

/// Why a request got no response.
#[derive(Debug)]
pub(crate) enum Lost {
    /// The container's stream ended (it stopped, or was removed) before the answer came.
    Closed,
    /// Writing the request failed.
    Write(std::io::Error),
}

/// An attached helper.
pub(crate) struct Session {
    container: String,
    input: Arc<Input>,
    pending: Arc<Mutex<Pending>>,
    reader: JoinHandle<()>,
    /// Request ids: unique per session, and across sessions of the same container (a new
    /// process may attach while answers for an old one are still under way).
    prefix: String,
    next: AtomicU64,
}

type Input = tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>;

#[derive(Default)]
struct Pending {
    waiters: HashMap<String, oneshot::Sender<Response>>,
    closed: bool,
}

fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Session {
    /// Takes over an attach stream of `container` (its id).
    pub(crate) fn new(container: String, attached: AttachContainerResults) -> Self {
        let pending = Arc::new(Mutex::new(Pending::default()));
        let reader = tokio::spawn(read_responses(
            container.clone(),
            attached.output,
            Arc::clone(&pending),
        ));
        Self {
            container,
            input: Arc::new(tokio::sync::Mutex::new(attached.input)),
            pending,
            reader,
            prefix: ulid::Ulid::generate().to_string().to_lowercase(),
            next: AtomicU64::new(0),
        }
    }

    /// The id of the container this session is attached to.
    pub(crate) fn container(&self) -> &str {
        &self.container
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.pending).closed
    }

    /// A fresh request id.
    pub(crate) fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n}", self.prefix)
    }

    /// Sends `req` and waits for its response (no deadline: the caller sets one).
    pub(crate) async fn call(&self, req: &Request) -> Result<Response, Lost> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.closed {
                return Err(Lost::Closed);
            }
            pending.waiters.insert(req.id.clone(), sender);
        }
        let mut line = serde_json::to_vec(req).map_err(|e| Lost::Write(e.into()))?;
        line.push(b'\n');
        // From here on, if this future is dropped the request may be running: cancel it.
        let mut waiting = Waiting {
            session: self,
            id: &req.id,
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
            lock(&self.pending).waiters.remove(&req.id);
            return Err(Lost::Write(e));
        }
        let answer = receiver.await.map_err(|_| Lost::Closed);
        waiting.done = true;
        lock(&self.pending).waiters.remove(&req.id);
        answer
    }

    /// Tells the helper to kill request `id`'s command. This runs from a destructor, maybe
    /// just before the process exits (its runtime then drops pending tasks), so the line is
    /// written on the spot when the connection takes it without waiting, as it nearly
    /// always does; only what it does not take goes out from a task. The line starts with a
    /// newline, which ends whatever part of a request line a dropped write left behind (the
    /// helper skips empty lines).
    fn cancel(&self, id: &str) {
        if lock(&self.pending).closed {
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
                let written = write_now(held.as_mut(), &line);
                line.drain(..written);
                if line.is_empty() && flush_now(held.as_mut()) {
                    tracing::debug!(container = %self.container, id, "cancelled a command nobody waits for");
                    return;
                }
                Some(held)
            }
            None => None,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(container = %self.container, id, "cannot cancel a command outside the runtime");
            return;
        };
        let (input, container, id) = (
            Arc::clone(&self.input),
            self.container.clone(),
            id.to_owned(),
        );
        runtime.spawn(async move {
            // The rest under the lock already held, if any: no other line may cut into it.
            let sent = match held {
                Some(mut held) => finish_line(&mut held, &line).await,
                None => finish_line(&mut *input.lock().await, &line).await,
            };
            match sent {
                Ok(()) => tracing::debug!(%container, %id, "cancelled a command nobody waits for"),
                Err(err) => tracing::warn!(%container, %id, %err, "could not cancel a command"),
            }
        });
    }

    /// Stops listening; waiters learn the session closed.
    pub(crate) fn close(&self) {
        self.reader.abort();
        let mut pending = lock(&self.pending);
        pending.closed = true;
        pending.waiters.clear();
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
            lock(&self.session.pending).waiters.remove(self.id);
            self.session.cancel(self.id);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

async fn finish_line(
    output: &mut Pin<Box<dyn AsyncWrite + Send>>,
    bytes: &[u8],
) -> std::io::Result<()> {
    output.write_all(bytes).await?;
    output.flush().await
}

/// Writes what `output` takes of `bytes` without waiting; returns how much.
fn write_now(mut output: Pin<&mut (dyn AsyncWrite + Send)>, bytes: &[u8]) -> usize {
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

/// Flushes `output` if it can without waiting.
fn flush_now(output: Pin<&mut (dyn AsyncWrite + Send)>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    matches!(output.poll_flush(&mut cx), Poll::Ready(Ok(())))
}

/// Splits the container's stdout into response lines until the stream ends.
async fn read_responses(
    container: String,
    mut output: Pin<
        Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    pending: Arc<Mutex<Pending>>,
) {
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    while let Some(item) = output.next().await {
        match item {
            Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                stdout.extend_from_slice(&message);
                for line in take_lines(&mut stdout) {
                    deliver(&container, &line, &pending);
                }
                if stdout.len() > MAX_LINE {
                    tracing::warn!(%container, "the sandbox helper sent an endless line");
                    break;
                }
            }
            Ok(LogOutput::StdErr { message }) => {
                stderr.extend_from_slice(&message);
                for line in take_lines(&mut stderr) {
                    tracing::debug!(%container, "{}", String::from_utf8_lossy(&line));
                }
                stderr.truncate(64 * 1024);
            }
            Ok(LogOutput::StdIn { .. }) => {}
            Err(err) => {
                tracing::debug!(%container, %err, "the attach stream failed");
                break;
            }
        }
    }
    tracing::debug!(%container, "the attach stream ended");
    let mut pending = lock(&pending);
    pending.closed = true;
    pending.waiters.clear();
}

/// Removes and returns every complete line in `buf` (without the newline).
fn take_lines(buf: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    while let Some(end) = buf.iter().position(|b| *b == b'\n') {
        let mut line: Vec<u8> = buf.drain(..=end).collect();
        line.pop();
        lines.push(line);
    }
    lines
}

fn deliver(container: &str, line: &[u8], pending: &Mutex<Pending>) {
    match serde_json::from_slice::<Response>(line) {
        Ok(response) => {
            let waiter = lock(pending).waiters.remove(response.id());
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send(response);
                }
                // An answer for a process that went away (this container outlived it).
                None => tracing::debug!(%container, id = response.id(), "unclaimed response"),
            }
        }
        Err(err) => tracing::warn!(
            %container,
            %err,
            line = %String::from_utf8_lossy(&line[..line.len().min(200)]),
            "the sandbox helper wrote something that is not a response"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_the_rest_is_kept() {
        let mut buf = b"one\ntwo\nthr".to_vec();
        assert_eq!(take_lines(&mut buf), vec![b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(buf, b"thr");
        buf.extend_from_slice(b"ee\n");
        assert_eq!(take_lines(&mut buf), vec![b"three".to_vec()]);
        assert!(buf.is_empty());
    }
}

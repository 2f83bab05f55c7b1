//! Following a run as it goes: [`Notifier`] is told of every committed event and every
//! streamed text fragment of the runs driven in this process (it is the worker's observer),
//! and [`Follow`] yields a run's events in order, reading them from the store when woken by
//! the notifier or, for runs driven by other processes, every poll interval.
//!
//! Streamed text is ephemeral (never journaled). With a stream directory, the notifier also
//! writes each run's text of the current model call to `<dir>/<run id>` (private, removed
//! once the answer is committed), after a first line naming the call, so a follower in
//! another process sees it too: from the start of each call, and only after the events
//! committed before it.

use std::collections::{HashSet, VecDeque};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::broadcast;
use toren_protocol::{Event, EventKind, RunId, RunStatus};
use toren_store::EventLog;

use crate::Result;

/// What a follower receives.
#[derive(Clone, Debug, PartialEq)]
pub enum Followed {
    /// An event of the log, in order; the last one of an ended run ends the stream.
    Event(Box<Event>),
    /// Streamed model text (ephemeral, never journaled), when the run is driven in this
    /// process.
    Text(String),
}

#[derive(Clone, Debug)]
enum Notice {
    Moved(RunId),
    Text(RunId, String),
}

/// Tells followers that a run moved. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Notifier {
    tx: broadcast::Sender<Notice>,
    /// Where streamed text is shared with followers in other processes.
    streams: Option<PathBuf>,
    /// The runs whose current model call has a stream file written here (a file that a
    /// process which died mid-call left behind is started afresh, not appended to).
    writing: Arc<Mutex<HashSet<RunId>>>,
}

impl Default for Notifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Notifier {
    pub fn new() -> Self {
        // A follower that falls this far behind re-reads the store; nothing is lost.
        let (tx, _) = broadcast::channel(1024);
        Self {
            tx,
            streams: None,
            writing: Arc::default(),
        }
    }

    /// Also shares streamed text through files in `dir` (created private if missing).
    pub fn with_stream_dir(mut self, dir: PathBuf) -> Self {
        self.streams = Some(dir);
        self
    }

    fn stream_file(&self, run: &RunId) -> Option<PathBuf> {
        self.streams.as_ref().map(|dir| dir.join(run.as_str()))
    }

    fn append_text(&self, run: &RunId, delta: &str) {
        let Some(path) = self.stream_file(run) else {
            return;
        };
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            let new_call = self
                .writing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(run.clone());
            if new_call {
                let mut file = OpenOptions::new()
                    .create(true)
                    .write(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&path)?;
                file.write_all(format!("{}\n", call_name()).as_bytes())?;
                return file.write_all(delta.as_bytes());
            }
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)?
                .write_all(delta.as_bytes())
        };
        if let Err(e) = write() {
            tracing::debug!(run = %run, "cannot share streamed text: {e}");
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.tx.subscribe()
    }

    /// Says that `run` moved without an event of this process (e.g. it was let go of and
    /// waits for a worker).
    pub fn moved(&self, run: &RunId) {
        let _ = self.tx.send(Notice::Moved(run.clone()));
    }

    /// Every move of every run from now on, for a pool of workers that claims runs when
    /// something changed rather than only on a timer.
    pub fn moves(&self) -> Moves {
        Moves {
            rx: self.subscribe(),
        }
    }
}

/// Moves of runs (see [`Notifier::moves`]).
pub struct Moves {
    rx: broadcast::Receiver<Notice>,
}

impl Moves {
    /// Waits until some run moved: the run, or `None` when moves were missed (the
    /// receiver fell behind) and anything may have changed. Never returns while the
    /// notifier lives and nothing moves.
    pub async fn next(&mut self) -> Option<RunId> {
        loop {
            match self.rx.recv().await {
                Ok(Notice::Moved(run)) => return Some(run),
                Ok(Notice::Text(..)) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return None,
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

impl toren_worker::Observer for Notifier {
    fn text(&self, run: &RunId, delta: &str) {
        self.append_text(run, delta);
        // No follower is no error.
        let _ = self.tx.send(Notice::Text(run.clone(), delta.to_owned()));
    }

    fn event(&self, event: &Event) {
        // The answer is in the log now: the streamed text of this call is done.
        let done = matches!(event.kind, EventKind::ModelResponded(_))
            || event
                .kind
                .status_after()
                .is_some_and(RunStatus::is_terminal);
        if done && let Some(path) = self.stream_file(&event.run_id) {
            let _ = fs::remove_file(path);
            self.writing
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&event.run_id);
        }
        let _ = self.tx.send(Notice::Moved(event.run_id.clone()));
    }
}

/// A name for one model call's stream file, unique across processes and restarts.
fn call_name() -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}.{}.{}",
        std::process::id(),
        jiff::Timestamp::now().as_nanosecond(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A run's stream file, and how much of which call's text was given.
struct StreamFile {
    path: PathBuf,
    call: Option<String>,
    offset: usize,
}

/// A run's events from a seq on, as they are appended. See [`crate::RunService::follow`].
pub struct Follow {
    store: Arc<dyn EventLog>,
    rx: broadcast::Receiver<Notice>,
    run: RunId,
    after: u64,
    poll: Duration,
    buffered: VecDeque<Event>,
    ended: bool,
    /// The run's stream file and how much of it was given.
    stream: Option<StreamFile>,
    /// The call of the last answer given: its stream file, while still there, is done.
    answered_call: Option<String>,
    /// The text of the current model call given so far, and whether events now come live
    /// (after the log as it was when following began).
    streamed: String,
    live: bool,
    /// The rest of an answer given whole before its deltas came: those deltas, when they
    /// come, are not given again.
    stale: String,
}

impl Follow {
    pub(crate) fn new(
        store: Arc<dyn EventLog>,
        notifier: &Notifier,
        run: RunId,
        after: u64,
        poll: Duration,
    ) -> Self {
        let stream = notifier.stream_file(&run).map(|path| StreamFile {
            path,
            call: None,
            offset: 0,
        });
        Self {
            store,
            rx: notifier.subscribe(),
            run,
            after,
            poll,
            buffered: VecDeque::new(),
            ended: false,
            stream,
            answered_call: None,
            streamed: String::new(),
            live: false,
            stale: String::new(),
        }
    }

    /// The next event (or text fragment); `None` once the run has ended and its last event
    /// was given.
    pub async fn next(&mut self) -> Result<Option<Followed>> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                // A live answer's text that did not stream here (it came faster than the
                // poll) is given before the answer, so a follower always reads it whole.
                if let EventKind::ModelResponded(answer) = &event.kind
                    && self.live
                {
                    let text = &answer.message.text;
                    if !self.streamed.is_empty() && text.starts_with(self.streamed.as_str()) {
                        self.answered_call =
                            self.stream.as_ref().and_then(|stream| stream.call.clone());
                    }
                    if let Some(rest) = text.strip_prefix(self.streamed.as_str())
                        && !rest.is_empty()
                    {
                        let rest = rest.to_owned();
                        self.stale.clone_from(&rest);
                        self.streamed.clone_from(text);
                        self.buffered.push_front(event);
                        return Ok(Some(Followed::Text(rest)));
                    }
                    self.streamed.clear();
                }
                self.after = event.seq;
                if event
                    .kind
                    .status_after()
                    .is_some_and(RunStatus::is_terminal)
                {
                    self.ended = true;
                }
                return Ok(Some(Followed::Event(Box::new(event))));
            }
            if self.ended {
                return Ok(None);
            }
            let events = self.store.read(&self.run, self.after).await?;
            if !events.is_empty() {
                self.buffered.extend(events);
                continue;
            }
            self.live = true;
            // An ended run whose last event was already given: nothing more will come. Its
            // end may have been appended since the read above: then read it first.
            let summary = self.store.run(&self.run).await?;
            if summary.status.is_terminal() {
                self.ended = summary.last_seq <= self.after;
                continue;
            }
            if let Some((text, call, offset)) = self.peek_stream() {
                // The text was written after every event committed before its call: give
                // those first (and take the text again after them).
                let events = self.store.read(&self.run, self.after).await?;
                if !events.is_empty() {
                    self.buffered.extend(events);
                    continue;
                }
                if let Some(stream) = &mut self.stream {
                    stream.call = Some(call);
                    stream.offset = offset;
                }
                if let Some(text) = self.fresh(text) {
                    return Ok(Some(Followed::Text(text)));
                }
                continue;
            }
            if let Some(text) = self.wait().await
                && let Some(text) = self.fresh(text)
            {
                return Ok(Some(Followed::Text(text)));
            }
        }
    }

    /// `text` unless it is the rest of an answer already given whole.
    fn fresh(&mut self, text: String) -> Option<String> {
        if let Some(left) = self.stale.strip_prefix(text.as_str()) {
            self.stale = left.to_owned();
            return None;
        }
        self.stale.clear();
        self.streamed.push_str(&text);
        Some(text)
    }

    /// Waits until the run may have moved: a notice from this process, or the poll
    /// interval. Returns streamed text of the run, if that is what came (without a stream
    /// file; with one, the caller reads it).
    async fn wait(&mut self) -> Option<String> {
        let deadline = tokio::time::sleep(self.poll);
        tokio::pin!(deadline);
        // With a stream file, text is read from it (whoever drives the run); otherwise it
        // comes from this process's notices.
        let from_notices = self.stream.is_none();
        loop {
            tokio::select! {
                () = &mut deadline => return None,
                notice = self.rx.recv() => match notice {
                    Ok(Notice::Text(run, text)) if run == self.run && from_notices => {
                        return Some(text);
                    }
                    Ok(Notice::Text(run, _) | Notice::Moved(run)) if run == self.run => {
                        return None;
                    }
                    Ok(_) => {}
                    // Fell behind: re-read the store now.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.stale.clear();
                        return None;
                    }
                    // No notifier any more: only the poll is left.
                    Err(broadcast::error::RecvError::Closed) => {
                        (&mut deadline).await;
                        return None;
                    }
                },
            }
        }
    }

    /// The text of the current model call in the run's stream file that was not given yet:
    /// the text, the call, and where it ends. A call not seen before is read from its
    /// start; the answered call's file (until it is removed) is done. Stops before a
    /// partial UTF-8 character at the end.
    fn peek_stream(&self) -> Option<(String, String, usize)> {
        let stream = self.stream.as_ref()?;
        let bytes = fs::read(&stream.path).ok()?;
        let newline = bytes.iter().position(|b| *b == b'\n')?;
        let call = String::from_utf8_lossy(&bytes[..newline]).into_owned();
        if self.answered_call.as_ref() == Some(&call) {
            return None;
        }
        let body = &bytes[newline + 1..];
        let start = match &stream.call {
            Some(seen) if *seen == call => stream.offset.min(body.len()),
            _ => 0,
        };
        let rest = &body[start..];
        let valid = match std::str::from_utf8(rest) {
            Ok(_) => rest.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => rest.len(),
        };
        let text = String::from_utf8_lossy(&rest[..valid]).into_owned();
        (!text.is_empty()).then_some((text, call, start + valid))
    }
}

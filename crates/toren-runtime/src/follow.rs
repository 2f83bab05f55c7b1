//! Following a run as it goes: [`Notifier`] is told of every committed event and every
//! streamed text fragment of the runs driven in this process (it is the worker's observer),
//! and [`Follow`] yields a run's events in order, reading them from the store when woken by
//! the notifier or, for runs driven by other processes, every poll interval.
//!
//! Streamed text is ephemeral (never journaled). With a stream directory, the notifier also
//! appends each run's text of the current model call to `<dir>/<run id>` (private, removed
//! once the answer is committed), so a follower in another process sees it too.

use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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
        Self { tx, streams: None }
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
        }
        let _ = self.tx.send(Notice::Moved(event.run_id.clone()));
    }
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
    stream: Option<(PathBuf, u64)>,
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
        let stream = notifier.stream_file(&run).map(|path| (path, 0));
        Self {
            store,
            rx: notifier.subscribe(),
            run,
            after,
            poll,
            buffered: VecDeque::new(),
            ended: false,
            stream,
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
            if let Some(text) = self.wait().await {
                if let Some(left) = self.stale.strip_prefix(text.as_str()) {
                    self.stale = left.to_owned();
                    continue;
                }
                self.stale.clear();
                self.streamed.push_str(&text);
                return Ok(Some(Followed::Text(text)));
            }
        }
    }

    /// Waits until the run may have moved: a notice from this process, or the poll
    /// interval. Returns streamed text of the run, if that is what came.
    async fn wait(&mut self) -> Option<String> {
        if let Some(text) = self.stream_text() {
            return Some(text);
        }
        let deadline = tokio::time::sleep(self.poll);
        tokio::pin!(deadline);
        // With a stream file, text is read from it (whoever drives the run); otherwise it
        // comes from this process's notices.
        let from_notices = self.stream.is_none();
        loop {
            tokio::select! {
                () = &mut deadline => return self.stream_text(),
                notice = self.rx.recv() => match notice {
                    Ok(Notice::Text(run, text)) if run == self.run && from_notices => {
                        return Some(text);
                    }
                    Ok(Notice::Text(run, _)) if run == self.run => {
                        if let Some(text) = self.stream_text() {
                            return Some(text);
                        }
                    }
                    Ok(Notice::Moved(run)) if run == self.run => return None,
                    Ok(_) => {}
                    // Fell behind: re-read the store now.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.stale.clear();
                        return None;
                    }
                    // No notifier any more: only the poll is left.
                    Err(broadcast::error::RecvError::Closed) => {
                        (&mut deadline).await;
                        return self.stream_text();
                    }
                },
            }
        }
    }

    /// New text in the run's stream file, if any. A file shorter than what was read is a
    /// new model call's: read from its start.
    fn stream_text(&mut self) -> Option<String> {
        let (path, offset) = self.stream.as_mut()?;
        let (text, read_to) = read_from(path, *offset)?;
        *offset = read_to;
        (!text.is_empty()).then_some(text)
    }
}

/// The text of `path` from `offset` (from 0 if the file is shorter now), and where it ends.
/// Stops before a partial UTF-8 character at the end.
fn read_from(path: &Path, offset: u64) -> Option<(String, u64)> {
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let start = if len < offset { 0 } else { offset };
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let valid = match std::str::from_utf8(&bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    };
    bytes.truncate(valid);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some((text, start + valid as u64))
}

//! The run's side of its egress proxy: [`RunEgress`], the `toren_egress` [`Approver`] and
//! [`Recorder`] the worker hands the sandbox backend when it opens a run's sandbox.
//!
//! **Asking about a host** (`network: {allow: […], ask: true}`): the proxy holds the
//! connection and calls [`Approver::answer`]. The run's log is folded first, so a resumed
//! run keeps its decisions (an allowed host goes through at once, a denied one is refused,
//! a request nobody answered yet is waited on, not made again). Otherwise a
//! `host_approval_requested` naming the host and the tool call running (its command) is
//! appended under the run's lease, the run's observers are told (the terminal, Telegram),
//! and this process's approver (the terminal prompt) is asked; meanwhile the log is
//! watched for an `approval_decided` on the request's id from anywhere (`toren approve`, the
//! API, the web page, a Telegram button), first decision wins (`decide_approval` is atomic).
//! A connection held longer than the wait bound is refused with a text saying how to
//! answer; the request stays open while the call it was made in runs, and the next
//! connection to the host waits for it again. Once that call has completed (or a rewind
//! left the request behind) no decision can answer it (the store refuses one), and the next
//! connection to the host makes a new request, naming the call that runs then.
//!
//! **Journaling connections**: every refused request and every allowed connection once it
//! closed (with its bytes) is buffered and appended as one `egress_connections` event per
//! batch, at most once per [`FLUSH_EVERY`] while records wait.
//!
//! **Redaction**: what either journals or shows — the host (a command can put a granted
//! value into the name it connects to), the request's id and command, a refusal's reason —
//! goes through [`crate::redaction::redact_event`] first, with the run's values; the
//! request is made, looked up, shown and decided in its redacted form.
//!
//! Both append while the driver is busy with a tool call; the driver treats those events as
//! side events (`toren_agent::is_side_event`) and appends its own after them as if nothing
//! happened, so a model call is never repeated for them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use toren_agent::RunState;
use toren_egress::{Answer, Approver, AskRequest, Decision, Outcome, Recorder, Refusal, Traffic};
use toren_protocol::{
    ApprovalDecided, ConnectionOutcome, EgressConnection, EgressConnections, EventKind,
    HostApprovalRequested, RunId,
};
use toren_redact::Redactor;
use toren_store::{EventLog, Lease};

use crate::{Approver as PersonApprover, Observer};

/// How long a held connection waits for a person before it is refused (the request stays
/// open). Clients give up on their own too (pip after 15 s, then retries).
pub const HOST_APPROVAL_WAIT: Duration = Duration::from_secs(120);

/// How often waiting connection records are appended, at most.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How many times an append that found the log moved on is tried again.
const APPEND_TRIES: usize = 8;

/// A run's journal-backed approver and recorder; cheap to clone. Its flusher task stops
/// when the last clone is dropped.
#[derive(Clone)]
pub struct RunEgress {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn EventLog>,
    lease: Lease,
    observer: Arc<dyn Observer>,
    person: Option<Arc<dyn PersonApprover>>,
    /// The run's values, replaced in everything journaled or shown.
    redactor: Redactor,
    wait: Duration,
    poll: Duration,
    /// The tool call running now: id and command.
    current: Mutex<Option<(String, String)>>,
    /// Connection records not journaled yet.
    journal: Mutex<Vec<EgressConnection>>,
    /// Wakes the flusher; it holds no reference to this, so dropping the last clone
    /// stops it.
    wake: Arc<Notify>,
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What the log says about a host.
enum Known {
    Decided(bool),
    /// Requested (now or earlier) and not answered.
    Waiting,
}

impl RunEgress {
    /// The approver and recorder of the run `lease` holds. `person` is this process's
    /// own approver (the terminal prompt), if any; `redactor` holds the run's values;
    /// `wait` bounds how long a connection is held; `poll` is how often the log is read
    /// for a decision.
    pub fn new(
        store: Arc<dyn EventLog>,
        lease: Lease,
        observer: Arc<dyn Observer>,
        person: Option<Arc<dyn PersonApprover>>,
        redactor: Redactor,
        wait: Duration,
        poll: Duration,
    ) -> Self {
        let egress = Self {
            inner: Arc::new(Inner {
                store,
                lease,
                observer,
                person,
                redactor,
                wait,
                poll,
                current: Mutex::new(None),
                journal: Mutex::new(Vec::new()),
                wake: Arc::new(Notify::new()),
                stop: CancellationToken::new(),
            }),
        };
        let weak = Arc::downgrade(&egress.inner);
        let stop = egress.inner.stop.clone();
        let wake = Arc::clone(&egress.inner.wake);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = wake.notified() => {}
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(FLUSH_EVERY) => {}
                }
                let Some(inner) = weak.upgrade() else { return };
                RunEgress { inner }.flush().await;
            }
        });
        egress
    }

    fn run(&self) -> &RunId {
        &self.inner.lease.run_id
    }

    /// The tool call that runs from now on (its id and command), or none.
    pub fn set_call(&self, call: Option<(String, String)>) {
        *lock(&self.inner.current) = call;
    }

    fn call(&self) -> Option<(String, String)> {
        lock(&self.inner.current).clone()
    }

    /// The connection records waiting, as the event that journals them (the driver puts
    /// it in the batch of a tool call's result); `None` when there are none.
    pub fn take(&self) -> Option<EventKind> {
        let batch = std::mem::take(&mut *lock(&self.inner.journal));
        (!batch.is_empty()).then(|| {
            crate::redaction::redact_event(
                &self.inner.redactor,
                EventKind::EgressConnections(EgressConnections { connections: batch }),
            )
        })
    }

    /// Appends the connection records waiting, if any (also done by the flusher).
    pub async fn flush(&self) {
        let Some(kind) = self.take() else {
            return;
        };
        if let Err(e) = self.append(kind).await {
            tracing::warn!(run = %self.run(), "could not journal egress connections: {e}");
        }
    }

    /// Appends `kind` after whatever the log holds, under the run's lease.
    async fn append(&self, kind: EventKind) -> Result<(), toren_store::Error> {
        let store = &self.inner.store;
        let mut tries = 0;
        loop {
            let seq = store.run(self.run()).await?.last_seq;
            match store
                .append(&self.inner.lease, seq, vec![kind.clone()])
                .await
            {
                Ok(_) => return Ok(()),
                Err(toren_store::Error::Conflict { .. }) if tries < APPEND_TRIES => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// What the log says about `host`, after making the request if nobody had.
    async fn requested(&self, request: &HostApprovalRequested) -> Result<Known, String> {
        let store = &self.inner.store;
        for _ in 0..APPEND_TRIES {
            let events = store.read(self.run(), 0).await.map_err(|e| e.to_string())?;
            let state = RunState::from_events(&events).map_err(|e| e.to_string())?;
            if state.status.is_terminal() {
                return Ok(Known::Decided(false));
            }
            // A request no decision can answer any more (its call completed, or a rewind
            // left it behind) is made again, for the call that runs now.
            if let Some(known) = state.host_approval(&request.host) {
                match known.decision {
                    Some(approved) => return Ok(Known::Decided(approved)),
                    None if known.open => return Ok(Known::Waiting),
                    None => {}
                }
            }
            let kind = EventKind::HostApprovalRequested(request.clone());
            match store
                .append(&self.inner.lease, state.last_seq, vec![kind])
                .await
            {
                Ok(_) => return Ok(Known::Waiting),
                Err(toren_store::Error::Conflict { .. }) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the run's log kept moving".to_owned())
    }

    /// Waits for a decision on `request` in the log (from anywhere), asking this
    /// process's approver meanwhile; `None` when the bound passed first.
    async fn decision(&self, request: &HostApprovalRequested) -> Option<bool> {
        let run = self.run().clone();
        let ask = async {
            let Some(person) = &self.inner.person else {
                return std::future::pending().await;
            };
            if let Some(d) = person.ask_host(&run, request).await {
                let decided = ApprovalDecided {
                    call_id: request.id.clone(),
                    approved: d.approved,
                    by: d.by,
                    via: d.via,
                    reason: d.reason,
                };
                match self.inner.store.decide_approval(&run, decided).await {
                    // Someone else decided first: their decision stands.
                    Ok(_) | Err(toren_store::Error::AlreadyDecided { .. }) => {}
                    Err(e) => tracing::warn!(run = %run, "could not record the decision: {e}"),
                }
            }
            // Answered or not, the log says what was decided.
            std::future::pending::<()>().await;
        };
        let watch = async {
            let mut seen = 0;
            loop {
                match self.inner.store.read(&run, seen).await {
                    Ok(events) => {
                        for event in events {
                            seen = event.seq;
                            match &event.kind {
                                EventKind::ApprovalDecided(d) if d.call_id == request.id => {
                                    return d.approved;
                                }
                                kind if kind
                                    .status_after()
                                    .is_some_and(toren_protocol::RunStatus::is_terminal) =>
                                {
                                    return false;
                                }
                                _ => {}
                            }
                        }
                    }
                    Err(e) => tracing::debug!(run = %run, "could not read the log: {e}"),
                }
                tokio::time::sleep(self.inner.poll).await;
            }
        };
        tokio::select! {
            approved = watch => Some(approved),
            () = ask => None,
            () = tokio::time::sleep(self.inner.wait) => None,
        }
    }

    fn unanswered(&self, request: &HostApprovalRequested) -> String {
        // A request made in a call can be answered only while that call runs.
        let open = match &request.call_id {
            Some(call) => format!("it stays open while call {call} runs"),
            None => "it stays open".to_owned(),
        };
        format!(
            "nobody answered the request for network access to {host} within {secs}s; \
             {open}: approve it (toren approve {run} {id}, the API, the web page or \
             Telegram), then try again",
            host = request.host,
            secs = self.inner.wait.as_secs(),
            run = self.run(),
            id = request.id,
        )
    }

    /// `request` as it is journaled, shown and decided: redacted of the run's values.
    fn redacted(&self, request: HostApprovalRequested) -> HostApprovalRequested {
        let kind = EventKind::HostApprovalRequested(request.clone());
        match crate::redaction::redact_event(&self.inner.redactor, kind) {
            EventKind::HostApprovalRequested(redacted) => redacted,
            // Not reached: `redact_event` keeps the `type` tag, so the kind comes back.
            _ => request,
        }
    }

    fn push(&self, connection: EgressConnection) {
        lock(&self.inner.journal).push(connection);
        self.inner.wake.notify_one();
    }
}

#[async_trait::async_trait]
impl Approver for RunEgress {
    async fn approve(&self, request: AskRequest) -> bool {
        self.answer(request).await == Answer::Allow
    }

    async fn answer(&self, ask: AskRequest) -> Answer {
        let request = self.redacted(HostApprovalRequested::new(&ask.host, ask.port, self.call()));
        match self.requested(&request).await {
            Ok(Known::Decided(true)) => return Answer::Allow,
            Ok(Known::Decided(false)) => return Answer::Deny,
            Ok(Known::Waiting) => {}
            Err(why) => {
                tracing::warn!(run = %self.run(), host = %request.host, "could not record the host approval request: {why}");
                return Answer::Unanswered(format!(
                    "the request for network access to {} could not be recorded: {why}",
                    request.host
                ));
            }
        }
        self.inner
            .observer
            .awaiting_host_approval(self.run(), &request);
        match self.decision(&request).await {
            Some(true) => Answer::Allow,
            Some(false) => Answer::Deny,
            None => Answer::Unanswered(self.unanswered(&request)),
        }
    }
}

impl Recorder for RunEgress {
    fn record(&self, decision: Decision) {
        // Allowed connections are recorded when they close, with their bytes.
        let Outcome::Refused(refusal) = &decision.outcome else {
            return;
        };
        let outcome = match refusal {
            Refusal::Unanswered(_) => ConnectionOutcome::Unanswered,
            _ => ConnectionOutcome::Denied,
        };
        self.push(EgressConnection {
            host: decision.host.clone(),
            port: decision.port,
            method: decision.method.clone(),
            outcome,
            reason: Some(refusal.message()),
            address: None,
            bytes_up: 0,
            bytes_down: 0,
            call_id: self.call().map(|(id, _)| id),
        });
    }

    fn closed(&self, decision: Decision, traffic: Traffic) {
        let Outcome::Allowed { address, approved } = decision.outcome else {
            return;
        };
        self.push(EgressConnection {
            host: decision.host,
            port: decision.port,
            method: decision.method,
            outcome: if approved {
                ConnectionOutcome::Approved
            } else {
                ConnectionOutcome::Allowed
            },
            reason: None,
            address: Some(address.to_string()),
            bytes_up: traffic.up,
            bytes_down: traffic.down,
            call_id: self.call().map(|(id, _)| id),
        });
    }
}

impl crate::Worker {
    /// The same worker, holding a connection to a host outside the list at most `wait`
    /// for a person's decision ([`HOST_APPROVAL_WAIT`] by default).
    #[must_use]
    pub fn with_host_approval_wait(mut self, wait: Duration) -> Self {
        self.host_approval_wait = wait;
        self
    }

    /// The egress approver and recorder of the run `lease` holds, redacting with
    /// `redactor`.
    pub(crate) fn egress_for(&self, lease: &Lease, redactor: Redactor) -> RunEgress {
        RunEgress::new(
            Arc::clone(&self.config.store),
            lease.clone(),
            Arc::clone(&self.config.observer),
            self.config.approver.clone(),
            redactor,
            self.host_approval_wait,
            self.config.approval_poll,
        )
    }
}

/// A call as a host request names it: its id and, for `bash`, its command.
pub(crate) fn call_of(call: &toren_protocol::ToolCall) -> (String, String) {
    let command = if call.name == toren_protocol::BASH {
        toren_protocol::BashArgs::decode(&call.arguments)
            .map(|a| a.command)
            .unwrap_or_default()
    } else {
        call.name.clone()
    };
    (call.id.clone(), command)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

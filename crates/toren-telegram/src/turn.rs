//! One turn as the chat sees it: [`Turns`] is the worker's observer, routing each run's
//! streamed text and events to the task that shows that run in its chat; [`TurnView`]
//! keeps the turn's transcript (the model's words and a line per tool call) and shows it as
//! one message edited as it grows (at most one edit per interval, within Telegram's
//! limits), continued in a new message past 4096 characters. Approvals, and a pause at the
//! run's budget, are posted as their own message with buttons. A Telegram call that fails
//! is logged and skipped: the run never waits on, or fails because of, Telegram.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use toren_protocol::{ApprovalRequested, BashArgs, BudgetReached, Event, EventKind, RunId};
use toren_store::{ChatButton, ChatStore};
use toren_worker::Observer;

use crate::api::BotApi;
use crate::render;

/// What the worker tells a turn's task.
#[derive(Debug)]
pub(crate) enum Signal {
    Text(String),
    Event(Box<Event>),
    Awaiting(ApprovalRequested),
    AwaitingBudget(BudgetReached),
}

/// The worker's observer for the bot's turns.
#[derive(Default)]
pub struct Turns {
    routes: Mutex<HashMap<RunId, mpsc::UnboundedSender<Signal>>>,
}

impl Turns {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, run: &RunId) -> mpsc::UnboundedReceiver<Signal> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run.clone(), tx);
        rx
    }

    pub(crate) fn unregister(&self, run: &RunId) {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run);
    }

    fn send(&self, run: &RunId, signal: Signal) {
        if let Some(tx) = self
            .routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run)
        {
            let _ = tx.send(signal);
        }
    }
}

impl Observer for Turns {
    fn text(&self, run: &RunId, delta: &str) {
        self.send(run, Signal::Text(delta.to_owned()));
    }

    fn event(&self, event: &Event) {
        self.send(&event.run_id, Signal::Event(Box::new(event.clone())));
    }

    fn awaiting_approval(&self, run: &RunId, request: &ApprovalRequested) {
        self.send(run, Signal::Awaiting(request.clone()));
    }

    fn awaiting_budget(&self, run: &RunId, reached: &BudgetReached) {
        self.send(run, Signal::AwaitingBudget(reached.clone()));
    }
}

/// The `call_id` a budget button is stored under (it stands for the run's pause, not for
/// a call).
pub(crate) const BUDGET_BUTTON: &str = "budget";

/// A fresh short opaque button id (well within the 64-byte callback data limit).
pub(crate) fn button_id() -> String {
    ulid::Ulid::generate().to_string().to_lowercase()
}

/// The inline keyboard of an approval.
pub(crate) fn approval_keyboard(id: &str, truncated: bool) -> Value {
    let mut rows = vec![
        json!([
            {"text": "✅ Approve", "callback_data": format!("a:{id}")},
            {"text": "❌ Deny", "callback_data": format!("d:{id}")},
        ]),
        json!([{"text": "✍️ Deny with reason", "callback_data": format!("r:{id}")}]),
    ];
    if truncated {
        rows.push(json!([{"text": "📜 Show all", "callback_data": format!("s:{id}")}]));
    }
    json!({"inline_keyboard": rows})
}

/// One turn's messages in its chat.
pub(crate) struct TurnView {
    api: BotApi,
    chats: Arc<dyn ChatStore>,
    chat: i64,
    run: RunId,
    /// The turn's text so far (Markdown-ish: the model's words and tool lines).
    transcript: String,
    /// The messages showing it, with the HTML each holds.
    sent: Vec<(i64, String)>,
    last_flush: Option<Instant>,
    interval: Duration,
    dirty: bool,
    /// Tool calls of the last model answer: call id → a summary of what it does.
    calls: HashMap<String, String>,
    /// Approval messages: call id → (message id, command).
    approvals: HashMap<String, (i64, String)>,
    /// The message offering to raise the budget, while the run is paused at it.
    budget: Option<i64>,
}

impl TurnView {
    pub(crate) fn new(
        api: BotApi,
        chats: Arc<dyn ChatStore>,
        chat: i64,
        run: RunId,
        interval: Duration,
    ) -> Self {
        Self {
            api,
            chats,
            chat,
            run,
            transcript: String::new(),
            sent: Vec::new(),
            last_flush: None,
            interval,
            dirty: false,
            calls: HashMap::new(),
            approvals: HashMap::new(),
            budget: None,
        }
    }

    /// Whether an edit is due now (something changed and the interval has passed).
    pub(crate) fn due(&self) -> Option<Duration> {
        if !self.dirty {
            return None;
        }
        Some(self.last_flush.map_or(Duration::ZERO, |t| {
            self.interval.saturating_sub(t.elapsed())
        }))
    }

    pub(crate) async fn apply(&mut self, signal: Signal) {
        match signal {
            Signal::Text(delta) => {
                self.transcript.push_str(&delta);
                self.dirty = true;
            }
            Signal::Event(event) => self.event(&event).await,
            Signal::Awaiting(request) => self.ask(&request).await,
            Signal::AwaitingBudget(reached) => self.offer_raise(&reached).await,
        }
    }

    async fn event(&mut self, event: &Event) {
        match &event.kind {
            EventKind::ModelResponded(responded) => {
                for call in &responded.message.tool_calls {
                    let detail = if call.name == "bash" {
                        BashArgs::decode(&call.arguments)
                            .map(|a| a.command)
                            .unwrap_or_default()
                    } else {
                        call.arguments
                            .get("path")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    self.calls
                        .insert(call.id.clone(), render::tool_started(&call.name, &detail));
                }
            }
            EventKind::ToolCompleted(done) => {
                if let Some(line) = self.calls.remove(&done.call_id) {
                    if !self.transcript.is_empty() && !self.transcript.ends_with('\n') {
                        self.transcript.push('\n');
                    }
                    self.transcript.push_str(&line);
                    self.transcript
                        .push_str(&render::tool_finished(done.exit_code, done.is_error));
                    self.transcript.push('\n');
                    self.dirty = true;
                }
            }
            EventKind::ApprovalDecided(decided) => {
                if let Some((message, command)) = self.approvals.remove(&decided.call_id) {
                    let text = render::decided_html(
                        &command,
                        decided.approved,
                        &decided.by,
                        &decided.via,
                        decided.reason.as_deref(),
                    );
                    if let Err(e) = self
                        .api
                        .edit_message(self.chat, message, &text, true, None)
                        .await
                    {
                        tracing::warn!("cannot update the approval message: {e}");
                    }
                }
            }
            // Shown in the turn's transcript (rendered like the rest); the raise button
            // follows in a message of its own (`offer_raise`).
            EventKind::BudgetReached(reached) => {
                let limits: Vec<String> = reached.reached.iter().map(ToString::to_string).collect();
                self.note(&format!(
                    "⏸ budget reached ({}): the turn waits until it is raised (the button \
                     below, or `toren budget {}`)",
                    limits.join(" and "),
                    self.run
                ));
            }
            // From any front door: the offer becomes what was done, its button gone.
            EventKind::BudgetRaised(raised) => {
                let line = render::budget_raised(raised);
                match self.budget.take() {
                    Some(message) => {
                        if let Err(e) = self
                            .api
                            .edit_message(
                                self.chat,
                                message,
                                &render::escape_html(&line),
                                true,
                                None,
                            )
                            .await
                        {
                            tracing::warn!("cannot update the budget message: {e}");
                        }
                    }
                    None => self.note(&line),
                }
            }
            _ => {}
        }
    }

    /// A line of its own in the transcript.
    fn note(&mut self, line: &str) {
        if !self.transcript.is_empty() && !self.transcript.ends_with('\n') {
            self.transcript.push('\n');
        }
        self.transcript.push_str(line);
        self.transcript.push('\n');
        self.dirty = true;
    }

    /// Posts an approval, stores what its buttons stand for, then adds the buttons: a
    /// button can only be pressed once its id resolves.
    async fn ask(&mut self, request: &ApprovalRequested) {
        self.flush().await;
        let id = button_id();
        let (text, truncated) = render::approval_html(&request.command, request.attempt);
        let message = match self.api.send_message(self.chat, &text, true, None).await {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(
                    "cannot post the approval to Telegram (decide with `toren approve`): {e}"
                );
                return;
            }
        };
        let button = ChatButton {
            run_id: self.run.clone(),
            call_id: request.call_id.clone(),
            chat: self.chat.to_string(),
            message_id: message,
        };
        if let Err(e) = self.chats.put_chat_button(&id, &button).await {
            tracing::warn!("cannot store the approval buttons (decide with `toren approve`): {e}");
            return;
        }
        if let Err(e) = self
            .api
            .edit_markup(self.chat, message, Some(approval_keyboard(&id, truncated)))
            .await
        {
            tracing::warn!("cannot add the approval buttons: {e}");
        }
        self.approvals
            .insert(request.call_id.clone(), (message, request.command.clone()));
        // What follows the approval goes in a new message below it.
        self.sent.clear();
        self.transcript.clear();
    }

    /// Posts the offer to raise the budget the run is paused at, with its button (a press
    /// raises each limit reached by the agent's budget for it once more: `bot/budget.rs`).
    async fn offer_raise(&mut self, reached: &BudgetReached) {
        self.flush().await;
        let id = button_id();
        let text = render::escape_html(&render::budget_offer(reached, &self.run));
        let message = match self.api.send_message(self.chat, &text, true, None).await {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(
                    "cannot post the budget offer to Telegram (raise it with `toren budget`): {e}"
                );
                return;
            }
        };
        let button = ChatButton {
            run_id: self.run.clone(),
            call_id: BUDGET_BUTTON.to_owned(),
            chat: self.chat.to_string(),
            message_id: message,
        };
        if let Err(e) = self.chats.put_chat_button(&id, &button).await {
            tracing::warn!("cannot store the budget button (raise it with `toren budget`): {e}");
            return;
        }
        let keyboard = json!({"inline_keyboard": [[
            {"text": "➕ Raise the budget", "callback_data": format!("b:{id}")},
        ]]});
        if let Err(e) = self
            .api
            .edit_markup(self.chat, message, Some(keyboard))
            .await
        {
            tracing::warn!("cannot add the budget button: {e}");
        }
        self.budget = Some(message);
        // What follows the raise goes in a new message below it.
        self.sent.clear();
        self.transcript.clear();
    }

    /// Shows the transcript as it stands: edits the messages that changed, sends the new.
    pub(crate) async fn flush(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.last_flush = Some(Instant::now());
        let parts = render::reply_html(&self.transcript);
        for (i, part) in parts.iter().enumerate() {
            match self.sent.get(i) {
                Some((_, shown)) if shown == part => {}
                Some((message, _)) => {
                    let message = *message;
                    match self
                        .api
                        .edit_message(self.chat, message, part, true, None)
                        .await
                    {
                        Ok(()) => self.sent[i].1.clone_from(part),
                        Err(e) => {
                            tracing::warn!("cannot edit the reply in Telegram: {e}");
                            self.dirty = true;
                        }
                    }
                }
                None => match self.api.send_message(self.chat, part, true, None).await {
                    Ok(message) => self.sent.push((message, part.clone())),
                    Err(e) => {
                        tracing::warn!("cannot send the reply to Telegram: {e}");
                        self.dirty = true;
                        return;
                    }
                },
            }
        }
    }

    /// The last word of the turn: what is still unsent, then `note` (how it ended) unless
    /// the turn completed with its text shown.
    pub(crate) async fn finish(&mut self, note: Option<String>) {
        if let Some(note) = note {
            if !self.transcript.is_empty() && !self.transcript.ends_with('\n') {
                self.transcript.push('\n');
            }
            self.transcript.push_str(&note);
            self.dirty = true;
        }
        if self.transcript.trim().is_empty() && self.sent.is_empty() {
            self.transcript.push_str("(done)");
            self.dirty = true;
        }
        // Final: no throttle.
        for _ in 0..3 {
            self.flush().await;
            if !self.dirty {
                break;
            }
        }
    }
}

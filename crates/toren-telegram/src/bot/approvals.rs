//! Approvals from Telegram: a press on Approve or Deny records the decision (the Telegram
//! user as the decider, `telegram` as the channel; the first decision wins across all
//! channels), answers the callback at once and edits the message to the decision that
//! stands; a late press is told that decision. "Deny with reason" makes the chat's next
//! message the reason; "Show all" sends a long command whole. "Raise the budget" is
//! handled in `budget.rs`.

use toren_display::visible;
use toren_runtime::{Actor, ApprovalState};

use super::{Bot, Handling};
use crate::channel::TELEGRAM;
use crate::render::{self, escape_html};
use crate::types::{CallbackQuery, User};

impl Bot {
    /// A button press: decide, answer the callback at once, show who decided what.
    pub(super) async fn press(&self, press: CallbackQuery) {
        let data = press.data.clone().unwrap_or_default();
        let Some((action, id)) = data.split_once(':') else {
            let _ = self.api.answer_callback(&press.id, "Unknown button.").await;
            return;
        };
        if !self.allowed(&press.from) {
            let _ = self
                .api
                .answer_callback(
                    &press.id,
                    &format!("You may not decide here (your id is {}).", press.from.id),
                )
                .await;
            return;
        }
        let button = match self.chats.chat_button(id).await {
            Ok(Some(button)) => button,
            Ok(None) => {
                let _ = self
                    .api
                    .answer_callback(&press.id, "This button is no longer known.")
                    .await;
                return;
            }
            Err(e) => {
                tracing::warn!("cannot look up a button: {e}");
                let _ = self
                    .api
                    .answer_callback(&press.id, "Cannot look this button up now; try again.")
                    .await;
                return;
            }
        };
        let chat = button.chat.parse::<i64>().unwrap_or(press.from.id);
        if action == "b" {
            let actor = Actor {
                by: press.from.decider(),
                via: TELEGRAM.to_owned(),
            };
            self.raise(&press.id, &button, &actor).await;
            return;
        }
        let command = self
            .service
            .approvals(&button.run_id)
            .await
            .ok()
            .and_then(|all| all.into_iter().rev().find(|a| a.call_id == button.call_id));
        match action {
            "a" | "d" => {
                let approved = action == "a";
                let actor = Actor {
                    by: press.from.decider(),
                    via: TELEGRAM.to_owned(),
                };
                self.decide(&press.id, chat, &button, approved, None, &actor)
                    .await;
            }
            "r" => {
                if let Some(approval) = &command
                    && let ApprovalState::Decided(d) = &approval.state
                {
                    let _ = self.api.answer_callback(&press.id, &standing(d)).await;
                    return;
                }
                if let Err(e) = self.chats.set_chat_reason(&button.chat, Some(id)).await {
                    tracing::warn!("cannot store the pending reason: {e}");
                }
                let _ = self
                    .api
                    .answer_callback(&press.id, "Send the reason as your next message.")
                    .await;
                self.say(chat, "Send the reason for denying as your next message.")
                    .await;
            }
            "s" => {
                let _ = self.api.answer_callback(&press.id, "").await;
                if let Some(approval) = command {
                    // The command exactly, never through the Markdown renderer (a ```
                    // line in it would close a fence and vanish, backticks turn to code).
                    for part in render::command_html(&approval.command) {
                        if let Err(e) = self.api.send_message(chat, &part, true, None).await {
                            tracing::warn!("cannot send to Telegram: {e}");
                        }
                    }
                }
            }
            _ => {
                let _ = self.api.answer_callback(&press.id, "Unknown button.").await;
            }
        }
    }

    /// Records a decision from Telegram (the first one wins) and shows the one that stands.
    async fn decide(
        &self,
        callback: &str,
        chat: i64,
        button: &toren_store::ChatButton,
        approved: bool,
        reason: Option<String>,
        actor: &Actor,
    ) {
        let decided = self
            .service
            .decide(
                &button.run_id,
                &button.call_id,
                approved,
                reason.clone(),
                actor,
            )
            .await;
        let approvals = self.service.approvals(&button.run_id).await.ok();
        let approval = approvals
            .as_ref()
            .and_then(|all| all.iter().rev().find(|a| a.call_id == button.call_id));
        match decided {
            Ok(_) => {
                let answer = if approved { "Approved." } else { "Denied." };
                let _ = self.api.answer_callback(callback, answer).await;
            }
            Err(e) => {
                let answer = match approval.map(|a| &a.state) {
                    Some(ApprovalState::Decided(d)) => standing(d),
                    Some(ApprovalState::Unanswered) => {
                        "Too late: the turn ended without this decision.".to_owned()
                    }
                    _ => visible(&format!("Cannot record the decision: {e}")).into_owned(),
                };
                let _ = self.api.answer_callback(callback, &answer).await;
            }
        }
        if let Some(approval) = approval {
            let text = match &approval.state {
                ApprovalState::Decided(d) => render::decided_html(
                    &approval.command,
                    d.approved,
                    &d.by,
                    &d.via,
                    d.reason.as_deref(),
                ),
                ApprovalState::Unanswered => {
                    let (text, _) = render::approval_html(&approval.command, approval.attempt);
                    format!("{text}\n⌛ Not answered: the turn ended.")
                }
                ApprovalState::Pending => return,
            };
            if let Err(e) = self
                .api
                .edit_message(chat, button.message_id, &text, true, None)
                .await
            {
                tracing::warn!("cannot update the approval message: {e}");
            }
        }
    }

    /// A message that is the reason of a pending "deny with reason"; whether it was one.
    /// The denial is recorded first, then the message's key is taken with the reason
    /// cleared (one write): handled again before that, the decision that stands is shown;
    /// after it, the message is skipped.
    pub(super) async fn reason(
        &self,
        chat: i64,
        user: &User,
        text: &str,
        update: &Handling,
    ) -> bool {
        let key = chat.to_string();
        let Ok(Some(id)) = self.chats.chat_reason(&key).await else {
            return false;
        };
        let Ok(Some(button)) = self.chats.chat_button(&id).await else {
            if let Err(e) = self.chats.set_chat_reason(&key, None).await {
                tracing::warn!("cannot clear the pending reason: {e}");
            }
            return false;
        };
        let actor = Actor {
            by: user.decider(),
            via: TELEGRAM.to_owned(),
        };
        let outcome = self
            .service
            .decide(
                &button.run_id,
                &button.call_id,
                false,
                Some(text.to_owned()),
                &actor,
            )
            .await;
        let approvals = self.service.approvals(&button.run_id).await.ok();
        let approval = approvals
            .as_ref()
            .and_then(|all| all.iter().rev().find(|a| a.call_id == button.call_id));
        match (&outcome, approval.map(|a| &a.state)) {
            (Ok(_), _) => self.say(chat, "Denied, with your reason.").await,
            (Err(_), Some(ApprovalState::Decided(d))) => {
                self.say(chat, &escape_html(&standing(d))).await;
            }
            (Err(e), _) => {
                self.say(chat, &escape_html(&visible(&format!("Not recorded: {e}"))))
                    .await;
            }
        }
        if let Err(e) = self.chats.take_message_key(&update.key, Some(&key)).await {
            tracing::warn!("cannot clear the pending reason: {e}");
        }
        if let Some(approval) = approval
            && let ApprovalState::Decided(d) = &approval.state
        {
            let text = render::decided_html(
                &approval.command,
                d.approved,
                &d.by,
                &d.via,
                d.reason.as_deref(),
            );
            if let Err(e) = self
                .api
                .edit_message(chat, button.message_id, &text, true, None)
                .await
            {
                tracing::warn!("cannot update the approval message: {e}");
            }
        }
        true
    }
}

/// What a late press is told: the decision that stands (who and how, made visible).
fn standing(d: &toren_runtime::Decided) -> String {
    format!(
        "Already decided: {} by {} via {}.",
        if d.approved { "approved" } else { "denied" },
        visible(&d.by),
        visible(&d.via)
    )
}

//! Admitting a model's answer into the run before it is journaled: every tool call gets an
//! id that is unique within the run, whatever the provider sent. Providers that send no id
//! (Ollama's OpenAI-compatible stream) or repeat ids across turns or within one answer would
//! otherwise make approvals ambiguous or the log impossible to fold. A call keeps the
//! provider's id where it is new; a missing id gets one of Toren's; an id an earlier turn
//! used gets one of Toren's and keeps the provider's as its wire id; an id repeated within
//! the same answer gets one of Toren's without a wire id, since the provider's would be
//! ambiguous on the wire too.

use std::collections::BTreeSet;

use toren_protocol::AssistantMessage;

use crate::RunState;

impl RunState {
    /// The answer as it will be journaled: tool call ids made unique within the run.
    /// Deterministic: the same state and answer give the same ids.
    pub fn admit(&self, mut message: AssistantMessage) -> AssistantMessage {
        let turn = self.turns + 1;
        let mut taken: BTreeSet<String> = self.used_ids.clone();
        let mut in_answer: BTreeSet<String> = BTreeSet::new();
        let mut fresh = FreshIds { turn, next: 1 };
        for call in &mut message.tool_calls {
            let given = std::mem::take(&mut call.id);
            // `host:` names host approvals, never a call: such an id is the provider's only.
            let reserved = toren_protocol::is_host_approval_id(&given);
            let (id, wire_id) = if given.trim().is_empty() || in_answer.contains(&given) {
                (fresh.next_free(&taken), None)
            } else if taken.contains(&given) || reserved {
                (fresh.next_free(&taken), Some(given.clone()))
            } else {
                (given.clone(), None)
            };
            in_answer.insert(given);
            taken.insert(id.clone());
            call.id = id;
            if call.wire_id.is_none() {
                call.wire_id = wire_id;
            }
        }
        message
    }
}

/// Toren's own call ids: `toren_<turn>_<n>`, accepted by every provider's id syntax.
struct FreshIds {
    turn: u32,
    next: u32,
}

impl FreshIds {
    fn next_free(&mut self, taken: &BTreeSet<String>) -> String {
        loop {
            let id = format!("toren_{}_{}", self.turn, self.next);
            self.next += 1;
            if !taken.contains(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
#[path = "admit_tests.rs"]
mod tests;

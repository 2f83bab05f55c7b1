//! Fitting the conversation into the model's context window, deterministically.
//!
//! Before each model call the state machine estimates the request's input tokens
//! ([`estimate_tokens`]) against the pinned agent's window ([`AgentSpec::context_window`]),
//! keeping room for the answer. When the request would not fit, the next action records a
//! [`ContextCompacted`] planned by `compact`: old tool outputs become stubs naming the call
//! and the output's size, then the oldest exchanges are left out — an assistant turn always
//! with its tool results, so every tool call keeps its result — each stretch replaced by a
//! note listing the calls it held. What the model is sent is [`RunState::conversation`]: the
//! folded messages with every recorded compaction applied, a pure function of the log, so a
//! resumed run sends the bytes it sent before. No model is asked to summarise anything.

use std::collections::{BTreeSet, HashMap, HashSet};

use toren_protocol::{AgentSpec, ContextCompacted, Message, SizeRefusal, ToolCall, ToolResult};

use crate::RunState;

/// Room kept for the answer: a quarter of the window, at most this many tokens. The model
/// call asks for no more output than the window has left (see `Action::CallModel`).
pub const OUTPUT_RESERVE_MAX: u64 = 16_384;
/// What the tool definitions are assumed to take when tools are offered (the four sandbox
/// tools are about 1,500 tokens by [`estimate_tokens`]; the rest is headroom for more).
pub const TOOLS_RESERVE: u64 = 3_000;
/// A compaction makes room down to this share of the input budget, so that it is not needed
/// again at the next call.
pub const COMPACT_TO_PERCENT: u64 = 60;
/// Per message and per content block: role markers, ids, the request's JSON.
const MESSAGE_OVERHEAD: u64 = 4;
const BLOCK_OVERHEAD: u64 = 8;
const REQUEST_OVERHEAD: u64 = 16;
/// How many calls a note lists, and how much of each call's argument it shows.
const NOTE_CALLS: usize = 10;
const PREVIEW_CHARS: usize = 60;
const NAME_CHARS: usize = 32;

/// Toren's estimate of the tokens of `text`: one per 3 bytes of ASCII, one per other
/// character. Real tokenizers average about 4 bytes per token on English and code; the
/// margin covers denser text (numbers, hex, JSON), so the estimate errs on the large side.
pub fn estimate_tokens(text: &str) -> u64 {
    if text.is_ascii() {
        return (text.len() as u64).div_ceil(3);
    }
    let (ascii, other) = text.chars().fold((0u64, 0u64), |(a, o), c| {
        if c.is_ascii() { (a + 1, o) } else { (a, o + 1) }
    });
    ascii.div_ceil(3) + other
}

/// The estimated tokens of one message as sent.
pub fn message_tokens(message: &Message) -> u64 {
    MESSAGE_OVERHEAD
        + match message {
            Message::User { text } => estimate_tokens(text),
            Message::Assistant(a) => {
                estimate_tokens(&a.text)
                    + a.tool_calls
                        .iter()
                        .map(|c| {
                            BLOCK_OVERHEAD
                                + estimate_tokens(&c.id)
                                + estimate_tokens(&c.name)
                                + estimate_tokens(&c.arguments.to_string())
                        })
                        .sum::<u64>()
            }
            Message::ToolResults { results } => results.iter().map(result_tokens).sum(),
        }
}

pub(crate) fn result_tokens(result: &ToolResult) -> u64 {
    BLOCK_OVERHEAD + estimate_tokens(&result.call_id) + estimate_tokens(&result.content)
}

/// The token budget of one model call of an agent, in the units of [`estimate_tokens`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The model's context window: the pinned spec's, or smaller if a provider said so.
    pub(crate) window: u64,
    /// The most input a request may have: the window less the answer's reserve (divided by
    /// what providers' refusals taught of the estimate, see [`Compaction`]).
    pub(crate) input: u64,
    /// Where a compaction aims.
    pub(crate) target: u64,
    /// What every request takes besides the conversation: system prompt, tools, overhead.
    pub(crate) fixed: u64,
    /// Real tokens per thousand estimated ones (1000 until a refusal teaches more).
    pub(crate) scale: u64,
}

impl Budget {
    pub(crate) fn new(
        agent: &AgentSpec,
        system: &str,
        offer_tools: bool,
        compaction: &Compaction,
    ) -> Self {
        let spec = u64::from(agent.context_window());
        let window = compaction.window_cap.map_or(spec, |cap| cap.min(spec));
        let scale = compaction.scale();
        let input = (window - (window / 4).min(OUTPUT_RESERVE_MAX)) * 1000 / scale;
        let tools = if offer_tools { TOOLS_RESERVE } else { 0 };
        Self {
            window,
            input,
            target: input * COMPACT_TO_PERCENT / 100,
            fixed: REQUEST_OVERHEAD + estimate_tokens(system) + tools,
            scale,
        }
    }

    /// What the window leaves for the answer of a request estimated at `estimate`.
    pub(crate) fn output_room(&self, estimate: u64) -> u64 {
        self.window.saturating_sub(estimate * self.scale / 1000)
    }
}

/// The compactions recorded so far, folded: which outputs are stubbed and which stretches
/// of the conversation are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Compaction {
    stubbed: BTreeSet<String>,
    /// Sorted, disjoint, non-adjacent `(start, end)` ranges of message positions.
    dropped: Vec<(usize, usize)>,
    count: u32,
    /// The smallest window a provider's refusal named.
    window_cap: Option<u64>,
    /// Real tokens per thousand estimated, learned from refusals; 0 means 1000.
    scale_permille: u64,
}

impl Compaction {
    /// How many compactions the run recorded.
    pub fn compactions(&self) -> u32 {
        self.count
    }

    /// How many tool outputs are sent as stubs.
    pub fn stubbed_outputs(&self) -> usize {
        self.stubbed.len()
    }

    /// How many messages are left out.
    pub fn dropped_messages(&self) -> usize {
        self.dropped.iter().map(|(s, e)| e - s).sum()
    }

    /// Real tokens per thousand estimated ones, as refusals taught (1000 before any).
    pub(crate) fn scale(&self) -> u64 {
        self.scale_permille.max(1000)
    }

    /// What a refusal of a request estimated at `estimate` teaches: the provider's window,
    /// and how far the estimate fell short (with a tenth more for margin). A refusal always
    /// teaches something — at least a quarter more per estimated token — so that a
    /// provider refusing again and again ends in a failed run, never in a loop.
    /// `window` is the pinned spec's.
    pub(crate) fn learn(&mut self, refused: &SizeRefusal, estimate: u64, window: u64) {
        let scale = self.scale();
        let before = self.window_cap.unwrap_or(window).min(window);
        if let Some(limit) = refused.limit_tokens {
            self.window_cap = Some(self.window_cap.map_or(limit, |cap| cap.min(limit)));
        }
        let after = self.window_cap.unwrap_or(window).min(window);
        let taught = refused
            .input_tokens
            .filter(|_| estimate > 0)
            .map(|input| input.saturating_mul(1100).div_ceil(estimate))
            .unwrap_or(0);
        self.scale_permille = if taught > scale {
            taught
        } else if after < before {
            scale
        } else {
            scale * 5 / 4
        };
    }

    pub(crate) fn is_stubbed(&self, call_id: &str) -> bool {
        self.stubbed.contains(call_id)
    }

    pub(crate) fn is_dropped(&self, position: usize) -> bool {
        self.dropped
            .iter()
            .any(|(s, e)| (*s..*e).contains(&position))
    }

    pub(crate) fn ranges(&self) -> &[(usize, usize)] {
        &self.dropped
    }

    /// Folds one `context_compacted` over `messages` of a run whose pinned window is
    /// `window`; `Err` says why it does not fit them.
    pub(crate) fn record(
        &mut self,
        event: &ContextCompacted,
        messages: &[Message],
        window: u64,
    ) -> Result<(), String> {
        let results: HashSet<&str> = messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResults { results } => Some(results),
                _ => None,
            })
            .flatten()
            .map(|r| r.call_id.as_str())
            .collect();
        for id in &event.stubbed {
            if !results.contains(id.as_str()) {
                return Err(format!("the conversation has no tool result {id} to stub"));
            }
            if self.stubbed.contains(id) {
                return Err(format!("the output of {id} is already stubbed"));
            }
        }
        let mut dropped = self.dropped.clone();
        for range in &event.dropped {
            let (start, end) = (range.start as usize, range.end as usize);
            let tool_results_at = |i: usize| matches!(messages[i], Message::ToolResults { .. });
            if start == 0 || start >= end || end >= messages.len() {
                return Err(format!(
                    "messages {start}..{end} are not a stretch after the first message and \
                     before the last (the conversation has {})",
                    messages.len()
                ));
            }
            if tool_results_at(start) || tool_results_at(end) {
                return Err(format!(
                    "leaving out messages {start}..{end} would part tool results from their calls"
                ));
            }
            if dropped.iter().any(|(s, e)| start < *e && *s < end) {
                return Err(format!(
                    "messages {start}..{end} are already left out in part"
                ));
            }
            dropped.push((start, end));
        }
        dropped.sort_unstable();
        self.dropped = dropped.into_iter().fold(Vec::new(), |mut merged, (s, e)| {
            match merged.last_mut() {
                Some((_, last_end)) if *last_end == s => *last_end = e,
                _ => merged.push((s, e)),
            }
            merged
        });
        self.stubbed.extend(event.stubbed.iter().cloned());
        self.count += 1;
        if let Some(refused) = &event.refused {
            self.learn(refused, event.estimated_before, window);
        }
        Ok(())
    }
}

impl RunState {
    /// The conversation as the model is sent it: [`RunState::messages`] with every recorded
    /// compaction applied.
    pub fn conversation(&self) -> Vec<Message> {
        view(&self.messages, &self.compaction)
    }

    /// The compactions recorded so far.
    pub fn compaction(&self) -> &Compaction {
        &self.compaction
    }
}

/// Every tool call of the conversation by id.
pub(crate) fn calls_by_id(messages: &[Message]) -> HashMap<&str, &ToolCall> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(&a.tool_calls),
            _ => None,
        })
        .flatten()
        .map(|c| (c.id.as_str(), c))
        .collect()
}

/// `messages` with `compaction` applied.
pub(crate) fn view(messages: &[Message], compaction: &Compaction) -> Vec<Message> {
    let calls = calls_by_id(messages);
    let mut out = Vec::with_capacity(messages.len());
    let mut ranges = compaction.ranges().iter().peekable();
    let mut i = 0;
    while i < messages.len() {
        if let Some(&&(start, end)) = ranges.peek()
            && start == i
        {
            out.push(Message::User {
                text: note(&messages[start..end]),
            });
            ranges.next();
            i = end;
            continue;
        }
        out.push(match &messages[i] {
            Message::ToolResults { results }
                if results.iter().any(|r| compaction.is_stubbed(&r.call_id)) =>
            {
                Message::ToolResults {
                    results: results
                        .iter()
                        .map(|r| stubbed(r, compaction.is_stubbed(&r.call_id), &calls))
                        .collect(),
                }
            }
            other => other.clone(),
        });
        i += 1;
    }
    out
}

/// `result`, or its stub when `stub`.
pub(crate) fn stubbed(
    result: &ToolResult,
    stub: bool,
    calls: &HashMap<&str, &ToolCall>,
) -> ToolResult {
    if !stub {
        return result.clone();
    }
    let tool = calls
        .get(result.call_id.as_str())
        .map_or("tool", |c| c.name.as_str());
    let hint = match tool {
        "bash" => "re-run the command if you need it",
        "read_file" => "read the file again if you need it",
        _ => "repeat the call if you need it",
    };
    ToolResult {
        call_id: result.call_id.clone(),
        content: format!(
            "[output of {tool} call {} ({} bytes) removed to fit the context window; {hint}]",
            result.call_id,
            toren_display::thousands(u64::try_from(result.content.len()).unwrap_or(u64::MAX))
        ),
        is_error: result.is_error,
    }
}

/// The note that stands for `left_out`: how much was there, and the calls it held.
pub(crate) fn note(left_out: &[Message]) -> String {
    let calls: Vec<&ToolCall> = left_out
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(&a.tool_calls),
            _ => None,
        })
        .flatten()
        .collect();
    let users = left_out
        .iter()
        .filter(|m| matches!(m, Message::User { .. }))
        .count();
    let were = if left_out.len() == 1 { "was" } else { "were" };
    let mut text = format!(
        "[Toren: {} {were} left out here to fit the context window ({}, {} from the user).",
        toren_display::count(left_out.len(), "earlier message", "earlier messages"),
        toren_display::count(calls.len(), "tool call", "tool calls"),
        toren_display::count(users, "message", "messages")
    );
    if !calls.is_empty() {
        let shown = calls.len().min(NOTE_CALLS);
        text.push_str(if shown < calls.len() {
            " The last calls, oldest first:"
        } else {
            " The calls, oldest first:"
        });
        for call in &calls[calls.len() - shown..] {
            let name: String = call.name.chars().take(NAME_CHARS).collect();
            text.push_str(&format!("\n- {name}: {}", preview(call)));
        }
        text.push_str("\nRepeat a call if you need its result.");
    }
    text.push(']');
    text
}

/// What a call did, in a few words: its command, its path, or its arguments.
fn preview(call: &ToolCall) -> String {
    let field = ["command", "path"].iter().find_map(|k| {
        call.arguments
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    });
    let text = field.unwrap_or_else(|| call.arguments.to_string());
    let first = text.lines().next().unwrap_or_default();
    let mut shown: String = first.chars().take(PREVIEW_CHARS).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
#[path = "context_tests.rs"]
pub(crate) mod tests;

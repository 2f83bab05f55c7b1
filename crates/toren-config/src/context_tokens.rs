//! `context_tokens` of an agent file: the model's context window in tokens, when the table
//! of known models (`toren_protocol::context_window`) does not know it or knows it wrong —
//! an Ollama server run with a smaller `num_ctx`, a model with a larger window. Pinned in
//! the spec; the state machine compacts the conversation to fit it.

use serde_saphyr::Spanned;

use crate::agent_file::Checker;
use crate::error::Result;
use crate::raw::RawCount;

/// The smallest window accepted.
pub const MIN_CONTEXT_TOKENS: u32 = 1_024;
/// The largest window accepted.
pub const MAX_CONTEXT_TOKENS: u32 = 10_000_000;

const HELP: &str = "the model's context window in tokens, e.g. `context_tokens: 32000`; \
                    remove the key to use the size Toren knows for the model";

impl Checker<'_> {
    pub(crate) fn context_tokens(&self, count: Spanned<RawCount>) -> Result<u32> {
        let message = match count.value {
            RawCount::Integer(value) => match u32::try_from(value) {
                Ok(tokens) if (MIN_CONTEXT_TOKENS..=MAX_CONTEXT_TOKENS).contains(&tokens) => {
                    return Ok(tokens);
                }
                _ if value > 0 => format!(
                    "`context_tokens` is {value}; it must be from {MIN_CONTEXT_TOKENS} to {MAX_CONTEXT_TOKENS}"
                ),
                _ => format!("`context_tokens` must be a positive integer, found {value}"),
            },
            RawCount::Other(found) => {
                format!("`context_tokens` must be a positive integer, found {found}")
            }
        };
        Err(self.error_with_help(count.referenced, message, HELP))
    }
}

//! The scripted provider: a YAML list of assistant turns, replayed deterministically, for
//! tests and offline demos. It never pretends to be a real model (it reports the model
//! `scripted`).
//!
//! ```yaml
//! turns:
//!   - text: "Looking around."
//!     tool_calls:                  # each item is {tool_name: arguments}
//!       - bash: {command: "ls -la"}
//!   - text: "Done."
//!     delay_ms: 200                # optional: answer after this long, like a real model
//! ```
//!
//! Which turn answers a request is derived from the request itself — the number of
//! assistant messages already in the conversation — so a resumed run, served by a fresh
//! provider, continues where it stopped. Tool call ids are `call_1`, `call_2`, … numbered
//! across the whole script, so every call's id is stable. Past the last turn the provider
//! answers `(end of script)` with no tool calls.

use std::fmt;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;
use toren_protocol::{AssistantMessage, Message, ToolCall, Usage};

use crate::error::{Error, Result};
use crate::provider::{ModelProvider, ModelRequest, ModelResponse, TextSink};

/// What the provider says once the script has run out.
pub const END_OF_SCRIPT: &str = "(end of script)";
/// The model name scripted responses report.
pub const SCRIPTED_MODEL: &str = "scripted";

/// A loaded, validated script.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    turns: Vec<AssistantMessage>,
    /// Per turn, how long to wait before answering (simulated model latency).
    delays: Vec<std::time::Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<TurnFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallFile>,
    #[serde(default)]
    delay_ms: u64,
}

/// `{tool_name: arguments}`: a map with exactly one entry.
struct CallFile {
    name: String,
    arguments: Value,
}

impl<'de> Deserialize<'de> for CallFile {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CallVisitor;
        impl<'de> Visitor<'de> for CallVisitor {
            type Value = CallFile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool call written as `tool_name: {arguments}`")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CallFile, A::Error> {
                let Some((name, arguments)) = map.next_entry::<String, Value>()? else {
                    return Err(de::Error::custom(
                        "empty tool call; write it as `tool_name: {arguments}`",
                    ));
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a tool call has exactly one key, the tool name, but `{name}` is \
                         followed by `{extra}`; start another list item with `- {extra}: ...`"
                    )));
                }
                let arguments = match arguments {
                    Value::Null => Value::Object(serde_json::Map::new()),
                    other => other,
                };
                Ok(CallFile { name, arguments })
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<CallFile, E> {
                Err(E::custom(format!(
                    "tool call `{name}` has no arguments; write it as `- {name}: {{...}}` \
                     (or `- {name}: {{}}` for none)"
                )))
            }
        }
        deserializer.deserialize_any(CallVisitor)
    }
}

impl Script {
    /// Reads and validates a script file.
    pub fn load(path: &Path) -> Result<Script> {
        let source = std::fs::read_to_string(path).map_err(|e| Error::Script {
            path: path.to_owned(),
            message: format!("cannot read it: {e}"),
        })?;
        Script::parse(&source, path)
    }

    /// Parses a script; `path` names the source in error messages.
    pub fn parse(source: &str, path: &Path) -> Result<Script> {
        if source.trim().is_empty() {
            return Err(Error::Script {
                path: path.to_owned(),
                message: "the file is empty; a script is a mapping with a `turns:` list".to_owned(),
            });
        }
        let file: ScriptFile = serde_saphyr::from_str(source).map_err(|e| {
            let name = path.display().to_string();
            Error::Script {
                path: path.to_owned(),
                message: e.render_with_options(serde_saphyr::render_options! {
                    source_name: Some(name.as_str()),
                }),
            }
        })?;
        let mut next_id = 0;
        let delays = file
            .turns
            .iter()
            .map(|turn| std::time::Duration::from_millis(turn.delay_ms))
            .collect();
        let turns = file
            .turns
            .into_iter()
            .map(|turn| AssistantMessage {
                text: turn.text.unwrap_or_default(),
                tool_calls: turn
                    .tool_calls
                    .into_iter()
                    .map(|call| {
                        next_id += 1;
                        ToolCall {
                            id: format!("call_{next_id}"),
                            name: call.name,
                            arguments: call.arguments,
                            wire_id: None,
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(Script { turns, delays })
    }

    /// The turns in order, with their tool call ids assigned.
    pub fn turns(&self) -> &[AssistantMessage] {
        &self.turns
    }

    /// How long the turn that answers `answered` assistant messages takes.
    pub fn delay(&self, answered: usize) -> std::time::Duration {
        self.delays.get(answered).copied().unwrap_or_default()
    }

    /// The turn that answers a conversation with `answered` assistant messages in it.
    pub fn turn(&self, answered: usize) -> AssistantMessage {
        self.turns
            .get(answered)
            .cloned()
            .unwrap_or_else(|| AssistantMessage {
                text: END_OF_SCRIPT.to_owned(),
                tool_calls: Vec::new(),
            })
    }
}

/// A [`ModelProvider`] that replays a [`Script`].
#[derive(Clone, Debug)]
pub struct ScriptedProvider {
    script: Script,
    path: PathBuf,
}

impl ScriptedProvider {
    pub fn new(script: Script, path: PathBuf) -> Self {
        ScriptedProvider { script, path }
    }

    /// Loads and validates the script at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        Ok(ScriptedProvider::new(Script::load(path)?, path.to_owned()))
    }

    /// The file the script came from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[async_trait]
impl ModelProvider for ScriptedProvider {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse> {
        let answered = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        let message = self.script.turn(answered);
        // The text streams word by word over the turn's delay, as a real model's would:
        // half the delay before the first word (time to first token), the rest between words.
        let delay = self.script.delay(answered);
        let words: Vec<&str> = message.text.split_inclusive(' ').collect();
        let pieces = u32::try_from(words.len()).unwrap_or(u32::MAX).max(1);
        tokio::time::sleep(delay / 2).await;
        for (i, word) in words.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(delay / 2 / pieces).await;
            }
            on_text(word);
        }
        if words.is_empty() {
            tokio::time::sleep(delay / 2).await;
        }
        let stop_reason = if message.tool_calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        Ok(ModelResponse {
            message,
            stop_reason: stop_reason.to_owned(),
            usage: Usage::default(),
            model: SCRIPTED_MODEL.to_owned(),
        })
    }
}

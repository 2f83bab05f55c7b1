//! Redaction by value in the worker (issue 18, part 5): what a tool printed is journaled,
//! and so sent to the model and shown on every surface, with the values of the run's
//! granted `env` variables and injected secrets replaced by `[redacted:NAME]`
//! (`toren_redact`). The values are looked up where the sandbox's environment is, through
//! the worker's [`crate::driver::EnvLookup`], each time, and remembered process-wide
//! (`toren_redact::remember`) so that the binary's log lines are redacted of them too
//! ([`redact_log`]); [`policy_redactor`] is the same for the run service, which redacts what a
//! person sends a run before it is journaled. Injected secrets' values are also what the run's egress proxy adds to requests
//! ([`Worker::secret_values`]); they never enter the sandbox, but a host could echo one
//! back into a command's output, and there it is redacted too.

use std::borrow::Cow;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;
use toren_protocol::{AssistantMessage, ResolvedPolicy};
use toren_redact::Redactor;

use crate::Worker;

impl Worker {
    /// The values of the secrets `policy` injects, by name; a secret whose variable is
    /// unset is left out (the proxy then refuses to start, naming it).
    pub(crate) fn secret_values(&self, policy: &ResolvedPolicy) -> Vec<(String, String)> {
        let Some(egress) = policy.egress.as_ref() else {
            return Vec::new();
        };
        egress
            .secrets
            .iter()
            .filter_map(|secret| (self.config.env)(&secret.name).map(|v| (secret.name.clone(), v)))
            .collect()
    }

    /// The redactor of `policy`'s granted and injected values.
    pub(crate) fn redactor(&self, policy: Option<&ResolvedPolicy>) -> Redactor {
        policy_redactor(policy, &*self.config.env)
    }

    /// A tool's output as it may be journaled.
    pub(crate) fn redact_output(
        &self,
        policy: Option<&ResolvedPolicy>,
        output: String,
        truncated: bool,
    ) -> String {
        let redactor = self.redactor(policy);
        if redactor.is_empty() {
            return output;
        }
        redactor.redact_output(&output, truncated)
    }
}

/// The redactor of the values `policy` grants (`env`) and injects (`sandbox.secrets`), as
/// `env` finds them (a variable it does not find is left out), each also remembered
/// process-wide so that this process's log lines are redacted of them ([`redact_log`]).
/// The worker's, and the run service's for what a person sends a run (its input, a
/// session's message) before it is journaled.
pub fn policy_redactor(
    policy: Option<&ResolvedPolicy>,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Redactor {
    let Some(policy) = policy else {
        return Redactor::default();
    };
    let secrets = policy.egress.iter().flat_map(|egress| &egress.secrets);
    let values: Vec<(String, String)> = policy
        .env
        .iter()
        .chain(secrets.map(|secret| &secret.name))
        .filter_map(|name| env(name).map(|value| (name.clone(), value)))
        .collect();
    toren_redact::remember(values.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    Redactor::new(values)
}

/// What the model said, as it may be journaled: its text and every string of its tool
/// calls' arguments with the values replaced. The model never received a value (tool
/// outputs are redacted before it sees them), but a person's message or a file it read
/// may have carried one; redacted before the append, so the conversation sent next is the
/// log's and replays exactly.
pub(crate) fn redact_message(
    redactor: &Redactor,
    mut message: AssistantMessage,
) -> AssistantMessage {
    if redactor.is_empty() {
        return message;
    }
    if let Cow::Owned(text) = redactor.redact(&message.text) {
        message.text = text;
    }
    for call in &mut message.tool_calls {
        redact_value(redactor, &mut call.arguments);
    }
    message
}

fn redact_value(redactor: &Redactor, value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(redacted) = redactor.redact(s) {
                *s = redacted;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact_value(redactor, v)),
        Value::Object(fields) => fields.values_mut().for_each(|v| redact_value(redactor, v)),
        _ => {}
    }
}

/// The model's streamed text of one call, redacted on its way to the observers (the
/// terminal, the followers' stream file, Telegram): a value split across deltas is held
/// back until it is whole, and [`TextStream::finish`] lets the rest go.
pub(crate) struct TextStream {
    stream: Mutex<toren_redact::Stream>,
}

impl TextStream {
    pub(crate) fn new(redactor: &Redactor) -> Self {
        Self {
            stream: Mutex::new(redactor.stream()),
        }
    }

    /// What of `delta` may be shown now (possibly nothing).
    pub(crate) fn push(&self, delta: &str) -> String {
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        stream.push(delta)
    }

    /// What was held back at the end of the call.
    pub(crate) fn finish(self) -> String {
        self.stream
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .finish()
    }
}

/// A log line with every value this process's runs were granted or injected (so far)
/// replaced: the binary's log writer passes each line through it.
pub fn redact_log(line: &str) -> Cow<'_, str> {
    toren_redact::known().redact(line)
}

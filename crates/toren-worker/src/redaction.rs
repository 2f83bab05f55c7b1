//! Redaction by value in the worker: what a tool printed is journaled,
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
use toren_protocol::{AssistantMessage, EventKind, ResolvedPolicy};
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

    /// The redactor of what this worker journals ([`redact_event`]): `policy`'s values as
    /// written and lower-cased too, since a host name reaches the log lower-cased (the
    /// egress proxy folds the case of the name the sandbox asked for, as DNS does).
    pub(crate) fn event_redactor(&self, policy: Option<&ResolvedPolicy>) -> Redactor {
        event_redactor(policy, &*self.config.env)
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
    Redactor::new(policy_values(policy, env))
}

/// [`Worker::event_redactor`], of the values `env` finds.
pub(crate) fn event_redactor(
    policy: Option<&ResolvedPolicy>,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Redactor {
    let values = policy_values(policy, env);
    let lowered: Vec<(String, String)> = values
        .iter()
        .map(|(name, value)| (name.clone(), value.to_ascii_lowercase()))
        .collect();
    Redactor::new(values.into_iter().chain(lowered))
}

/// The values `policy` grants and injects, as `env` finds them (`(name, value)`), each
/// remembered process-wide.
fn policy_values(
    policy: Option<&ResolvedPolicy>,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> Vec<(String, String)> {
    let Some(policy) = policy else {
        return Vec::new();
    };
    let secrets = policy.egress.iter().flat_map(|egress| &egress.secrets);
    let values: Vec<(String, String)> = policy
        .env
        .iter()
        .chain(secrets.map(|secret| &secret.name))
        .filter_map(|name| env(name).map(|value| (name.clone(), value)))
        .collect();
    toren_redact::remember(values.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    values
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

/// Fields journaled verbatim, by event kind: identifiers Toren makes for its own use
/// (a checkpoint's content hash, the sandbox's instance and workspace path, all of
/// `sandbox_provisioned`), which no model, sandbox or person writes, and which the run
/// needs exactly as they are (a rewind restores by the hash, a resume reconnects by the
/// instance). `None`: the whole kind.
const VERBATIM: &[(&str, Option<&str>)] = &[
    ("tool_started", Some("checkpoint")),
    ("rewound", Some("checkpoint")),
    ("sandbox_provisioned", None),
];

/// `kind` as it may be journaled: every string in it — every field of every event kind,
/// host names, ids, commands, reasons and map keys included — with the values replaced,
/// found by walking the event's serialized form, so that a field added to an event is
/// redacted without anyone remembering to. Left as they are: the kind's `type` tag, the
/// [`VERBATIM`] identifiers, and a string whose type admits only Toren's own vocabulary (an
/// enum's variant, a timestamp, a run id): if the redacted event does not decode, each
/// replacement is kept only if the event still decodes with it, so such a field, which
/// can hold a value only by coincidence, keeps its text rather than break the log.
///
/// Hosts (a host approval's, the connection records') are lower-cased after redaction, as
/// every host is journaled, and a host approval's id is made from its host again
/// (`host:<name>`), so the fold still finds one by the other.
pub(crate) fn redact_event(redactor: &Redactor, kind: EventKind) -> EventKind {
    if redactor.is_empty() {
        return kind;
    }
    let name = kind.name();
    let verbatim: Vec<&str> = match VERBATIM.iter().find(|(k, _)| *k == name) {
        Some((_, None)) => return kind,
        Some((_, Some(field))) => vec!["type", field],
        None => vec!["type"],
    };
    let Ok(original) = serde_json::to_value(&kind) else {
        return kind;
    };
    let mut whole = original.clone();
    if !redact_fields(redactor, &mut whole, &verbatim) {
        return kind;
    }
    let redacted = match serde_json::from_value::<EventKind>(whole) {
        Ok(redacted) => redacted,
        Err(_) => one_by_one(redactor, original, &verbatim).unwrap_or(kind),
    };
    normalize_host(redacted)
}

/// Redacts every field of the event object `value` but those named in `verbatim`; whether
/// anything changed.
fn redact_fields(redactor: &Redactor, value: &mut Value, verbatim: &[&str]) -> bool {
    let Value::Object(fields) = value else {
        return redact_all(redactor, value);
    };
    let mut changed = false;
    for (key, field) in fields.iter_mut() {
        if !verbatim.contains(&key.as_str()) {
            changed |= redact_all(redactor, field);
        }
    }
    changed
}

/// Redacts the keys of one map (not its values); whether any changed.
fn rename_keys(redactor: &Redactor, fields: &mut serde_json::Map<String, Value>) -> bool {
    if !fields
        .keys()
        .any(|k| matches!(redactor.redact(k), Cow::Owned(_)))
    {
        return false;
    }
    let taken = std::mem::take(fields);
    for (key, v) in taken {
        fields.insert(redactor.redact(&key).into_owned(), v);
    }
    true
}

/// Redacts every string in `value`, map keys too; whether anything changed.
fn redact_all(redactor: &Redactor, value: &mut Value) -> bool {
    match value {
        Value::String(s) => match redactor.redact(s) {
            Cow::Owned(redacted) => {
                *s = redacted;
                true
            }
            Cow::Borrowed(_) => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| redact_all(redactor, v) | changed),
        Value::Object(fields) => {
            let changed = rename_keys(redactor, fields);
            fields
                .values_mut()
                .fold(changed, |changed, v| redact_all(redactor, v) | changed)
        }
        _ => false,
    }
}

/// The slow path of [`redact_event`]: each string that redaction changes, replaced one at
/// a time and kept only if the event still decodes; then the map keys, all or none.
fn one_by_one(redactor: &Redactor, original: Value, verbatim: &[&str]) -> Option<EventKind> {
    let mut current = original;
    let mut pointers = Vec::new();
    if let Value::Object(fields) = &current {
        for (key, field) in fields {
            if !verbatim.contains(&key.as_str()) {
                changed_strings(redactor, field, &format!("/{}", escape(key)), &mut pointers);
            }
        }
    }
    for pointer in pointers {
        let Some(Value::String(text)) = current.pointer(&pointer) else {
            continue;
        };
        let redacted = redactor.redact(text).into_owned();
        let mut candidate = current.clone();
        if let Some(slot) = candidate.pointer_mut(&pointer) {
            *slot = Value::String(redacted);
        }
        if serde_json::from_value::<EventKind>(candidate.clone()).is_ok() {
            current = candidate;
        }
    }
    let mut keyed = current.clone();
    if redact_keys(redactor, &mut keyed, verbatim)
        && let Ok(kind) = serde_json::from_value::<EventKind>(keyed)
    {
        return Some(kind);
    }
    serde_json::from_value(current).ok()
}

/// The JSON pointers of the strings under `value` (at `at`) that redaction changes.
fn changed_strings(redactor: &Redactor, value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if matches!(redactor.redact(s), Cow::Owned(_)) {
                out.push(at.to_owned());
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                changed_strings(redactor, v, &format!("{at}/{i}"), out);
            }
        }
        Value::Object(fields) => {
            for (key, v) in fields {
                changed_strings(redactor, v, &format!("{at}/{}", escape(key)), out);
            }
        }
        _ => {}
    }
}

/// Redacts the map keys (not the strings) of every field but `verbatim`'s.
fn redact_keys(redactor: &Redactor, value: &mut Value, verbatim: &[&str]) -> bool {
    fn keys_of(redactor: &Redactor, value: &mut Value) -> bool {
        match value {
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| keys_of(redactor, v) | changed),
            Value::Object(fields) => {
                let changed = rename_keys(redactor, fields);
                fields
                    .values_mut()
                    .fold(changed, |changed, v| keys_of(redactor, v) | changed)
            }
            _ => false,
        }
    }
    let Value::Object(fields) = value else {
        return false;
    };
    let mut changed = false;
    for (key, field) in fields.iter_mut() {
        if !verbatim.contains(&key.as_str()) {
            changed |= keys_of(redactor, field);
        }
    }
    changed
}

/// A JSON pointer's escaping of one key (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// An event naming hosts, redacted: each host lower-cased again (a marker too, so the
/// host reads the same in a request and in the connection records), a host approval's id
/// made from its host.
fn normalize_host(kind: EventKind) -> EventKind {
    match kind {
        EventKind::HostApprovalRequested(mut request) => {
            request.host = request.host.to_ascii_lowercase();
            request.id = toren_protocol::host_approval_id(&request.host);
            EventKind::HostApprovalRequested(request)
        }
        EventKind::EgressConnections(mut records) => {
            for connection in &mut records.connections {
                connection.host = connection.host.to_ascii_lowercase();
            }
            EventKind::EgressConnections(records)
        }
        other => other,
    }
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

#[cfg(test)]
#[path = "redaction_tests.rs"]
mod tests;

//! Decoding a stored payload into an [`Event`] in one pass.
//!
//! `Event` puts its kind beside its envelope (`#[serde(flatten)]` of an enum tagged by
//! `type`), and serde's derive for that shape first copies every field of the payload into
//! an intermediate tree, then decodes the kind from the copy: about a third of the time
//! to decode a long log went there. Toren writes the envelope (`run_id`, `seq`, `at`, `v`),
//! then `type`, then the kind's fields; a payload laid out that way is decoded here field
//! by field, the kind's fields straight into the kind's own serde type. Anything else —
//! another order, an unknown field before `type`, a field of the envelope after it, a
//! payload that does not decode — goes through the derive for `Event`, whose answer
//! (the event, or the error) is the one returned. So the result is always what
//! `serde_json::from_str::<Event>` gives.

use std::borrow::Cow;
use std::fmt;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use toren_protocol::{Event, EventKind, RunId};

/// The event in `payload`.
pub(super) fn event(payload: &str) -> serde_json::Result<Event> {
    match one_pass(payload) {
        Some(event) => Ok(event),
        None => serde_json::from_str(payload),
    }
}

/// The event in `payload` if it is laid out as Toren writes events and decodes.
fn one_pass(payload: &str) -> Option<Event> {
    serde_json::from_str::<OnePass>(payload).ok()?.0
}

/// An event decoded in one pass, or `None`: leave it to the derive.
struct OnePass(Option<Event>);

impl<'de> Deserialize<'de> for OnePass {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EventVisitor)
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = OnePass;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OnePass, A::Error> {
        let mut run_id: Option<RunId> = None;
        let mut seq: Option<u64> = None;
        let mut at: Option<Timestamp> = None;
        let mut v: Option<u32> = None;
        while let Some(key) = map.next_key_seed(Text)? {
            match &*key {
                "run_id" if run_id.is_none() => run_id = Some(map.next_value()?),
                "seq" if seq.is_none() => seq = Some(map.next_value()?),
                "at" if at.is_none() => at = Some(map.next_value()?),
                "v" if v.is_none() => v = Some(map.next_value()?),
                "type" => {
                    let (Some(run_id), Some(seq), Some(at)) = (run_id, seq, at) else {
                        return Ok(OnePass(None));
                    };
                    let tag = map.next_value_seed(Text)?;
                    let Some(kind) = kind(&tag, map)? else {
                        return Ok(OnePass(None));
                    };
                    return Ok(OnePass(Some(Event {
                        run_id,
                        seq,
                        at,
                        // The default of `Event::v`.
                        v: v.unwrap_or(1),
                        kind,
                    })));
                }
                // A repeated or unknown field before `type`.
                _ => return Ok(OnePass(None)),
            }
        }
        Ok(OnePass(None))
    }
}

/// The kind tagged `tag`, from the rest of the payload's fields; `None` for a tag this
/// table does not know (a kind added later decodes through the derive until it is added).
fn kind<'de, A: MapAccess<'de>>(tag: &str, map: A) -> Result<Option<EventKind>, A::Error> {
    let map = MapAccessDeserializer::new(KindFields(map));
    Ok(Some(match tag {
        "run_created" => EventKind::RunCreated(Deserialize::deserialize(map)?),
        "model_responded" => EventKind::ModelResponded(Deserialize::deserialize(map)?),
        "approval_requested" => EventKind::ApprovalRequested(Deserialize::deserialize(map)?),
        "approval_decided" => EventKind::ApprovalDecided(Deserialize::deserialize(map)?),
        "tool_started" => EventKind::ToolStarted(Deserialize::deserialize(map)?),
        "tool_completed" => EventKind::ToolCompleted(Deserialize::deserialize(map)?),
        "sandbox_provisioned" => EventKind::SandboxProvisioned(Deserialize::deserialize(map)?),
        "run_completed" => EventKind::RunCompleted(Deserialize::deserialize(map)?),
        "run_failed" => EventKind::RunFailed(Deserialize::deserialize(map)?),
        "run_cancelled" => EventKind::RunCancelled(Deserialize::deserialize(map)?),
        "context_compacted" => EventKind::ContextCompacted(Deserialize::deserialize(map)?),
        "message_delivered" => EventKind::MessageDelivered(Deserialize::deserialize(map)?),
        "budget_reached" => EventKind::BudgetReached(Deserialize::deserialize(map)?),
        "budget_raised" => EventKind::BudgetRaised(Deserialize::deserialize(map)?),
        "host_approval_requested" => {
            EventKind::HostApprovalRequested(Deserialize::deserialize(map)?)
        }
        "egress_connections" => EventKind::EgressConnections(Deserialize::deserialize(map)?),
        "rewound" => EventKind::Rewound(Deserialize::deserialize(map)?),
        _ => return Ok(None),
    }))
}

/// The fields after `type`, handed to the kind's serde type. A field of the envelope
/// there is an error, so that the derive (which would refuse it as a duplicate, or take it
/// for the envelope) decides.
struct KindFields<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for KindFields<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.0.next_key_seed(Text)? else {
            return Ok(None);
        };
        if matches!(&*key, "run_id" | "seq" | "at" | "v" | "type") {
            return Err(de::Error::custom(format_args!(
                "`{key}` after the event's type"
            )));
        }
        match key {
            Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
            Cow::Owned(key) => {
                seed.deserialize(IntoDeserializer::<A::Error>::into_deserializer(key))
            }
        }
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// A string of the payload: borrowed when it has no escapes.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Text {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(text))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// Every kind, as the store's corpus of v1 events holds them.
    const CORPUS: &str = include_str!("../../tests/corpus/v1_events.jsonl");

    fn derive(payload: &str) -> serde_json::Result<Event> {
        serde_json::from_str(payload)
    }

    #[test]
    fn events_as_toren_writes_them_decode_in_one_pass_to_what_the_derive_gives() {
        for line in CORPUS.lines() {
            let written = serde_json::to_string(&derive(line).unwrap()).unwrap();
            assert_eq!(
                one_pass(&written),
                Some(derive(&written).unwrap()),
                "{written}"
            );
        }
    }

    #[test]
    fn any_other_payload_decodes_exactly_as_through_the_derive() {
        let written = r#"{"run_id":"run_01jqz5m3k8v7c2x9n4b6t0r1ya","seq":3,"at":"2026-03-14T09:26:53.589793238Z","v":1,"type":"tool_started","call_id":"toolu_1","tool":"bash","attempt":2}"#;
        let odd = [
            // Another order, as the hand-written corpus has some.
            r#"{"type":"tool_started","call_id":"toolu_1","tool":"bash","run_id":"run_01jqz5m3k8v7c2x9n4b6t0r1ya","seq":3,"at":"2026-03-14T09:26:53.589793238Z"}"#.to_owned(),
            // `v` after the type, an unknown field before it, no `v` at all.
            written.replace(r#""v":1,"type":"tool_started","#, r#""type":"tool_started","v":1,"#),
            written.replace(r#""v":1,"#, r#""v":1,"later":true,"#),
            written.replace(r#""v":1,"#, ""),
            // A field of the envelope again after the type: the derive refuses it.
            written.replace(r#","attempt":2}"#, r#","attempt":2,"seq":4}"#),
            // Broken ones: a kind from the future, a missing field, not an object.
            written.replace("tool_started", "from_the_future"),
            written.replace(r#""tool":"bash","#, ""),
            written.replace(r#""seq":3"#, r#""seq":"three""#),
            "[1, 2]".to_owned(),
            "{".to_owned(),
        ];
        assert!(one_pass(written).is_some());
        for payload in std::iter::once(written.to_owned()).chain(odd) {
            let (ours, theirs) = (event(&payload), derive(&payload));
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{payload}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{payload}"),
                _ => panic!("{payload}: {ours:?} against the derive's {theirs:?}"),
            }
        }
    }
}

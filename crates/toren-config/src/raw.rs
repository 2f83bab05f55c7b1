//! The agent file as written: the YAML shape with the position of every value kept.
//!
//! These types mirror `agent.yaml` key for key (unknown keys are refused by serde), wrap
//! values in [`Spanned`] so that `agent_file` can point at the line and column of a value
//! it rejects, and accept a wrong type for `sandbox`, `limits`, counts and sizes as data
//! ([`Found`]) so the error can name the value's own position rather than its key's.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// The top-level mapping of `agent.yaml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    pub(crate) name: Spanned<String>,
    pub(crate) model: Spanned<String>,
    #[serde(default)]
    pub(crate) instructions: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) sandbox: Option<Spanned<RawSandbox>>,
    #[serde(default)]
    pub(crate) max_turns: Option<Spanned<RawCount>>,
    #[serde(default)]
    pub(crate) context_tokens: Option<Spanned<RawCount>>,
    #[serde(default)]
    pub(crate) budget: Option<Spanned<crate::budget::RawBudget>>,
    #[serde(default)]
    pub(crate) pricing: Option<Spanned<crate::budget::RawPricing>>,
}

/// `sandbox:` — `true`, `false`, a mapping, or something else to report.
#[derive(Debug)]
pub(crate) enum RawSandbox {
    Flag(bool),
    Mapping(Box<RawSandboxMapping>),
    Other(Found),
}

/// The mapping form of `sandbox:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSandboxMapping {
    #[serde(default)]
    pub(crate) image: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) network: Option<Spanned<RawNetwork>>,
    #[serde(default)]
    pub(crate) approval: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) env: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(crate) limits: Option<Spanned<RawLimits>>,
    #[serde(default)]
    pub(crate) on_interrupt: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) secrets: Option<Spanned<crate::secrets::RawSecrets>>,
    #[serde(default)]
    pub(crate) checkpoints: Option<Spanned<RawCheckpoints>>,
}

/// `checkpoints:` inside `sandbox:` — `true`, `false`, a mapping, or something else.
#[derive(Debug)]
pub(crate) enum RawCheckpoints {
    Flag(bool),
    Mapping(Box<RawCheckpointsMapping>),
    Other(Found),
}

/// The mapping form of `checkpoints:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCheckpointsMapping {
    #[serde(default)]
    pub(crate) exclude: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(crate) keep: Option<Spanned<RawCount>>,
}

/// `network:` inside `sandbox:` — `true`, `false`, a list of hosts, a mapping
/// `{allow, ask}`, or something else to report.
#[derive(Debug)]
pub(crate) enum RawNetwork {
    Flag(bool),
    List(Vec<Spanned<String>>),
    Mapping(Box<RawNetworkMapping>),
    Other(Found),
}

/// The mapping form of `network:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNetworkMapping {
    #[serde(default)]
    pub(crate) allow: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub(crate) ask: Option<bool>,
}

/// `limits:` inside `sandbox:` — a mapping, or something else to report.
#[derive(Debug)]
pub(crate) enum RawLimits {
    Mapping(Box<RawLimitsMapping>),
    Other(Found),
}

/// The mapping form of `limits:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimitsMapping {
    #[serde(default)]
    pub(crate) memory: Option<Spanned<RawSize>>,
    #[serde(default)]
    pub(crate) pids: Option<Spanned<RawCount>>,
    #[serde(default)]
    pub(crate) cpu_secs: Option<Spanned<RawCount>>,
}

/// A size such as `memory:` — a number of bytes, a string with a unit (`2GiB`), or
/// something else.
#[derive(Debug)]
pub(crate) enum RawSize {
    Integer(i128),
    Text(String),
    Other(Found),
}

/// A count such as `max_turns:` or `context_tokens:` — an integer (any sign, checked later) or something else.
#[derive(Debug)]
pub(crate) enum RawCount {
    Integer(i128),
    Other(Found),
}

/// A description of a value of the wrong type, for the error message (`the string "yes"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found(pub(crate) String);

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Found {
    fn string(value: &str) -> Self {
        Self(format!("the string {value:?}"))
    }

    fn number(value: impl fmt::Display) -> Self {
        Self(format!("the number {value}"))
    }
}

/// Drains a list so the parser moves past it, and describes it.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Found, A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(Found("a list".to_owned()))
}

/// Drains a mapping so the parser moves past it, and describes it.
fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Found, A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(Found("a mapping".to_owned()))
}

impl<'de> Deserialize<'de> for RawSandbox {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SandboxVisitor;

        impl<'de> Visitor<'de> for SandboxVisitor {
            type Value = RawSandbox;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a mapping")
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawSandbox, E> {
                Ok(RawSandbox::Flag(value))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawSandbox, A::Error> {
                // Hand serde-saphyr's own map access to the derived impl, so that unknown
                // keys are refused and the `Spanned` values inside keep their positions.
                RawSandboxMapping::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|mapping| RawSandbox::Mapping(Box::new(mapping)))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawSandbox, E> {
                Ok(RawSandbox::Other(Found::string(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawSandbox, E> {
                Ok(RawSandbox::Other(Found::number(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawSandbox, E> {
                Ok(RawSandbox::Other(Found::number(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawSandbox, E> {
                Ok(RawSandbox::Other(Found::number(value)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawSandbox, A::Error> {
                skip_seq(seq).map(RawSandbox::Other)
            }
        }

        deserializer.deserialize_any(SandboxVisitor)
    }
}

impl<'de> Deserialize<'de> for RawLimits {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LimitsVisitor;

        impl<'de> Visitor<'de> for LimitsVisitor {
            type Value = RawLimits;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawLimits, A::Error> {
                RawLimitsMapping::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|mapping| RawLimits::Mapping(Box::new(mapping)))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawLimits, E> {
                Ok(RawLimits::Other(Found(format!("`{value}`"))))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawLimits, E> {
                Ok(RawLimits::Other(Found::string(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawLimits, E> {
                Ok(RawLimits::Other(Found::number(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawLimits, E> {
                Ok(RawLimits::Other(Found::number(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawLimits, E> {
                Ok(RawLimits::Other(Found::number(value)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawLimits, A::Error> {
                skip_seq(seq).map(RawLimits::Other)
            }
        }

        deserializer.deserialize_any(LimitsVisitor)
    }
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl<'de> Visitor<'de> for SizeVisitor {
            type Value = RawSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as `2GiB`")
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawSize, E> {
                Ok(RawSize::Integer(i128::from(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawSize, E> {
                Ok(RawSize::Integer(i128::from(value)))
            }

            fn visit_i128<E: de::Error>(self, value: i128) -> Result<RawSize, E> {
                Ok(RawSize::Integer(value))
            }

            fn visit_u128<E: de::Error>(self, value: u128) -> Result<RawSize, E> {
                Ok(RawSize::Integer(i128::try_from(value).unwrap_or(i128::MAX)))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawSize, E> {
                Ok(RawSize::Text(value.to_owned()))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawSize, E> {
                Ok(RawSize::Other(Found(format!("`{value}`"))))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawSize, E> {
                Ok(RawSize::Other(Found::number(value)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawSize, A::Error> {
                skip_seq(seq).map(RawSize::Other)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawSize, A::Error> {
                skip_map(map).map(RawSize::Other)
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

impl<'de> Deserialize<'de> for RawCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CountVisitor;

        impl<'de> Visitor<'de> for CountVisitor {
            type Value = RawCount;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer")
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawCount, E> {
                Ok(RawCount::Integer(i128::from(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawCount, E> {
                Ok(RawCount::Integer(i128::from(value)))
            }

            fn visit_i128<E: de::Error>(self, value: i128) -> Result<RawCount, E> {
                Ok(RawCount::Integer(value))
            }

            fn visit_u128<E: de::Error>(self, value: u128) -> Result<RawCount, E> {
                Ok(RawCount::Integer(
                    i128::try_from(value).unwrap_or(i128::MAX),
                ))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawCount, E> {
                Ok(RawCount::Other(Found(format!("`{value}`"))))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawCount, E> {
                Ok(RawCount::Other(Found::string(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawCount, E> {
                Ok(RawCount::Other(Found::number(value)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawCount, A::Error> {
                skip_seq(seq).map(RawCount::Other)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawCount, A::Error> {
                skip_map(map).map(RawCount::Other)
            }
        }

        deserializer.deserialize_any(CountVisitor)
    }
}

impl<'de> Deserialize<'de> for RawNetwork {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NetworkVisitor;

        impl<'de> Visitor<'de> for NetworkVisitor {
            type Value = RawNetwork;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, a list of hosts or a mapping")
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawNetwork, E> {
                Ok(RawNetwork::Flag(value))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawNetwork, A::Error> {
                // As for maps: serde-saphyr's own access, so every host keeps its position.
                Vec::<Spanned<String>>::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(RawNetwork::List)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawNetwork, A::Error> {
                RawNetworkMapping::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|mapping| RawNetwork::Mapping(Box::new(mapping)))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawNetwork, E> {
                Ok(RawNetwork::Other(Found::string(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawNetwork, E> {
                Ok(RawNetwork::Other(Found::number(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawNetwork, E> {
                Ok(RawNetwork::Other(Found::number(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawNetwork, E> {
                Ok(RawNetwork::Other(Found::number(value)))
            }
        }

        deserializer.deserialize_any(NetworkVisitor)
    }
}

impl<'de> Deserialize<'de> for RawCheckpoints {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CheckpointsVisitor;

        impl<'de> Visitor<'de> for CheckpointsVisitor {
            type Value = RawCheckpoints;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a mapping")
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawCheckpoints, E> {
                Ok(RawCheckpoints::Flag(value))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawCheckpoints, A::Error> {
                RawCheckpointsMapping::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|mapping| RawCheckpoints::Mapping(Box::new(mapping)))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawCheckpoints, E> {
                Ok(RawCheckpoints::Other(Found::string(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawCheckpoints, E> {
                Ok(RawCheckpoints::Other(Found::number(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawCheckpoints, E> {
                Ok(RawCheckpoints::Other(Found::number(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawCheckpoints, E> {
                Ok(RawCheckpoints::Other(Found::number(value)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<RawCheckpoints, A::Error> {
                skip_seq(seq).map(RawCheckpoints::Other)
            }
        }

        deserializer.deserialize_any(CheckpointsVisitor)
    }
}

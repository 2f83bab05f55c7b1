//! Spending limits: the agent file's `budget` (tokens, US dollars, wall time) and `pricing`,
//! pinned in the spec as [`Budget`], and the amounts [`Usd`] they are written in.
//!
//! The state machine (`toren-agent`) checks a run's spending, folded from its log, against
//! the limits before each model call; a run that reached one pauses (`budget_reached`,
//! status `awaiting_budget`) until someone raises it (`budget_raised`). Dollars are priced
//! from [`Pricing`]: the agent file's, else the table of known models
//! ([`crate::known_pricing`]).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Usage;

/// An amount of US dollars, kept as whole millionths (micro-dollars) so that sums are exact
/// and specs compare; written as a decimal number of dollars (`5.0`, `0.25`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Usd(pub u64);

impl Usd {
    pub const ZERO: Self = Self(0);
    /// Micro-dollars in a dollar.
    pub const MICROS: u64 = 1_000_000;

    /// The amount nearest `dollars` (negative and not-a-number: `None`).
    pub fn from_dollars(dollars: f64) -> Option<Self> {
        let micros = (dollars * Self::MICROS as f64).round();
        (micros.is_finite() && micros >= 0.0 && micros <= u64::MAX as f64)
            .then_some(Self(micros as u64))
    }

    /// As dollars, for display and the wire.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / Self::MICROS as f64
    }

    pub fn saturating_add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for Usd {
    /// `$1.23`; amounts under a cent keep four decimals (`$0.0042`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 != 0 && self.0 < 10_000 {
            write!(f, "${:.4}", self.dollars())
        } else {
            write!(f, "${:.2}", self.dollars())
        }
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let dollars = f64::deserialize(deserializer)?;
        Self::from_dollars(dollars).ok_or_else(|| {
            serde::de::Error::custom(format!("{dollars} is not an amount of dollars"))
        })
    }
}

/// What a model's tokens cost, in US dollars per million tokens. `input` is for input
/// tokens neither read from nor written to the provider's prompt cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    pub input: Usd,
    pub output: Usd,
    /// Input tokens read from the prompt cache.
    pub cache_read: Usd,
    /// Input tokens written to the prompt cache.
    pub cache_write: Usd,
}

impl Pricing {
    /// What `usage` costs: its uncached input, cache reads, cache writes and output, each
    /// at its price (exact to the micro-dollar, rounded down once on the total).
    pub fn cost(&self, usage: &Usage) -> Usd {
        let cached = usage
            .cache_read_input_tokens
            .saturating_add(usage.cache_creation_input_tokens);
        let uncached = usage.input_tokens.saturating_sub(cached);
        let part = |tokens: u64, price: Usd| u128::from(tokens) * u128::from(price.0);
        let micros_times_million = part(uncached, self.input)
            + part(usage.cache_read_input_tokens, self.cache_read)
            + part(usage.cache_creation_input_tokens, self.cache_write)
            + part(usage.output_tokens, self.output);
        Usd(u64::try_from(micros_times_million / 1_000_000).unwrap_or(u64::MAX))
    }
}

/// The limits of a run's spending; `None` is no limit. Tokens count every input token
/// (cached or not) and every output token of the run's model answers; wall time is the
/// run's active time (see `toren-agent`'s budget module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BudgetLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<Usd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_secs: Option<u64>,
}

impl BudgetLimits {
    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.tokens.is_some() || self.usd.is_some() || self.wall_secs.is_some()
    }

    /// These limits raised by `raise` (a limit that is not set stays unset).
    pub fn raised(self, raise: &BudgetRaised) -> Self {
        Self {
            tokens: self.tokens.map(|t| t.saturating_add(raise.tokens)),
            usd: self.usd.map(|u| u.saturating_add(raise.usd)),
            wall_secs: self.wall_secs.map(|w| w.saturating_add(raise.wall_secs)),
        }
    }
}

/// The agent file's `budget` and `pricing`, pinned in the spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default)]
    pub limits: BudgetLimits,
    /// The agent file's `pricing`: overrides the table of known models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Pricing>,
}

/// Which limit a run reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    Tokens,
    Usd,
    Wall,
}

impl fmt::Display for BudgetLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tokens => "tokens",
            Self::Usd => "usd",
            Self::Wall => "wall",
        })
    }
}

/// What a run has spent so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spending {
    /// Input and output tokens of its model answers.
    #[serde(default)]
    pub tokens: u64,
    /// Their price; `None` when the model's prices are unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<Usd>,
    /// Its active time, in whole seconds.
    #[serde(default)]
    pub wall_secs: u64,
}

/// Since v1 (added later). The run reached a limit of its budget before a model call and
/// waits for someone to raise it; nothing was sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetReached {
    /// The limits reached (one or more).
    pub reached: Vec<BudgetLimit>,
    pub spent: Spending,
    /// The limits in force: the pinned budget with every raise so far.
    pub limits: BudgetLimits,
}

/// Since v1 (added later). A person raised the budget of a run that waits for it; the
/// amounts are added to the limits in force (a limit the run does not have stays unset).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRaised {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero_usd")]
    pub usd: Usd,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wall_secs: u64,
    /// Who raised it (a user name).
    pub by: String,
    /// Through which front door (`cli`, `api`, `web`, …).
    pub via: String,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn is_zero_usd(value: &Usd) -> bool {
    value.0 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_round_trip_as_decimal_numbers() {
        let five = Usd::from_dollars(5.0).unwrap();
        assert_eq!(five, Usd(5_000_000));
        assert_eq!(serde_json::to_string(&five).unwrap(), "5.0");
        assert_eq!(serde_json::from_str::<Usd>("0.125").unwrap(), Usd(125_000));
        assert!(serde_json::from_str::<Usd>("-1").is_err());
        assert_eq!(five.to_string(), "$5.00");
        assert_eq!(Usd(4_200).to_string(), "$0.0042");
        assert_eq!(Usd::ZERO.to_string(), "$0.00");
    }

    #[test]
    fn cost_prices_each_kind_of_token_once() {
        // Sonnet's prices: $3 in, $15 out, $0.30 cache read, $3.75 cache write.
        let pricing = Pricing {
            input: Usd(3_000_000),
            output: Usd(15_000_000),
            cache_read: Usd(300_000),
            cache_write: Usd(3_750_000),
        };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_input_tokens: 500_000,
            cache_creation_input_tokens: 100_000,
        };
        // 400k uncached ($1.20) + 500k read ($0.15) + 100k written ($0.375) + 100k out ($1.50).
        assert_eq!(pricing.cost(&usage), Usd(3_225_000));
        assert_eq!(pricing.cost(&Usage::default()), Usd::ZERO);
    }

    #[test]
    fn a_raise_adds_to_the_limits_that_are_set() {
        let limits = BudgetLimits {
            tokens: Some(1_000),
            usd: None,
            wall_secs: Some(60),
        };
        let raise = BudgetRaised {
            tokens: 500,
            usd: Usd(2_000_000),
            wall_secs: 30,
            by: "ana".into(),
            via: "cli".into(),
        };
        assert_eq!(
            limits.raised(&raise),
            BudgetLimits {
                tokens: Some(1_500),
                usd: None,
                wall_secs: Some(90),
            }
        );
    }
}

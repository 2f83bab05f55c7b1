//! `budget` and `pricing` of an agent file: the limits of a run's spending (`tokens`,
//! `usd`, `wall`) and what the model's tokens cost, checked into a
//! [`toren_protocol::Budget`] pinned in the spec. Wall time is written like Toren's other
//! durations (`90m`, `2h`, jiff's friendly format). Prices are US dollars per million
//! tokens; `cache_read` and `cache_write` default to `input`. A `usd` limit needs prices:
//! the file's `pricing`, else the table of known models (`toren_protocol::known_pricing`);
//! for a model the table does not know, the file must give them.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use toren_protocol::{Budget, BudgetLimits, Pricing, Usd};

use crate::agent_file::{Checker, Problems};
use crate::error::Result;
use crate::raw::{Found, RawCount, RawSize};

/// The most dollars a limit or a price may be: a typo guard, not a policy.
pub const MAX_USD: f64 = 1_000_000.0;

const BUDGET_HELP: &str = "e.g. `budget: {tokens: 2000000, usd: 5.00, wall: 2h}`; leave a key \
                           out for no limit of that kind";
const PRICING_HELP: &str = "US dollars per million tokens, e.g. `pricing: {input: 3.0, output: \
                            15.0, cache_read: 0.3, cache_write: 3.75}` (`cache_read` and \
                            `cache_write` default to `input`)";

/// `budget:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    #[serde(default)]
    tokens: Option<Spanned<RawCount>>,
    #[serde(default)]
    usd: Option<Spanned<RawMoney>>,
    #[serde(default)]
    wall: Option<Spanned<RawSize>>,
}

/// `pricing:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPricing {
    #[serde(default)]
    input: Option<Spanned<RawMoney>>,
    #[serde(default)]
    output: Option<Spanned<RawMoney>>,
    #[serde(default)]
    cache_read: Option<Spanned<RawMoney>>,
    #[serde(default)]
    cache_write: Option<Spanned<RawMoney>>,
}

/// An amount of dollars: a number, or something else to report.
#[derive(Debug)]
pub(crate) enum RawMoney {
    Number(f64),
    Other(Found),
}

impl<'de> Deserialize<'de> for RawMoney {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MoneyVisitor;

        impl<'de> Visitor<'de> for MoneyVisitor {
            type Value = RawMoney;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an amount of US dollars such as `5.00`")
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawMoney, E> {
                Ok(RawMoney::Number(value))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawMoney, E> {
                Ok(RawMoney::Number(value as f64))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawMoney, E> {
                Ok(RawMoney::Number(value as f64))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<RawMoney, E> {
                Ok(RawMoney::Other(Found(format!("`{value}`"))))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawMoney, E> {
                Ok(RawMoney::Other(Found(format!("the string {value:?}"))))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawMoney, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawMoney::Other(Found("a list".to_owned())))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawMoney, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(RawMoney::Other(Found("a mapping".to_owned())))
            }
        }

        deserializer.deserialize_any(MoneyVisitor)
    }
}

impl Checker<'_> {
    /// The spec's budget from the file's `budget` and `pricing` (either may be absent);
    /// `None` when both are.
    pub(crate) fn budget(
        &self,
        budget: Option<Spanned<RawBudget>>,
        pricing: Option<Spanned<RawPricing>>,
        model: &str,
    ) -> Result<Option<Budget>> {
        if budget.is_none() && pricing.is_none() {
            return Ok(None);
        }
        // Each key is checked even when another is wrong, so all are reported at once.
        let mut problems = Problems::default();
        let priced = pricing.is_some();
        let pricing = pricing.and_then(|pricing| problems.keep(self.pricing(pricing)));
        let mut limits = BudgetLimits::default();
        if let Some(budget) = budget {
            let RawBudget { tokens, usd, wall } = budget.value;
            if tokens.is_none() && usd.is_none() && wall.is_none() {
                problems.add(self.error_with_help(
                    budget.referenced,
                    "`budget` sets no limit",
                    BUDGET_HELP,
                ));
            }
            if let Some(tokens) = tokens {
                limits.tokens = problems.keep(self.tokens(tokens));
            }
            if let Some(usd) = usd {
                let at = usd.referenced;
                limits.usd = problems.keep(self.money("budget.usd", usd, BUDGET_HELP));
                // Prices written but wrong are reported at `pricing`; not again here.
                if !priced && toren_protocol::known_pricing(model).is_none() {
                    problems.add(self.error_with_help(
                        at,
                        format!(
                            "a `usd` budget needs the model's prices, and Toren knows none \
                             for `{model}`"
                        ),
                        format!("give them in the agent file: {PRICING_HELP}"),
                    ));
                }
            }
            if let Some(wall) = wall {
                limits.wall_secs = problems.keep(self.wall(wall));
            }
        }
        problems.into_result(Some(Budget { limits, pricing }))
    }

    fn pricing(&self, pricing: Spanned<RawPricing>) -> Result<Pricing> {
        let RawPricing {
            input,
            output,
            cache_read,
            cache_write,
        } = pricing.value;
        let (Some(input), Some(output)) = (input, output) else {
            return Err(self.error_with_help(
                pricing.referenced,
                "`pricing` needs at least `input` and `output`",
                PRICING_HELP,
            ));
        };
        let mut problems = Problems::default();
        let mut price = |key: &str, money: Spanned<RawMoney>| {
            problems
                .keep(self.money(key, money, PRICING_HELP))
                .unwrap_or_default()
        };
        let input = price("pricing.input", input);
        let output = price("pricing.output", output);
        let cache_read = cache_read.map_or(input, |money| price("pricing.cache_read", money));
        let cache_write = cache_write.map_or(input, |money| price("pricing.cache_write", money));
        problems.into_result(Pricing {
            input,
            output,
            cache_read,
            cache_write,
        })
    }

    fn money(&self, key: &str, money: Spanned<RawMoney>, help: &str) -> Result<Usd> {
        let message = match money.value {
            RawMoney::Number(value) if (0.0..=MAX_USD).contains(&value) => {
                if let Some(usd) = Usd::from_dollars(value) {
                    return Ok(usd);
                }
                format!("`{key}` must be an amount of US dollars, found {value}")
            }
            RawMoney::Number(value) if value > MAX_USD => {
                format!("`{key}` is {value}, over the limit of {MAX_USD} dollars")
            }
            RawMoney::Number(value) => {
                format!("`{key}` must not be negative, found {value}")
            }
            RawMoney::Other(found) => {
                format!("`{key}` must be an amount of US dollars such as `5.00`, found {found}")
            }
        };
        Err(self.error_with_help(money.referenced, message, help))
    }

    fn tokens(&self, tokens: Spanned<RawCount>) -> Result<u64> {
        let message = match tokens.value {
            RawCount::Integer(value) => match u64::try_from(value) {
                Ok(n) if n > 0 => return Ok(n),
                _ => format!("`budget.tokens` must be a positive integer, found {value}"),
            },
            RawCount::Other(found) => {
                format!("`budget.tokens` must be a positive integer, found {found}")
            }
        };
        Err(self.error_with_help(tokens.referenced, message, BUDGET_HELP))
    }

    fn wall(&self, wall: Spanned<RawSize>) -> Result<u64> {
        const HELP: &str = "a duration written with its unit (`s`, `m` or `h`), e.g. `wall: 2h` \
                            or `wall: 90m`";
        let message = match wall.value {
            RawSize::Text(text) => match text.trim().parse::<jiff::SignedDuration>() {
                Ok(d) if d.as_secs() >= 1 => {
                    // Whole seconds, a fraction rounded up.
                    let secs = d.as_secs() + i64::from(d.subsec_nanos() > 0);
                    return Ok(u64::try_from(secs).unwrap_or(u64::MAX));
                }
                Ok(_) => format!("`budget.wall` must be at least one second, found `{text}`"),
                Err(_) => format!("`budget.wall` must be a duration, found `{text}`"),
            },
            RawSize::Integer(value) => {
                format!("`budget.wall` needs a unit, found the number {value}")
            }
            RawSize::Other(found) => format!("`budget.wall` must be a duration, found {found}"),
        };
        Err(self.error_with_help(wall.referenced, message, HELP))
    }
}

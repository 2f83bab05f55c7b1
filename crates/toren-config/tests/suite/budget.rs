//! `budget` and `pricing` of an agent file: parsed into the pinned `Budget`, and every
//! mistake reported at the line and column of its value.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_config::{Position, parse_agent};
use toren_protocol::{Budget, BudgetLimits, Pricing, Usd};

use super::common::diagnostic;

fn budget_of(yaml: &str) -> Option<Budget> {
    parse_agent(Path::new("agents/x.yaml"), yaml)
        .unwrap_or_else(|e| panic!("{e}"))
        .budget
}

#[test]
fn limits_and_prices_are_pinned_as_written() {
    let yaml = "name: a\nmodel: anthropic/claude-sonnet-4-5\n\
                budget: {tokens: 2000000, usd: 5.00, wall: 2h}\n";
    assert_eq!(
        budget_of(yaml),
        Some(Budget {
            limits: BudgetLimits {
                tokens: Some(2_000_000),
                usd: Some(Usd(5_000_000)),
                wall_secs: Some(7_200),
            },
            // The table's prices are read when spending is priced, not pinned.
            pricing: None,
        })
    );
    let yaml = "name: a\nmodel: openai/new-model\nbudget:\n  usd: 2\n  wall: 90m\n\
                pricing: {input: 1.5, output: 6}\n";
    assert_eq!(
        budget_of(yaml),
        Some(Budget {
            limits: BudgetLimits {
                tokens: None,
                usd: Some(Usd(2_000_000)),
                wall_secs: Some(5_400),
            },
            // The cache prices default to the input price.
            pricing: Some(Pricing {
                input: Usd(1_500_000),
                output: Usd(6_000_000),
                cache_read: Usd(1_500_000),
                cache_write: Usd(1_500_000),
            }),
        })
    );
    assert_eq!(budget_of("name: a\nmodel: anthropic/m\n"), None);
}

#[test]
fn a_usd_budget_for_a_model_of_unknown_prices_needs_pricing() {
    let d = diagnostic("name: a\nmodel: openai/new-model\nbudget: {usd: 5}\n");
    assert_eq!(
        d.position,
        Some(Position {
            line: 3,
            column: 15
        })
    );
    assert!(
        d.message
            .contains("Toren knows none for `openai/new-model`"),
        "{d}"
    );
    assert!(
        d.help.as_deref().unwrap_or_default().contains("pricing:"),
        "{d}"
    );
    // A token budget needs no prices.
    assert!(budget_of("name: a\nmodel: openai/new-model\nbudget: {tokens: 10}\n").is_some());
}

#[test]
fn mistakes_point_at_their_value() {
    let cases = [
        (
            "budget: {tokens: 0}\n",
            3,
            18,
            "`budget.tokens` must be a positive integer",
        ),
        (
            "budget: {tokens: lots}\n",
            3,
            18,
            "found the string \"lots\"",
        ),
        (
            "budget: {usd: -1}\n",
            3,
            15,
            "`budget.usd` must not be negative",
        ),
        (
            "budget: {usd: \"5\"}\n",
            3,
            15,
            "`budget.usd` must be an amount of US dollars",
        ),
        (
            "budget: {wall: 7200}\n",
            3,
            16,
            "`budget.wall` needs a unit",
        ),
        (
            "budget: {wall: soon}\n",
            3,
            16,
            "`budget.wall` must be a duration",
        ),
        ("budget: {}\n", 3, 9, "`budget` sets no limit"),
        (
            "pricing: {input: 3}\n",
            3,
            10,
            "`pricing` needs at least `input` and `output`",
        ),
        (
            "pricing: {input: 3, output: x}\n",
            3,
            29,
            "`pricing.output` must be an amount",
        ),
    ];
    for (tail, line, column, message) in cases {
        let d = diagnostic(&format!(
            "name: a\nmodel: anthropic/claude-sonnet-4-5\n{tail}"
        ));
        assert_eq!(
            (tail, d.position),
            (tail, Some(Position { line, column })),
            "{d}"
        );
        assert!(d.message.contains(message), "{tail}: {d}");
    }
    let d = diagnostic("name: a\nmodel: anthropic/m\nbudget: {tokns: 5}\n");
    assert!(d.to_string().contains("tokns"), "{d}");
}

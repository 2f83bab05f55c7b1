//! Valid agent specs and their renderings as agent files, in every YAML style that must
//! parse back to the same spec; `hostile` mutates these files.

use proptest::prelude::*;
use proptest::sample::select;
use toren_config::{MAX_CPU_SECS, MAX_PIDS, MIN_MEMORY, MIN_PIDS, PROVIDERS, env_vars};
use toren_protocol::{AgentSpec, ApprovalPolicy, ResourceLimits, SandboxSpec};

fn non_blank() -> impl Strategy<Value = String> {
    any::<String>().prop_filter("non-blank", |s| !s.trim().is_empty())
}

/// A non-blank string without control characters (images may not hold them).
fn printable() -> impl Strategy<Value = String> {
    non_blank().prop_filter("printable", |s| !s.contains(char::is_control))
}

pub(super) fn valid_spec() -> impl Strategy<Value = AgentSpec> {
    let model = (select(PROVIDERS), "[^\\s\\p{Cc}]{1,24}").prop_map(|(p, id)| format!("{p}/{id}"));
    let env = prop::collection::btree_set("[A-Za-z_][A-Za-z0-9_]{0,16}", 0..5).prop_map(|names| {
        let granted = names.into_iter().filter(|n| !env_vars::is_secret(n));
        granted.collect::<Vec<_>>()
    });
    let sandbox = (
        prop::option::of(printable()),
        any::<bool>(),
        select(&[ApprovalPolicy::Always, ApprovalPolicy::Never][..]),
        env,
        prop_oneof![Just(ResourceLimits::default()), limits()],
    )
        .prop_map(|(image, network, approval, env, limits)| SandboxSpec {
            checkpoints: Default::default(),
            image,
            network,
            egress: None,
            approval,
            env,
            limits,
            on_interrupt: Default::default(),
        });
    (
        "[A-Za-z0-9][A-Za-z0-9_-]{0,63}",
        model,
        prop::option::of(non_blank()),
        prop::option::of(sandbox),
        prop_oneof![Just(AgentSpec::DEFAULT_MAX_TURNS), 1..=u32::MAX],
    )
        .prop_map(
            |(name, model, instructions, sandbox, max_turns)| AgentSpec {
                budget: None,
                name,
                model,
                instructions,
                sandbox,
                max_turns,
                context_tokens: None,
                source: None,
            },
        )
}

/// Size units of `sandbox.limits.memory`, as written and in bytes.
const UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("gi", 1 << 30),
    ("Mi", 1 << 20),
    ("KB", 1_000),
    ("mb", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

fn limits() -> impl Strategy<Value = ResourceLimits> {
    let memory = prop_oneof![
        MIN_MEMORY..=u64::MAX,
        select(UNITS).prop_flat_map(|(_, scale)| {
            (MIN_MEMORY.div_ceil(scale)..=u64::MAX / scale).prop_map(move |n| n * scale)
        }),
    ];
    (memory, MIN_PIDS..=MAX_PIDS, 1..=MAX_CPU_SECS).prop_map(|(memory, pids, cpu_secs)| {
        ResourceLimits {
            memory,
            pids,
            cpu_secs,
        }
    })
}

/// Style choices for [`render`], drawn from bytes proptest generates (and shrinks to 0,
/// the plainest style).
pub(super) struct Dice {
    bytes: Vec<u8>,
    next: usize,
}

impl Dice {
    pub(super) fn new(bytes: Vec<u8>) -> Self {
        Self { bytes, next: 0 }
    }

    /// A number below `n`.
    fn roll(&mut self, n: u8) -> u8 {
        let byte = self.bytes.get(self.next % self.bytes.len().max(1)).copied();
        self.next += 1;
        byte.unwrap_or(0) % n
    }
}

/// `spec` as an agent file: keys in any order, scalars plain, single- or double-quoted or
/// literal blocks, the sandbox in block or flow style or as `true`/`false`, defaults
/// written or left out, LF or CRLF, with or without a BOM, `---`, `...` and comments.
pub(super) fn render(spec: &AgentSpec, dice: &mut Dice) -> String {
    let mut entries: Vec<String> = Vec::new();
    entries.push(format!("name: {}", scalar_text(&spec.name, true, dice)));
    entries.push(format!("model: {}", scalar_text(&spec.model, true, dice)));
    if let Some(text) = &spec.instructions {
        entries.push(format!("instructions: {}", scalar_text(text, true, dice)));
    }
    match &spec.sandbox {
        None => match dice.roll(3) {
            0 => {}
            1 => entries.push("sandbox: false".to_owned()),
            _ => entries.push("sandbox:".to_owned()),
        },
        Some(sandbox) if *sandbox == SandboxSpec::default() && dice.roll(2) == 0 => {
            entries.push("sandbox: true".to_owned());
        }
        Some(sandbox) => entries.push(render_sandbox(sandbox, dice)),
    }
    if spec.max_turns != AgentSpec::DEFAULT_MAX_TURNS || dice.roll(2) == 1 {
        entries.push(format!("max_turns: {}", spec.max_turns));
    }
    // A rotation of the keys: any key may come first.
    let first = usize::from(dice.roll(5)) % entries.len();
    entries.rotate_left(first);
    let mut text = String::new();
    if dice.roll(4) == 1 {
        text.push('\u{feff}');
    }
    if dice.roll(3) == 1 {
        text.push_str("---\n");
    }
    for entry in entries {
        if dice.roll(5) == 1 {
            text.push_str("# a comment: [not, yaml]\n");
        }
        text.push_str(&entry);
        text.push('\n');
    }
    if dice.roll(4) == 1 {
        text.push_str("...\n");
    }
    if dice.roll(3) == 1 {
        text = text.replace('\n', "\r\n");
    }
    text
}

fn render_sandbox(sandbox: &SandboxSpec, dice: &mut Dice) -> String {
    let mut fields: Vec<(&str, String)> = Vec::new();
    if let Some(image) = &sandbox.image {
        fields.push(("image", scalar_text(image, false, dice)));
    }
    if sandbox.network || dice.roll(2) == 1 {
        fields.push(("network", sandbox.network.to_string()));
    }
    if sandbox.approval != ApprovalPolicy::default() || dice.roll(2) == 1 {
        fields.push(("approval", sandbox.approval.to_string()));
    }
    let names: Vec<String> = sandbox
        .env
        .iter()
        .map(|n| scalar_text(n, false, dice))
        .collect();
    let flow_env = dice.roll(2) == 0 || names.is_empty();
    if !names.is_empty() || dice.roll(2) == 1 {
        fields.push(("env", format!("[{}]", names.join(", "))));
    }
    if sandbox.limits != ResourceLimits::default() || dice.roll(2) == 1 {
        fields.push(("limits", render_limits(sandbox.limits, dice)));
    }
    if dice.roll(2) == 0 {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        return format!("sandbox: {{{}}}", fields.join(", "));
    }
    let pad = " ".repeat(usize::from(dice.roll(4)) + 1);
    let mut text = "sandbox:".to_owned();
    if fields.is_empty() {
        text.push_str(" {}");
    }
    for (key, value) in fields {
        if key == "env" && !flow_env {
            text.push_str(&format!("\n{pad}env:"));
            for name in &names {
                text.push_str(&format!("\n{pad}  - {name}"));
            }
        } else {
            text.push_str(&format!("\n{pad}{key}: {value}"));
        }
    }
    text
}

/// `limits` as a flow mapping, each default left out or written.
fn render_limits(limits: ResourceLimits, dice: &mut Dice) -> String {
    let defaults = ResourceLimits::default();
    let mut fields = Vec::new();
    if limits.memory != defaults.memory || dice.roll(2) == 1 {
        let units: Vec<&(&str, u64)> = UNITS
            .iter()
            .filter(|(_, scale)| limits.memory.is_multiple_of(*scale))
            .collect();
        let memory = match units.get(usize::from(dice.roll(8))) {
            Some((unit, scale)) => {
                let space = if dice.roll(2) == 1 { " " } else { "" };
                scalar_text(
                    &format!("{}{space}{unit}", limits.memory / scale),
                    false,
                    dice,
                )
            }
            None => limits.memory.to_string(),
        };
        fields.push(format!("memory: {memory}"));
    }
    if limits.pids != defaults.pids || dice.roll(2) == 1 {
        fields.push(format!("pids: {}", limits.pids));
    }
    if limits.cpu_secs != defaults.cpu_secs || dice.roll(2) == 1 {
        fields.push(format!("cpu_secs: {}", limits.cpu_secs));
    }
    format!("{{{}}}", fields.join(", "))
}

/// `value` as a YAML scalar in a style the dice pick among those that can hold it; a
/// literal block only where `block` says the scalar is a top-level value.
fn scalar_text(value: &str, block: bool, dice: &mut Dice) -> String {
    match dice.roll(4) {
        1 if is_plain_safe(value) => value.to_owned(),
        2 if !value.chars().any(needs_escape) => format!("'{}'", value.replace('\'', "''")),
        3 if block && is_block_safe(value) => {
            let body: Vec<String> = value.split('\n').map(|l| format!("  {l}")).collect();
            format!("|-\n{}", body.join("\n"))
        }
        _ => double_quoted(value),
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
}

/// A plain scalar that YAML reads back as this exact string.
fn is_plain_safe(value: &str) -> bool {
    value.starts_with(|c: char| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "null" | "true" | "false"
        )
}

/// Text a `|-` block holds exactly: lines without escapes, leading blanks or trailing
/// blank lines.
fn is_block_safe(value: &str) -> bool {
    value.split('\n').all(|line| {
        !line.is_empty()
            && !line.starts_with([' ', '\t'])
            && !line.ends_with([' ', '\t'])
            && !line.chars().any(needs_escape)
    })
}

pub(super) fn double_quoted(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

//! Generators of hostile agent-file text for the fuzz properties: soups of YAML-significant
//! tokens, and valid files (from `valid`) mutated into wrong types, unknown and duplicate
//! keys, deep nesting, anchors and aliases, tabs and second documents.

use proptest::prelude::*;
use proptest::sample::select;
use toren_protocol::AgentSpec;

use super::valid::{double_quoted, valid_spec};

/// The keys of an agent file, at every level.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    "name", "model", "instructions", "sandbox", "max_turns", "image", "network", "approval",
    "env", "limits", "memory", "pids", "cpu_secs",
];

/// Fragments that mean something to a YAML parser or to the agent-file checks.
#[rustfmt::skip]
const TOKENS: &[&str] = &[
    "name", "model", "instructions", "sandbox", "max_turns", "image", "network", "approval",
    "env", "limits", "memory", "pids", "cpu_secs", "2GiB", "1.5GiB", "2G", "16MiB",
    ":", ": ", " ", "  ", "\n", "\r\n", "\r", "\t", "- ", "-", "[", "]", "{", "}", ",",
    "&a ", "*a", "&b ", "*b", "<<: ", "!!str ", "!!int ", "!!binary ", "!tag ", "---", "...",
    "# c", "'", "\"", "\\", "|", "|-", ">+", "? ", "%YAML 1.2\n", "%TAG ! tag:x,2000:\n",
    "anthropic/claude", "openai/", "scripted/turns.yaml", "true", "yes", "null", "~", "0",
    "-1", "0x1F", "0o17", "1e400", ".inf", ".nan", "99999999999999999999999999999999999999999",
    "\u{feff}", "\u{85}", "\u{2028}", "é", "名前", "🦀", "\u{202e}", "\u{0}", "\u{7f}",
    "ANTHROPIC_API_KEY", "MY_VAR", "1BAD",
];

pub(super) fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(select(TOKENS), 0..60).prop_map(|tokens| tokens.concat())
}

/// A YAML value for the mutation generator, rendered in flow or block style.
#[derive(Clone, Debug)]
enum Node {
    /// Already YAML source text: a plain, quoted or numeric scalar, or raw junk.
    Scalar(String),
    Seq(Vec<Node>, bool),
    Map(Vec<(String, Node)>, bool),
    Anchor(String, Box<Node>),
    Alias(String),
}

fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        select(TOKENS).prop_map(str::to_owned),
        "[A-Za-z0-9_/.-]{0,12}",
        any::<String>().prop_map(|s| double_quoted(&s)),
        any::<String>(),
        "-?[0-9]{15,60}",
        any::<f64>().prop_map(|f| f.to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        (1usize..200).prop_map(|depth| format!("{}x{}", "[".repeat(depth), "]".repeat(depth))),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(KEYS).prop_map(str::to_owned),
        1 => "[a-z_]{1,10}",
        1 => any::<String>().prop_map(|s| double_quoted(&s)),
        1 => Just("<<".to_owned()),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        4 => scalar().prop_map(Node::Scalar),
        1 => select(&["a", "b"][..]).prop_map(|name| Node::Alias(name.to_owned())),
    ];
    leaf.prop_recursive(6, 48, 5, |inner| {
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..5), any::<bool>())
                .prop_map(|(items, flow)| Node::Seq(items, flow)),
            (
                prop::collection::vec((key(), inner.clone()), 0..5),
                any::<bool>()
            )
                .prop_map(|(entries, flow)| Node::Map(entries, flow)),
            (select(&["a", "b"][..]), inner)
                .prop_map(|(name, value)| Node::Anchor(name.to_owned(), Box::new(value))),
        ]
    })
}

/// One change to the top-level entries of a valid file.
#[derive(Clone, Debug)]
enum Mutation {
    Replace(usize, Node),
    Insert(usize, String, Node),
    Remove(usize),
    Duplicate(usize),
    SandboxEntry(String, Node),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), node()).prop_map(|(at, value)| Mutation::Replace(at, value)),
        (any::<usize>(), key(), node()).prop_map(|(at, k, v)| Mutation::Insert(at, k, v)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Duplicate),
        (key(), node()).prop_map(|(k, v)| Mutation::SandboxEntry(k, v)),
    ]
}

/// A valid file changed by one to three mutations; now and then indented with tabs or
/// followed by a second document.
pub(super) fn mutated_file() -> impl Strategy<Value = String> {
    (
        valid_spec(),
        prop::collection::vec(mutation(), 1..4),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.1, node()),
    )
        .prop_map(|(spec, mutations, tabs, second)| {
            let mut entries = entries_of(&spec);
            for mutation in mutations {
                apply(&mut entries, mutation);
            }
            let mut out = String::new();
            render_entries(&mut out, &entries, 0);
            if tabs {
                out = out.replace("  ", "\t");
            }
            if let Some(second) = second {
                out.push_str("---\n");
                render_entries(&mut out, &[("name".to_owned(), second)], 0);
            }
            out
        })
}

/// The top-level entries of a file describing `spec`.
fn entries_of(spec: &AgentSpec) -> Vec<(String, Node)> {
    let text = |value: &str| Node::Scalar(double_quoted(value));
    let mut entries = vec![
        ("name".to_owned(), text(&spec.name)),
        ("model".to_owned(), text(&spec.model)),
        (
            "max_turns".to_owned(),
            Node::Scalar(spec.max_turns.to_string()),
        ),
    ];
    if let Some(instructions) = &spec.instructions {
        entries.push(("instructions".to_owned(), text(instructions)));
    }
    if let Some(sandbox) = &spec.sandbox {
        let mut fields = vec![
            (
                "network".to_owned(),
                Node::Scalar(sandbox.network.to_string()),
            ),
            (
                "approval".to_owned(),
                Node::Scalar(sandbox.approval.to_string()),
            ),
            (
                "env".to_owned(),
                Node::Seq(sandbox.env.iter().map(|n| text(n)).collect(), false),
            ),
        ];
        if let Some(image) = &sandbox.image {
            fields.push(("image".to_owned(), text(image)));
        }
        let limits = sandbox.limits;
        let limits = vec![
            ("memory".to_owned(), Node::Scalar(limits.memory.to_string())),
            ("pids".to_owned(), Node::Scalar(limits.pids.to_string())),
            (
                "cpu_secs".to_owned(),
                Node::Scalar(limits.cpu_secs.to_string()),
            ),
        ];
        fields.push(("limits".to_owned(), Node::Map(limits, false)));
        entries.push(("sandbox".to_owned(), Node::Map(fields, false)));
    }
    entries
}

fn apply(entries: &mut Vec<(String, Node)>, mutation: Mutation) {
    let len = entries.len().max(1);
    match mutation {
        Mutation::Replace(at, value) => match entries.get_mut(at % len) {
            Some(entry) => entry.1 = value,
            None => entries.push(("name".to_owned(), value)),
        },
        Mutation::Insert(at, key, value) => entries.insert(at % (entries.len() + 1), (key, value)),
        Mutation::Remove(at) => {
            if !entries.is_empty() {
                entries.remove(at % len);
            }
        }
        Mutation::Duplicate(at) => {
            if let Some(entry) = entries.get(at % len).cloned() {
                entries.push(entry);
            }
        }
        Mutation::SandboxEntry(key, value) => {
            match entries.iter_mut().find(|(k, _)| k == "sandbox") {
                Some((_, Node::Map(fields, _))) => fields.push((key, value)),
                Some(entry) => entry.1 = Node::Map(vec![(key, value)], false),
                None => entries.push(("sandbox".to_owned(), Node::Map(vec![(key, value)], false))),
            }
        }
    }
}

fn render_entries(out: &mut String, entries: &[(String, Node)], indent: usize) {
    for (key, value) in entries {
        out.push_str(&" ".repeat(indent));
        out.push_str(key);
        out.push(':');
        render_value(out, value, indent);
    }
}

/// Renders `node` after a `key:` or `-` at `indent`, ending with a line break.
fn render_value(out: &mut String, node: &Node, indent: usize) {
    match node {
        Node::Seq(items, false) if !items.is_empty() => {
            out.push('\n');
            for item in items {
                out.push_str(&" ".repeat(indent + 2));
                out.push('-');
                render_value(out, item, indent + 2);
            }
        }
        Node::Map(entries, false) if !entries.is_empty() => {
            out.push('\n');
            render_entries(out, entries, indent + 2);
        }
        Node::Anchor(name, value) if matches!(**value, Node::Seq(..) | Node::Map(..)) => {
            out.push_str(&format!(" &{name}"));
            render_value(out, value, indent);
        }
        other => {
            out.push(' ');
            out.push_str(&flow(other));
            out.push('\n');
        }
    }
}

fn flow(node: &Node) -> String {
    match node {
        Node::Scalar(text) => text.clone(),
        Node::Seq(items, _) => {
            let items: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", items.join(", "))
        }
        Node::Map(entries, _) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{k}: {}", flow(v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Node::Anchor(name, value) => format!("&{name} {}", flow(value)),
        Node::Alias(name) => format!("*{name}"),
    }
}

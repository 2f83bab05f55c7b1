//! Property tests (proptest) of workspace path resolution under attack.
//!
//! Cases run in a tree, `{outside/, sandboxes/ws/workspace, sandboxes/other_run/workspace}`
//! under padding directories, whose workspace holds symlinks of every kind (inside,
//! relative escapes, absolute to `/` and to `outside/`, chains, loops, dangling links
//! aiming outside); see `layout`. Each case makes reads, writes and `metadata` calls on
//! generated paths made of `..`, `.`, `//`, `~`, NUL, absolute prefixes, odd unicode and
//! over-long names. After every call nothing outside the workspace has changed, no read
//! returned bytes that were not written inside it, a refusal is a model-fixable error with
//! a message, and a successful write reads back. `PROPTEST_CASES` sets the cases per
//! property (256 by default); `docs/fuzzing.md` describes the long run.

mod layout;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, FileFailurePersistence};
use toren_sandbox::{EntryKind, Error, Workspace, workspace_path};

use self::layout::{CANARY, Layout};

/// Reads are limited to this many bytes; every file in the tree is smaller.
const LIMIT: u64 = 1 << 20;

fn config() -> Config {
    Config {
        // Relative to the package root, where cargo and nextest run tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/suite/proptest-regressions/fuzz_paths.txt",
        ))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_paths_never_reach_outside_the_workspace(ops in prop::collection::vec(op(), 1..8)) {
        Layout::with(|layout| -> Result<(), TestCaseError> {
            for op in &ops {
                run(layout, op)?;
                layout.check_outside_unchanged()?;
            }
            Ok(())
        })?;
    }

    #[test]
    fn paths_of_plain_names_write_and_read_back(
        names in prop::collection::vec(plain_name(), 1..6),
        separator in select(&["/", "//", "/./"][..]),
        contents in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let path = names.join(separator);
        Layout::with(|layout| {
            let written = layout.ws.write(&path, &contents);
            prop_assert!(written.is_ok(), "writing {path:?} failed: {written:?}");
            let read = layout.ws.read(&path, LIMIT).map_err(|e| e.to_string());
            prop_assert_eq!(read, Ok(contents), "reading back {:?}", path);
            layout.check_outside_unchanged()
        })?;
    }

    #[test]
    fn workspace_names_stay_one_directory_inside_the_root(raw in hostile_path(false)) {
        Layout::with(|layout| -> Result<(), TestCaseError> {
            let name = layout.expand(&raw);
            let private = layout.sandboxes.join(&name);
            let path = workspace_path(&layout.sandboxes, &name);
            let existed = std::fs::symlink_metadata(&private).is_ok();
            match Workspace::create(&layout.sandboxes, &name) {
                Ok(ws) => {
                    prop_assert_eq!(ws.path(), path.as_path());
                    for dir in [&private, &path] {
                        let meta = std::fs::symlink_metadata(dir);
                        prop_assert!(meta.is_ok_and(|m| m.is_dir()), "{dir:?} is not a real directory");
                    }
                    prop_assert!(!name.contains('/'), "{name:?} is more than one component");
                    layout.check_outside_unchanged_except(&name)?;
                    if !existed {
                        std::fs::remove_dir(&path).unwrap();
                        std::fs::remove_dir(&private).unwrap();
                    }
                }
                // Names come from the runtime (run ids), not from the model: any error will
                // do, as long as it says what is wrong.
                Err(error) => {
                    prop_assert!(!error.to_string().trim().is_empty(), "{error:?}");
                    layout.check_outside_unchanged()?;
                }
            }
            Ok(())
        })?;
    }
}

/// One call on the workspace.
#[derive(Clone, Debug)]
enum Op {
    Read(String),
    Metadata(String),
    Write(String, Vec<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        hostile_path(true).prop_map(Op::Read),
        hostile_path(true).prop_map(Op::Metadata),
        (
            hostile_path(false),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(path, bytes)| Op::Write(path, bytes)),
    ]
}

/// Runs `op` and checks what it returned.
fn run(layout: &mut Layout, op: &Op) -> Result<(), TestCaseError> {
    let ws = layout.ws.clone();
    match op {
        Op::Read(raw) => {
            let path = layout.expand(raw);
            match ws.read(&path, LIMIT) {
                Ok(bytes) => layout.check_known(&path, &bytes)?,
                Err(error) => check_refusal(&path, &error)?,
            }
        }
        Op::Metadata(raw) => {
            let path = layout.expand(raw);
            match ws.metadata(&path) {
                // What `metadata` saw must be what `read` sees: same file, same size.
                Ok(info) => match (info.kind, ws.read(&path, LIMIT)) {
                    (EntryKind::File, Ok(bytes)) => {
                        prop_assert_eq!(info.len, bytes.len() as u64, "size of {:?}", path);
                        layout.check_known(&path, &bytes)?;
                    }
                    (EntryKind::Directory, Err(Error::IsDirectory { .. }))
                    | (EntryKind::Other, Err(Error::NotAFile { .. })) => {}
                    (kind, read) => {
                        return Err(TestCaseError::fail(format!(
                            "metadata of {path:?} says {kind:?}, but reading it gave {read:?}"
                        )));
                    }
                },
                Err(error) => check_refusal(&path, &error)?,
            }
        }
        Op::Write(raw, bytes) => {
            let path = layout.expand(raw);
            match ws.write(&path, bytes) {
                Ok(()) => {
                    layout.known.push(bytes.clone());
                    let read = ws.read(&path, LIMIT).map_err(|e| e.to_string());
                    prop_assert_eq!(read, Ok(bytes.clone()), "reading back {:?}", path);
                }
                Err(error) => check_refusal(&path, &error)?,
            }
        }
    }
    Ok(())
}

/// A refusal is the model's to fix (never a host fault that would fail the run) and says
/// what is wrong.
fn check_refusal(path: &str, error: &Error) -> Result<(), TestCaseError> {
    let message = error.to_string();
    prop_assert!(
        !message.trim().is_empty(),
        "empty message for {path:?}: {error:?}"
    );
    prop_assert!(
        error.is_model_fixable(),
        "{path:?} was refused as a host fault: {error:?}"
    );
    prop_assert!(
        !message.contains(CANARY),
        "the message for {path:?} shows the canary"
    );
    Ok(())
}

// ---- Paths ------------------------------------------------------------------------------

/// Names of the workspace's own entries that stay inside it (see `layout`).
#[rustfmt::skip]
const INSIDE_NAMES: &[&str] = &[
    "file.txt", "sub", "deeper", "x.txt", "emptydir", "in_file", "in_dir", "up", "self",
    "chain_in1", "dangling_in", "loop_a", "new", "a", "fifo", "sock", "fifo_link", "sock_link",
];

/// Names of the workspace's symlinks that lead out.
#[rustfmt::skip]
const ESCAPE_NAMES: &[&str] = &[
    "esc_up", "esc_rel", "esc_canary", "esc_sibling", "esc_deep", "abs_root", "abs_outside",
    "abs_canary", "abs_in", "chain1", "dangling_rel", "dangling_abs", "dangling_dir",
];

/// Path syntax, names outside the workspace, and names no file system takes kindly.
#[rustfmt::skip]
const ODD_NAMES: &[&str] = &[
    "~", "...", " ", "outside", "canary.txt", "sandboxes", "ws", "other_run", "notes.txt",
    "workspace", "\0", "a\0b", "é", "🦀", "\u{202e}txt.exe", "\u{feff}", "\u{2028}", "\\",
    "a b", "*", "\n", "con", "%2e%2e", "..\u{2215}..",
];

/// Names only reads and `metadata` use: a write through them would, if the workspace
/// leaked, damage the host rather than the test's own tree.
const READ_ONLY_NAMES: &[&str] = &["abs_passwd", "etc", "passwd", "proc", "environ"];

#[rustfmt::skip]
const PREFIXES: &[&str] = &[
    "/", "//", "./", "../", "~/", "~", "/workspace/", "/workspace", "@TOP@/",
    "@TOP@/outside/", "@WS@/", "../ws/", "/proc/self/root/",
];

const SEPARATORS: &[&str] = &["/", "/", "/", "/", "//", "/./", "/../"];

const SUFFIXES: &[&str] = &["/", "/.", "/..", "\0"];

fn component(read_only: bool) -> impl Strategy<Value = String> {
    let escapes = if read_only {
        [ESCAPE_NAMES, READ_ONLY_NAMES].concat()
    } else {
        ESCAPE_NAMES.to_vec()
    };
    let name = |names: Vec<&'static str>| select(names).prop_map(str::to_owned);
    prop_oneof![
        6 => name(INSIDE_NAMES.to_vec()),
        5 => name(escapes),
        3 => name(vec![".", "..", ""]),
        2 => name(ODD_NAMES.to_vec()),
        1 => "[^/\0]{1,8}",
        1 => select(&[255usize, 256, 4096][..]).prop_map(|n| "x".repeat(n)),
        1 => Just("é".repeat(128)),
    ]
}

/// A path a model might send, friendly or not. `@TOP@` and `@WS@` stand for the host
/// paths of the tree and of the workspace ([`Layout::expand`]).
fn hostile_path(read_only: bool) -> impl Strategy<Value = String> {
    let structured = (
        prop_oneof![3 => Just(""), 1 => select(PREFIXES)],
        prop_oneof![
            3 => prop::collection::vec((select(SEPARATORS), component(read_only)), 1..4),
            1 => prop::collection::vec((select(SEPARATORS), component(read_only)), 0..8),
        ],
        prop_oneof![6 => Just(""), 1 => select(SUFFIXES)],
    )
        .prop_map(|(prefix, parts, suffix)| {
            let mut path = prefix.to_owned();
            for (index, (separator, name)) in parts.into_iter().enumerate() {
                if index > 0 {
                    path.push_str(separator);
                }
                path.push_str(&name);
            }
            path.push_str(suffix);
            path
        });
    // 2 to 7.5 KiB, around PATH_MAX (4096 bytes), in few directories so writes stay cheap.
    let long = (150usize..=255, 14usize..=30)
        .prop_map(|(width, depth)| format!("{}f", format!("{}/", "d".repeat(width)).repeat(depth)));
    prop_oneof![
        10 => structured,
        1 => any::<String>(),
        1 => long,
    ]
}

/// One path component that names nothing special: no `/`, NUL, `.` or `..`, at most 255
/// bytes, and not a name the layout already uses (prefix `n`).
fn plain_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "n[A-Za-z0-9_.-]{0,20}",
        "n[^/\0]{0,40}".prop_filter("at most 255 bytes", |name| name.len() <= 255),
    ]
}

//! The tree each path-fuzzing case runs in, and the snapshot that proves nothing outside
//! the workspace changed.
//!
//! `base/p/…/p/tmp` (deep padding, so that even a long run of `..` would land in the
//! test's own directories) holds `outside/` with canary files, `sandboxes/other_run/`
//! (another run's workspace, also a canary) and `sandboxes/ws/workspace`, the workspace
//! under test (in its run's private directory), full of symlinks, with a named pipe and a
//! unix socket. The snapshot records every entry under `base` except the workspace:
//! kind, mode, content, link target.
//!
//! Building the tree takes a few milliseconds of file-system work, so a test builds it
//! once and [`Layout::with`] restores the workspace between cases; a case that changed
//! anything outside the workspace has already failed, and the tree is then rebuilt.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tempfile::TempDir;
use toren_sandbox::Workspace;

/// The secret outside the workspace; no read may ever return it.
pub(crate) const CANARY: &str = "CANARY-7f3a9c-outside-the-workspace";

/// Levels of padding directories above the tree.
const PADDING: usize = 12;

/// Files inside the workspace at the start: (path, content).
const INSIDE: &[(&str, &str)] = &[
    ("file.txt", "inside: file.txt"),
    ("sub/file.txt", "inside: sub/file.txt"),
    ("sub/deeper/x.txt", "inside: sub/deeper/x.txt"),
];

/// Symlinks in the workspace: (link, target); `@TOP@` is the tree's host path.
const LINKS: &[(&str, &str)] = &[
    // Staying inside.
    ("in_file", "sub/file.txt"),
    ("in_dir", "sub"),
    ("sub/up", ".."),
    ("sub/self", "."),
    ("chain_in1", "chain_in2"),
    ("chain_in2", "in_dir"),
    ("dangling_in", "sub/created_through_link.txt"),
    ("fifo_link", "fifo"),
    ("sub/sock_link", "../sock"),
    // Relative, leading out.
    ("esc_up", ".."),
    ("esc_rel", "../../../outside"),
    ("esc_canary", "../../../outside/canary.txt"),
    ("esc_sibling", "../../other_run/workspace/notes.txt"),
    ("sub/esc_deep", "../../../../outside"),
    ("esc_deep", "sub/esc_deep"),
    ("chain1", "chain2"),
    ("chain2", "sub/chain3"),
    ("sub/chain3", "../esc_rel"),
    // Absolute.
    ("abs_root", "/"),
    ("abs_passwd", "/etc/passwd"),
    ("abs_outside", "@TOP@/outside"),
    ("abs_canary", "@TOP@/outside/canary.txt"),
    ("abs_in", "@TOP@/sandboxes/ws/workspace/file.txt"),
    // Dangling: a write that followed them would create a file outside.
    ("dangling_rel", "../../../outside/created_rel.txt"),
    ("dangling_abs", "@TOP@/outside/created_abs.txt"),
    ("dangling_dir", "../../../outside/newdir/created.txt"),
    // Loops.
    ("loop_a", "loop_b"),
    ("loop_b", "loop_a"),
];

#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Dir { mode: u32 },
    File { mode: u32, content: Vec<u8> },
    Link(PathBuf),
    Other,
}

type Snapshot = BTreeMap<PathBuf, Entry>;

pub(crate) struct Layout {
    base: TempDir,
    top: PathBuf,
    pub(crate) sandboxes: PathBuf,
    pub(crate) ws: Workspace,
    /// Every content that may legitimately be read: the initial files and all writes.
    pub(crate) known: Vec<Vec<u8>>,
    before: Snapshot,
    /// The workspace's own entries when built, relative to it.
    initial: Snapshot,
    host_root: BTreeSet<OsString>,
}

thread_local! {
    /// This thread's tree, kept between the cases of one test.
    static REUSED: RefCell<Option<Layout>> = const { RefCell::new(None) };
}

impl Layout {
    /// Runs `case` in a tree as [`Layout::new`] builds it (reused from the previous case
    /// of this thread's test when it can be restored).
    pub(crate) fn with<R>(case: impl FnOnce(&mut Layout) -> R) -> R {
        let reused = REUSED.with(|cell| cell.borrow_mut().take());
        let mut layout = reused.filter(Self::reset).unwrap_or_else(Self::new);
        layout.known = initial_contents();
        let result = case(&mut layout);
        REUSED.with(|cell| *cell.borrow_mut() = Some(layout));
        result
    }

    fn new() -> Self {
        let base = tempfile::tempdir().unwrap();
        let top = (0..PADDING)
            .fold(base.path().to_path_buf(), |dir, _| dir.join("p"))
            .join("tmp");
        let outside = top.join("outside");
        std::fs::create_dir_all(outside.join("secret")).unwrap();
        std::fs::write(outside.join("canary.txt"), CANARY).unwrap();
        std::fs::write(outside.join("secret/deep.txt"), format!("{CANARY}-deep")).unwrap();
        let sandboxes = top.join("sandboxes");
        let other = Workspace::create(&sandboxes, "other_run").unwrap();
        std::fs::write(other.path().join("notes.txt"), format!("{CANARY}-run")).unwrap();

        let ws = Workspace::create(&sandboxes, "ws").unwrap();
        for (path, content) in INSIDE {
            ws.write(path, content.as_bytes()).unwrap();
        }
        std::fs::create_dir(ws.path().join("emptydir")).unwrap();
        // Special files the agent can make: a named pipe and a bound unix socket.
        nix::unistd::mkfifo(&ws.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        drop(std::os::unix::net::UnixListener::bind(ws.path().join("sock")).unwrap());
        let top_text = top.display().to_string();
        for (link, target) in LINKS {
            symlink(target.replace("@TOP@", &top_text), ws.path().join(link)).unwrap();
        }

        let mut layout = Self {
            base,
            top,
            sandboxes,
            ws,
            known: initial_contents(),
            before: Snapshot::new(),
            initial: Snapshot::new(),
            host_root: host_root(),
        };
        layout.before = layout.snapshot(None);
        layout.initial = workspace_snapshot(layout.ws.path()).unwrap();
        layout
    }

    /// Puts the workspace back as built and forgets the writes; `false` when that is not
    /// possible because something outside the workspace changed.
    fn reset(&self) -> bool {
        if self.snapshot(None) != self.before || host_root() != self.host_root {
            return false;
        }
        let ws = self.ws.path().to_path_buf();
        // Children sort after their parents: remove in reverse, restore in order.
        let Some(now) = workspace_snapshot(&ws) else {
            return false;
        };
        for (path, entry) in now.iter().rev() {
            if self.initial.get(path) != Some(entry) {
                let full = ws.join(path);
                let _ = match entry {
                    Entry::Dir { .. } => std::fs::remove_dir_all(&full),
                    _ => std::fs::remove_file(&full),
                };
            }
        }
        for (path, entry) in &self.initial {
            let full = ws.join(path);
            if std::fs::symlink_metadata(&full).is_ok() {
                continue;
            }
            let _ = match entry {
                Entry::Dir { .. } => std::fs::create_dir(&full),
                Entry::File { content, .. } => std::fs::write(&full, content),
                Entry::Link(target) => symlink(target, &full),
                Entry::Other => Ok(()),
            };
        }
        workspace_snapshot(&ws).as_ref() == Some(&self.initial)
    }

    /// `raw` with `@TOP@` and `@WS@` replaced by the host paths of the tree and workspace.
    pub(crate) fn expand(&self, raw: &str) -> String {
        raw.replace("@TOP@", &self.top.display().to_string())
            .replace("@WS@", &self.ws.path().display().to_string())
    }

    /// `bytes`, read from `path`, were written inside the workspace.
    pub(crate) fn check_known(&self, path: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
        let canary = bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes());
        prop_assert!(!canary, "reading {path:?} returned the canary");
        prop_assert!(
            self.known.iter().any(|known| known == bytes),
            "reading {path:?} returned bytes never written in the workspace: {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        );
        Ok(())
    }

    /// Nothing under the test's directory but the workspace, and nothing in the host's `/`,
    /// differs from when the tree was built.
    pub(crate) fn check_outside_unchanged(&self) -> Result<(), TestCaseError> {
        self.compare(&self.before, &self.snapshot(None))
    }

    /// As [`Self::check_outside_unchanged`], ignoring the workspace directory `name` in the
    /// sandbox root.
    pub(crate) fn check_outside_unchanged_except(&self, name: &str) -> Result<(), TestCaseError> {
        let created = self.sandboxes.join(name);
        let mut before = self.before.clone();
        let skipped = created.strip_prefix(self.base.path()).ok();
        before.retain(|path, _| skipped.is_none_or(|skip| !path.starts_with(skip)));
        self.compare(&before, &self.snapshot(Some(&created)))
    }

    fn compare(&self, before: &Snapshot, after: &Snapshot) -> Result<(), TestCaseError> {
        let changed: BTreeSet<&PathBuf> = before
            .keys()
            .chain(after.keys())
            .filter(|path| before.get(*path) != after.get(*path))
            .collect();
        prop_assert!(
            changed.is_empty(),
            "changed outside the workspace: {changed:?}"
        );
        let root = host_root();
        prop_assert!(
            root == self.host_root,
            "the host's `/` changed: {:?}",
            root.symmetric_difference(&self.host_root)
                .collect::<Vec<_>>()
        );
        Ok(())
    }

    fn snapshot(&self, also_skip: Option<&Path>) -> Snapshot {
        let mut entries = Snapshot::new();
        let skip = [Some(self.ws.path()), also_skip];
        if let Err(error) = walk(self.base.path(), self.base.path(), &skip, &mut entries) {
            panic!("cannot read the tree outside the workspace: {error}");
        }
        entries
    }
}

fn initial_contents() -> Vec<Vec<u8>> {
    INSIDE.iter().map(|(_, c)| c.as_bytes().to_vec()).collect()
}

/// The workspace's entries; `None` when some cannot be read (a write may have left
/// directories nested beyond `PATH_MAX` on the host).
fn workspace_snapshot(ws: &Path) -> Option<Snapshot> {
    let mut entries = Snapshot::new();
    walk(ws, ws, &[], &mut entries).ok()?;
    Some(entries)
}

fn walk(
    base: &Path,
    dir: &Path,
    skip: &[Option<&Path>],
    entries: &mut Snapshot,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if skip.contains(&Some(path.as_path())) {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path)?;
        let mode = meta.permissions().mode();
        let relative = path.strip_prefix(base).unwrap().to_path_buf();
        let kind = meta.file_type();
        let entry = if kind.is_symlink() {
            Entry::Link(std::fs::read_link(&path)?)
        } else if kind.is_dir() {
            walk(base, &path, skip, entries)?;
            Entry::Dir { mode }
        } else if kind.is_file() {
            let content = std::fs::read(&path)?;
            Entry::File { mode, content }
        } else {
            Entry::Other
        };
        entries.insert(relative, entry);
    }
    Ok(())
}

/// The names in the host's `/`: a write through `abs_root` that escaped would add one.
fn host_root() -> BTreeSet<OsString> {
    std::fs::read_dir("/")
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect()
}

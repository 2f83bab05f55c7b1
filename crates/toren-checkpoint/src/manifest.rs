//! What a checkpoint records, two ways: the public [`Manifest`] (paths with hex hashes, what
//! `diff`, the CLI and other crates read) and the store's own [`Snap`] (hashes as bytes, and
//! for a symlink what `lstat` said when its target was read, so that an unchanged one is not
//! read again). A [`Delta`] is what one checkpoint changed against its parent: the paths
//! removed and the records added or changed, both sorted; [`Snap::apply`] replays a chain
//! of them onto a full one in one merge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::walk::Stat;

/// One path of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    #[serde(flatten)]
    pub kind: EntryKind,
}

/// What a path is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryKind {
    Dir,
    File {
        size: u64,
        /// SHA-256 of the content, hex.
        hash: String,
        /// What `lstat` said when the content was hashed: a file that still says so is
        /// not read again.
        mtime_ns: i64,
        ctime_ns: i64,
        ino: u64,
    },
    Symlink {
        target: String,
    },
}

/// One checkpoint's list of paths, sorted.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub id: String,
    /// Milliseconds since the epoch.
    pub created_ms: u64,
    pub entries: Vec<Entry>,
    /// Paths not recorded: names that are not UTF-8, sockets, fifos, devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// What `lstat` said of a symlink when its target was read. A symlink's target cannot be
/// changed in place (only by making a new one), so one that still says so has it still.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) ino: u64,
}

impl Seen {
    pub(crate) fn of(stat: &Stat) -> Self {
        Self {
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
            ino: stat.ino,
        }
    }
}

/// One path as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    pub(crate) path: String,
    pub(crate) mode: u32,
    pub(crate) kind: RecKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RecKind {
    Dir,
    File {
        size: u64,
        hash: [u8; 32],
        mtime_ns: i64,
        ctime_ns: i64,
        ino: u64,
    },
    Symlink {
        target: String,
        /// `None` when not known (a manifest written before it was kept).
        seen: Option<Seen>,
    },
}

impl RecKind {
    /// A file whose size, mtime, ctime and inode are what `stat` says: its content is taken
    /// to be what it was when it was hashed.
    pub(crate) fn stat_is(&self, stat: &Stat) -> bool {
        matches!(self, Self::File { size, mtime_ns, ctime_ns, ino, .. }
            if (*size, *mtime_ns, *ctime_ns, *ino)
                == (stat.size, stat.mtime_ns, stat.ctime_ns, stat.ino))
    }
}

impl Rec {
    /// The same as far as the checkpoint is concerned (what [`Entry`] says): when the
    /// same symlink target was read again, that is no change.
    pub(crate) fn same(&self, other: &Self) -> bool {
        self.path == other.path
            && self.mode == other.mode
            && match (&self.kind, &other.kind) {
                (RecKind::Symlink { target: a, .. }, RecKind::Symlink { target: b, .. }) => a == b,
                (a, b) => a == b,
            }
    }

    pub(crate) fn to_entry(&self) -> Entry {
        Entry {
            path: self.path.clone(),
            mode: self.mode,
            kind: match &self.kind {
                RecKind::Dir => EntryKind::Dir,
                RecKind::File {
                    size,
                    hash,
                    mtime_ns,
                    ctime_ns,
                    ino,
                } => EntryKind::File {
                    size: *size,
                    hash: hex::encode(hash),
                    mtime_ns: *mtime_ns,
                    ctime_ns: *ctime_ns,
                    ino: *ino,
                },
                RecKind::Symlink { target, .. } => EntryKind::Symlink {
                    target: target.clone(),
                },
            },
        }
    }

    /// `None` when the hash is not 64 hex digits.
    pub(crate) fn from_entry(entry: Entry) -> Option<Self> {
        let kind = match entry.kind {
            EntryKind::Dir => RecKind::Dir,
            EntryKind::File {
                size,
                hash,
                mtime_ns,
                ctime_ns,
                ino,
            } => {
                let mut bytes = [0u8; 32];
                hex::decode_to_slice(&hash, &mut bytes).ok()?;
                RecKind::File {
                    size,
                    hash: bytes,
                    mtime_ns,
                    ctime_ns,
                    ino,
                }
            }
            EntryKind::Symlink { target } => RecKind::Symlink { target, seen: None },
        };
        Some(Self {
            path: entry.path,
            mode: entry.mode,
            kind,
        })
    }
}

/// A checkpoint as the store keeps it (in memory, the latest one per store).
#[derive(Clone, Debug)]
pub(crate) struct Snap {
    pub(crate) id: String,
    pub(crate) created_ms: u64,
    /// Sorted by path.
    pub(crate) entries: Vec<Rec>,
    pub(crate) skipped: Vec<String>,
    /// Deltas on the way from the last full manifest to this one (0: this one is full).
    pub(crate) depth: u32,
}

/// What a checkpoint changed against its parent.
#[derive(Clone, Debug, Default)]
pub(crate) struct Delta {
    pub(crate) parent: String,
    /// Paths gone, sorted.
    pub(crate) removed: Vec<String>,
    /// Records added or changed, sorted by path.
    pub(crate) upserts: Vec<Rec>,
}

impl Snap {
    pub(crate) fn to_manifest(&self) -> Manifest {
        Manifest {
            id: self.id.clone(),
            created_ms: self.created_ms,
            entries: self.entries.iter().map(Rec::to_entry).collect(),
            skipped: self.skipped.clone(),
        }
    }

    /// `base` with `deltas` (oldest first) applied: one merge, whatever the chain's length.
    pub(crate) fn apply(base: Vec<Rec>, deltas: &[Delta]) -> Vec<Rec> {
        let mut changes: BTreeMap<&str, Option<&Rec>> = BTreeMap::new();
        for delta in deltas {
            for path in &delta.removed {
                changes.insert(path, None);
            }
            for rec in &delta.upserts {
                changes.insert(&rec.path, Some(rec));
            }
        }
        let mut out = Vec::with_capacity(base.len() + changes.len());
        let mut changes = changes.into_iter().peekable();
        for rec in base {
            while let Some((path, change)) = changes.next_if(|(p, _)| *p < rec.path.as_str()) {
                debug_assert!(!path.is_empty());
                out.extend(change.cloned());
            }
            match changes.next_if(|(p, _)| *p == rec.path.as_str()) {
                Some((_, change)) => out.extend(change.cloned()),
                None => out.push(rec),
            }
        }
        out.extend(changes.filter_map(|(_, change)| change.cloned()));
        out
    }
}

/// Sorted by path, strictly (each path once)?
pub(crate) fn sorted(entries: &[Rec]) -> bool {
    entries.windows(2).all(|w| w[0].path < w[1].path)
}

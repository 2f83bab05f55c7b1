//! The checkpoint store: blobs by content, manifests by id; taking a checkpoint and
//! pruning old ones (restoring one is `restore.rs`).

use std::cmp::Ordering;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::blobs::NewBlobs;
use crate::format::{self, Decoded, MAX_DEPTH};
use crate::manifest::{Delta, Rec, RecKind, Seen, Snap};
use crate::walk::{self, Found, Kind, Stat};
use crate::{Error, Exclude, Manifest, Result, beneath, io};

/// What a checkpoint cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Entries recorded (files, directories, symlinks).
    pub entries: usize,
    /// Files whose content was read and hashed (new or changed since the last checkpoint).
    pub hashed: usize,
    /// Blobs written (content the store did not have).
    pub blobs_written: usize,
    pub bytes_written: u64,
}

/// A checkpoint just taken.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub id: String,
    pub stats: Stats,
}

/// A directory of blobs and manifests, outside the workspace it records.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) root: PathBuf,
}

impl Store {
    /// Opens (making it if needed) the store at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        for sub in ["objects", "manifests", "tmp"] {
            let dir = root.join(sub);
            fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        }
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checkpoint ids, oldest first.
    pub fn list(&self) -> Result<Vec<String>> {
        let dir = self.root.join("manifests");
        let mut ids = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io("read directory", &dir))? {
            let entry = entry.map_err(io("read directory", &dir))?;
            if let Some(id) = entry.file_name().to_str().and_then(|n| {
                n.strip_suffix(".v2")
                    .or_else(|| n.strip_suffix(".json"))
                    .filter(|id| valid_id(id))
            }) {
                ids.push(id.to_owned());
            }
        }
        // ULIDs sort by time.
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// A checkpoint's manifest.
    pub fn manifest(&self, id: &str) -> Result<Manifest> {
        Ok(self.snap(id)?.to_manifest())
    }

    /// A checkpoint as the store keeps it: the remembered latest one, or read (a delta's
    /// chain applied). A parent removed meanwhile by a prune (which first wrote this one
    /// whole) makes it read once more.
    pub(crate) fn snap(&self, id: &str) -> Result<Arc<Snap>> {
        if let Some(snap) = recall(&self.root, id) {
            return Ok(snap);
        }
        match self.load(id) {
            Err(Error::NotFound { id: missing, .. }) if missing != id => self.load(id),
            other => other,
        }
        .map(Arc::new)
    }

    /// The latest checkpoint, remembered for the next one (read once per process and store:
    /// parsing 20,000 entries would be a good part of a checkpoint otherwise).
    fn latest(&self, id: &str) -> Result<Arc<Snap>> {
        let snap = self.snap(id)?;
        remember(&self.root, Arc::clone(&snap));
        Ok(snap)
    }

    /// Reads checkpoint `id`: its full manifest, or its delta and its parents' back to a
    /// full one, applied.
    pub(crate) fn load(&self, id: &str) -> Result<Snap> {
        let mut own: Option<Snap> = None;
        let mut deltas = Vec::new();
        let mut at = id.to_owned();
        let base = loop {
            match self.read_file(&at)? {
                Decoded::Full(full) => break full,
                Decoded::Delta { snap, delta } => {
                    // A parent is older (ids only grow), so a chain ends.
                    if delta.parent >= at || deltas.len() > 4 * MAX_DEPTH as usize {
                        return Err(self.bad(&at, "its chain of parents does not end"));
                    }
                    at.clone_from(&delta.parent);
                    own.get_or_insert(snap);
                    deltas.push(delta);
                }
            }
        };
        let Some(mut own) = own else {
            return Ok(base);
        };
        deltas.reverse();
        own.entries = Snap::apply(base.entries, &deltas);
        Ok(own)
    }

    /// One manifest file as it is on disk (version 2, else version 1).
    pub(crate) fn read_file(&self, id: &str) -> Result<Decoded> {
        if !valid_id(id) {
            return Err(self.not_found(id));
        }
        let v2 = self.v2_path(id);
        match fs::read(&v2) {
            Ok(bytes) => return format::decode(&bytes).map_err(|why| self.bad(id, why)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("read", &v2)(e)),
        }
        let v1 = self.v1_path(id);
        let bytes = match fs::read(&v1) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.not_found(id));
            }
            Err(e) => return Err(io("read", &v1)(e)),
        };
        let mut snap = format::decode_v1(&bytes).map_err(|e| match e {
            format::V1Error::Json(source) => Error::Manifest {
                path: v1.display().to_string(),
                source,
            },
            format::V1Error::Hash => self.bad(id, "a hash is not 64 hex digits"),
        })?;
        if !crate::manifest::sorted(&snap.entries) {
            snap.entries.sort_by(|a, b| a.path.cmp(&b.path));
            snap.entries.dedup_by(|a, b| a.path == b.path);
        }
        Ok(Decoded::Full(snap))
    }

    /// Records the workspace as it is now. Files unchanged since the latest checkpoint
    /// (same size, mtime, ctime, inode) are not read; content the store has is not
    /// written again; what changed is written as a delta against the latest checkpoint.
    pub fn checkpoint(&self, workspace: &Path, exclude: &Exclude) -> Result<Checkpoint> {
        self.clear_tmp()?;
        let last = self.list()?.pop();
        let previous = match &last {
            Some(id) => match self.latest(id) {
                Ok(snap) => Some(snap),
                // The latest one does not read (its file or a parent's damaged or removed
                // by hand): this checkpoint is taken whole, every file read (their blobs
                // are mostly there already), so the store heals instead of failing each
                // call from now on.
                Err(e) if unreadable(&e) => None,
                Err(e) => return Err(e),
            },
            None => None,
        };
        // What the last restore wrote, if one did since the latest checkpoint (`hints`).
        let hints = self.read_hints();
        let mut hint_at = 0;
        let walked = walk::walk(workspace, exclude)?;
        // Files are read beneath this handle, never by their host path (see `open_beneath`).
        let root = beneath::open_root(workspace)?;
        let prev: &[Rec] = previous.as_deref().map_or(&[], |p| &p.entries);
        let mut stats = Stats::default();
        let mut blobs = NewBlobs::default();
        let mut entries = Vec::with_capacity(walked.found.len());
        let mut delta = Delta::default();
        // Both lists are sorted by path: one pass pairs each path with its previous record.
        let mut at = 0;
        for Found { path, stat } in walked.found {
            let mut old = None;
            while let Some(rec) = prev.get(at) {
                match rec.path.as_str().cmp(path.as_str()) {
                    Ordering::Less => delta.removed.push(rec.path.clone()),
                    Ordering::Equal => old = Some(rec),
                    Ordering::Greater => break,
                }
                at += 1;
                if old.is_some() {
                    break;
                }
            }
            // The hash to reuse when the stat says so: the previous record's, else (a file
            // the restore wrote since) the hint's. The delta is against the previous one.
            let mut basis = old;
            if stat.kind == Kind::File && !old.is_some_and(|o| o.kind.stat_is(&stat)) {
                while hints.get(hint_at).is_some_and(|h| h.path < path) {
                    hint_at += 1;
                }
                if let Some(hint) = hints.get(hint_at).filter(|h| h.path == path) {
                    basis = Some(hint);
                }
            }
            let kind = self.record(&root, &path, &stat, basis, &mut stats, &mut blobs)?;
            let rec = Rec {
                path,
                mode: stat.mode,
                kind,
            };
            if previous.is_some() && !old.is_some_and(|o| o.same(&rec)) {
                delta.upserts.push(rec.clone());
            }
            entries.push(rec);
        }
        delta
            .removed
            .extend(prev.get(at..).unwrap_or(&[]).iter().map(|r| r.path.clone()));
        stats.entries = entries.len();
        let changes = delta.removed.len() + delta.upserts.len();
        // Nothing changed since the latest checkpoint: it is this one too.
        if let Some(previous) = &previous
            && changes == 0
            && previous.skipped == walked.skipped
        {
            if !hints.is_empty() {
                self.clear_hints()?;
            }
            return Ok(Checkpoint {
                id: previous.id.clone(),
                stats,
            });
        }
        let id = next_id(last.as_deref());
        let created_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        // A delta, unless the chain is long or the change large (then the whole list).
        let depth = match &previous {
            Some(p) if p.depth + 1 < MAX_DEPTH && changes * 4 <= entries.len() => p.depth + 1,
            _ => 0,
        };
        let snap = Snap {
            id: id.clone(),
            created_ms,
            entries,
            skipped: walked.skipped,
            depth,
        };
        let bytes = match &previous {
            Some(p) if depth > 0 => {
                delta.parent.clone_from(&p.id);
                format::encode_delta(&snap, &delta)
            }
            _ => format::encode_full(&snap),
        };
        self.sync_blobs(&blobs)?;
        self.write_manifest(&id, &bytes)?;
        remember(&self.root, Arc::new(snap));
        // Its stats are in this checkpoint now (and a hint could only save reading).
        if !hints.is_empty() {
            self.clear_hints()?;
        }
        Ok(Checkpoint { id, stats })
    }

    /// What `path` is now: its previous record's hash (or target) when `lstat` says it
    /// is unchanged, else read (and its blob stored).
    fn record(
        &self,
        root: &File,
        path: &str,
        stat: &Stat,
        old: Option<&Rec>,
        stats: &mut Stats,
        blobs: &mut NewBlobs,
    ) -> Result<RecKind> {
        let old = old.map(|o| &o.kind);
        Ok(match stat.kind {
            Kind::Dir => RecKind::Dir,
            Kind::Symlink => {
                let seen = Seen::of(stat);
                let target = match old {
                    Some(RecKind::Symlink {
                        target,
                        seen: Some(s),
                    }) if *s == seen => target.clone(),
                    _ => crate::restore::link_target(root, path).ok_or_else(|| {
                        io("read link", Path::new(path))(std::io::Error::other(
                            "not a symlink any more",
                        ))
                    })?,
                };
                RecKind::Symlink {
                    target,
                    seen: Some(seen),
                }
            }
            Kind::File => match old {
                Some(kind) if kind.stat_is(stat) => kind.clone(),
                _ => {
                    stats.hashed += 1;
                    self.store_file(root, path, stats, blobs)?
                }
            },
        })
    }

    /// A blob's content.
    pub fn blob(&self, hash: &str) -> Result<Vec<u8>> {
        let path = self.blob_path(hash);
        fs::read(&path).map_err(io("read", &path))
    }

    pub(crate) fn v2_path(&self, id: &str) -> PathBuf {
        self.root.join("manifests").join(format!("{id}.v2"))
    }

    pub(crate) fn v1_path(&self, id: &str) -> PathBuf {
        self.root.join("manifests").join(format!("{id}.json"))
    }

    fn not_found(&self, id: &str) -> Error {
        Error::NotFound {
            id: id.to_owned(),
            store: self.root.display().to_string(),
        }
    }

    fn bad(&self, id: &str, reason: &'static str) -> Error {
        Error::Format {
            path: self.v2_path(id).display().to_string(),
            reason,
        }
    }

    pub(crate) fn blob_path(&self, hash: &str) -> PathBuf {
        let (fan, rest) = hash.split_at(hash.len().min(2));
        self.root.join("objects").join(fan).join(rest)
    }

    pub(crate) fn tmp_path(&self) -> PathBuf {
        self.root
            .join("tmp")
            .join(ulid::Ulid::generate().to_string())
    }

    /// What a killed checkpoint left behind: temporaries older than ten minutes (a younger
    /// one may be another process's checkpoint under way, e.g. `toren diff`'s beside a
    /// worker's).
    fn clear_tmp(&self) -> Result<()> {
        let dir = self.root.join("tmp");
        let old = SystemTime::now() - Duration::from_secs(600);
        for entry in fs::read_dir(&dir).map_err(io("read directory", &dir))? {
            let entry = entry.map_err(io("read directory", &dir))?;
            let path = entry.path();
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < old);
            if stale {
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("remove", &path)(e)),
                }
            }
        }
        Ok(())
    }
}

/// A new id after the latest one's: ids sort in the order the checkpoints were made (list,
/// prune and diff rely on it), also for two made within one millisecond, whose random
/// parts would decide.
fn next_id(latest: Option<&str>) -> String {
    let mut id = ulid::Ulid::generate();
    if let Some(last) = latest.and_then(|p| ulid::Ulid::from_string(&p.to_uppercase()).ok())
        && id <= last
    {
        id = last.increment().unwrap_or(id);
    }
    id.to_string().to_lowercase()
}

/// A manifest that is not there or does not decode (as against one that could not be
/// read now, e.g. for lack of permission).
pub(crate) fn unreadable(e: &Error) -> bool {
    matches!(
        e,
        Error::NotFound { .. } | Error::Format { .. } | Error::Manifest { .. }
    )
}

fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The latest checkpoint of each store this process checkpointed lately, by store root.
/// Bounded: a worker serving many runs keeps the few it used last. A checkpoint never
/// changes once written and ids are never reused, so the copy is the file.
static LATEST: Mutex<Vec<(PathBuf, Arc<Snap>)>> = Mutex::new(Vec::new());
const LATEST_KEPT: usize = 16;

fn recall(root: &Path, id: &str) -> Option<Arc<Snap>> {
    let latest = LATEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    latest
        .iter()
        .find(|(r, m)| r == root && m.id == id)
        .map(|(_, m)| Arc::clone(m))
}

fn remember(root: &Path, snap: Arc<Snap>) {
    let mut latest = LATEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    latest.retain(|(r, _)| r != root);
    if latest.len() >= LATEST_KEPT {
        latest.remove(0);
    }
    latest.push((root.to_path_buf(), snap));
}

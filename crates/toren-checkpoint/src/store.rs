//! The checkpoint store: blobs by content, manifests by id, checkpoint, restore, prune.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, FileTimes};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::beneath;
use crate::walk::{self, Found};
use crate::{Error, Exclude, Result, io};

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
    root: PathBuf,
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
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
            {
                ids.push(id.to_owned());
            }
        }
        // ULIDs sort by time.
        ids.sort();
        Ok(ids)
    }

    /// A checkpoint's manifest.
    pub fn manifest(&self, id: &str) -> Result<Manifest> {
        let path = self.manifest_path(id)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound {
                    id: id.to_owned(),
                    store: self.root.display().to_string(),
                });
            }
            Err(e) => return Err(io("read", &path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|source| Error::Manifest {
            path: path.display().to_string(),
            source,
        })
    }

    /// Records the workspace as it is now. Files unchanged since the latest checkpoint
    /// (same size, mtime, ctime, inode) are not read; content the store has is not
    /// written again.
    pub fn checkpoint(&self, workspace: &Path, exclude: &Exclude) -> Result<Checkpoint> {
        self.clear_tmp()?;
        let previous = match self.list()?.last() {
            Some(id) => Some(self.latest(id)?),
            None => None,
        };
        let known: HashMap<&str, &Entry> = previous
            .iter()
            .flat_map(|m| &m.entries)
            .map(|e| (e.path.as_str(), e))
            .collect();
        let walked = walk::walk(workspace, exclude)?;
        // Files are read beneath this handle, never by their host path (see `open_beneath`).
        let root = File::open(workspace).map_err(io("open", workspace))?;
        let mut stats = Stats::default();
        let mut entries = Vec::with_capacity(walked.found.len());
        for Found { path, meta } in walked.found {
            let mode = meta.mode() & 0o7777;
            let ft = meta.file_type();
            let kind = if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_symlink() {
                let full = workspace.join(&path);
                let target = fs::read_link(&full).map_err(io("read link", &full))?;
                EntryKind::Symlink {
                    target: target.to_string_lossy().into_owned(),
                }
            } else {
                let (mtime_ns, ctime_ns) = walk::times(&meta);
                let cached = known.get(path.as_str()).and_then(|e| match &e.kind {
                    EntryKind::File {
                        size,
                        hash,
                        mtime_ns: m,
                        ctime_ns: c,
                        ino,
                    } if *size == meta.len()
                        && *m == mtime_ns
                        && *c == ctime_ns
                        && *ino == meta.ino() =>
                    {
                        Some(hash.clone())
                    }
                    _ => None,
                });
                match cached {
                    Some(hash) => EntryKind::File {
                        size: meta.len(),
                        hash,
                        mtime_ns,
                        ctime_ns,
                        ino: meta.ino(),
                    },
                    None => {
                        stats.hashed += 1;
                        self.store_file(&root, Path::new(&path), &mut stats)?
                    }
                }
            };
            entries.push(Entry { path, mode, kind });
        }
        stats.entries = entries.len();
        // Nothing changed since the latest checkpoint: it is this one too.
        if let Some(previous) = &previous
            && previous.entries == entries
            && previous.skipped == walked.skipped
        {
            return Ok(Checkpoint {
                id: previous.id.clone(),
                stats,
            });
        }
        // Ids sort in the order the checkpoints were made (list, prune and diff rely on
        // it), also for two made within one millisecond, whose random parts would decide.
        let mut id = ulid::Ulid::generate();
        if let Some(last) = previous
            .as_ref()
            .and_then(|p| ulid::Ulid::from_string(&p.id.to_uppercase()).ok())
            && id <= last
        {
            id = last.increment().unwrap_or(id);
        }
        let id = id.to_string().to_lowercase();
        let created_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let manifest = Manifest {
            id: id.clone(),
            created_ms,
            entries,
            skipped: walked.skipped,
        };
        self.write_manifest(&manifest, stats.blobs_written > 0)?;
        remember(&self.root, Arc::new(manifest));
        Ok(Checkpoint { id, stats })
    }

    /// The manifest `id`, the latest one: from memory when this process wrote or read it
    /// last (a manifest never changes once written and ids are never reused, so the copy
    /// is the file), else read and remembered. Parsing 20,000 entries of JSON is ≈30 ms
    /// of a checkpoint otherwise.
    fn latest(&self, id: &str) -> Result<Arc<Manifest>> {
        if let Some(m) = recall(&self.root, id) {
            return Ok(m);
        }
        let m = Arc::new(self.manifest(id)?);
        remember(&self.root, Arc::clone(&m));
        Ok(m)
    }

    /// Reads one file (never through a symlink), writes its blob if new, and says what it
    /// was when read.
    fn store_file(&self, root: &File, path: &Path, stats: &mut Stats) -> Result<EntryKind> {
        let (mut file, meta) = walk::open_beneath(root, path)?;
        let tmp_path = self.tmp_path();
        let mut tmp = File::create(&tmp_path).map_err(io("create", &tmp_path))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(io("read", path))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(io("write", &tmp_path))?;
            size += n as u64;
        }
        drop(tmp);
        let hash = hex::encode(hasher.finalize());
        let blob = self.blob_path(&hash);
        if blob.exists() {
            fs::remove_file(&tmp_path).map_err(io("remove", &tmp_path))?;
        } else {
            if let Some(parent) = blob.parent() {
                fs::create_dir_all(parent).map_err(io("create", parent))?;
            }
            fs::rename(&tmp_path, &blob).map_err(io("rename", &blob))?;
            stats.blobs_written += 1;
            stats.bytes_written += size;
        }
        let (mtime_ns, ctime_ns) = walk::times(&meta);
        Ok(EntryKind::File {
            size,
            hash,
            mtime_ns,
            ctime_ns,
            ino: meta.ino(),
        })
    }

    /// The manifest last: flushed (with every new blob before it, by one `syncfs`, when
    /// there are any), then renamed into place.
    fn write_manifest(&self, manifest: &Manifest, new_blobs: bool) -> Result<()> {
        let tmp_path = self.tmp_path();
        let bytes = serde_json::to_vec(manifest).map_err(|source| Error::Manifest {
            path: tmp_path.display().to_string(),
            source,
        })?;
        let mut file = File::create(&tmp_path).map_err(io("create", &tmp_path))?;
        file.write_all(&bytes).map_err(io("write", &tmp_path))?;
        if new_blobs {
            let root = File::open(&self.root).map_err(io("open", &self.root))?;
            nix::unistd::syncfs(&root)
                .map_err(|e| io("sync", &self.root)(std::io::Error::from(e)))?;
        } else {
            file.sync_all().map_err(io("sync", &tmp_path))?;
        }
        drop(file);
        let path = self.manifest_path(&manifest.id)?;
        fs::rename(&tmp_path, &path).map_err(io("rename", &path))?;
        let dir = self.root.join("manifests");
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io("sync", &dir))
    }

    /// Makes the workspace what it was at checkpoint `id`: paths added since are removed,
    /// changed ones written back with their modes (and mtimes), symlinks re-made. Excluded
    /// paths are left alone. Safe to run again after an interruption (it converges on the
    /// same workspace). Every change is made beneath a handle on the workspace, never by
    /// host path (`beneath`), so a symlink a process in the sandbox put in place cannot
    /// lead the restore outside.
    pub fn restore(&self, id: &str, workspace: &Path, exclude: &Exclude) -> Result<()> {
        let manifest = self.manifest(id)?;
        for entry in &manifest.entries {
            if !safe_path(&entry.path) {
                return Err(Error::BadPath {
                    path: entry.path.clone(),
                    id: id.to_owned(),
                });
            }
        }
        let root = beneath::open_root(workspace)?;
        let wanted: HashMap<&str, &Entry> = manifest
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e))
            .collect();
        let current = walk::walk(workspace, exclude)?;
        let mut unchanged: HashMap<String, u32> = HashMap::new();
        let mut removed_dirs: Vec<String> = Vec::new();
        // Remove what should not be there, or is there as another kind of thing.
        for Found { path, meta } in &current.found {
            if removed_dirs.iter().any(|d| {
                path.starts_with(d.as_str()) && path.as_bytes().get(d.len()) == Some(&b'/')
            }) {
                continue;
            }
            let ft = meta.file_type();
            let keep = match wanted.get(path.as_str()).map(|e| &e.kind) {
                Some(EntryKind::Dir) => ft.is_dir(),
                Some(EntryKind::Symlink { target }) => {
                    ft.is_symlink() && link_target(&root, path).as_deref() == Some(target.as_str())
                }
                Some(EntryKind::File {
                    size,
                    mtime_ns,
                    ctime_ns,
                    ino,
                    ..
                }) => {
                    if ft.is_file()
                        && *size == meta.len()
                        && (*mtime_ns, *ctime_ns) == walk::times(meta)
                        && *ino == meta.ino()
                    {
                        unchanged.insert(path.clone(), meta.mode() & 0o7777);
                    }
                    ft.is_file()
                }
                None => false,
            };
            if keep {
                continue;
            }
            beneath::remove(&root, path)?;
            if ft.is_dir() {
                removed_dirs.push(path.clone());
            }
        }
        // Make what should be there, parents first (the entries are sorted).
        for entry in &manifest.entries {
            match &entry.kind {
                EntryKind::Dir => {
                    beneath::make_dir(&root, &entry.path)?;
                    // Writable while its children are written; its mode at the end.
                    beneath::chmod_dir(&root, &entry.path, 0o700)?;
                }
                EntryKind::Symlink { target } => {
                    if link_target(&root, &entry.path).is_none() {
                        beneath::make_symlink(&root, &entry.path, target)?;
                    }
                }
                EntryKind::File { hash, mtime_ns, .. } => match unchanged.get(&entry.path) {
                    Some(mode) if *mode == entry.mode => {}
                    Some(_) => beneath::chmod_file(&root, &entry.path, entry.mode)?,
                    None => self.write_back(id, hash, &root, &entry.path, entry.mode, *mtime_ns)?,
                },
            }
        }
        for entry in manifest.entries.iter().rev() {
            if entry.kind == EntryKind::Dir {
                beneath::chmod_dir(&root, &entry.path, entry.mode)?;
            }
        }
        Ok(())
    }

    fn write_back(
        &self,
        id: &str,
        hash: &str,
        root: &File,
        path: &str,
        mode: u32,
        mtime_ns: i64,
    ) -> Result<()> {
        let blob = self.blob_path(hash);
        let mut source = match File::open(&blob) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::MissingBlob {
                    hash: hash.to_owned(),
                    id: id.to_owned(),
                });
            }
            Err(e) => return Err(io("open", &blob)(e)),
        };
        let full = Path::new(path);
        let mut out = beneath::create_file(root, path)?;
        std::io::copy(&mut source, &mut out).map_err(io("write", full))?;
        let secs = mtime_ns.div_euclid(1_000_000_000);
        let nanos = mtime_ns.rem_euclid(1_000_000_000);
        if let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) {
            let when = UNIX_EPOCH + Duration::new(secs, nanos);
            out.set_times(FileTimes::new().set_modified(when))
                .map_err(io("set times", full))?;
        }
        out.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io("chmod", full))
    }

    /// A blob's content.
    pub fn blob(&self, hash: &str) -> Result<Vec<u8>> {
        let path = self.blob_path(hash);
        fs::read(&path).map_err(io("read", &path))
    }

    /// Keeps the newest `keep` checkpoints, removing older manifests and every blob none
    /// of the kept ones references. Returns how many checkpoints were removed.
    pub fn prune(&self, keep: usize) -> Result<usize> {
        let ids = self.list()?;
        if ids.len() <= keep {
            return Ok(0);
        }
        let (old, kept) = ids.split_at(ids.len() - keep);
        // Manifests first: a blob is removed only once nothing can name it.
        for id in old {
            let path = self.manifest_path(id)?;
            fs::remove_file(&path).map_err(io("remove", &path))?;
        }
        let mut live = HashSet::new();
        for id in kept {
            for entry in self.manifest(id)?.entries {
                if let EntryKind::File { hash, .. } = entry.kind {
                    live.insert(hash);
                }
            }
        }
        let objects = self.root.join("objects");
        for fan in fs::read_dir(&objects).map_err(io("read directory", &objects))? {
            let fan = fan.map_err(io("read directory", &objects))?.path();
            let Some(prefix) = fan.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
                continue;
            };
            for blob in fs::read_dir(&fan).map_err(io("read directory", &fan))? {
                let blob = blob.map_err(io("read directory", &fan))?;
                let name = blob.file_name();
                let hash = format!("{prefix}{}", name.to_string_lossy());
                if !live.contains(&hash) {
                    let path = blob.path();
                    fs::remove_file(&path).map_err(io("remove", &path))?;
                }
            }
        }
        Ok(old.len())
    }

    fn manifest_path(&self, id: &str) -> Result<PathBuf> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(Error::NotFound {
                id: id.to_owned(),
                store: self.root.display().to_string(),
            });
        }
        Ok(self.root.join("manifests").join(format!("{id}.json")))
    }

    fn blob_path(&self, hash: &str) -> PathBuf {
        let (fan, rest) = hash.split_at(hash.len().min(2));
        self.root.join("objects").join(fan).join(rest)
    }

    fn tmp_path(&self) -> PathBuf {
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

/// The latest manifest of each store this process checkpointed lately, by store root.
/// Bounded: a worker serving many runs keeps the few it used last.
static LATEST: Mutex<Vec<(PathBuf, Arc<Manifest>)>> = Mutex::new(Vec::new());
const LATEST_KEPT: usize = 16;

fn recall(root: &Path, id: &str) -> Option<Arc<Manifest>> {
    let latest = LATEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    latest
        .iter()
        .find(|(r, m)| r == root && m.id == id)
        .map(|(_, m)| Arc::clone(m))
}

fn remember(root: &Path, manifest: Arc<Manifest>) {
    let mut latest = LATEST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    latest.retain(|(r, _)| r != root);
    if latest.len() >= LATEST_KEPT {
        latest.remove(0);
    }
    latest.push((root.to_path_buf(), manifest));
}

/// A relative path of plain names: no `..`, no root, no empty name.
fn safe_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|n| !n.is_empty() && n != "." && n != "..")
}

/// The target of the symlink at `path`, read beneath `root`; `None` if it is not one.
fn link_target(root: &File, path: &str) -> Option<String> {
    let (dir, name) = beneath::parent(root, path).ok()?;
    nix::fcntl::readlinkat(&dir, name)
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
}

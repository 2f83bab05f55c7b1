//! Writing a checkpoint's new content and its manifest, in the order that keeps the store
//! whole: each blob renamed into place, then flushed (a few one by one with their
//! directories, many by one `syncfs`) before the manifest naming them is written, flushed
//! and renamed into place. A process killed at any point leaves every manifest's blobs
//! whole (a rename is all or nothing); a machine that loses power loses at most the
//! checkpoint being taken.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::manifest::RecKind;
use crate::walk::{self, Stat};
use crate::{Result, Stats, Store, io};

/// New blobs flushed one by one (each file, then their directories); more than this, one
/// `syncfs` for them all.
const SYNC_EACH_MAX: usize = 16;

/// Blobs written by one checkpoint, to flush before its manifest.
#[derive(Default)]
pub(crate) struct NewBlobs {
    paths: Vec<PathBuf>,
    /// A fan directory (`objects/ab`) was made: `objects` is flushed too.
    made_dir: bool,
}

impl Store {
    /// Reads one file (never through a symlink), writes its blob if new, and says what it
    /// was when read.
    pub(crate) fn store_file(
        &self,
        root: &File,
        path: &str,
        stats: &mut Stats,
        blobs: &mut NewBlobs,
    ) -> Result<RecKind> {
        let (mut file, meta) = walk::open_beneath(root, Path::new(path))?;
        let tmp_path = self.tmp_path();
        let mut tmp = File::create(&tmp_path).map_err(io("create", &tmp_path))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(io("read", Path::new(path)))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).map_err(io("write", &tmp_path))?;
            size += n as u64;
        }
        drop(tmp);
        let hash: [u8; 32] = hasher.finalize().into();
        let blob = self.blob_path(&hex::encode(hash));
        if blob.exists() {
            fs::remove_file(&tmp_path).map_err(io("remove", &tmp_path))?;
        } else {
            if let Err(e) = fs::rename(&tmp_path, &blob) {
                let fan = blob
                    .parent()
                    .filter(|_| e.kind() == std::io::ErrorKind::NotFound);
                let Some(fan) = fan else {
                    return Err(io("rename", &blob)(e));
                };
                fs::create_dir_all(fan).map_err(io("create", fan))?;
                blobs.made_dir = true;
                fs::rename(&tmp_path, &blob).map_err(io("rename", &blob))?;
            }
            blobs.paths.push(blob);
            stats.blobs_written += 1;
            stats.bytes_written += size;
        }
        let stat = Stat::of_meta(&meta);
        Ok(RecKind::File {
            size,
            hash,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
            ino: stat.ino,
        })
    }

    /// New blobs reach the disk before the manifest that names them: a few are flushed
    /// each (the file, then its directory), many by one `syncfs`.
    pub(crate) fn sync_blobs(&self, blobs: &NewBlobs) -> Result<()> {
        if blobs.paths.is_empty() {
            return Ok(());
        }
        if blobs.paths.len() > SYNC_EACH_MAX {
            let root = File::open(&self.root).map_err(io("open", &self.root))?;
            return nix::unistd::syncfs(&root)
                .map_err(|e| io("sync", &self.root)(std::io::Error::from(e)));
        }
        let mut dirs = BTreeSet::new();
        for blob in &blobs.paths {
            File::open(blob)
                .and_then(|f| f.sync_data())
                .map_err(io("sync", blob))?;
            dirs.extend(blob.parent().map(Path::to_path_buf));
        }
        if blobs.made_dir {
            dirs.insert(self.root.join("objects"));
        }
        for dir in dirs {
            sync_dir(&dir)?;
        }
        Ok(())
    }

    /// A manifest file: written to `tmp/`, flushed, renamed into place, its directory
    /// flushed. Renaming over the same checkpoint's delta (a prune writing it whole) is
    /// atomic: a reader gets one or the other, the same checkpoint either way.
    pub(crate) fn write_manifest(&self, id: &str, bytes: &[u8]) -> Result<()> {
        let tmp_path = self.tmp_path();
        let mut file = File::create(&tmp_path).map_err(io("create", &tmp_path))?;
        file.write_all(bytes).map_err(io("write", &tmp_path))?;
        file.sync_data().map_err(io("sync", &tmp_path))?;
        drop(file);
        let path = self.v2_path(id);
        fs::rename(&tmp_path, &path).map_err(io("rename", &path))?;
        sync_dir(&self.root.join("manifests"))
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("sync", dir))
}

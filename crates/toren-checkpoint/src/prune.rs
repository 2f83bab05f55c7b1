//! Pruning: the newest checkpoints kept, older manifests removed, then every blob no kept
//! checkpoint names. A kept delta whose parent goes is written whole first (the same
//! checkpoint under the same id, renamed over its delta), so every kept one still reads.

use std::collections::HashSet;
use std::fs;

use crate::format::{self, Decoded};
use crate::manifest::{Rec, RecKind};
use crate::store::unreadable;
use crate::{Result, Store, io};

impl Store {
    /// Keeps the newest `keep` checkpoints, removing older manifests and every blob none
    /// of the kept ones references. Returns how many checkpoints were removed. A kept
    /// delta whose parent goes is written whole first (the same checkpoint, same id).
    pub fn prune(&self, keep: usize) -> Result<usize> {
        let ids = self.list()?;
        if ids.len() <= keep {
            return Ok(0);
        }
        let (old, kept) = ids.split_at(ids.len() - keep);
        let kept_ids: HashSet<&str> = kept.iter().map(String::as_str).collect();
        // Oldest first: a delta's parent, when kept, was seen (and written whole if need
        // be) before it, so its hashes are all live already, and the delta's own are the
        // ones it adds.
        let mut live: HashSet<[u8; 32]> = HashSet::new();
        let mut add = |recs: &[Rec]| {
            for rec in recs {
                if let RecKind::File { hash, .. } = &rec.kind {
                    live.insert(*hash);
                }
            }
        };
        // A kept checkpoint that does not read (damaged, or a parent removed by hand) can
        // restore nothing: it keeps no blob alive, and does not stop the prune.
        for id in kept {
            let file = match self.read_file(id) {
                Ok(file) => file,
                Err(e) if unreadable(&e) => continue,
                Err(e) => return Err(e),
            };
            match file {
                Decoded::Full(snap) => add(&snap.entries),
                Decoded::Delta { delta, .. } if kept_ids.contains(delta.parent.as_str()) => {
                    add(&delta.upserts);
                }
                Decoded::Delta { .. } => {
                    let mut snap = match self.load(id) {
                        Ok(snap) => snap,
                        Err(e) if unreadable(&e) => continue,
                        Err(e) => return Err(e),
                    };
                    snap.depth = 0;
                    self.write_manifest(id, &format::encode_full(&snap))?;
                    add(&snap.entries);
                }
            }
        }
        // Manifests first: a blob is removed only once nothing can name it.
        for id in old {
            for path in [self.v2_path(id), self.v1_path(id)] {
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("remove", &path)(e)),
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
                let mut hash = [0u8; 32];
                let named =
                    hex::decode_to_slice(format!("{prefix}{}", name.to_string_lossy()), &mut hash);
                if named.is_err() || !live.contains(&hash) {
                    let path = blob.path();
                    fs::remove_file(&path).map_err(io("remove", &path))?;
                }
            }
        }
        Ok(old.len())
    }
}

//! What a restore leaves for the next checkpoint: the stat of each file it wrote back, with
//! the hash of what it wrote, so that checkpoint (the rewind turn's own, or the next tool
//! call's, possibly in another process) matches them by `lstat` instead of reading the
//! whole restored tree again (every file written back has a new inode and ctime).
//!
//! The hints are `<store>/restored.v2`, a full version 2 manifest (`format`) of the files
//! written, not a checkpoint (it is outside `manifests/`, so never listed, restored or
//! pruned). They only save reading: a file is taken from them when size, mtime, ctime and
//! inode are all what the restore saw after writing it, the same test as against the
//! latest checkpoint. A stat cannot hide a later change because a file is only hinted when
//! the clock had left the timestamp granule of its ctime by the end of the restore (git's
//! "racily clean" rule): a write after the restore gets a later ctime. A file written in
//! the restore's last granule is read again (at most a few milliseconds' worth, a second's
//! on a file system with whole-second times). The file is written without a flush (lost,
//! torn or stale hints only mean files are read) and removed by the checkpoint that used
//! it, whose own manifest then holds the new stats.

use std::fs;
use std::path::PathBuf;

use crate::format::{self, Decoded};
use crate::manifest::{Rec, RecKind, Snap};
use crate::{Result, Store, io};

impl Store {
    fn hints_path(&self) -> PathBuf {
        self.root.join("restored.v2")
    }

    /// Records what restore of checkpoint `id` wrote (`written`, sorted by path), keeping
    /// only the files whose ctime the clock has left behind now.
    pub(crate) fn write_hints(&self, id: &str, mut written: Vec<Rec>) -> Result<()> {
        let fence = coarse_now_ns();
        written.retain(
            |rec| matches!(rec.kind, RecKind::File { ctime_ns, .. } if settled(ctime_ns, fence)),
        );
        if written.is_empty() {
            return self.clear_hints();
        }
        let snap = Snap {
            id: id.to_owned(),
            created_ms: 0,
            entries: written,
            skipped: Vec::new(),
            depth: 0,
        };
        let tmp = self.tmp_path();
        fs::write(&tmp, format::encode_full(&snap)).map_err(io("write", &tmp))?;
        let path = self.hints_path();
        fs::rename(&tmp, &path).map_err(io("rename", &path))
    }

    /// The hints a restore left, sorted by path; none when there are none or they do
    /// not read.
    pub(crate) fn read_hints(&self) -> Vec<Rec> {
        match fs::read(self.hints_path()).ok().map(|b| format::decode(&b)) {
            Some(Ok(Decoded::Full(snap))) if crate::manifest::sorted(&snap.entries) => snap.entries,
            _ => Vec::new(),
        }
    }

    pub(crate) fn clear_hints(&self) -> Result<()> {
        let path = self.hints_path();
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", &path)(e)),
        }
    }
}

/// Whether a ctime lies in a granule the clock (`fence`, read after the stat) has left:
/// then any later write gives another ctime. The granule is guessed from the time itself
/// (the largest power of ten up to a second dividing it: a file system that keeps whole
/// seconds gives a whole second), so a coarse one is never taken for a fine one.
pub(crate) fn settled(ctime_ns: i64, fence_ns: i64) -> bool {
    let mut granule: i64 = 1;
    while granule < 1_000_000_000 && ctime_ns % (granule * 10) == 0 {
        granule *= 10;
    }
    ctime_ns.saturating_add(granule) <= fence_ns
}

/// The clock file times are taken from (`CLOCK_REALTIME_COARSE`; a fine-grained ctime is
/// never behind it), in nanoseconds since the epoch; 0 (nothing settled) if unreadable.
fn coarse_now_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE).map_or(0, |t| {
        t.tv_sec()
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec())
    })
}

#[cfg(test)]
mod tests {
    use super::settled;

    #[test]
    fn a_ctime_in_the_fences_granule_is_not_settled() {
        // Nanosecond times: settled once the clock is past it.
        assert!(settled(1_000_000_123, 1_000_000_124));
        assert!(!settled(1_000_000_123, 1_000_000_123));
        // Whole seconds (a coarse file system): not settled within the same second.
        assert!(!settled(7_000_000_000, 7_999_999_999));
        assert!(settled(7_000_000_000, 8_000_000_000));
        // Milliseconds.
        assert!(!settled(7_004_000_000, 7_004_999_999));
        assert!(settled(7_004_000_000, 7_005_000_000));
    }
}

//! Seeding a new workspace with a copy of a directory (a person's own project): the
//! directory is taken as the first checkpoint of the workspace's store and that checkpoint
//! restored into the empty workspace, so the copy is made by the same code as every
//! checkpoint and restore (files read and written beneath a handle, symlinks re-made as
//! links, modes and mtimes kept), and a rewind to the run's start gives the seed back.
//!
//! Before anything is copied the directory is walked once and refused whole, with what to
//! do, when it is larger than the limits or holds a symlink that points outside it (an
//! absolute target, or one whose `..` climbs above it): the file tools refuse paths that
//! lead out of the workspace, and a copy does not bring in links that would. Sockets,
//! FIFOs, devices and names that are not UTF-8 are not copied (they are counted in
//! `skipped`).

use std::path::{Component, Path};

use crate::{Error, Exclude, Result, Store, walk};

/// How large a directory a workspace is seeded with may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedLimits {
    /// Files, directories and symlinks, together.
    pub max_files: u64,
    /// The regular files' sizes, summed.
    pub max_bytes: u64,
}

impl Default for SeedLimits {
    /// 100,000 entries and 2 GiB: a large repository with its history, not its build
    /// output.
    fn default() -> Self {
        Self {
            max_files: 100_000,
            max_bytes: 2 << 30,
        }
    }
}

/// What a seed copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeded {
    /// The checkpoint that holds the copy (the workspace's first).
    pub checkpoint: String,
    /// Files, directories and symlinks copied.
    pub files: u64,
    /// Bytes of file content copied.
    pub bytes: u64,
    /// Entries not copied: special files and names that are not UTF-8.
    pub skipped: Vec<String>,
}

impl Store {
    /// Fills the empty `workspace` with a copy of `source` (see the module doc), checked
    /// against `limits` first; the copy becomes this store's checkpoint.
    pub fn seed(&self, source: &Path, workspace: &Path, limits: &SeedLimits) -> Result<Seeded> {
        let shown = source.display().to_string();
        let walked = walk::walk(source, &Exclude::default())?;
        let files = walked.found.len() as u64;
        let bytes: u64 = walked
            .found
            .iter()
            .filter(|f| f.stat.kind == walk::Kind::File)
            .map(|f| f.stat.size)
            .sum();
        if files > limits.max_files || bytes > limits.max_bytes {
            return Err(Error::SeedTooLarge {
                source_dir: shown,
                files,
                bytes,
                max_files: limits.max_files,
                max_bytes: limits.max_bytes,
            });
        }
        for found in walked
            .found
            .iter()
            .filter(|f| f.stat.kind == walk::Kind::Symlink)
        {
            let link = source.join(&found.path);
            let target = std::fs::read_link(&link).map_err(crate::io("read link", &link))?;
            if leads_out(&found.path, &target) {
                return Err(Error::SeedLinkOutside {
                    source_dir: shown,
                    path: found.path.clone(),
                    target: target.display().to_string(),
                });
            }
        }
        let taken = self.checkpoint(source, &Exclude::default())?;
        self.restore(&taken.id, workspace, &Exclude::default())?;
        Ok(Seeded {
            checkpoint: taken.id,
            files,
            bytes,
            skipped: walked.skipped,
        })
    }
}

impl Store {
    /// Copies the workspace `source` into the empty directory `dest` (taking a run's result
    /// out), through this store, which should be a scratch one: `source` is checkpointed
    /// into it and the checkpoint restored into `dest`, so files are read beneath a handle
    /// and symlinks copied as links, never followed.
    pub fn export(&self, source: &Path, dest: &Path) -> Result<Seeded> {
        let walked = walk::walk(source, &Exclude::default())?;
        let bytes = walked
            .found
            .iter()
            .filter(|f| f.stat.kind == walk::Kind::File)
            .map(|f| f.stat.size)
            .sum();
        let taken = self.checkpoint(source, &Exclude::default())?;
        self.restore(&taken.id, dest, &Exclude::default())?;
        Ok(Seeded {
            checkpoint: taken.id,
            files: taken.stats.entries as u64,
            bytes,
            skipped: walked.skipped,
        })
    }
}

/// Whether the symlink at `path` (relative to the root, `/`-separated) with `target` leads
/// outside the root: an absolute target, or `..` that climbs above it.
fn leads_out(path: &str, target: &Path) -> bool {
    // The link's own directory: its path less its name.
    let mut depth = path.matches('/').count();
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return true,
            },
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_climb_above_the_root_or_are_absolute_lead_out() {
        for (path, target) in [
            ("link", "/etc/passwd"),
            ("link", ".."),
            ("link", "../x"),
            ("a/link", "../../x"),
            ("a/link", "b/../../../x"),
        ] {
            assert!(leads_out(path, Path::new(target)), "{path} -> {target}");
        }
        for (path, target) in [
            ("link", "a"),
            ("link", "a/b"),
            ("a/link", "../b"),
            ("a/b/link", "../../c"),
            ("link", "./a/../b"),
        ] {
            assert!(!leads_out(path, Path::new(target)), "{path} -> {target}");
        }
    }

    #[test]
    fn a_directory_is_copied_whole_and_refused_when_too_large_or_a_link_leads_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let source = dir.path().join("project");
        std::fs::create_dir_all(source.join("src/deep")).expect("mkdir");
        std::fs::write(source.join("src/deep/main.rs"), "fn main() {}\n").expect("write");
        std::fs::write(source.join("README"), "hello\n").expect("write");
        std::os::unix::fs::symlink("src/deep/main.rs", source.join("entry")).expect("symlink");
        let workspace = dir.path().join("run/workspace");
        std::fs::create_dir_all(&workspace).expect("mkdir");
        let store = Store::open(dir.path().join("run/checkpoints")).expect("store");

        let tiny = SeedLimits {
            max_files: 3,
            max_bytes: 1 << 20,
        };
        let err = store
            .seed(&source, &workspace, &tiny)
            .expect_err("too many");
        assert!(matches!(err, Error::SeedTooLarge { files: 5, .. }), "{err}");
        assert_eq!(std::fs::read_dir(&workspace).expect("ls").count(), 0);

        let seeded = store
            .seed(&source, &workspace, &SeedLimits::default())
            .expect("seeded");
        assert_eq!((seeded.files, seeded.bytes), (5, 19));
        assert_eq!(
            std::fs::read_to_string(workspace.join("src/deep/main.rs")).expect("read"),
            "fn main() {}\n"
        );
        assert_eq!(
            std::fs::read_link(workspace.join("entry")).expect("link"),
            Path::new("src/deep/main.rs")
        );
        assert_eq!(store.list().expect("list"), vec![seeded.checkpoint]);

        std::os::unix::fs::symlink(dir.path(), source.join("src/out")).expect("symlink");
        let fresh = dir.path().join("other/workspace");
        std::fs::create_dir_all(&fresh).expect("mkdir");
        let other = Store::open(dir.path().join("other/checkpoints")).expect("store");
        let err = other
            .seed(&source, &fresh, &SeedLimits::default())
            .expect_err("a link out");
        assert!(
            matches!(&err, Error::SeedLinkOutside { path, .. } if path == "src/out"),
            "{err}"
        );
        assert_eq!(std::fs::read_dir(&fresh).expect("ls").count(), 0);
    }
}

//! The checkpoint after a restore: the files the restore wrote back (each with a new inode
//! and ctime) are matched by the stat the restore left, not read again, and a file changed
//! after the restore is still read.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;

use toren_checkpoint::{EntryKind, Exclude, Store};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const FILES: usize = 1_000;

fn tree(ws: &Path) -> TestResult {
    for i in 0..FILES {
        let dir = ws.join(format!("pkg{}", i / 50));
        if i % 50 == 0 {
            fs::create_dir_all(&dir)?;
        }
        fs::write(dir.join(format!("f{i}.js")), format!("exports = {i};\n"))?;
    }
    Ok(())
}

/// The content each file of checkpoint `id` records, checked against the workspace.
fn assert_recorded(store: &Store, id: &str, ws: &Path) -> TestResult {
    let manifest = store.manifest(id)?;
    let mut files = 0;
    for entry in &manifest.entries {
        if let EntryKind::File { hash, .. } = &entry.kind {
            let on_disk = fs::read(ws.join(&entry.path))?;
            assert_eq!(
                store.blob(hash)?,
                on_disk,
                "{} is recorded with other content than it has",
                entry.path
            );
            files += 1;
        }
    }
    assert_eq!(files, FILES);
    Ok(())
}

#[test]
fn the_checkpoint_after_a_restore_reads_only_what_changed_since() -> TestResult {
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    tree(&ws)?;
    let store = Store::open(dir.path().join("checkpoints"))?;
    let none = Exclude::default();
    let first = store.checkpoint(&ws, &none)?.id;
    // The whole tree goes (a rewind to before it was made would do the same), then comes
    // back by a restore: every file written anew.
    for i in 0..FILES / 50 {
        fs::remove_dir_all(ws.join(format!("pkg{i}")))?;
    }
    store.checkpoint(&ws, &none)?;
    store.restore(&first, &ws, &none)?;
    let after = store.checkpoint(&ws, &none)?;
    // At most the files written in the restore's last clock granule are read again (a
    // few milliseconds' worth of 1,000 writes), not the tree.
    assert!(
        after.stats.hashed < FILES / 2,
        "{} of {FILES} files read again after the restore",
        after.stats.hashed
    );
    assert_eq!(after.stats.blobs_written, 0);
    assert_recorded(&store, &after.id, &ws)?;

    // Restored again, then every file rewritten in place at once with content of the
    // same size: each is read, none taken for what the restore wrote.
    for i in 0..FILES / 50 {
        fs::remove_dir_all(ws.join(format!("pkg{i}")))?;
    }
    store.checkpoint(&ws, &none)?;
    store.restore(&first, &ws, &none)?;
    for i in 0..FILES {
        let path = ws.join(format!("pkg{}/f{i}.js", i / 50));
        let same_size = format!("EXPORT = {i};\n");
        fs::OpenOptions::new()
            .write(true)
            .open(&path)?
            .write_all_at(same_size.as_bytes(), 0)?;
    }
    let changed = store.checkpoint(&ws, &none)?;
    assert_eq!(changed.stats.hashed, FILES);
    assert_recorded(&store, &changed.id, &ws)?;
    // The hints were used up: the next checkpoint is the same one, nothing read.
    let again = store.checkpoint(&ws, &none)?;
    assert_eq!((again.id, again.stats.hashed), (changed.id, 0));
    Ok(())
}

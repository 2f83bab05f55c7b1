//! Manifests on disk: a checkpoint written by an earlier version (JSON, version 1) still
//! restores, compares and serves as a parent; a long run of checkpoints is written as small
//! deltas with a full manifest now and then, and every one of them reads back as it was
//! taken, also after a prune removed the parents of the oldest kept ones.

// Test helpers outside `#[test]` functions: a failed read is a failed test.
#![allow(clippy::unwrap_used)]
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use sha2::Digest;
use toren_checkpoint::{Change, Entry, EntryKind, Exclude, Store};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn setup() -> Result<(tempfile::TempDir, std::path::PathBuf, Store), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    fs::create_dir(&ws)?;
    let store = Store::open(dir.path().join("checkpoints"))?;
    Ok((dir, ws, store))
}

/// The paths, kinds, modes and hashes/targets of a checkpoint (what a restore gives back).
fn content(entries: &[Entry]) -> Vec<(String, u32, String)> {
    entries
        .iter()
        .map(|e| {
            let what = match &e.kind {
                EntryKind::Dir => "dir".to_owned(),
                EntryKind::File { hash, size, .. } => format!("{hash} {size}"),
                EntryKind::Symlink { target } => format!("-> {target}"),
            };
            (e.path.clone(), e.mode, what)
        })
        .collect()
}

/// A manifest as version 1 wrote it (`manifests/<id>.json`, the entries as JSON objects
/// tagged by `type`), with its blob where version 1 put it.
#[test]
fn a_version_1_checkpoint_still_restores_compares_and_is_a_parent() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    let body = b"hello from version 1\n";
    let hash = hex::encode(sha2::Sha256::digest(body));
    let blob = dir
        .path()
        .join("checkpoints/objects")
        .join(&hash[..2])
        .join(&hash[2..]);
    fs::create_dir_all(blob.parent().unwrap())?;
    fs::write(&blob, body)?;
    let id = "01kbdz6m2q8n3v5x7y9a1c3e5g";
    let json = format!(
        r#"{{"id":"{id}","created_ms":1764600000000,"entries":[{{"path":"d","mode":493,"type":"dir"}},{{"path":"d/hello.txt","mode":420,"type":"file","size":{},"hash":"{hash}","mtime_ns":1764600000000000000,"ctime_ns":1764600000000000000,"ino":12345}},{{"path":"link","mode":511,"type":"symlink","target":"d/hello.txt"}}]}}"#,
        body.len()
    );
    fs::write(
        dir.path().join(format!("checkpoints/manifests/{id}.json")),
        json,
    )?;
    assert_eq!(store.list()?, vec![id.to_owned()]);
    fs::write(ws.join("stray"), "made since")?;
    store.restore(id, &ws, &none)?;
    assert_eq!(fs::read(ws.join("d/hello.txt"))?, body);
    assert_eq!(fs::read_link(ws.join("link"))?, Path::new("d/hello.txt"));
    assert!(!ws.join("stray").exists());
    // A checkpoint on top of it: the file's times and inode are new, so it is read again
    // (same content, no new blob), and the new checkpoint is a delta against the old one.
    fs::write(ws.join("d/new.txt"), "new\n")?;
    let next = store.checkpoint(&ws, &none)?;
    assert_eq!((next.stats.hashed, next.stats.blobs_written), (2, 1));
    let changes = store.diff(id, &next.id)?;
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].path.as_str(), &changes[0].change),
        ("d/new.txt", &Change::Added)
    );
    // Pruned down to the new one: it is written whole (its parent goes) and still reads.
    let before = content(&store.manifest(&next.id)?.entries);
    assert_eq!(store.prune(1)?, 1);
    assert_eq!(store.list()?, vec![next.id.clone()]);
    let fresh = Store::open(dir.path().join("checkpoints"))?;
    assert_eq!(content(&fresh.manifest(&next.id)?.entries), before);
    fs::remove_dir_all(ws.join("d"))?;
    fresh.restore(&next.id, &ws, &none)?;
    assert_eq!(fs::read(ws.join("d/hello.txt"))?, body);
    assert_eq!(fs::read(ws.join("d/new.txt"))?, b"new\n");
    Ok(())
}

/// 150 checkpoints, each changing, adding or removing something: most are written as small
/// deltas, a full manifest at least every 64, and each reads back (from disk, its chain
/// applied) exactly as it was taken; after a prune the oldest kept ones still read and
/// restore, and the blobs only they name are kept.
#[test]
fn a_long_run_of_deltas_reads_back_every_checkpoint() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    for d in 0..20 {
        fs::create_dir_all(ws.join(format!("pkg{d}/lib")))?;
        for f in 0..20 {
            fs::write(ws.join(format!("pkg{d}/lib/f{f}.js")), format!("{d} {f}\n"))?;
        }
    }
    symlink("pkg0/lib/f0.js", ws.join("main"))?;
    let mut taken = Vec::new();
    for round in 0..150u32 {
        match round % 5 {
            0 => fs::write(ws.join("pkg3/lib/f7.js"), format!("round {round}\n"))?,
            1 => fs::write(ws.join(format!("added{round}.txt")), round.to_string())?,
            2 => fs::remove_file(ws.join(format!("added{}.txt", round - 1)))?,
            3 => {
                fs::remove_file(ws.join("main"))?;
                symlink(format!("pkg{}/lib/f1.js", round % 20), ws.join("main"))?;
            }
            _ => fs::create_dir_all(ws.join(format!("deep/r{round}")))?,
        }
        let cp = store.checkpoint(&ws, &none)?;
        taken.push((cp.id.clone(), content(&store.manifest(&cp.id)?.entries)));
    }
    let manifests = dir.path().join("checkpoints/manifests");
    let sizes: Vec<u64> = fs::read_dir(&manifests)?
        .map(|f| f.unwrap().metadata().unwrap().len())
        .collect();
    let full = sizes.iter().filter(|&&n| n > 10_000).count();
    assert_eq!(sizes.len(), 150);
    assert!(
        (3..10).contains(&full),
        "{full} full manifests of 150 (sizes {sizes:?})"
    );
    // Read back by a fresh store (the latest is remembered in memory; the others are not).
    let fresh = Store::open(dir.path().join("checkpoints"))?;
    for (id, expected) in &taken {
        assert_eq!(&content(&fresh.manifest(id)?.entries), expected, "{id}");
    }
    assert_eq!(fresh.prune(30)?, 120);
    for (id, expected) in &taken[120..] {
        assert_eq!(&content(&fresh.manifest(id)?.entries), expected, "{id}");
    }
    let (oldest, expected) = &taken[120];
    fresh.restore(oldest, &ws, &none)?;
    let again = fresh.checkpoint(&ws, &none)?;
    assert_eq!(&content(&fresh.manifest(&again.id)?.entries), expected);
    assert_eq!(again.stats.blobs_written, 0, "the kept blobs are all there");
    Ok(())
}

/// The latest manifest damaged (cut short, as a disk fault might leave it): the next
/// checkpoint is taken whole instead of failing from then on, and restores; a prune goes
/// past a kept checkpoint that does not read.
#[test]
fn a_damaged_latest_manifest_heals_with_the_next_checkpoint() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::write(ws.join("a"), "one")?;
    let first = store.checkpoint(&ws, &none)?;
    fs::write(ws.join("a"), "two")?;
    let second = store.checkpoint(&ws, &none)?;
    let file = dir
        .path()
        .join(format!("checkpoints/manifests/{}.v2", second.id));
    let bytes = fs::read(&file)?;
    fs::write(&file, &bytes[..bytes.len() / 2])?;
    // As a fresh process sees it: the latest checkpoint is remembered per store root, so
    // the store is opened by another path to it.
    symlink(dir.path().join("checkpoints"), dir.path().join("alias"))?;
    let fresh = Store::open(dir.path().join("alias"))?;
    assert!(fresh.manifest(&second.id).is_err());
    fs::write(ws.join("b"), "new")?;
    let third = fresh.checkpoint(&ws, &none)?;
    assert!(third.id > second.id);
    assert_eq!(third.stats.hashed, 2, "taken whole");
    fs::write(ws.join("a"), "three")?;
    let fourth = fresh.checkpoint(&ws, &none)?;
    // The damaged one is among the kept: passed over.
    assert_eq!(fresh.prune(3)?, 1);
    assert_eq!(
        fresh.list()?,
        [second.id, third.id.clone(), fourth.id.clone()]
    );
    assert!(fresh.manifest(&first.id).is_err());
    fresh.restore(&third.id, &ws, &none)?;
    assert_eq!(fs::read_to_string(ws.join("a"))?, "two");
    assert_eq!(fs::read_to_string(ws.join("b"))?, "new");
    fresh.restore(&fourth.id, &ws, &none)?;
    assert_eq!(fs::read_to_string(ws.join("a"))?, "three");
    Ok(())
}

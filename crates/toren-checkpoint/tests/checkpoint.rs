//! Checkpoints of real directories: incremental, deduplicated, restored byte for byte,
//! compared, pruned.

// Test helpers outside `#[test]` functions: a failed read is a failed test.
#![allow(clippy::unwrap_used)]
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use toren_checkpoint::{Change, Exclude, Store};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Everything under `root` as the test sees it: path → (kind, mode, content or target).
fn snapshot(root: &Path) -> BTreeMap<String, (char, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let t = fs::read_link(&path).unwrap();
                out.insert(rel, ('l', 0, t.display().to_string().into_bytes()));
            } else if meta.is_dir() {
                out.insert(rel, ('d', mode, Vec::new()));
                stack.push(path);
            } else {
                out.insert(rel, ('f', mode, fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn setup() -> Result<(tempfile::TempDir, std::path::PathBuf, Store), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    fs::create_dir(&ws)?;
    let store = Store::open(dir.path().join("checkpoints"))?;
    Ok((dir, ws, store))
}

#[test]
fn restore_brings_back_the_tree_byte_for_byte() -> TestResult {
    let (_dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::create_dir_all(ws.join("src/deep"))?;
    fs::write(ws.join("src/main.rs"), "fn main() {}\n")?;
    fs::write(ws.join("src/deep/data.bin"), [0u8, 1, 2, 255])?;
    fs::write(ws.join("run.sh"), "#!/bin/sh\necho hi\n")?;
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755))?;
    symlink("src/main.rs", ws.join("link"))?;
    symlink("/etc/passwd", ws.join("outside"))?;
    let before = snapshot(&ws);
    let first = store.checkpoint(&ws, &none)?;

    // Change everything: edit, delete, add, chmod, turn a file into a dir, retarget a link.
    fs::write(ws.join("src/main.rs"), "fn main() { println!(); }\n")?;
    fs::remove_file(ws.join("src/deep/data.bin"))?;
    fs::write(ws.join("new.txt"), "new")?;
    fs::create_dir_all(ws.join("added/dir"))?;
    fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o600))?;
    fs::remove_file(ws.join("link"))?;
    fs::create_dir(ws.join("link"))?;
    fs::remove_file(ws.join("outside"))?;
    symlink("/tmp", ws.join("outside"))?;
    store.checkpoint(&ws, &none)?;
    assert_ne!(snapshot(&ws), before);

    store.restore(&first.id, &ws, &none)?;
    assert_eq!(snapshot(&ws), before);
    // The symlink to outside is itself again, and /etc/passwd was never touched.
    assert_eq!(fs::read_link(ws.join("outside"))?, Path::new("/etc/passwd"));
    // Restoring again changes nothing.
    store.restore(&first.id, &ws, &none)?;
    assert_eq!(snapshot(&ws), before);
    Ok(())
}

#[test]
fn unchanged_files_are_not_read_again_and_content_is_stored_once() -> TestResult {
    let (_dir, ws, store) = setup()?;
    let none = Exclude::default();
    for i in 0..50 {
        fs::write(ws.join(format!("f{i}")), "same content")?;
    }
    let first = store.checkpoint(&ws, &none)?;
    assert_eq!(first.stats.entries, 50);
    assert_eq!(first.stats.hashed, 50);
    assert_eq!(first.stats.blobs_written, 1, "50 equal files are one blob");

    let again = store.checkpoint(&ws, &none)?;
    assert_eq!(again.stats.hashed, 0, "nothing changed: stat only");
    assert_eq!(again.stats.blobs_written, 0);

    fs::write(ws.join("f7"), "other content")?;
    let third = store.checkpoint(&ws, &none)?;
    assert_eq!(third.stats.hashed, 1);
    assert_eq!(third.stats.blobs_written, 1);
    assert_eq!(again.id, first.id, "nothing changed: the same checkpoint");
    assert_eq!(store.list()?, vec![first.id, third.id]);
    Ok(())
}

#[test]
fn excluded_paths_are_neither_stored_nor_touched_by_restore() -> TestResult {
    let (dir, ws, store) = setup()?;
    let ex = Exclude::new(&["node_modules/", "*.log"])?;
    fs::create_dir_all(ws.join("web/node_modules/pkg"))?;
    fs::write(ws.join("web/node_modules/pkg/index.js"), "x")?;
    fs::write(ws.join("build.log"), "log")?;
    fs::write(ws.join("kept.txt"), "kept")?;
    let cp = store.checkpoint(&ws, &ex)?;
    let paths: Vec<String> = store
        .manifest(&cp.id)?
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(paths, vec!["kept.txt", "web"]);

    fs::write(ws.join("build.log"), "more log")?;
    fs::write(ws.join("kept.txt"), "changed")?;
    store.restore(&cp.id, &ws, &ex)?;
    assert_eq!(fs::read_to_string(ws.join("kept.txt"))?, "kept");
    assert_eq!(fs::read_to_string(ws.join("build.log"))?, "more log");
    assert!(ws.join("web/node_modules/pkg/index.js").exists());
    // The store is beside the workspace, not in it.
    assert!(!store.root().starts_with(&ws));
    assert!(dir.path().join("checkpoints/objects").is_dir());
    Ok(())
}

#[test]
fn diff_is_unified_for_text_and_one_line_for_binary() -> TestResult {
    let (_dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::write(ws.join("a.txt"), "one\ntwo\nthree\n")?;
    fs::write(ws.join("img.bin"), [0u8, 159, 146, 150])?;
    fs::write(ws.join("gone.txt"), "bye\n")?;
    let a = store.checkpoint(&ws, &none)?;
    fs::write(ws.join("a.txt"), "one\n2\nthree\n")?;
    fs::write(ws.join("img.bin"), [0u8, 1])?;
    fs::remove_file(ws.join("gone.txt"))?;
    fs::write(ws.join("new.txt"), "hello\n")?;
    fs::set_permissions(ws.join("a.txt"), fs::Permissions::from_mode(0o644))?;
    let b = store.checkpoint(&ws, &none)?;
    let diffs = store.diff(&a.id, &b.id)?;
    let by: BTreeMap<_, _> = diffs.iter().map(|d| (d.path.as_str(), d)).collect();
    assert_eq!(by.len(), 4);
    assert_eq!(by["a.txt"].change, Change::Modified);
    assert_eq!(
        by["a.txt"].text,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    );
    assert_eq!(
        by["img.bin"].text,
        "Binary file img.bin differs (4 -> 2 bytes)\n"
    );
    assert_eq!(by["gone.txt"].change, Change::Removed);
    assert!(by["gone.txt"].text.contains("+++ /dev/null"));
    assert_eq!(by["new.txt"].change, Change::Added);
    assert!(by["new.txt"].text.contains("+hello"));
    Ok(())
}

#[test]
fn prune_keeps_the_newest_and_their_blobs() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    let mut ids = Vec::new();
    for i in 0..5 {
        fs::write(ws.join("f"), format!("version {i}"))?;
        ids.push(store.checkpoint(&ws, &none)?.id);
    }
    let blobs = |d: &Path| {
        fs::read_dir(d.join("checkpoints/objects"))
            .unwrap()
            .map(|f| fs::read_dir(f.unwrap().path()).unwrap().count())
            .sum::<usize>()
    };
    assert_eq!(blobs(dir.path()), 5);
    assert_eq!(store.prune(2)?, 3);
    assert_eq!(store.list()?, ids[3..].to_vec());
    assert_eq!(blobs(dir.path()), 2);
    store.restore(&ids[3], &ws, &none)?;
    assert_eq!(fs::read_to_string(ws.join("f"))?, "version 3");
    assert!(store.restore(&ids[0], &ws, &none).is_err());
    Ok(())
}

#[test]
fn restore_never_follows_a_symlink_put_in_place_of_a_directory() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::create_dir_all(ws.join("d/sub"))?;
    fs::write(ws.join("d/sub/f"), "inside")?;
    fs::write(ws.join("d/g"), "g")?;
    let before = snapshot(&ws);
    let first = store.checkpoint(&ws, &none)?;
    // What a process left running in the sandbox may do: the directory becomes a symlink
    // to one outside, holding a file of the same name.
    let outside = dir.path().join("outside");
    fs::create_dir_all(outside.join("sub"))?;
    fs::write(outside.join("sub/f"), "victim")?;
    fs::write(outside.join("g"), "victim g")?;
    let outside_before = snapshot(&outside);
    fs::remove_dir_all(ws.join("d"))?;
    symlink(&outside, ws.join("d"))?;

    store.restore(&first.id, &ws, &none)?;
    assert_eq!(
        snapshot(&ws),
        before,
        "the workspace is the checkpoint's again"
    );
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "nothing outside was touched"
    );
    Ok(())
}

/// The child half of `a_checkpoint_killed_at_any_point_leaves_a_consistent_store`: changes
/// the workspace and checkpoints it, over and over, until it is killed.
#[test]
#[ignore = "run by the SIGKILL test as its child process"]
fn checkpoint_forever_child() -> TestResult {
    let Some(dir) = std::env::var_os("TOREN_CHECKPOINT_KILL_DIR") else {
        return Ok(());
    };
    let dir = Path::new(&dir);
    let ws = dir.join("workspace");
    let store = Store::open(dir.join("checkpoints"))?;
    for round in 0u64.. {
        for i in 0..40 {
            fs::write(
                ws.join(format!("t/{i}.txt")),
                format!("{round} {i}\n").repeat(200),
            )?;
        }
        fs::write(ws.join(format!("new{round}")), round.to_string())?;
        store.checkpoint(&ws, &Exclude::default())?;
        store.prune(5)?;
    }
    Ok(())
}

/// A process killed (SIGKILL) at random points while it checkpoints leaves a store whose
/// every manifest parses and names only blobs that are there with the content their name
/// says; checkpointing and restoring go on working.
#[test]
fn a_checkpoint_killed_at_any_point_leaves_a_consistent_store() -> TestResult {
    use sha2::Digest;
    let (dir, ws, store) = setup()?;
    fs::create_dir_all(ws.join("t"))?;
    for i in 0..400 {
        fs::write(
            ws.join(format!("t/base{i}")),
            format!("base {i}\n").repeat(50),
        )?;
    }
    let exe = std::env::current_exe()?;
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "checkpoint_forever_child",
                "--ignored",
                "--quiet",
            ])
            .env("TOREN_CHECKPOINT_KILL_DIR", dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        // Fault injection, not synchronisation: kill after a random 20-300 ms.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(std::time::Duration::from_millis(20 + (seed >> 33) % 280));
        child.kill()?;
        child.wait()?;
        for id in store.list()? {
            let manifest = store.manifest(&id)?;
            for entry in manifest.entries {
                if let toren_checkpoint::EntryKind::File { hash, size, .. } = entry.kind {
                    let blob = store.blob(&hash)?;
                    assert_eq!(blob.len() as u64, size, "{id}: {}", entry.path);
                    assert_eq!(hex::encode(sha2::Sha256::digest(&blob)), hash);
                }
            }
        }
        // It goes on: the workspace now is checkpointed and restored exactly.
        let now = snapshot(&ws);
        let taken = store.checkpoint(&ws, &Exclude::default())?;
        fs::write(ws.join("t/0.txt"), "scribbled")?;
        fs::remove_dir_all(ws.join("t"))?;
        store.restore(&taken.id, &ws, &Exclude::default())?;
        assert_eq!(snapshot(&ws), now);
    }
    Ok(())
}

/// The walk lists directories on several threads and the latest manifest is reused from
/// memory: the manifest still names every path once, sorted, and a checkpoint after a
/// change made between two calls (in a tree wide and deep enough for the threads to share
/// it) reads exactly the changed file and records its new content.
#[test]
fn a_wide_tree_is_walked_whole_and_the_remembered_manifest_is_the_file() -> TestResult {
    let (_dir, ws, store) = setup()?;
    let mut expected = Vec::new();
    for d in 0..40 {
        let sub = format!("d{d}/e{}", d % 3);
        fs::create_dir_all(ws.join(&sub))?;
        expected.push(format!("d{d}"));
        expected.push(sub.clone());
        for f in 0..5 {
            let path = format!("{sub}/f{f}");
            fs::write(ws.join(&path), format!("{d} {f}"))?;
            expected.push(path);
        }
    }
    expected.sort();
    let first = store.checkpoint(&ws, &Exclude::default())?;
    let paths = |id: &str| -> Result<Vec<String>, toren_checkpoint::Error> {
        Ok(store
            .manifest(id)?
            .entries
            .into_iter()
            .map(|e| e.path)
            .collect())
    };
    assert_eq!(paths(&first.id)?, expected);
    fs::write(ws.join("d17/e2/f3"), "changed")?;
    let second = store.checkpoint(&ws, &Exclude::default())?;
    assert_eq!(second.stats.hashed, 1);
    assert_ne!(second.id, first.id);
    assert_eq!(paths(&second.id)?, expected);
    // Nothing changed: the same checkpoint, decided against the remembered manifest.
    let third = store.checkpoint(&ws, &Exclude::default())?;
    assert_eq!(
        (third.id.as_str(), third.stats.hashed),
        (second.id.as_str(), 0)
    );
    fs::write(ws.join("d17/e2/f3"), "fs")?;
    let fourth = store.checkpoint(&ws, &Exclude::default())?;
    store.restore(&second.id, &ws, &Exclude::default())?;
    assert_eq!(fs::read(ws.join("d17/e2/f3"))?, b"changed");
    assert_eq!(fourth.stats.hashed, 1);
    Ok(())
}

/// A restore told to stop gives up before its next change with `Error::Stopped`; the
/// workspace is left as it was, and a restore let run finishes it.
#[test]
fn a_stopped_restore_changes_nothing_more() -> TestResult {
    let (_dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::write(ws.join("a"), "first")?;
    let first = store.checkpoint(&ws, &none)?;
    fs::write(ws.join("a"), "second")?;
    fs::write(ws.join("b"), "new")?;
    let stop = std::sync::atomic::AtomicBool::new(true);
    let stopped = store.restore_unless(&first.id, &ws, &none, &stop);
    assert!(
        matches!(stopped, Err(toren_checkpoint::Error::Stopped { .. })),
        "{stopped:?}"
    );
    assert_eq!(fs::read_to_string(ws.join("a"))?, "second");
    assert!(ws.join("b").exists());
    store.restore(&first.id, &ws, &none)?;
    assert_eq!(fs::read_to_string(ws.join("a"))?, "first");
    assert!(!ws.join("b").exists());
    Ok(())
}

#[test]
fn a_checkpoint_missing_a_blob_is_not_restorable_and_its_restore_changes_nothing() -> TestResult {
    let (dir, ws, store) = setup()?;
    let none = Exclude::default();
    fs::write(ws.join("a"), "kept")?;
    fs::write(ws.join("b"), "lost")?;
    let id = store.checkpoint(&ws, &none)?.id;
    store.check_restorable(&id)?;
    // The blob of `b` goes (a damaged store); the workspace moves on.
    let hash = sha_hex(b"lost");
    fs::remove_file(
        dir.path()
            .join("checkpoints/objects")
            .join(&hash[..2])
            .join(&hash[2..]),
    )?;
    fs::remove_file(ws.join("a"))?;
    fs::write(ws.join("new"), "after")?;
    let after = snapshot(&ws);
    let missing = store.check_restorable(&id).unwrap_err();
    assert!(
        matches!(&missing, toren_checkpoint::Error::MissingBlob { hash: h, .. } if *h == hash),
        "{missing}"
    );
    let failed = store.restore(&id, &ws, &none).unwrap_err();
    assert!(
        matches!(failed, toren_checkpoint::Error::MissingBlob { .. }),
        "{failed}"
    );
    assert_eq!(
        snapshot(&ws),
        after,
        "a restore that cannot finish started anyway"
    );
    assert!(matches!(
        store.check_restorable("01aaaaaaaaaaaaaaaaaaaaaaaa"),
        Err(toren_checkpoint::Error::NotFound { .. })
    ));
    Ok(())
}

fn sha_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

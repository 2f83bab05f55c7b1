//! Workspace access through the capability handle: what is allowed, what is refused, and
//! with which error.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use toren_sandbox::{EntryInfo, EntryKind, Error, Workspace};

/// A sandbox root with one workspace `ws` and a sibling file `secret.txt` outside it.
fn setup() -> (TempDir, Workspace) {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("secret.txt"), "outside").unwrap();
    let ws = Workspace::create(root.path(), "ws").unwrap();
    (root, ws)
}

fn assert_escape(result: Result<impl std::fmt::Debug, Error>, path: &str) {
    match result {
        Err(err @ Error::PathEscape { .. }) => {
            assert_eq!(
                err.to_string(),
                format!(
                    "path `{path}` leads outside the workspace; paths are relative to the \
                     workspace root"
                )
            );
            assert!(err.is_model_fixable());
        }
        other => panic!("`{path}` must be refused as an escape, got {other:?}"),
    }
}

#[test]
fn create_makes_private_directories_and_reopens_existing_ones() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("sandboxes");
    let ws = Workspace::create(&root, "run_1").unwrap();
    assert_eq!(ws.path(), root.join("run_1"));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(ws.path()), 0o700);

    ws.write("kept.txt", b"still here").unwrap();
    let again = Workspace::create(&root, "run_1").unwrap();
    assert_eq!(again.read("kept.txt", 100).unwrap(), b"still here");
    let opened = Workspace::open(&root, "run_1").unwrap();
    assert_eq!(opened.read("kept.txt", 100).unwrap(), b"still here");
}

#[test]
fn opening_a_missing_workspace_is_a_host_fault() {
    let base = tempfile::tempdir().unwrap();
    let err = Workspace::open(base.path(), "run_missing").unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(!err.is_model_fixable());
    assert!(
        err.to_string().contains("cannot open the workspace"),
        "{err}"
    );
}

#[test]
fn workspace_names_are_single_components() {
    let base = tempfile::tempdir().unwrap();
    for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
        let err = Workspace::create(base.path(), bad).unwrap_err();
        assert!(
            matches!(err, Error::InvalidWorkspaceName { .. }),
            "{bad:?}: {err:?}"
        );
    }
}

#[test]
fn writes_create_parent_directories_and_read_back() {
    let (_root, ws) = setup();
    ws.write("a/b/c.txt", b"deep").unwrap();
    assert_eq!(std::fs::read(ws.path().join("a/b/c.txt")).unwrap(), b"deep");
    assert_eq!(ws.read("a/b/c.txt", 4).unwrap(), b"deep");
    assert_eq!(ws.read("a/./b/../b/c.txt", 4).unwrap(), b"deep");
    ws.write("a/b/c.txt", b"x").unwrap();
    assert_eq!(
        ws.read("a/b/c.txt", 4).unwrap(),
        b"x",
        "a write replaces the whole file"
    );
    assert_eq!(
        ws.metadata("a/b/c.txt").unwrap(),
        EntryInfo {
            kind: EntryKind::File,
            len: 1
        }
    );
    assert_eq!(ws.metadata("a").unwrap().kind, EntryKind::Directory);
}

#[test]
fn dot_dot_and_absolute_paths_are_refused() {
    let (_root, ws) = setup();
    ws.write("a/x", b"").unwrap();
    for path in [
        "../secret.txt",
        "a/../../secret.txt",
        "/etc/passwd",
        "./../ws/../secret.txt",
    ] {
        assert_escape(ws.read(path, 1000), path);
    }
    assert_escape(ws.write("../planted.txt", b"x"), "../planted.txt");
    assert_escape(
        ws.write("sub/../../planted.txt", b"x"),
        "sub/../../planted.txt",
    );
    assert!(!ws.path().parent().unwrap().join("planted.txt").exists());
}

#[test]
fn the_sandbox_mount_point_gets_a_hint() {
    let (_root, ws) = setup();
    let err = ws.read("/workspace/src/main.rs", 10).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid path `/workspace/src/main.rs`: paths are relative to the workspace root, \
         which bash sees as `/workspace`; write `src/main.rs` instead"
    );
    assert!(err.is_model_fixable());
}

#[test]
fn symlinks_leading_outside_are_refused() {
    let (root, ws) = setup();
    let ws_path = ws.path().to_owned();
    symlink("/", ws_path.join("rootfs")).unwrap();
    symlink("/etc/passwd", ws_path.join("abs_out")).unwrap();
    symlink("../secret.txt", ws_path.join("rel_out")).unwrap();
    symlink("hop2", ws_path.join("hop1")).unwrap();
    symlink("sub/../../secret.txt", ws_path.join("hop2")).unwrap();
    symlink(root.path(), ws_path.join("outdir")).unwrap();
    // Absolute symlinks are refused even when they point inside.
    symlink(ws_path.join("inside.txt"), ws_path.join("abs_in")).unwrap();
    ws.write("inside.txt", b"in").unwrap();
    ws.write("sub/x", b"").unwrap();

    for path in [
        "rootfs/etc/passwd",
        "abs_out",
        "rel_out",
        "hop1",
        "outdir/secret.txt",
        "abs_in",
    ] {
        assert_escape(ws.read(path, 1000), path);
        assert_escape(ws.metadata(path), path);
    }
    assert_escape(ws.write("outdir/planted.txt", b"x"), "outdir/planted.txt");
    assert_escape(
        ws.write("outdir/new/planted.txt", b"x"),
        "outdir/new/planted.txt",
    );
    assert_escape(ws.write("rel_out", b"overwritten"), "rel_out");
    assert!(!root.path().join("planted.txt").exists());
    assert!(!root.path().join("new").exists());
    assert_eq!(
        std::fs::read_to_string(root.path().join("secret.txt")).unwrap(),
        "outside"
    );
}

#[test]
fn writes_through_dangling_symlinks_pointing_outside_are_refused() {
    let (root, ws) = setup();
    let target = root.path().join("created-by-write.txt");
    symlink(&target, ws.path().join("dangling_abs")).unwrap();
    symlink("../created-by-relative.txt", ws.path().join("dangling_rel")).unwrap();

    assert_escape(ws.write("dangling_abs", b"x"), "dangling_abs");
    assert_escape(ws.write("dangling_rel", b"x"), "dangling_rel");
    assert!(!target.exists());
    assert!(!root.path().join("created-by-relative.txt").exists());
}

#[test]
fn symlinks_staying_inside_are_followed() {
    let (_root, ws) = setup();
    ws.write("sub/file.txt", b"target").unwrap();
    symlink("sub/file.txt", ws.path().join("link")).unwrap();
    symlink("..", ws.path().join("sub/up")).unwrap();
    assert_eq!(ws.read("link", 100).unwrap(), b"target");
    assert_eq!(ws.read("sub/up/sub/file.txt", 100).unwrap(), b"target");
    ws.write("link", b"through the link").unwrap();
    assert_eq!(
        std::fs::read(ws.path().join("sub/file.txt")).unwrap(),
        b"through the link"
    );
}

#[test]
fn bad_paths_get_clear_errors() {
    let (_root, ws) = setup();
    ws.write("file.txt", b"12345").unwrap();
    ws.write("dir/x", b"").unwrap();

    let cases: Vec<(Error, &str)> = vec![
        (
            ws.read("", 10).unwrap_err(),
            "invalid path ``: the path is empty; give a path relative to the workspace root, \
             e.g. `notes.txt`",
        ),
        (
            ws.write("a\0b", b"").unwrap_err(),
            "invalid path `a\0b`: the path contains a NUL byte",
        ),
        (
            ws.read("missing.txt", 10).unwrap_err(),
            "`missing.txt` does not exist in the workspace",
        ),
        (
            ws.metadata("nope/x").unwrap_err(),
            "`nope/x` does not exist in the workspace",
        ),
        (
            ws.read("file.txt", 4).unwrap_err(),
            "`file.txt` is 5 bytes, more than the limit of 4 bytes",
        ),
        (
            ws.read("dir", 10).unwrap_err(),
            "`dir` is a directory, not a file",
        ),
        (
            ws.write("dir", b"x").unwrap_err(),
            "`dir` is a directory, not a file",
        ),
        (
            ws.write("file.txt/inner", b"x").unwrap_err(),
            "invalid path `file.txt/inner`: a component of the path is a file, not a directory",
        ),
    ];
    for (err, message) in cases {
        assert_eq!(err.to_string(), message);
        assert!(err.is_model_fixable(), "{err:?} is the model's to fix");
    }
}

#[test]
fn named_pipes_are_refused_without_blocking() {
    let (_root, ws) = setup();
    nix::unistd::mkfifo(&ws.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let started = Instant::now();
    let err = ws.read("fifo", 100).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`fifo` is not a regular file (it is a named pipe)"
    );
    assert!(err.is_model_fixable());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_rewrite_replaces_the_file_whole_and_keeps_its_permissions() {
    // A process killed mid-write must leave the old file or the new one, never a truncated
    // one (the chaos test found an edit emptied by a kill): writes go through a temporary
    // file renamed over the target.
    let (_dir, ws) = setup();
    ws.write("bin/run.sh", b"#!/bin/sh\necho old\n").unwrap();
    let script = ws.path().join("bin/run.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = std::fs::metadata(&script).unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&before);

    ws.write("bin/run.sh", b"#!/bin/sh\necho new\n").unwrap();
    let after = std::fs::metadata(&script).unwrap();
    assert_eq!(std::fs::read(&script).unwrap(), b"#!/bin/sh\necho new\n");
    assert_eq!(after.permissions().mode() & 0o777, 0o755);
    assert_ne!(
        std::os::unix::fs::MetadataExt::ino(&after),
        inode,
        "a new file was renamed in"
    );
    let names: Vec<String> = std::fs::read_dir(ws.path().join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["run.sh"], "no temporary file is left behind");
}

//! Workspace access through the capability handle: what is allowed, what is refused, and
//! with which error.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use toren_sandbox::{EntryInfo, EntryKind, Error, Workspace, workspace_path};

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
    assert_eq!(ws.path(), root.join("run_1").join("workspace"));
    assert_eq!(ws.path(), workspace_path(&root, "run_1"));
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&root.join("run_1")), 0o700);
    assert_eq!(mode(ws.path()), 0o700);

    ws.write("kept.txt", b"still here").unwrap();
    let again = Workspace::create(&root, "run_1").unwrap();
    assert_eq!(again.read("kept.txt", 100).unwrap(), b"still here");
    let opened = Workspace::open(&root, "run_1").unwrap();
    assert_eq!(opened.read("kept.txt", 100).unwrap(), b"still here");
    let exact = Workspace::open_path(ws.path()).unwrap();
    assert_eq!(exact.path(), ws.path());
    assert_eq!(exact.read("kept.txt", 100).unwrap(), b"still here");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_private_directory_stays_private_whatever_the_agent_and_the_root_allow() {
    // The agent runs as Toren's user and can open up the workspace it sees; the directory
    // around it, which it cannot name, is what keeps other local users out.
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("shared-root");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let ws = Workspace::create(&root, "run_1").unwrap();
    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let private = root.join("run_1");
    assert_eq!(mode(&private), 0o700);
    // A private directory loosened by hand is tightened again when the run reopens it.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
    Workspace::create(&root, "run_1").unwrap();
    assert_eq!(mode(&private), 0o700);
    Workspace::open(&root, "run_1").unwrap();
    assert_eq!(mode(&private), 0o700);
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o755)).unwrap();
    Workspace::open_path(ws.path()).unwrap();
    assert_eq!(mode(&private), 0o700);
    assert_eq!(mode(&root), 0o1777, "the operator's root is left as it is");
}

#[test]
fn a_planted_private_directory_is_refused() {
    // In a shared sandbox root another user could make `<run id>` first: as a symlink to
    // somewhere of theirs, or as their own directory.
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("sandboxes");
    std::fs::create_dir(&root).unwrap();
    let theirs = base.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    symlink(&theirs, root.join("run_link")).unwrap();
    let err = Workspace::create(&root, "run_link").unwrap_err();
    assert!(!err.is_model_fixable());
    assert!(err.to_string().contains("not a symlink"), "{err}");
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);

    if nix::unistd::geteuid().is_root() {
        let planted = root.join("run_planted");
        std::fs::create_dir(&planted).unwrap();
        std::os::unix::fs::chown(&planted, Some(4321), Some(4321)).unwrap();
        let err = Workspace::create(&root, "run_planted").unwrap_err();
        assert!(
            matches!(err, Error::ForeignWorkspace { owner: 4321, .. }),
            "{err:?}"
        );
        assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);
    } else {
        eprintln!("not root: cannot plant a directory owned by another user");
    }
}

#[test]
fn workspaces_of_the_flat_layout_still_open() {
    // Before the private directory, `<root>/<run id>` was the workspace itself.
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("sandboxes");
    let old = root.join("run_old");
    std::fs::create_dir_all(old.join("src")).unwrap();
    std::fs::write(old.join("notes.txt"), "from before\n").unwrap();
    for ws in [
        Workspace::open_path(&old).unwrap(),
        Workspace::open(&root, "run_old").unwrap(),
        Workspace::create(&root, "run_old").unwrap(),
    ] {
        assert_eq!(ws.path(), old);
        assert_eq!(ws.read("notes.txt", 100).unwrap(), b"from before\n");
    }
    assert!(
        !old.join("workspace").exists(),
        "nothing was moved or added"
    );
}

#[test]
fn opening_a_missing_workspace_is_a_host_fault_naming_it() {
    let base = tempfile::tempdir().unwrap();
    let missing = base.path().join("run_missing");
    let err = Workspace::open_path(&missing).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the workspace `{}` does not exist (Toren never deletes workspaces: was it moved \
             or deleted by hand?)",
            missing.display()
        )
    );
    assert!(!err.is_model_fixable());
    let err = Workspace::open(base.path(), "run_missing").unwrap_err();
    assert!(matches!(err, Error::WorkspaceMissing { .. }), "{err:?}");
    assert!(
        err.to_string().contains(
            &workspace_path(base.path(), "run_missing")
                .display()
                .to_string()
        ),
        "{err}"
    );
    assert!(!err.is_model_fixable());
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
fn absolute_paths_get_messages_that_never_suggest_an_escape() {
    let (_root, ws) = setup();
    let hint = |inside: &str| {
        format!(
            "paths are relative to the workspace root, which bash sees as `/workspace`; write \
             `{inside}` instead"
        )
    };
    let root_itself = "`/workspace` is the workspace root itself, a directory; paths are \
                       relative to it: `notes.txt` is `/workspace/notes.txt`";
    let cases = [
        ("/workspace/src/main.rs", Some(hint("src/main.rs"))),
        ("/workspace/./a//b/", Some(hint("a/b"))),
        ("/workspace/a/../b.txt", Some(hint("b.txt"))),
        ("/workspace/../workspace/x", Some(hint("x"))),
        ("/workspace", Some(root_itself.to_owned())),
        ("/workspace/", Some(root_itself.to_owned())),
        ("/workspace/.", Some(root_itself.to_owned())),
        ("/workspace/..", None),
        ("/workspace/../etc/passwd", None),
        ("/workspace/a/../../etc/passwd", None),
        ("/workspace/../../outside/victim.txt", None),
        ("/workspaces/x", None),
        ("/etc/passwd", None),
        ("/", None),
    ];
    for (path, hint) in cases {
        for err in [
            ws.read(path, 10).unwrap_err(),
            ws.write(path, b"x").unwrap_err(),
            ws.metadata(path).unwrap_err(),
        ] {
            match &hint {
                Some(why) => assert_eq!(err.to_string(), format!("invalid path `{path}`: {why}")),
                None => assert!(matches!(err, Error::PathEscape { .. }), "{path}: {err:?}"),
            }
            assert!(err.is_model_fixable());
            assert!(!err.to_string().contains("write `.."), "{path}: {err}");
        }
    }
}

#[test]
fn relative_paths_naming_the_root_are_directories() {
    let (_root, ws) = setup();
    for path in [".", "./", ".//", "a/..", "./."] {
        if path == "a/.." {
            ws.write("a/x", b"").unwrap();
        }
        assert_eq!(
            ws.read(path, 10).unwrap_err().to_string(),
            format!("`{path}` is a directory, not a file")
        );
        assert_eq!(
            ws.write(path, b"x").unwrap_err().to_string(),
            format!("`{path}` is a directory, not a file")
        );
    }
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

/// What the agent can make in its workspace that is not a regular file, made on the host
/// the same way; each name is also reached through a symlink `<name>_link`. A character
/// device (`/dev/null`'s numbers) only as root: no one else may make one.
fn special_files(ws: &Workspace) -> Vec<(&'static str, &'static str)> {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};
    let dir = ws.path();
    nix::unistd::mkfifo(&dir.join("fifo"), Mode::S_IRWXU).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
    std::mem::forget(listener);
    let mut kinds = vec![("fifo", "named pipe (FIFO)"), ("socket", "unix socket")];
    if nix::unistd::geteuid().is_root() {
        mknod(
            &dir.join("null"),
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(1, 3),
        )
        .unwrap();
        kinds.push(("null", "character device"));
    } else {
        eprintln!("not root: cannot make a character device");
    }
    for (name, _) in &kinds {
        symlink(name, dir.join(format!("{name}_link"))).unwrap();
    }
    kinds
}

#[test]
fn special_files_are_refused_by_name_without_opening_them() {
    let (_root, ws) = setup();
    let kinds = special_files(&ws);
    let started = Instant::now();
    for (name, kind) in kinds {
        for (path, verb) in [
            (name.to_owned(), "is"),
            (format!("{name}_link"), "is a symbolic link to"),
        ] {
            let want = format!(
                "`{path}` {verb} a {kind}, not a regular file; read_file, write_file and \
                 edit_file work only on regular files (use bash to work with it, e.g. \
                 `ls -l {path}`)"
            );
            for err in [
                ws.read(&path, 100).unwrap_err(),
                ws.write(&path, b"written").unwrap_err(),
            ] {
                assert_eq!(err.to_string(), want);
                assert!(err.is_model_fixable(), "{err:?}");
            }
            assert_eq!(ws.metadata(&path).unwrap().kind, EntryKind::Other);
        }
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    // Nothing was replaced: the entries are still what they were.
    let kind = |name: &str| std::fs::symlink_metadata(ws.path().join(name)).unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(kind("fifo").file_type().is_fifo());
    assert!(kind("socket").file_type().is_socket());
    assert!(kind("fifo_link").file_type().is_symlink());
}

#[test]
fn errors_the_agent_can_cause_are_the_models_to_fix() {
    use nix::errno::Errno;
    // Each errno follows from something the agent can make: a socket or a pipe without
    // reader (ENXIO), a running program (ETXTBSY), a read-only file (EACCES), a directory
    // with too many links (EMLINK)…
    let agents = [
        Errno::ENXIO,
        Errno::ETXTBSY,
        Errno::EAGAIN,
        Errno::EACCES,
        Errno::EPERM,
        Errno::ELOOP,
        Errno::EMLINK,
        Errno::ENOSPC,
    ];
    let hosts = [Errno::EIO, Errno::ENOMEM, Errno::EMFILE, Errno::EROFS];
    let fs = |errno: Errno| Error::Fs {
        op: "write",
        path: "x".to_owned(),
        source: std::io::Error::from_raw_os_error(errno as i32),
    };
    for errno in agents {
        assert!(fs(errno).is_model_fixable(), "{errno}");
    }
    for errno in hosts {
        assert!(!fs(errno).is_model_fixable(), "{errno}");
    }
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

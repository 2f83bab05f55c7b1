//! The file tools' operations on the VM: written and read back on the sandbox's own disk,
//! and every way out refused in the VM — `..`, absolute paths, symlinks the agent made
//! with bash (to a file, to a directory, dangling), besides directories, named pipes,
//! missing and oversized files.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use toren_sandbox::{EntryKind, Error, Files, SandboxBackend};

use super::support::{Fixture, policy, run, run_id};

async fn blocking<T: Send + 'static>(
    files: &Arc<dyn Files>,
    work: impl FnOnce(&dyn Files) -> T + Send + 'static,
) -> T {
    let files = Arc::clone(files);
    tokio::task::spawn_blocking(move || work(files.as_ref()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_written_and_read_in_the_vm() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let files = sandbox.files();
    blocking(&files, |f| f.write("notes/todo.txt", b"one\ntwo\n"))
        .await
        .unwrap();
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert_eq!(
        std::fs::read(disk.workspace().join("notes/todo.txt")).unwrap(),
        b"one\ntwo\n"
    );
    // bash sees what the file tools wrote, and the file tools what bash wrote.
    assert_eq!(
        run(
            sandbox.as_ref(),
            "cat notes/todo.txt; echo three >> notes/todo.txt"
        )
        .await
        .output,
        "one\ntwo\n"
    );
    let read = blocking(&files, |f| f.read("notes/todo.txt", 1000))
        .await
        .unwrap();
    assert_eq!(read, b"one\ntwo\nthree\n");
    let meta = blocking(&files, |f| f.metadata("notes/todo.txt"))
        .await
        .unwrap();
    assert_eq!((meta.kind, meta.len), (EntryKind::File, 14));
    assert_eq!(
        blocking(&files, |f| f.metadata("notes"))
            .await
            .unwrap()
            .kind,
        EntryKind::Directory
    );
    // A symlink that stays inside is followed.
    run(sandbox.as_ref(), "ln -s notes/todo.txt inside").await;
    assert_eq!(
        blocking(&files, |f| f.read("inside", 1000)).await.unwrap(),
        b"one\ntwo\nthree\n"
    );
    // The host's workspace directory is not where the files are.
    assert!(!sandbox.workspace().path().join("notes").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn every_way_out_is_refused_in_the_vm() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let setup = run(
        sandbox.as_ref(),
        "ln -s /etc etc-link; ln -s /etc/passwd pw; ln -s /tmp/made-outside out; \
         ln -s ../.. up; mkdir d; mkfifo pipe; ln -s pipe pipe-link; head -c 5000 /dev/zero > big",
    )
    .await;
    assert_eq!(setup.exit_code, Some(0), "{}", setup.output);
    let files = sandbox.files();
    for path in [
        "../x",
        "/etc/passwd",
        "etc-link/passwd",
        "pw",
        "up/etc/passwd",
        "a/../../x",
    ] {
        let p = path.to_owned();
        let err = blocking(&files, move |f| f.read(&p, 100_000))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PathEscape { .. }), "{path}: {err:?}");
    }
    for path in ["out", "etc-link/new", "up/tmp/x"] {
        let p = path.to_owned();
        let err = blocking(&files, move |f| f.write(&p, b"x"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::PathEscape { .. }), "{path}: {err:?}");
    }
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert!(!disk.host_path("/tmp/made-outside").unwrap().0.exists());
    let err = blocking(&files, |f| f.read("d", 100)).await.unwrap_err();
    assert!(matches!(err, Error::IsDirectory { .. }), "{err:?}");
    let err = blocking(&files, |f| f.read("pipe", 100)).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotAFile {
                kind: "named pipe (FIFO)",
                via_link: false,
                ..
            }
        ),
        "{err:?}"
    );
    let err = blocking(&files, |f| f.write("pipe-link", b"x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::NotAFile { via_link: true, .. }),
        "{err:?}"
    );
    let err = blocking(&files, |f| f.read("big", 100)).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooLarge {
                size: 5000,
                limit: 100,
                ..
            }
        ),
        "{err:?}"
    );
    let err = blocking(&files, |f| f.read("nope.txt", 100))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    SandboxBackend::finish(&backend, &run_id()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_too_large_for_e2b_is_the_models_to_fix_and_nothing_is_written() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    fx.fake.set_faults(toren_test_support::e2b::Faults {
        upload_limit: Some(1000),
        ..Default::default()
    });
    let files = sandbox.files();
    let err = blocking(&files, |f| f.write("big.txt", &[b'a'; 1001]))
        .await
        .unwrap_err();
    // A tool error the model reads (the file tools report what `is_model_fixable`), not a
    // host fault that fails the run.
    assert!(err.is_model_fixable(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "cannot write `big.txt`: 1001 bytes are more than the E2B sandbox takes in one upload \
         (413); nothing was written. Use bash for files that large (e.g. generate them with a \
         script)"
    );
    let disk = fx.fake.disk(&sandbox.instance_id()).unwrap();
    assert!(!disk.workspace().join("big.txt").exists());
    // The sandbox goes on: a smaller file is written.
    blocking(&files, |f| f.write("small.txt", &[b'a'; 1000]))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(disk.workspace().join("small.txt"))
            .unwrap()
            .len(),
        1000
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_tool_after_the_sandbox_was_killed_works_in_a_new_one_and_bash_says_so() {
    let fx = Fixture::new();
    let backend = fx.backend();
    let sandbox = backend
        .open(&run_id(), &policy(serde_json::json!({})), vec![])
        .await
        .unwrap();
    let files = sandbox.files();
    blocking(&files, |f| f.write("a.txt", b"one\n"))
        .await
        .unwrap();
    let old = sandbox.instance_id();
    assert!(fx.fake.kill(&old));
    // Not a host fault: the write goes to a new sandbox.
    blocking(&files, |f| f.write("b.txt", b"two\n"))
        .await
        .unwrap();
    let new = sandbox.instance_id();
    assert_ne!(new, old);
    let out = run(sandbox.as_ref(), "ls").await;
    assert!(
        out.output
            .starts_with(&format!("[the E2B sandbox `{old}` is gone")),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("]\nb.txt\n"), "{}", out.output);
}

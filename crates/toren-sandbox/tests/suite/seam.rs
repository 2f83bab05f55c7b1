//! The local backend is the worker's [`SandboxBackend`] as it is, with no adapter: held as
//! `dyn SandboxBackend` it opens a run's sandbox under the name policies record, runs in
//! it, and finishing the run leaves the workspace (I-1).

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, RunId};
use toren_sandbox::{ExecRequest, LocalBackend, LocalSettings, SandboxBackend};

#[tokio::test]
async fn the_local_backend_opens_runs_and_finishes_them_through_the_seam() {
    let root = tempfile::tempdir().unwrap();
    let seam: Arc<dyn SandboxBackend> = Arc::new(LocalBackend::new(LocalSettings {
        sandbox_root: root.path().join("sandboxes"),
        bwrap: None,
    }));
    assert_eq!(seam.name(), LocalBackend::NAME);
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: seam.name().to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: vec!["GREETING".to_owned()],
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let run = RunId::new();
    let env = vec![("GREETING".to_owned(), "hello".to_owned())];
    let sandbox = seam.open(&run, &policy, env).await.unwrap();
    assert_eq!(sandbox.backend(), "local");
    let out = sandbox
        .exec(ExecRequest {
            command: "echo \"$GREETING\" > note.txt && cat note.txt".to_owned(),
            timeout: Duration::from_secs(30),
            output_limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.output.as_str()), (Some(0), "hello\n"));

    seam.finish(&run).await.unwrap();
    let note = std::fs::read_to_string(sandbox.workspace().path().join("note.txt")).unwrap();
    assert_eq!(note, "hello\n", "the workspace outlives the run");
}

#[tokio::test]
async fn a_refused_variable_is_a_sandbox_error_through_the_seam() {
    let root = tempfile::tempdir().unwrap();
    let seam: Arc<dyn SandboxBackend> = Arc::new(LocalBackend::new(LocalSettings {
        sandbox_root: root.path().join("sandboxes"),
        bwrap: None,
    }));
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: LocalBackend::NAME.to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let env = vec![("A=B".to_owned(), "x".to_owned())];
    let error = seam
        .open(&RunId::new(), &policy, env)
        .await
        .expect_err("a name with `=`");
    assert!(
        matches!(&error, toren_sandbox::Error::InvalidEnv { name, .. } if name == "A=B"),
        "{error:?}"
    );
}

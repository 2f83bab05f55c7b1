//! The docker backend is the worker's `toren_sandbox::SandboxBackend` as it is, with no
//! adapter: held as `dyn SandboxBackend` it opens a run's sandbox by the name policies
//! record, and at the run's end removes its container and keeps its workspace (I-1).

use std::sync::Arc;

use pretty_assertions::assert_eq;
use toren_protocol::RunId;
use toren_sandbox::SandboxBackend;

use super::support::{Env, policy, run};

#[tokio::test(flavor = "multi_thread")]
async fn finish_through_the_seam_removes_the_container_and_keeps_the_workspace() {
    let env = Env::new().await;
    let seam: Arc<dyn SandboxBackend> = Arc::new(env.backend.clone());
    assert_eq!(seam.name(), "docker");
    let run_id = RunId::new();
    let sandbox = seam.open(&run_id, &policy(), Vec::new()).await.unwrap();
    assert_eq!(
        run(&*sandbox, "echo kept > note.txt").await.exit_code,
        Some(0)
    );
    assert_eq!(env.containers().await.len(), 1, "the command's container");

    seam.finish(&run_id).await.unwrap();
    assert_eq!(env.containers().await, Vec::<String>::new());
    // Finishing a run that holds no container is not an error.
    seam.finish(&run_id).await.unwrap();
    let note = std::fs::read_to_string(sandbox.workspace().path().join("note.txt")).unwrap();
    assert_eq!(note, "kept\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_through_the_seam_fails_with_the_fix_in_the_sandbox_error() {
    let env = Env::new().await;
    let seam: Arc<dyn SandboxBackend> = Arc::new(env.backend.clone());
    let missing = toren_protocol::ResolvedPolicy {
        checkpoints: Default::default(),
        image: Some("toren-no-such-image:1".to_owned()),
        ..policy()
    };
    let error = seam
        .open(&RunId::new(), &missing, Vec::new())
        .await
        .expect_err("no such image");
    let message = error.to_string();
    assert!(message.contains("toren-no-such-image:1"), "{message}");
    assert_eq!(env.containers().await, Vec::<String>::new());
}

//! A worker with checkpoints on records the workspace before each call that can change it
//! (real bubblewrap sandbox, real SQLite): the id is in that call's `tool_started`, the
//! store sits beside the workspace, and restoring a checkpoint gives back the workspace as
//! it was before that call.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toren_checkpoint::{Exclude, Policy, Store};
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, CheckpointPolicy, EventKind, ResolvedPolicy, RunCreated, RunId,
    RunStatus, SandboxSpec,
};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Outcome, Worker, WorkerConfig, holder};

struct NoObserver;
impl toren_worker::Observer for NoObserver {}

/// Drives a scripted run of `script` under the pinned checkpoint policy to its end; returns
/// its directory (kept alive), its log and its workspace.
async fn drive_script(
    script: &str,
    pinned: CheckpointPolicy,
) -> (
    tempfile::TempDir,
    Vec<toren_protocol::Event>,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = Arc::new(SqliteStore::open(&url).await.unwrap());
    let path = dir.path().join("script.yaml");
    let model = ScriptedProvider::new(Script::parse(script, &path).unwrap(), path);
    let root = dir.path().join("sandboxes");
    let sandbox = LocalBackend::new(LocalSettings {
        sandbox_root: root.clone(),
        bwrap: None,
    });
    sandbox.check().unwrap();
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "a".into(),
            model: "scripted/script.yaml".into(),
            instructions: None,
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: None,
                network: false,
                egress: None,
                approval: ApprovalPolicy::Never,
                env: Vec::new(),
                limits: Default::default(),
                on_interrupt: Default::default(),
            }),
            max_turns: 10,
            context_tokens: None,
            source: None,
        },
        policy: Some(ResolvedPolicy {
            checkpoints: pinned,
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
        }),
        input: "go".into(),
        session: None,
        channel: None,
        start: None,
    };
    let run = RunId::new();
    let ttl = Duration::from_secs(30);
    let holder = holder::this_process();
    let (_, lease) = store.create_run(&run, created, &holder, ttl).await.unwrap();
    let driver = Worker::new(WorkerConfig {
        store: store.clone(),
        models: Arc::new(Arc::new(model) as Arc<dyn toren_model::ModelProvider>),
        backends: vec![Arc::new(sandbox)],
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: Arc::new(NoObserver),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(50),
        holder,
        lease_ttl: ttl,
    })
    .with_checkpoints();
    let outcome = driver
        .drive(lease, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Ended {
            status: RunStatus::Completed,
            output: "finished".into()
        }
    );

    let events = store.read(&run, 0).await.unwrap();
    let ws = toren_sandbox::workspace_path(&root, run.as_str());
    (dir, events, ws)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_bash_call_starts_with_a_checkpoint_that_restores_the_workspace_before_it() {
    let script = r#"turns:
  - tool_calls:
      - bash: {command: "echo one > a.txt && mkdir -p d && printf 'x\n' > d/x"}
  - tool_calls:
      - bash: {command: "echo two > a.txt && echo b > b.txt && chmod 755 b.txt"}
  - tool_calls:
      - bash: {command: "rm a.txt && rm -r d && ln -s b.txt link"}
  - text: finished
"#;
    let (_dir, events, ws) = drive_script(script, CheckpointPolicy::default()).await;
    let ids: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => Some(s.checkpoint.clone().unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3, "one checkpoint per bash call");

    let checkpoints = Store::open(Policy::store_for(&ws).unwrap()).unwrap();
    assert!(
        !checkpoints.root().starts_with(&ws),
        "outside the workspace"
    );
    assert_eq!(checkpoints.list().unwrap(), ids);
    let paths = |id: &str| -> Vec<String> {
        checkpoints
            .manifest(id)
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert!(paths(&ids[0]).is_empty(), "before the first call: empty");
    assert_eq!(paths(&ids[1]), ["a.txt", "d", "d/x"]);
    assert_eq!(paths(&ids[2]), ["a.txt", "b.txt", "d", "d/x"]);

    // What the third call changed, and the workspace back as it was before it.
    let diff = checkpoints.diff(&ids[1], &ids[2]).unwrap();
    let text: String = diff.iter().map(|d| d.text.as_str()).collect();
    assert!(text.contains("-one\n+two\n"), "{text}");
    assert!(text.contains("+++ b/b.txt"), "{text}");
    checkpoints
        .restore(&ids[2], &ws, &Exclude::default())
        .unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    assert_eq!(std::fs::read_to_string(ws.join("d/x")).unwrap(), "x\n");
    assert!(std::fs::symlink_metadata(ws.join("link")).is_err());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(ws.join("b.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

/// The pinned policy governs each run: `checkpoints: false` takes none, and excluded paths
/// are not recorded.
#[tokio::test(flavor = "multi_thread")]
async fn each_run_is_checkpointed_by_its_own_pinned_policy() {
    let script = r#"turns:
  - tool_calls:
      - bash: {command: "echo kept > a.txt && echo noise > build.log && mkdir -p node_modules/p && echo m > node_modules/p/i.js"}
  - tool_calls:
      - bash: {command: "echo two > a.txt"}
  - text: finished
"#;
    let checkpoints_of = |events: &[toren_protocol::Event]| -> Vec<Option<String>> {
        events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolStarted(s) => Some(s.checkpoint.clone()),
                _ => None,
            })
            .collect()
    };
    let (_off, events, ws) = drive_script(script, CheckpointPolicy::off()).await;
    assert_eq!(checkpoints_of(&events), [None, None], "checkpoints: false");
    assert!(
        !Policy::store_for(&ws).unwrap().exists(),
        "no store is made"
    );

    let pinned = CheckpointPolicy {
        enabled: true,
        exclude: vec!["*.log".into(), "node_modules/".into()],
        keep: 100,
    };
    let (_on, events, ws) = drive_script(script, pinned).await;
    let ids: Vec<String> = checkpoints_of(&events)
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let store = Store::open(Policy::store_for(&ws).unwrap()).unwrap();
    let paths: Vec<String> = store
        .manifest(&ids[1])
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(paths, ["a.txt"], "build.log and node_modules/ are excluded");
}

//! A real local sandbox over a temporary workspace, and a shorthand to call tools on it.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tempfile::TempDir;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, RunId, ToolCall};
use toren_sandbox::{LocalBackend, LocalSettings, Sandbox};
use toren_tools::{ToolOutcome, ToolSettings, Toolkit};

pub(crate) struct Fixture {
    _root: TempDir,
    pub(crate) sandbox: Arc<dyn Sandbox>,
    pub(crate) kit: Toolkit,
}

impl Fixture {
    pub(crate) async fn new() -> Self {
        Self::with_settings(ToolSettings::default()).await
    }

    pub(crate) async fn with_settings(settings: ToolSettings) -> Self {
        let root = tempfile::tempdir().unwrap();
        let backend = LocalBackend::new(LocalSettings {
            sandbox_root: root.path().join("sandboxes"),
            bwrap: None,
        });
        let policy = ResolvedPolicy {
            checkpoints: Default::default(),
            backend: "local".to_owned(),
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
        let sandbox = backend
            .open(&RunId::new(), &policy, Vec::new())
            .await
            .unwrap();
        Self {
            _root: root,
            sandbox,
            kit: Toolkit::new(settings),
        }
    }

    pub(crate) async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        let call = ToolCall {
            id: "toolu_1".to_owned(),
            name: name.to_owned(),
            arguments,
            wire_id: None,
        };
        self.kit
            .execute(self.sandbox.as_ref(), &call)
            .await
            .unwrap()
    }

    /// The host path of a workspace file.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.sandbox.workspace().path().join(rel)
    }

    pub(crate) fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

pub(crate) fn ok(output: &str) -> ToolOutcome {
    ToolOutcome::success(output)
}

pub(crate) fn err(output: &str) -> ToolOutcome {
    ToolOutcome::error(output)
}

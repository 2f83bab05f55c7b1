//! The toolkit's surface: specs, approval, dispatch, and the line between model-fixable
//! errors and host faults.

use std::sync::Arc;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{ToolCall, ToolCompleted};
use toren_sandbox::{ExecOutput, ExecRequest, LimitHit, Sandbox, Workspace};
use toren_tools::{TOOL_NAMES, ToolError, ToolOutcome, Toolkit};

use super::common::{Fixture, err};

fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: "toolu_9".to_owned(),
        name: name.to_owned(),
        arguments,
        wire_id: None,
    }
}

#[test]
fn specs_document_every_tool() {
    let specs = Toolkit::default().specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, TOOL_NAMES);
    insta::assert_json_snapshot!(specs);
}

#[tokio::test]
async fn unknown_tools_list_the_available_ones() {
    let f = Fixture::new().await;
    assert_eq!(
        f.call("run_python", json!({})).await,
        err(
            "unknown tool `run_python`; the available tools are `bash`, `read_file`, \
             `write_file`, `edit_file`, `send_to_channel`"
        )
    );
}

#[test]
fn outcomes_become_tool_completed_events() {
    let outcome = ToolOutcome {
        output: "x".to_owned(),
        is_error: true,
        exit_code: Some(2),
        truncated: true,
    };
    assert_eq!(
        outcome.into_completed("toolu_1"),
        ToolCompleted {
            call_id: "toolu_1".to_owned(),
            output: "x".to_owned(),
            is_error: true,
            exit_code: Some(2),
            truncated: true,
        }
    );
}

/// A sandbox whose backend broke: every exec is a host fault.
#[derive(Debug)]
struct BrokenSandbox(Workspace);

#[async_trait]
impl Sandbox for BrokenSandbox {
    fn workspace(&self) -> &Workspace {
        &self.0
    }
    fn backend(&self) -> &'static str {
        "broken"
    }
    fn instance_id(&self) -> String {
        "broken".to_owned()
    }
    async fn exec(&self, _req: ExecRequest) -> toren_sandbox::Result<ExecOutput> {
        Err(toren_sandbox::Error::BwrapMissing {
            searched: "`/nowhere/bwrap`".to_owned(),
        })
    }
}

#[tokio::test]
async fn host_faults_are_errors_not_tool_results() {
    let root = tempfile::tempdir().unwrap();
    let sandbox: Arc<dyn Sandbox> =
        Arc::new(BrokenSandbox(Workspace::create(root.path(), "ws").unwrap()));
    let kit = Toolkit::default();
    let result = kit
        .execute(sandbox.as_ref(), &call("bash", json!({"command": "ls"})))
        .await;
    assert!(matches!(
        result,
        Err(ToolError::Sandbox(
            toren_sandbox::Error::BwrapMissing { .. }
        ))
    ));

    // The same broken sandbox still serves file tools, and model mistakes stay results.
    let read = kit
        .execute(
            sandbox.as_ref(),
            &call("read_file", json!({"path": "../x"})),
        )
        .await;
    assert!(read.unwrap().is_error);
}

/// A sandbox whose commands ran into both limits.
#[derive(Debug)]
struct LimitedSandbox(Workspace);

#[async_trait]
impl Sandbox for LimitedSandbox {
    fn workspace(&self) -> &Workspace {
        &self.0
    }
    fn backend(&self) -> &'static str {
        "limited"
    }
    fn instance_id(&self) -> String {
        "limited".to_owned()
    }
    async fn exec(&self, _req: ExecRequest) -> toren_sandbox::Result<ExecOutput> {
        Ok(ExecOutput {
            exit_code: Some(137),
            output: "Killed\n".to_owned(),
            truncated: false,
            timed_out: false,
            limits_hit: vec![
                LimitHit::Memory { limit: 256 << 20 },
                LimitHit::Pids { limit: 64 },
            ],
        })
    }
}

#[tokio::test]
async fn limits_a_command_ran_into_are_reported_to_the_model() {
    let root = tempfile::tempdir().unwrap();
    let sandbox = LimitedSandbox(Workspace::create(root.path(), "ws").unwrap());
    let out = Toolkit::default()
        .execute(&sandbox, &call("bash", json!({"command": "make -j"})))
        .await
        .unwrap();
    assert_eq!(
        out.output,
        "Killed\n[exit code: 137]\n\
         [limit reached: the command reached its memory limit of 256 MiB and the kernel killed a process]\n\
         [limit reached: the command reached its limit of 64 processes: starting another failed]"
    );
    assert!(out.is_error);
}

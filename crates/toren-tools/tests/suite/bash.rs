//! The bash tool: output format, exit codes, timeouts, truncation and argument errors.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_tools::{ToolOutcome, ToolSettings};

use super::common::{Fixture, err};

fn exited(output: &str, code: i32) -> ToolOutcome {
    ToolOutcome {
        output: output.to_owned(),
        is_error: code != 0,
        exit_code: Some(code),
        truncated: false,
    }
}

#[tokio::test]
async fn output_is_followed_by_the_exit_code() {
    let f = Fixture::new().await;
    assert_eq!(
        f.call("bash", json!({"command": "echo hi"})).await,
        exited("hi\n[exit code: 0]", 0)
    );
    assert_eq!(
        f.call("bash", json!({"command": "printf abc"})).await,
        exited("abc\n[exit code: 0]", 0)
    );
    assert_eq!(
        f.call("bash", json!({"command": "true"})).await,
        exited("(no output)\n[exit code: 0]", 0)
    );
    assert_eq!(
        f.call(
            "bash",
            json!({"command": "echo out; echo oops >&2; exit 2"})
        )
        .await,
        exited("out\noops\n[exit code: 2]", 2)
    );
}

#[tokio::test]
async fn commands_work_on_the_workspace() {
    let f = Fixture::new().await;
    let out = f
        .call(
            "bash",
            json!({"command": "mkdir -p src && echo 'fn main() {}' > src/main.rs && ls src"}),
        )
        .await;
    assert_eq!(out, exited("main.rs\n[exit code: 0]", 0));
    assert_eq!(f.read("src/main.rs"), "fn main() {}\n");
}

#[tokio::test]
async fn timeouts_kill_and_say_so() {
    let f = Fixture::new().await;
    let out = f
        .call(
            "bash",
            json!({"command": "echo start; sleep 30", "timeout_secs": 1}),
        )
        .await;
    assert_eq!(
        out,
        ToolOutcome {
            output: "start\n[timed out: the command and everything it started were killed after \
                     1 s; pass a larger timeout_secs (at most 600) if it needs longer]"
                .to_owned(),
            is_error: true,
            exit_code: None,
            truncated: false,
        }
    );
}

#[tokio::test]
async fn the_default_timeout_applies_without_timeout_secs() {
    let settings = ToolSettings {
        bash_default_timeout: Duration::from_secs(1),
        ..ToolSettings::default()
    };
    let f = Fixture::with_settings(settings).await;
    let out = f.call("bash", json!({"command": "sleep 30"})).await;
    assert!(out.output.contains("killed after 1 s"), "{}", out.output);
    assert!(out.is_error);
}

#[tokio::test]
async fn timeouts_out_of_range_are_refused() {
    let f = Fixture::new().await;
    for secs in [0, 601] {
        let out = f
            .call(
                "bash",
                json!({"command": "touch ran", "timeout_secs": secs}),
            )
            .await;
        assert_eq!(
            out,
            err(&format!(
                "`timeout_secs` is {secs} but must be between 1 and 600; for longer work, split \
                 it into several commands"
            ))
        );
    }
    assert!(!f.path("ran").exists(), "a refused call must not run");
}

#[tokio::test]
async fn long_output_is_truncated_with_a_notice() {
    let settings = ToolSettings {
        output_limit: 100,
        ..ToolSettings::default()
    };
    let f = Fixture::with_settings(settings).await;
    let out = f.call("bash", json!({"command": "seq 1 10000"})).await;
    assert!(out.truncated);
    assert!(!out.is_error);
    assert_eq!(out.exit_code, Some(0));
    assert!(out.output.starts_with("1\n2\n3\n"), "{}", out.output);
    assert!(out.output.contains("bytes of output cut"), "{}", out.output);
    assert!(
        out.output.ends_with(
            "9999\n10000\n[exit code: 0]\n[output truncated: to see all of it, redirect it to a \
             file and search or page through it with grep or read_file]"
        ),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn malformed_arguments_are_explained() {
    let f = Fixture::new().await;
    let usage = r#"expected {"command": string, "timeout_secs"?: integer}"#;
    let cases = [
        (
            json!({}),
            format!("invalid arguments for `bash`: missing field `command`; {usage}"),
        ),
        (
            json!({"command": 5}),
            format!(
                "invalid arguments for `bash`: invalid type: integer `5`, expected a string; {usage}"
            ),
        ),
        (
            json!({"command": "ls", "timeout_secs": "10"}),
            format!(
                "invalid arguments for `bash`: invalid type: string \"10\", expected u64; {usage}"
            ),
        ),
        (
            json!("{\"command\": \"ls"),
            format!(
                "the arguments for `bash` are not valid JSON (EOF while parsing a string at line 1 \
                 column 15); {usage}"
            ),
        ),
        (
            json!({"command": "  "}),
            "`command` is empty; give the shell command to run".to_owned(),
        ),
        (
            json!({"command": "echo a\u{0}b"}),
            "`command` contains a NUL byte, which no shell command can hold; write the data to \
             a file with write_file, or produce it with printf '\\0'"
                .to_owned(),
        ),
        (
            json!({"command": format!("echo {}", "a".repeat(200_000))}),
            "`command` is 200005 bytes, over the limit of 100000 bytes; write a long script to \
             a file with write_file and run that file"
                .to_owned(),
        ),
    ];
    for (args, message) in cases {
        assert_eq!(f.call("bash", args).await, err(&message));
    }
    // The longest command accepted still runs.
    let longest = format!("echo {}", "a".repeat(toren_sandbox::MAX_COMMAND_BYTES - 5));
    let out = f.call("bash", json!({ "command": longest })).await;
    assert_eq!(out.exit_code, Some(0), "{}", &out.output[..200]);
    // A string that holds a valid object is accepted.
    let out = f.call("bash", json!("{\"command\": \"echo ok\"}")).await;
    assert_eq!(out, exited("ok\n[exit code: 0]", 0));
}

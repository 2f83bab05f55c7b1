//! Bad input to tools: arguments of the wrong type or shape, missing and unknown fields,
//! unknown tools, huge arguments (a command over its limit, a file over the file tools'
//! limit). Each comes back to the model as a clear tool error and the run goes on to its
//! end.

use serde_json::json;

use super::harness::{self, Call, call};
use super::{Backend, report};

/// (probe, the message the model gets must contain this).
fn probes() -> Vec<(Call, &'static str)> {
    let huge_command = format!("echo {}", "a".repeat(300_000));
    vec![
        (
            call("bash", json!({"command": 42})),
            "invalid type: integer `42`, expected a string",
        ),
        (call("bash", json!(null)), "missing field `command`"),
        (call("read_file", json!({})), "missing field `path`"),
        (
            call("edit_file", json!({"path": "a.txt", "old_string": "x"})),
            "missing field `new_string`",
        ),
        (
            call("bash", json!({"command": "ls", "sudo": true})),
            "unknown field `sudo`",
        ),
        (call("read_file", json!("not json")), "not valid JSON"),
        (call("bash", json!([1, 2])), "must be a JSON object"),
        (
            call("bash", json!({"command": {"nested": {"deeper": [1]}}})),
            "invalid type: map",
        ),
        (
            call("bash", json!({"command": "ls", "timeout_secs": 0})),
            "must be between 1 and",
        ),
        (
            call("bash", json!({"command": "ls", "timeout_secs": -1})),
            "invalid value: integer `-1`",
        ),
        (
            call("bash", json!({"command": "ls", "timeout_secs": 1e30})),
            "invalid type: floating point",
        ),
        (call("rm_rf", json!({"path": "/"})), "unknown tool `rm_rf`"),
        (call("", json!({})), "unknown tool ``"),
        (
            call("BASH", json!({"command": "ls"})),
            "unknown tool `BASH`",
        ),
        (
            call("bash", json!({"command": huge_command})),
            "over the limit of",
        ),
        (call("bash", json!({"command": "echo a\u{0}b"})), "NUL byte"),
        (
            call("bash", json!({"command": "   "})),
            "`command` is empty",
        ),
        (
            call("read_file", json!({"path": "x", "offset": 0})),
            "1-based line number",
        ),
        (
            call(
                "edit_file",
                json!({"path": "a.txt", "old_string": "b".repeat(2_000_000), "new_string": "c"}),
            ),
            "does not exist",
        ),
        // Content over the file tools' limit (10 MiB) is refused, not written.
        (
            call(
                "write_file",
                json!({"path": "huge.txt", "content": "z".repeat(10 * 1024 * 1024 + 1)}),
            ),
            "`content` would make `huge.txt` 10485761 bytes, more than the limit of 10485760",
        ),
    ]
}

pub(crate) fn suite(backend: &Backend) {
    let toren = harness::toren_for(backend);
    let probes = probes();
    let mut calls: Vec<Call> = probes.iter().map(|(c, _)| c.clone()).collect();
    // After all of that, an ordinary call still works.
    calls.push(call(
        "write_file",
        json!({"path": "big.txt", "content": "z".repeat(5_000_000)}),
    ));
    harness::agent(&toren, "clumsy", "  approval: never\n", &[calls]);
    let ran = harness::run(&toren, "clumsy");
    ran.assert_completed();
    let mut count = 0;
    for (i, (probe, message)) in probes.iter().enumerate() {
        let result = ran.result(i);
        let args: String = probe.args.to_string().chars().take(80).collect();
        assert!(
            result.is_error && result.output.contains(message),
            "{} {args}: expected an error with {message:?}, got:\n{}",
            probe.tool,
            &result.output[..result.output.len().min(2000)]
        );
        count += 1;
    }
    let last = ran.result(probes.len());
    assert!(!last.is_error, "{last:?}");
    assert_eq!(
        std::fs::metadata(harness::workspace(&toren, &ran.run).join("big.txt"))
            .unwrap()
            .len(),
        5_000_000
    );
    assert!(
        !harness::workspace(&toren, &ran.run)
            .join("huge.txt")
            .exists()
    );
    count += 1;
    report(backend, "bad-input", count);
}

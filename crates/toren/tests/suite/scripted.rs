//! A scripted agent does real work in a bubblewrap sandbox, and the workspace and the
//! event log show exactly what happened.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::{Toren, read, text};

pub(crate) const WORK_SCRIPT: &str = r#"
turns:
  - text: "Setting up."
    tool_calls:
      - write_file: {path: notes/todo.txt, content: "one\ntwo\nthree\n"}
      - bash: {command: "echo built > build.log && wc -l < notes/todo.txt"}
  - tool_calls:
      - edit_file: {path: notes/todo.txt, old_string: "two", new_string: "TWO"}
      - read_file: {path: notes/todo.txt}
  - tool_calls:
      - bash: {command: "cat notes/todo.txt build.log; exit 3"}
  - text: "All done."
"#;

pub(crate) const WORK_AGENT: &str =
    "name: worker\nmodel: scripted/work.yaml\nsandbox:\n  approval: never\n";

fn tool_outputs(events: &[Value]) -> Vec<(String, Value, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_completed")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["is_error"].clone(),
                e["exit_code"].clone(),
            )
        })
        .collect()
}

#[test]
fn a_scripted_agent_works_in_its_workspace_and_the_log_shows_it() {
    let toren = Toren::new().env("TOREN_WORKSPACE_VOLUME", "volume-1");
    toren.file("work.yaml", WORK_SCRIPT);
    toren.agent("worker", WORK_AGENT);

    let out = toren.run(&["run", "worker", "--input", "do the work"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(text(&out.stdout), "All done.\n");
    let run = toren.newest_run().unwrap();
    assert!(
        stderr.contains(&run),
        "the run id is announced on stderr: {stderr}"
    );

    // The workspace holds exactly what the agent made.
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("notes/todo.txt")), "one\nTWO\nthree\n");
    assert_eq!(read(&ws.join("build.log")), "built\n");
    let mut names: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, vec!["build.log", "notes"]);

    // The log tells the same story, in order.
    let events = toren.events(&run);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        vec![
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started",
            "tool_completed",
            "tool_started",
            "tool_completed",
            "model_responded",
            "tool_started",
            "tool_completed",
            "tool_started",
            "tool_completed",
            "model_responded",
            "tool_started",
            "tool_completed",
            "model_responded",
            "run_completed",
        ]
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=17).collect::<Vec<u64>>());
    assert_eq!(
        tool_outputs(&events),
        vec![
            ("call_1".into(), json!(false), Value::Null),
            ("call_2".into(), json!(false), json!(0)),
            ("call_3".into(), json!(false), Value::Null),
            ("call_4".into(), json!(false), Value::Null),
            ("call_5".into(), json!(true), json!(3)),
        ]
    );
    let read_result = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_4")
        .unwrap();
    assert!(
        read_result["output"].as_str().unwrap().contains("TWO"),
        "{read_result}"
    );
    let last_bash = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_5")
        .unwrap();
    let output = last_bash["output"].as_str().unwrap();
    assert!(output.contains("one\nTWO\nthree\nbuilt"), "{output}");
    assert!(output.contains('3'), "the exit code is reported: {output}");

    // The pinned spec and policy are in run_created.
    assert_eq!(events[0]["agent"]["name"], "worker");
    assert_eq!(
        events[0]["policy"],
        json!({
            "backend": "local",
            "network": false,
            "approval": "never",
            "env": [],
            "limits": {"cpu_secs": 600, "memory": 2147483648_u64, "pids": 512},
            "workspace": ws.display().to_string(),
            "volume": "volume-1",
        })
    );
    assert_eq!(events[0]["input"], "do the work");
    assert_eq!(events[0]["v"], 1);
    assert_eq!(events[2]["workspace"], ws.display().to_string());

    // runs list / show agree.
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["output"], "All done.");
    let list: Value =
        serde_json::from_slice(&toren.run(&["runs", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["id"], run.as_str());
    assert_eq!(list[0]["agent"], "worker");
    assert_eq!(list[0]["status"], "completed");
    assert!(list[0]["created_at"].is_string());
}

#[test]
fn json_output_and_runs_newest_first() {
    let toren = Toren::new();
    toren.file("s.yaml", "turns:\n  - text: first answer\n");
    let agent = toren.agent("plain", "name: plain\nmodel: scripted/s.yaml\n");
    let a = toren.run(&["run", agent.to_str().unwrap(), "--input", "one", "--json"]);
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    let a: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(a["status"], "completed");
    assert_eq!(a["output"], "first answer");
    let b = toren.run(&["run", "plain", "--input", "two", "--json"]);
    let b: Value = serde_json::from_slice(&b.stdout).unwrap();
    let list: Value =
        serde_json::from_slice(&toren.run(&["runs", "list", "--json"]).stdout).unwrap();
    let ids: Vec<&Value> = list.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, vec![&b["run_id"], &a["run_id"]]);
}

#[test]
fn max_turns_fails_the_run_with_exit_1() {
    let toren = Toren::new();
    toren.file(
        "loop.yaml",
        "turns:\n  - tool_calls: [{read_file: {path: a}}]\n  - tool_calls: [{read_file: {path: a}}]\n  - text: never reached\n",
    );
    toren.agent(
        "looper",
        "name: looper\nmodel: scripted/loop.yaml\nsandbox: true\nmax_turns: 2\n",
    );
    let out = toren.run(&["run", "looper", "--input", "x", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert!(
        result["output"].as_str().unwrap().contains("max_turns (2)"),
        "{result}"
    );
}

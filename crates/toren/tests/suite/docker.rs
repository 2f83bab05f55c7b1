//! The docker backend through the real `toren` binary and the machine's Docker Engine:
//! the scripted work completes in a container over the workspace, a container removed
//! mid-run is recreated around the same workspace, finished runs leave no container, and
//! the reaper leaves a live run's container alone. `scripts/test` builds the helper and
//! the images first.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::{Toren, read, text};
use super::scripted::{WORK_AGENT, WORK_SCRIPT};

fn docker_home() -> Toren {
    Toren::new().env("TOREN_SANDBOX", "docker")
}

fn containers(toren: &Toren) -> Vec<Value> {
    let out = toren.run(&["sandbox", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn scripted_work_completes_in_a_container_and_the_container_goes_away() {
    let toren = docker_home();
    toren.file("work.yaml", WORK_SCRIPT);
    toren.agent("worker", WORK_AGENT);
    let out = toren.run(&["run", "worker", "--input", "do the work"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox docker"),
        "the backend is announced: {stderr}"
    );
    assert_eq!(text(&out.stdout), "All done.\n");
    let run = toren.newest_run().unwrap();
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("notes/todo.txt")), "one\nTWO\nthree\n");
    assert_eq!(read(&ws.join("build.log")), "built\n");
    let events = toren.events(&run);
    let provisioned = events
        .iter()
        .find(|e| e["type"] == "sandbox_provisioned")
        .unwrap();
    assert_eq!(provisioned["backend"], "docker");
    assert_eq!(events[0]["policy"]["backend"], "docker");
    let last_bash = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_5")
        .unwrap();
    assert_eq!(last_bash["exit_code"], 3);
    assert!(
        containers(&toren).is_empty(),
        "a finished run's container is removed"
    );
}

const TWO_STEPS: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo first > steps.txt; hostname > first-host.txt"}
  - tool_calls:
      - bash: {command: "echo second >> steps.txt; hostname > second-host.txt"}
  - text: "finished"
"#;

#[test]
fn a_container_removed_mid_run_is_recreated_around_the_same_workspace() {
    let toren = docker_home();
    toren.file("s.yaml", TWO_STEPS);
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    assert_eq!(
        toren.run(&["approve", &run, "call_1"]).status.code(),
        Some(0)
    );
    // Wait for the second approval: the first command ran in a container.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while toren.show(&run)["pending_approval"]["call_id"] != "call_2" {
        assert!(
            std::time::Instant::now() < deadline,
            "the second call never asked"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let listed = containers(&toren);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["run"], run.as_str());
    assert_eq!(listed[0]["run_state"], "live");
    // The reaper never touches a live run's container.
    let reap = toren.run(&["sandbox", "reap"]);
    assert_eq!(reap.status.code(), Some(0), "{}", text(&reap.stderr));
    assert_eq!(containers(&toren).len(), 1);

    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let rm = std::process::Command::new("docker")
        .args(["rm", "-f", &id])
        .output()
        .unwrap();
    assert!(rm.status.success(), "{}", text(&rm.stderr));
    assert_eq!(
        toren.run(&["approve", &run, "call_2"]).status.code(),
        Some(0)
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let ws = toren.workspace(&run);
    assert_eq!(
        read(&ws.join("steps.txt")),
        "first\nsecond\n",
        "the workspace survived"
    );
    assert_ne!(
        read(&ws.join("first-host.txt")),
        read(&ws.join("second-host.txt")),
        "the second command ran in a new container"
    );
    assert!(containers(&toren).is_empty());
}

#[test]
fn an_unreachable_daemon_or_e2b_fail_fast_naming_the_fix() {
    let toren = docker_home().env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    toren.file("s.yaml", "turns: []\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let out = toren.run(&["run", "a", "--input", "go"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("DOCKER_HOST") && stderr.contains("/nonexistent/docker.sock"),
        "{stderr}"
    );
    assert_eq!(toren.newest_run(), None, "no run was created");

    let toren = Toren::new().env("TOREN_SANDBOX", "e2b");
    toren.file("s.yaml", "turns: []\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let out = toren.run(&["run", "a", "--input", "go"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("E2B_API_KEY is not set") && stderr.contains("TOREN_SANDBOX=docker"),
        "{stderr}"
    );
    assert_eq!(toren.newest_run(), None, "no run was created");
}

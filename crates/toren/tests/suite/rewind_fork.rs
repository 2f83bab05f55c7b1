//! Going back to a step of a run that has ended, through the real binary (real bubblewrap
//! sandbox, real SQLite, a fake model server): the ended run keeps its closed log and its
//! workspace, and a new run goes on from the step, with the workspace as it was then (from
//! the ended run's checkpoint) and the conversation up to the step.

use serde_json::{Value, json};
use toren_test_support::{FakeOpenAi, Reply};

use super::common::{Toren, bash, read, seq_of, text};

/// What the model was sent last: each message's role and, for a tool call, its command.
fn conversation(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let calls: Vec<String> = m["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|c| c["function"]["arguments"].as_str().unwrap().to_owned())
                .collect();
            format!("{} {}", m["role"].as_str().unwrap(), calls.join(","))
                .trim()
                .to_owned()
        })
        .collect()
}

const FIRST: &str = "echo one > a.txt";
const SECOND: &str = "echo two > b.txt && rm a.txt";

/// A run that makes `a.txt`, then replaces it with `b.txt`, then ends as `end` has it.
fn ended_run(end: Vec<Reply>, agent_extra: &str) -> (Toren, FakeOpenAi, String) {
    let mut replies = vec![bash("c1", FIRST), bash("c2", SECOND)];
    replies.extend(end);
    let fake = FakeOpenAi::start(replies).unwrap();
    let toren = Toren::new().env("OLLAMA_HOST", &fake.host_url());
    toren.agent(
        "f",
        &format!("name: f\nmodel: ollama/llama3.2\n{agent_extra}sandbox:\n  approval: never\n"),
    );
    let out = toren.run(&["run", "f", "do it"]);
    let run = toren
        .newest_run()
        .unwrap_or_else(|| panic!("no run: {}", text(&out.stderr)));
    (toren, fake, run)
}

#[test]
fn a_completed_run_goes_on_from_a_step_as_a_new_run() {
    let (toren, fake, run) = ended_run(vec![Reply::text("all done")], "");
    assert_eq!(toren.show(&run)["status"], "completed");
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("b.txt")), "two\n");
    let events_before = toren.events(&run);
    let step = seq_of(&events_before, "tool_completed", "c1");

    // A step in the middle of a call is refused as a rewind's is, and nothing is made.
    let started = seq_of(&events_before, "tool_started", "c2");
    let out = toren.run(&["rewind", &run, "--to", &started.to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("middle of a tool call"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.newest_run().as_deref(), Some(run.as_str()));

    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let new = text(&out.stdout).trim().to_owned();
    assert!(new.starts_with("run_") && new != run, "stdout: {new:?}");
    let said = text(&out.stderr);
    assert!(
        said.contains("had ended") && said.contains(&format!("toren resume {new}")),
        "{said}"
    );

    // The ended run is as it was: log closed, workspace untouched.
    assert_eq!(toren.events(&run), events_before);
    assert_eq!(toren.show(&run)["status"], "completed");
    assert_eq!(read(&ws.join("b.txt")), "two\n");
    assert!(!ws.join("a.txt").exists());

    // The new run has the workspace of the step, in a directory of its own.
    let new_ws = toren.workspace(&new);
    assert_ne!(new_ws, ws);
    assert_eq!(read(&new_ws.join("a.txt")), "one\n");
    assert!(!new_ws.join("b.txt").exists());
    let created = &toren.events(&new)[0];
    assert_eq!(created["type"], "run_created");
    assert_eq!(created["start"]["forked"]["from"], run.as_str());
    assert_eq!(created["start"]["forked"]["to"], step);
    let shown = text(&toren.run(&["runs", "show", &new]).stdout);
    assert!(shown.contains(&run), "runs show names the origin: {shown}");

    // Driven, it sends the model the conversation up to the step (the person's input, the
    // first call and its result) and goes on from there.
    fake.push(Reply::text("done again"));
    let out = toren.run(&["resume", &new]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "done again\n");
    let requests = fake.requests();
    let sent = conversation(&requests.last().unwrap().body);
    let first = json!({ "command": FIRST }).to_string();
    assert_eq!(
        sent.iter().skip(1).cloned().collect::<Vec<_>>(),
        [
            "user".to_owned(),
            format!("assistant {first}"),
            "tool".to_owned()
        ],
        "{sent:?}"
    );
    assert_eq!(toren.show(&new)["status"], "completed");
    assert_eq!(read(&new_ws.join("a.txt")), "one\n");
}

#[test]
fn a_failed_run_goes_on_from_its_start_and_its_calls_run_again() {
    // max_turns: 2 fails the run after its second call; a new run from the step after the
    // first model answer runs that answer's call again and goes on.
    let (toren, fake, run) = ended_run(vec![], "max_turns: 2\n");
    assert_eq!(toren.show(&run)["status"], "failed");
    let events = toren.events(&run);
    let answered = events
        .iter()
        .find(|e| e["type"] == "model_responded")
        .and_then(|e| e["seq"].as_u64())
        .unwrap();
    let out = toren.run(&["rewind", &run, "--to", &answered.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let new = text(&out.stdout).trim().to_owned();
    let new_ws = toren.workspace(&new);
    // Nothing had run at that step: the workspace is empty, as it was.
    assert_eq!(std::fs::read_dir(&new_ws).unwrap().count(), 0);

    fake.push(Reply::text("fine"));
    let out = toren.run(&["resume", &new]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "fine\n");
    // The first call ran again in the new workspace.
    assert_eq!(read(&new_ws.join("a.txt")), "one\n");
    let types = toren.event_types(&new);
    assert_eq!(
        types.iter().filter(|t| *t == "tool_completed").count(),
        1,
        "{types:?}"
    );
}

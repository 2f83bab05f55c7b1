//! `toren rewind` through the real binary (real bubblewrap sandbox, real SQLite, a fake
//! model server): a run whose bash calls make a git repository with commits and a
//! 20,000-file tree, then change and delete files, goes back to an earlier step; its
//! workspace is then byte for byte the copy the test took at that step, and the model is
//! next sent the conversation as it was then. A rewind killed at random points leaves the
//! log and workspace consistent, and resuming the run finishes the restore.

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;
use toren_test_support::{FakeOpenAi, Reply};

use super::common::{Toren, bash, commands_sent, seq_of, text};
use super::session_rewind::{cancel_refused_restore_due, same, tree};

/// The first call: a git repository with a commit, a tree of `dirs` × 200 files, a
/// symlink, modes and a binary file.
fn make(dirs: u32) -> String {
    format!(
        "git init -q proj && cd proj && git config user.email t@example.com && \
         git config user.name t && echo one > a && git add a && git commit -qm one && cd .. && \
         mkdir tree && cd tree && for d in $(seq 0 {last}); do mkdir d$d; \
         for f in $(seq 0 199); do echo \"$d $f\" > d$d/f$f; done; done && cd .. && \
         ln -s proj/a link && chmod 750 tree/d1 && printf '\\000\\377' > bin.dat",
        last = dirs - 1
    )
}
const CHANGE: &str = "cd proj && echo two >> a && echo b > b && git add b && \
    git commit -qam two && git tag v2 && cd .. && rm -rf tree/d5 tree/d6 && \
    echo changed > tree/d7/f1 && rm link && ln -s tree link && mkdir -p new/deep && \
    echo n > new/deep/n && chmod 700 bin.dat";
const LATER: &str = "rm -rf proj && echo later > later.txt";

/// The id of the call the run waits on, once it waits on one other than `previous`.
fn pending(toren: &Toren, child: &mut Child, run: &str, previous: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = toren.show(run);
        if let Some(call) = shown["pending_approval"]["call_id"].as_str()
            && Some(call) != previous
        {
            return call.to_owned();
        }
        if let Some(exit) = child.try_wait().unwrap() {
            panic!("toren exited ({exit}) while a call should wait: {shown}");
        }
        assert!(Instant::now() < deadline, "no new pending call: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn approve(toren: &Toren, run: &str, call: &str) {
    let out = toren.run(&["approve", run, call]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

struct Scenario {
    toren: Toren,
    fake: FakeOpenAi,
    run: String,
    /// The step after the first call's result (between turns 1 and 2).
    step: u64,
    /// The workspace as the test copied it at `step`.
    at_step: BTreeMap<String, (char, u32, Vec<u8>)>,
}

/// Three approved bash calls: make (a tree of `dirs` × 200 files), change, and a third the
/// run waits on when its process is killed (SIGKILL), so that nobody drives it.
fn scenario(dirs: u32) -> Scenario {
    let fake = FakeOpenAi::start(vec![
        bash("c1", &make(dirs)),
        bash("c2", CHANGE),
        bash("c3", LATER),
    ])
    .unwrap();
    let toren = Toren::new().env("OLLAMA_HOST", &fake.host_url());
    toren.agent("r", "name: r\nmodel: ollama/llama3.2\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "r", "--input", "build it"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let first = pending(&toren, &mut child, &run, None);
    approve(&toren, &run, &first);
    let second = pending(&toren, &mut child, &run, Some(&first));
    // Between the two calls: the workspace as it is at the step after the first result.
    let ws = toren.workspace(&run);
    let at_step = tree(&ws);
    assert!(
        at_step.len() > dirs as usize * 200,
        "{} entries",
        at_step.len()
    );
    let step = seq_of(&toren.events(&run), "tool_completed", &first);
    approve(&toren, &run, &second);
    let third = pending(&toren, &mut child, &run, Some(&second));

    // Driven by a live process: refused, and nothing is written.
    let before = toren.events(&run).len();
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("is being driven by"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run).len(), before);

    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(tree(&ws), at_step, "the second call changed the workspace");
    let _ = third;
    Scenario {
        toren,
        fake,
        run,
        step,
        at_step,
    }
}

#[test]
fn a_rewound_run_has_the_workspace_and_conversation_of_that_step() {
    let Scenario {
        toren,
        fake,
        run,
        step,
        at_step,
    } = scenario(100);
    let ws = toren.workspace(&run);

    // A step in the middle of a call is refused with the steps near it.
    let started = seq_of(&toren.events(&run), "tool_started", "c2");
    let out = toren.run(&["rewind", &run, "--to", &started.to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("middle of a tool call"),
        "{}",
        text(&out.stderr)
    );

    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    same(&at_step, &tree(&ws), "at the step");
    let events = toren.events(&run);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "rewound");
    assert_eq!(last["to"], step);
    let c2_checkpoint = events
        .iter()
        .find(|e| e["type"] == "tool_started" && e["call_id"] == "c2")
        .map(|e| e["checkpoint"].clone())
        .unwrap();
    assert_eq!(last["checkpoint"], c2_checkpoint);
    // The git repository is the one of that step: one commit, no tag.
    let log = std::process::Command::new("git")
        .args([
            "-C",
            &ws.join("proj").display().to_string(),
            "log",
            "--format=%s",
        ])
        .output()
        .unwrap();
    assert_eq!(text(&log.stdout), "one\n", "{}", text(&log.stderr));

    // The run goes on from there: the model is sent the conversation as it was at the
    // step (the first call and its result), and its answer ends the run.
    fake.push(Reply::text("rewound and done"));
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "rewound and done\n");
    let requests = fake.requests();
    let sent = &requests.last().unwrap().body;
    assert_eq!(commands_sent(sent), [make(100)]);
    let before = &requests[requests.len() - 2].body;
    assert_eq!(
        commands_sent(before),
        [make(100), CHANGE.to_owned()],
        "the run had gone further"
    );
    same(&at_step, &tree(&ws), "at the step");
}

/// A `toren rewind` killed (SIGKILL) at a random point: either nothing was recorded and
/// the workspace is untouched, or `rewound` is last in the log and resuming the run
/// restores the workspace before anything else.
#[test]
fn a_rewind_killed_at_any_point_is_finished_by_the_next_resume() {
    let Scenario {
        toren,
        fake,
        run,
        step,
        at_step,
    } = scenario(10);
    let ws = toren.workspace(&run);
    let mut seed = u64::from(std::process::id()) | 1;
    let mut recorded = 0;
    for round in 0..3 {
        // The workspace moved on since the step (as the third call would have moved it).
        std::fs::remove_dir_all(ws.join("tree/d3")).ok();
        std::fs::write(ws.join(format!("scribble{round}")), "x").unwrap();
        let before = tree(&ws);
        let rewinds = |events: &[Value]| events.iter().filter(|e| e["type"] == "rewound").count();
        let had = rewinds(&toren.events(&run));
        let mut child = toren.spawn(&["rewind", &run, "--to", &step.to_string()]);
        // Fault injection, not synchronisation: kill after a random 0-400 ms.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(seed % 400));
        child.kill().unwrap();
        child.wait().unwrap();
        let events = toren.events(&run);
        if rewinds(&events) == had {
            same(
                &before,
                &tree(&ws),
                "a rewind killed before it was recorded",
            );
            continue;
        }
        recorded += 1;
        assert_eq!(
            events.last().unwrap()["type"],
            "rewound",
            "the intent is last"
        );
        // Resume: the restore is finished before the model is called; the model's next
        // answer is a call the run waits on, and that process is let go of.
        fake.push(bash(&format!("again{round}"), "echo again"));
        let mut resume = toren.spawn(&["resume", &run]);
        let call = pending(&toren, &mut resume, &run, None);
        assert!(call.starts_with("again"), "{call}");
        resume.kill().unwrap();
        resume.wait().unwrap();
        same(&at_step, &tree(&ws), "at the step");
    }
    // Whatever the kills hit, a rewind that is let finish gives the step's workspace.
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    same(&at_step, &tree(&ws), "at the step");
    eprintln!("{recorded} of 3 killed rewinds had recorded their intent");
}

/// A checkpoint store damaged since the step (its blobs gone) refuses the rewind with
/// nothing written; a restore recorded before the damage, which can then never finish,
/// does not hold the run forever: it is the one case a due restore lets a cancel through.
#[test]
fn a_damaged_checkpoint_refuses_the_rewind_and_an_unfinishable_restore_can_be_cancelled() {
    let Scenario {
        toren, run, step, ..
    } = scenario(1);
    let ws = toren.workspace(&run);
    let objects = ws.parent().unwrap().join("checkpoints/objects");
    let aside = ws.parent().unwrap().join("objects.aside");
    let before = (toren.events(&run).len(), tree(&ws));

    std::fs::rename(&objects, &aside).unwrap();
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is missing from the store"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run).len(), before.0, "a refused rewind wrote");
    same(&before.1, &tree(&ws), "a refused rewind");

    // Whole again: the rewind is made, and its restore stays due until the run goes on,
    // so a cancel is refused.
    std::fs::rename(&aside, &objects).unwrap();
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    cancel_refused_restore_due(&toren, &run);
    assert_eq!(toren.events(&run).last().unwrap()["type"], "rewound");

    // Damaged now: the restore can never finish, and the cancel says so.
    std::fs::remove_dir_all(&objects).unwrap();
    let out = toren.run(&["cancel", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let last = toren.events(&run).last().unwrap().clone();
    assert_eq!(last["type"], "run_cancelled");
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .contains("the rewind's restore could not finish"),
        "{last}"
    );
}

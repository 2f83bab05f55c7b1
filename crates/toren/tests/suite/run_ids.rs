//! Naming runs on the command line: `toren run AGENT "task"` takes the task as its second
//! word, and every command that takes a run takes its whole id, a unique prefix of it
//! (with or without `run_`) or `last`, the newest run; a prefix two runs share, or none
//! has, is refused with what to give instead.

use pretty_assertions::assert_eq;

use super::common::{Toren, text};

#[test]
fn runs_are_named_by_prefix_or_last_and_the_task_is_positional() {
    let toren = Toren::new();
    toren.file("s.yaml", "turns:\n  - text: \"hello\"\n");
    toren.agent("plain", "name: plain\nmodel: scripted/s.yaml\n");

    let mut ids = Vec::new();
    for task in ["first", "second"] {
        let out = toren.run(&["run", "plain", task, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(run["status"], "completed", "{run}");
        ids.push(run["run_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(toren.events(&ids[0])[0]["input"], "first");
    // Both forms of the task cannot be given at once.
    let out = toren.run(&["run", "plain", "a", "--input", "b"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));

    let show = |name: &str| {
        let out = toren.run(&["runs", "show", name, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
        let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        view["id"].as_str().unwrap().to_owned()
    };
    assert_eq!(show("last"), ids[1]);
    // The shortest prefix that tells the two apart, with and without `run_`.
    let common = ids[0]
        .chars()
        .zip(ids[1].chars())
        .take_while(|(a, b)| a == b)
        .count();
    for (id, other) in [(&ids[0], &ids[1]), (&ids[1], &ids[0])] {
        let prefix = &id[..=common];
        assert!(!other.starts_with(prefix));
        assert_eq!(&show(prefix), id);
        assert_eq!(&show(&prefix["run_".len()..]), id);
    }
    let out = toren.run(&["events", &ids[0][..common + 2]]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Shared by both, or by none.
    let out = toren.run(&["runs", "show", &ids[0][..common]]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("more than one run"), "{stderr}");
    let out = toren.run(&["runs", "show", "run_zzzz"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no run is `run_zzzz`"), "{stderr}");
}

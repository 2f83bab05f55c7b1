//! One pass over an agent file reports every problem the checks find, each at its own line
//! and column, in the order of the file, so a person fixes them all before trying again.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_config::{AgentRef, Position, load_agent, parse_agent};

use super::common::Home;

fn positions(error: &toren_config::Error) -> Vec<(u64, u64)> {
    error
        .diagnostics()
        .iter()
        .map(|d| {
            d.position
                .map_or((0, 0), |Position { line, column }| (line, column))
        })
        .collect()
}

#[test]
fn every_problem_of_a_file_is_reported_in_file_order() {
    let yaml = "\
name: 'bad name'
model: nobody/x
instructions: ' '
max_turns: 0
sandbox:
  approval: sometimes
  env: [OK_VAR, 1BAD, TOREN_HOME]
  network: [pypi.org, 'not a host']
  limits: {memory: 1KiB, pids: 1}
budget: {tokens: -5, wall: 90}
";
    let error = parse_agent(Path::new("agents/x.yaml"), yaml).expect_err("invalid");
    assert_eq!(
        positions(&error),
        vec![
            (1, 7),
            (2, 8),
            (3, 15),
            (4, 12),
            (6, 13),
            (7, 17),
            (7, 23),
            (8, 23),
            (9, 20),
            (9, 32),
            (10, 18),
            (10, 28),
        ],
        "{error}"
    );
    let rendered = error.to_string();
    // Each problem reads `file:line:col: error: ...`, with what to do where there is more to say.
    assert_eq!(rendered.matches("agents/x.yaml:").count(), 12, "{rendered}");
    assert!(rendered.contains("agents/x.yaml:7:23: error: `TOREN_HOME` is one of Toren's own"));
    assert!(rendered.contains("= help: "), "{rendered}");
}

#[test]
fn a_scripted_model_needs_its_file_beside_the_agent() {
    let home = Home::new();
    let path = home.write(
        "agents/x.yaml",
        "name: x\nmodel: scripted/turns.yaml\nmax_turns: 0\n",
    );
    let error = load_agent(&path).expect_err("no script, no turns");
    assert_eq!(positions(&error), vec![(2, 8), (3, 12)], "{error}");
    let rendered = home.render(&error);
    assert!(
        rendered.contains(
            "[TMP]/agents/x.yaml:2:8: error: the scripted model's file [TMP]/agents/turns.yaml \
             does not exist"
        ),
        "{rendered}"
    );

    home.write("agents/turns.yaml", "turns: []\n");
    home.write("agents/x.yaml", "name: x\nmodel: scripted/turns.yaml\n");
    load_agent(&path).expect("the script is there");
}

#[test]
fn a_wrong_name_is_reported_with_the_other_problems() {
    let home = Home::new();
    home.write(
        "agents/coder.yaml",
        "name: builder\nmodel: anthropic/m\nmax_turns: -1\n",
    );
    let agent = AgentRef::resolve("coder", &home.agents()).expect("found by name");
    let error = agent.load().expect_err("wrong name and turns");
    assert_eq!(positions(&error), vec![(1, 7), (3, 12)], "{error}");
    assert!(
        home.render(&error)
            .contains("but it was looked up as `coder`")
    );
}

#[test]
fn every_unknown_key_is_reported_and_the_rest_still_checked() {
    let yaml = "\
name: a
model: anthropic/m
tools: [bash]
sandbox:
  netwrok: true
  approval: sometimes
  limits:
    memory: 2GiB
    cpus: 2
temperature:
  value: 0.2
max_turns: 0
";
    let error = parse_agent(Path::new("agents/x.yaml"), yaml).expect_err("invalid");
    assert_eq!(
        positions(&error),
        vec![(3, 1), (5, 3), (6, 13), (9, 5), (10, 1), (12, 12)],
        "{error}"
    );
    let rendered = error.to_string();
    for key in ["tools", "netwrok", "cpus", "temperature"] {
        assert!(
            rendered.contains(&format!("unknown key `{key}`")),
            "{rendered}"
        );
    }
}

#[test]
fn an_unknown_key_that_leaves_its_mapping_empty_adds_no_made_up_error() {
    // Without its only key, `sandbox:` would be null: that error is the blanking's, not
    // the file's, and is not reported.
    let yaml = "name: a\nmodel: anthropic/m\nsandbox:\n  netwrok: true\n";
    let error = parse_agent(Path::new("agents/x.yaml"), yaml).expect_err("invalid");
    assert_eq!(positions(&error), vec![(4, 3)], "{error}");
}

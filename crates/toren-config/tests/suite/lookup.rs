//! Finding agents: by name in both layouts, by path, and the errors when that fails.

use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use toren_config::{AgentEntry, AgentRef, Position, find_agent, list_agents, resolve_agent};

use super::common::Home;

const CODER: &str = "name: coder\nmodel: anthropic/claude-sonnet-5\n";

#[test]
fn a_name_finds_name_dot_yaml() {
    let home = Home::new();
    let path = home.write("agents/coder.yaml", CODER);
    let found = AgentRef::resolve("coder", &home.agents()).expect("found");
    assert_eq!(
        found,
        AgentRef::Named {
            name: "coder".to_owned(),
            path: path.clone()
        }
    );
    assert_eq!(resolve_agent("coder", &home.agents()).expect("found"), path);
    assert_eq!(
        find_agent("coder", &home.agents()).expect("valid").name,
        "coder"
    );
}

#[test]
fn a_name_finds_name_dot_yml() {
    let home = Home::new();
    let path = home.write("agents/coder.yml", CODER);
    assert_eq!(resolve_agent("coder", &home.agents()).expect("found"), path);
}

#[test]
fn a_name_finds_an_agent_in_its_own_directory() {
    let home = Home::new();
    let path = home.write("agents/coder/agent.yaml", CODER);
    home.write("agents/coder/script.yaml", "turns: []\n");
    assert_eq!(resolve_agent("coder", &home.agents()).expect("found"), path);
    let spec = find_agent("coder", &home.agents()).expect("valid");
    assert_eq!(
        spec.source,
        Some(path.canonicalize().expect("exists").display().to_string())
    );
}

#[test]
fn a_file_found_by_name_must_carry_that_name() {
    let home = Home::new();
    home.write(
        "agents/coder.yaml",
        "# renamed\nname:   builder\nmodel: anthropic/m\n",
    );
    let error = find_agent("coder", &home.agents()).expect_err("name mismatch");
    let position = error.diagnostic().and_then(|d| d.position);
    assert_eq!(position, Some(Position { line: 2, column: 9 }));
    assert_snapshot!(home.render(&error));
}

#[test]
fn a_path_is_used_as_given_and_its_name_is_free() {
    let home = Home::new();
    let path = home.write("elsewhere/my-file.yaml", CODER);
    let arg = path.display().to_string();
    let found = AgentRef::resolve(&arg, &home.agents()).expect("found");
    assert_eq!(found, AgentRef::Path(path));
    assert_eq!(found.load().expect("valid").name, "coder");
}

#[test]
fn a_path_to_a_directory_uses_its_agent_yaml() {
    let home = Home::new();
    let path = home.write("elsewhere/coder/agent.yaml", CODER);
    let arg = home
        .dir
        .path()
        .join("elsewhere/coder")
        .display()
        .to_string();
    assert_eq!(resolve_agent(&arg, &home.agents()).expect("found"), path);
}

#[test]
fn an_unknown_name_lists_where_it_looked_and_what_exists() {
    let home = Home::new();
    home.write("agents/coder.yaml", CODER);
    home.write(
        "agents/reviewer/agent.yaml",
        "name: reviewer\nmodel: openai/gpt-5\n",
    );
    home.write("agents/notes.txt", "not an agent");
    let error = resolve_agent("builder", &home.agents()).expect_err("absent");
    assert_snapshot!(home.render(&error));
}

#[test]
fn a_missing_path_and_a_missing_agents_directory_are_both_reported() {
    let home = Home::new();
    let missing_dir = home.dir.path().join("no-agents-here");
    let error = resolve_agent("./builder.yaml", &missing_dir).expect_err("absent");
    assert_snapshot!(home.render(&error));
}

#[test]
fn two_layouts_for_one_name_are_an_error() {
    let home = Home::new();
    home.write("agents/coder.yaml", CODER);
    home.write("agents/coder/agent.yaml", CODER);
    let error = resolve_agent("coder", &home.agents()).expect_err("ambiguous");
    assert_snapshot!(home.render(&error));
}

#[test]
fn an_argument_that_is_neither_path_nor_name_is_refused() {
    let home = Home::new();
    let error = resolve_agent("my agent", &home.agents()).expect_err("invalid");
    assert_snapshot!(home.render(&error));
}

#[test]
fn list_agents_finds_every_layout_in_name_order() {
    let home = Home::new();
    let b = home.write("agents/b.yml", CODER);
    let a = home.write("agents/a/agent.yaml", CODER);
    let c = home.write("agents/c.yaml", CODER);
    home.write("agents/d/readme.md", "no agent.yaml here");
    home.write("agents/e.json", "{}");
    let entry = |name: &str, path| AgentEntry {
        name: name.to_owned(),
        path,
    };
    assert_eq!(
        list_agents(&home.agents()).expect("listed"),
        vec![entry("a", a), entry("b", b), entry("c", c)]
    );
}

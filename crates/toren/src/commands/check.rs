//! `toren check [AGENT|DIR...]`: validate agent files (default: every agent in the agents
//! directory; a directory argument: every agent file in it).
//!
//! An argument is checked as `toren run ARG` would load it: every problem of the file is
//! printed as `file:line:col: error: …` (not only the first), a `scripted/FILE` model must
//! name a script that exists and parses, and a file found by its name (an agent name, or
//! each file of a directory: `NAME.yaml`, `NAME.yml`, `NAME/agent.yaml`) must carry that
//! name, as the lookup by name demands; a file given by its path may carry any name. A
//! file that is the script of a scripted agent checked with it (`turns.yaml` beside
//! `NAME.yaml`) is left out, said so, rather than reported as a broken agent. A model whose API key is not set here is a warning, not an error: the
//! file is right, and the machine that runs it may have the key. Each file's verdict goes
//! to stderr; the status is 2 if any file is bad.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use toren_config::{AGENT_FILE_NAME, AgentEntry, AgentRef, Settings};
use toren_protocol::AgentSpec;
use toren_worker::ModelFactory as _;

use crate::exit::{Failure, USAGE};
use crate::wiring;

pub(crate) fn check(args: &[String]) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let targets: Vec<Target> = if args.is_empty() {
        let found = toren_config::list_agents(&settings.agents_dir).map_err(Failure::usage)?;
        if found.is_empty() {
            return Err(Failure::usage(anyhow!(
                "no agent files in {}; pass paths, or set TOREN_AGENTS to the directory that holds them",
                settings.agents_dir.display()
            )));
        }
        by_name(found)
    } else {
        args.iter()
            .flat_map(|arg| targets_of(arg, &settings.agents_dir))
            .collect()
    };
    // Every file is loaded first: a file that is the script of a scripted agent found
    // here (`agents/turns.yaml` beside `agents/NAME.yaml`) is no agent file, and is left out.
    let loaded: Vec<(Target, Option<toren_config::Result<AgentSpec>>)> = targets
        .into_iter()
        .map(|target| {
            let spec = match &target {
                Target::Agent(agent) => Some(agent.load()),
                Target::Invalid(_) | Target::Empty(_) => None,
            };
            (target, spec)
        })
        .collect();
    let scripts = scripts_of(&loaded);
    let mut bad = 0;
    let mut total = 0;
    for (target, spec) in loaded {
        if let (Target::Agent(agent), Some(Err(_))) = (&target, &spec)
            && std::fs::canonicalize(agent.path()).is_ok_and(|path| scripts.contains(&path))
        {
            eprintln!(
                "skipped: {} (the script of a scripted agent, not an agent file)",
                agent.path().display()
            );
            continue;
        }
        total += 1;
        if !report(&target, spec, &settings) {
            bad += 1;
        }
    }
    if bad > 0 {
        let (files, have) = match (total, bad) {
            (1, _) => ("agent file", "has"),
            (_, 1) => ("agent files", "has"),
            _ => ("agent files", "have"),
        };
        eprintln!("{bad} of {total} {files} {have} errors");
        return Ok(USAGE);
    }
    Ok(0)
}

/// What one argument stands for: a file to check, or why it names none.
enum Target {
    Agent(AgentRef),
    Invalid(toren_config::Error),
    Empty(PathBuf),
}

/// The files `arg` names: a directory without an `agent.yaml` stands for the agent files
/// in it; anything else is resolved as `toren run` resolves an agent.
fn targets_of(arg: &str, agents_dir: &Path) -> Vec<Target> {
    let path = Path::new(arg);
    if path.is_dir() && !path.join(AGENT_FILE_NAME).is_file() {
        return match toren_config::list_agents(path) {
            Ok(found) if found.is_empty() => vec![Target::Empty(path.to_path_buf())],
            Ok(found) => by_name(found),
            Err(error) => vec![Target::Invalid(error)],
        };
    }
    match AgentRef::resolve(arg, agents_dir) {
        Ok(agent) => vec![Target::Agent(agent)],
        Err(error) => vec![Target::Invalid(error)],
    }
}

/// A directory's agent files, each to be checked under the name it is found by; a name
/// given by two files (`x.yaml` and `x/agent.yaml`) is an error, as it is to `toren run`.
fn by_name(found: Vec<AgentEntry>) -> Vec<Target> {
    let mut names: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in found {
        names.entry(entry.name).or_default().push(entry.path);
    }
    names
        .into_iter()
        .map(|(name, mut paths)| match paths.len() {
            1 => Target::Agent(AgentRef::Named {
                name,
                path: paths.remove(0),
            }),
            _ => Target::Invalid(toren_config::Error::AmbiguousAgent { name, paths }),
        })
        .collect()
}

/// The script files (canonical paths) the scripted agents among `loaded` name.
fn scripts_of(loaded: &[(Target, Option<toren_config::Result<AgentSpec>>)]) -> HashSet<PathBuf> {
    loaded
        .iter()
        .filter_map(|(_, spec)| spec.as_ref()?.as_ref().ok())
        .filter_map(|spec| {
            let file = spec.model.strip_prefix("scripted/")?;
            let dir = Path::new(spec.source.as_deref()?).parent()?;
            std::fs::canonicalize(dir.join(file)).ok()
        })
        .collect()
}

/// Says how one target's check went (`spec`: the agent file loaded); whether it passed.
fn report(
    target: &Target,
    spec: Option<toren_config::Result<AgentSpec>>,
    settings: &Settings,
) -> bool {
    let agent = match target {
        Target::Agent(agent) => agent,
        Target::Invalid(error) => {
            eprintln!("error: {error}");
            return false;
        }
        Target::Empty(dir) => {
            eprintln!(
                "error: no agent files in {}: an agent file is NAME.yaml, NAME.yml or \
                 NAME/{AGENT_FILE_NAME}",
                dir.display()
            );
            return false;
        }
    };
    let spec = match spec.unwrap_or_else(|| agent.load()) {
        Ok(spec) => spec,
        Err(error) => {
            match error.diagnostic() {
                Some(_) => eprintln!("{error}"),
                None => eprintln!("error: {error}"),
            }
            return false;
        }
    };
    let path = agent.path().display();
    if !model_builds(&spec, &path.to_string(), settings) {
        return false;
    }
    eprintln!("ok: {path} (agent {}, model {})", spec.name, spec.model);
    true
}

/// Builds the model as a run would (a script is read and parsed); a missing API key is
/// warned about, anything else is an error. Whether nothing stops the model.
fn model_builds(spec: &AgentSpec, path: &str, settings: &Settings) -> bool {
    match wiring::models(settings).model(spec) {
        Ok(_) => true,
        Err(toren_model::Error::MissingKey { var, .. }) => {
            eprintln!(
                "warning: {path}: model `{}` needs {var}, which is not set here; set it \
                 where the agent runs",
                spec.model
            );
            true
        }
        Err(error) => {
            eprintln!("{path}: error: {error}");
            false
        }
    }
}

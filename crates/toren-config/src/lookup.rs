//! Finding an agent file from what the user typed: a path, or a name in the agents directory.
//!
//! An argument that looks like a path (it contains `/` or ends in `.yaml`/`.yml`) and exists
//! is used as is; otherwise it is a name, looked up as `NAME.yaml`, `NAME.yml` or
//! `NAME/agent.yaml` in the agents directory (`TOREN_AGENTS`). A file found by name must
//! carry that name. Parsing the file is `agent_file`'s job.

use std::path::{Path, PathBuf};

use toren_protocol::AgentSpec;

use crate::agent_file::{self, check_name};
use crate::error::{Error, Result};

/// The file name of an agent kept in its own directory (`agents/NAME/agent.yaml`).
pub const AGENT_FILE_NAME: &str = "agent.yaml";

/// An agent file, and the name it was looked up by, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentRef {
    /// Given as a path.
    Path(PathBuf),
    /// Found in the agents directory by `name`.
    Named { name: String, path: PathBuf },
}

impl AgentRef {
    /// Finds the agent file `arg` refers to; see the module docs for the rules.
    pub fn resolve(arg: &str, agents_dir: &Path) -> Result<Self> {
        if looks_like_path(arg) {
            let path = PathBuf::from(arg);
            if path.is_file() {
                return Ok(Self::Path(path));
            }
            let inside = path.join(AGENT_FILE_NAME);
            if path.is_dir() && inside.is_file() {
                return Ok(Self::Path(inside));
            }
            return Err(Error::AgentNotFound {
                reference: arg.to_owned(),
                searched: vec![path],
                agents_dir: agents_dir.to_path_buf(),
                available: agent_names(agents_dir),
            });
        }
        if let Err(problem) = check_name(arg) {
            return Err(Error::InvalidAgentName {
                reference: arg.to_owned(),
                problem,
            });
        }
        let candidates = candidates(arg, agents_dir);
        let mut found: Vec<PathBuf> = candidates.iter().filter(|p| p.is_file()).cloned().collect();
        match found.len() {
            0 => Err(Error::AgentNotFound {
                reference: arg.to_owned(),
                searched: candidates,
                agents_dir: agents_dir.to_path_buf(),
                available: agent_names(agents_dir),
            }),
            1 => Ok(Self::Named {
                name: arg.to_owned(),
                path: found.remove(0),
            }),
            _ => Err(Error::AmbiguousAgent {
                name: arg.to_owned(),
                paths: found,
            }),
        }
    }

    /// The agent file.
    pub fn path(&self) -> &Path {
        match self {
            Self::Path(path) | Self::Named { path, .. } => path,
        }
    }

    /// Loads the file; one found by name must be named so (the error points at `name:`).
    pub fn load(&self) -> Result<AgentSpec> {
        match self {
            Self::Path(path) => agent_file::load_agent(path),
            Self::Named { name, path } => agent_file::load(path, Some(name)),
        }
    }
}

/// The agent file `arg` refers to (see [`AgentRef::resolve`]).
pub fn resolve_agent(arg: &str, agents_dir: &Path) -> Result<PathBuf> {
    AgentRef::resolve(arg, agents_dir).map(|agent| agent.path().to_path_buf())
}

/// Resolves `arg` and loads the agent, checking the name of a file found by name.
pub fn find_agent(arg: &str, agents_dir: &Path) -> Result<AgentSpec> {
    AgentRef::resolve(arg, agents_dir)?.load()
}

/// One agent file in the agents directory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AgentEntry {
    /// The name it is looked up by (the file stem or directory name).
    pub name: String,
    pub path: PathBuf,
}

/// The agent files in `agents_dir`, in every layout, sorted by name then path.
pub fn list_agents(agents_dir: &Path) -> Result<Vec<AgentEntry>> {
    let list_error = |cause| Error::ListAgents {
        dir: agents_dir.to_path_buf(),
        cause,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(agents_dir).map_err(list_error)? {
        let path = entry.map_err(list_error)?.path();
        let Some(file_name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        if path.is_dir() {
            let inside = path.join(AGENT_FILE_NAME);
            if inside.is_file() {
                entries.push(AgentEntry {
                    name: file_name.to_owned(),
                    path: inside,
                });
            }
        } else if let Some(stem) = file_name
            .strip_suffix(".yaml")
            .or_else(|| file_name.strip_suffix(".yml"))
        {
            entries.push(AgentEntry {
                name: stem.to_owned(),
                path,
            });
        }
    }
    entries.sort();
    Ok(entries)
}

/// The names in `agents_dir` for an error message; `None` when it cannot be listed.
fn agent_names(agents_dir: &Path) -> Option<Vec<String>> {
    let mut names: Vec<String> = list_agents(agents_dir)
        .ok()?
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    names.dedup();
    Some(names)
}

/// Where an agent called `name` may be, in the order they are tried.
fn candidates(name: &str, agents_dir: &Path) -> Vec<PathBuf> {
    vec![
        agents_dir.join(format!("{name}.yaml")),
        agents_dir.join(format!("{name}.yml")),
        agents_dir.join(name).join(AGENT_FILE_NAME),
    ]
}

fn looks_like_path(arg: &str) -> bool {
    arg.contains('/')
        || arg.contains(std::path::MAIN_SEPARATOR)
        || arg.ends_with(".yaml")
        || arg.ends_with(".yml")
}

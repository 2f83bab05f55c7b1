//! `toren check [PATH...]`: validate agent files (default: every agent in the agents
//! directory). Prints each error as `file:line:col: message`; exits 2 if any file is bad.
#![expect(clippy::print_stderr, reason = "validation results are for people")]

use std::path::PathBuf;

use anyhow::anyhow;

use crate::exit::{Failure, USAGE};
use crate::wiring;

pub(crate) fn check(args: &[String]) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let paths: Vec<Result<PathBuf, String>> = if args.is_empty() {
        let found = toren_config::list_agent_files(&settings.agents_dir).map_err(Failure::usage)?;
        if found.is_empty() {
            return Err(Failure::usage(anyhow!(
                "no agent files in {}; pass paths, or set TOREN_AGENTS to the directory that holds them",
                settings.agents_dir.display()
            )));
        }
        found.into_iter().map(Ok).collect()
    } else {
        args.iter()
            .map(|a| toren_config::resolve_agent(a, &settings.agents_dir).map_err(|e| e.to_string()))
            .collect()
    };
    let mut bad = 0;
    for path in paths {
        let result = path.and_then(|p| toren_config::load_agent(&p).map(|a| (p, a)).map_err(|e| e.to_string()));
        match result {
            Ok((path, agent)) => eprintln!("ok: {} (agent {}, model {})", path.display(), agent.name, agent.model),
            Err(message) => {
                bad += 1;
                eprintln!("{message}");
            }
        }
    }
    if bad > 0 {
        eprintln!("{bad} agent file(s) with errors");
        return Ok(USAGE);
    }
    Ok(0)
}

//! `toren check [AGENT...]`: validate agent files (default: every agent in the agents
//! directory). Prints each error as `file:line:col: error: …`; exits 2 if any file is bad.

use anyhow::anyhow;
use toren_config::AgentRef;

use crate::exit::{Failure, USAGE};
use crate::wiring;

pub(crate) fn check(args: &[String]) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let targets: Vec<String> = if args.is_empty() {
        let found = toren_config::list_agents(&settings.agents_dir).map_err(Failure::usage)?;
        if found.is_empty() {
            return Err(Failure::usage(anyhow!(
                "no agent files in {}; pass paths, or set TOREN_AGENTS to the directory that holds them",
                settings.agents_dir.display()
            )));
        }
        found.into_iter().map(|entry| entry.name).collect()
    } else {
        args.to_vec()
    };
    let mut bad = 0;
    for target in &targets {
        let checked = AgentRef::resolve(target, &settings.agents_dir)
            .and_then(|agent| Ok((agent.load()?, agent)));
        match checked {
            Ok((spec, agent)) => eprintln!(
                "ok: {} (agent {}, model {})",
                agent.path().display(),
                spec.name,
                spec.model
            ),
            Err(error) => {
                bad += 1;
                match error.diagnostic() {
                    Some(_) => eprintln!("{error}"),
                    None => eprintln!("error: {error}"),
                }
            }
        }
    }
    if bad > 0 {
        eprintln!("{bad} of {} agent file(s) have errors", targets.len());
        return Ok(USAGE);
    }
    Ok(0)
}

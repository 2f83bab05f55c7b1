//! `toren rewind RUN|SESSION --to STEP`: a run's or a session's workspace and conversation
//! go back to step STEP together (the run service does it, intent first; see
//! `toren_worker::rewind` and `toren_runtime::SessionStep`). For a run STEP is an event's
//! seq and `toren resume RUN` continues from there; for a session STEP is `TURN` (before
//! that turn began) or `TURN.SEQ` (after event SEQ of that turn's run) and the session's
//! next message continues from there. A run that has ended keeps its closed log: a new run
//! goes on from the step instead (its id on stdout). Refused while a live process drives
//! the run (or the session's turn), and with the steps it can go back to when STEP is not
//! one.

use anyhow::anyhow;
use toren_protocol::RunId;
use toren_runtime::{Actor, RunService, SessionStep, WentBack};
use toren_worker::holder;

use crate::cli::RewindArgs;
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn rewind(args: &RewindArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let actor = Actor {
        by: settings.user.clone(),
        via: "cli".to_owned(),
    };
    // A run's id, `last` or a prefix starting `run_` names a run; anything else a session.
    if args.run.parse::<RunId>().is_ok() || args.run == "last" || args.run.starts_with("run_") {
        let run_id = resolve_run(&service, &args.run).await?;
        rewind_run(&service, &run_id, &args.to, &actor).await
    } else {
        rewind_session(&service, &args.run, &args.to, &actor).await
    }
}

async fn rewind_run(
    service: &RunService,
    run_id: &RunId,
    to: &str,
    actor: &Actor,
) -> Result<u8, Failure> {
    let to: u64 = to.parse().map_err(|_| {
        Failure::usage(anyhow!(
            "`{to}` is not a step of a run: give an event's seq (see `toren events {run_id}`)"
        ))
    })?;
    let went = service
        .go_back(run_id, to, actor, &holder::this_process())
        .await
        .map_err(|e| refused(e, &format!("run {run_id}")))?;
    match went {
        WentBack::Rewound(outcome) => eprintln!(
            "run {run_id} is back at step {} ({}); `toren resume {run_id}` continues it from there",
            outcome.to,
            workspace_note(outcome.checkpoint.as_deref())
        ),
        WentBack::Forked(fork) => {
            // The new run's id is the command's data: `toren resume $(toren rewind …)`.
            println!("{}", fork.run_id);
            eprintln!(
                "run {run_id} had ended, so new run {new} goes on from its step {to} ({}); \
                 `toren resume {new}` continues it from there",
                fork_note(fork.checkpoint.as_deref()),
                new = fork.run_id,
                to = fork.to,
            );
        }
    }
    Ok(0)
}

async fn rewind_session(
    service: &RunService,
    name: &str,
    to: &str,
    actor: &Actor,
) -> Result<u8, Failure> {
    let session = match service.session(name).await {
        Ok(session) => session,
        Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => {
            return Err(Failure::usage(anyhow!(
                "`{name}` is neither a run id nor a session's name (`toren sessions list` lists \
                 the sessions)"
            )));
        }
        Err(e) => return Err(Failure::failed(anyhow!(e))),
    };
    let step: SessionStep = to.parse().map_err(|e: String| Failure::usage(anyhow!(e)))?;
    let done = service
        .rewind_session(&session, step, actor, &holder::this_process())
        .await
        .map_err(|e| refused(e, &format!("session {name}")))?;
    {
        eprintln!("{}", session_note(&session.name, &done));
    }
    Ok(0)
}

/// What a front door says after a session's rewind.
pub(crate) fn session_note(name: &str, done: &toren_runtime::SessionRewound) -> String {
    let step = if done.step.seq == 0 {
        format!("before turn {}", done.step.turn)
    } else {
        format!("step {}", done.step)
    };
    format!(
        "session {name} is back at {step} ({}; recorded as turn {}, run {}); its next message \
         continues from there",
        workspace_note(done.checkpoint.as_deref()),
        done.turn,
        done.run_id
    )
}

fn fork_note(checkpoint: Option<&str>) -> String {
    match checkpoint {
        Some(id) => format!("its workspace copied from checkpoint {id}"),
        None => "no sandbox".to_owned(),
    }
}

fn workspace_note(checkpoint: Option<&str>) -> String {
    match checkpoint {
        Some(id) => format!("workspace restored to checkpoint {id}"),
        None => "workspace unchanged (nothing changed it since)".to_owned(),
    }
}

/// A refused rewind as the exit code says it: driven elsewhere is a failure, a wrong step
/// a usage error.
pub(crate) fn refused(error: toren_runtime::Error, what: &str) -> Failure {
    match error {
        toren_runtime::Error::Worker(toren_worker::Error::Store(toren_store::Error::Leased {
            holder,
            expires_at,
            ..
        })) => Failure::failed(anyhow!(
            "{what} is being driven by {holder} (lease until {expires_at:.0}); stop it first (or \
             wait until its lease expires), then rewind"
        )),
        e if e.is_refusal() => Failure::usage(anyhow!(e)),
        e => Failure::failed(anyhow!(e)),
    }
}

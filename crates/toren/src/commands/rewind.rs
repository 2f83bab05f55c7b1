//! `toren rewind RUN --to STEP`: the run's workspace and conversation go back to step STEP
//! together (the run service does it under the run's lease, intent first; see
//! `toren_worker::rewind`). Refused while a live process drives the run, and with the
//! steps it can go back to when STEP is not one. `toren resume RUN` continues from there.

use anyhow::anyhow;
use toren_runtime::Actor;
use toren_worker::holder;

use crate::cli::RewindArgs;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn rewind(args: &RewindArgs) -> Result<u8, Failure> {
    let run_id = args.run.parse().map_err(|e| {
        Failure::usage(anyhow!(
            "{e}; `toren rewind` takes a run id (rewinding a session by name is not built yet: \
             rewind its latest turn's run, from `toren sessions show`)"
        ))
    })?;
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let actor = Actor {
        by: settings.user.clone(),
        via: "cli".to_owned(),
    };
    let outcome = match service
        .rewind(&run_id, args.to, &actor, &holder::this_process())
        .await
    {
        Ok(outcome) => outcome,
        Err(toren_runtime::Error::Worker(toren_worker::Error::Store(
            toren_store::Error::Leased {
                holder, expires_at, ..
            },
        ))) => {
            return Err(Failure::failed(anyhow!(
                "run {run_id} is being driven by {holder} (lease until {expires_at:.0}); stop \
                 it first (or wait until its lease expires), then rewind"
            )));
        }
        Err(e) if e.is_refusal() => return Err(Failure::usage(anyhow!(e))),
        Err(e) => return Err(Failure::failed(anyhow!(e))),
    };
    #[expect(clippy::print_stderr, reason = "confirmation for people")]
    {
        let workspace = match &outcome.checkpoint {
            Some(id) => format!("workspace restored to checkpoint {id}"),
            None => "workspace unchanged (nothing changed it since)".to_owned(),
        };
        eprintln!(
            "run {run_id} is back at step {} ({workspace}); `toren resume {run_id}` continues it from there",
            outcome.to
        );
    }
    Ok(0)
}

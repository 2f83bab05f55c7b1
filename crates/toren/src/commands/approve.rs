//! `toren approve RUN CALL`, `toren deny RUN CALL [--reason TEXT]` and `toren cancel RUN
//! [--reason TEXT]`: decide or stop a run from any terminal, through the run service. The
//! first decision wins; a second is refused. A cancelled run stops wherever it is driven.

use anyhow::anyhow;
use toren_runtime::Actor;

use crate::cli::{CancelArgs, DecideArgs};
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

fn actor(user: &str) -> Actor {
    Actor {
        by: user.to_owned(),
        via: "cli".to_owned(),
    }
}

pub(crate) async fn decide(
    target: &DecideArgs,
    approved: bool,
    reason: Option<String>,
) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let run_id = resolve_run(&service, &target.run).await?;
    service
        .decide(
            &run_id,
            &target.call,
            approved,
            reason,
            &actor(&settings.user),
        )
        .await
        // A decision the run cannot take (already decided, nothing pending, a call that a
        // rewind left behind or, for a host, a command that is over) is the caller's to
        // fix: exit 2, nothing was written.
        .map_err(|e| {
            if e.is_refusal() {
                Failure::usage(anyhow!(e))
            } else {
                Failure::failed(anyhow!(e))
            }
        })?;
    {
        eprintln!(
            "{} call {} of run {run_id}",
            if approved { "approved" } else { "denied" },
            toren_display::visible(&target.call)
        );
    }
    Ok(0)
}

pub(crate) async fn cancel(args: &CancelArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let run_id = resolve_run(&service, &args.run).await?;
    service
        .cancel(&run_id, args.reason.clone(), &actor(&settings.user))
        .await
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    {
        eprintln!(
            "cancelled run {run_id}; whatever it was running is stopped, and it cannot be resumed"
        );
    }
    Ok(0)
}

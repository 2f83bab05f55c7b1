//! `toren resume RUN`: continue a run whose process died, from its event log, under the
//! spec and policy pinned when it was created (never today's agent file or environment).

use anyhow::anyhow;
use toren_protocol::RunStatus;

use crate::cli::ResumeArgs;
use crate::commands::host::Host;
use crate::commands::resolve_run;
use crate::exit::{FAILED, Failure};
use crate::{printer, wiring};

pub(crate) async fn resume(args: ResumeArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let run_id = resolve_run(&service, &args.run).await?;
    // A log that cannot be replayed is recorded as failed by the service, with the reason,
    // so that no surface goes on calling it resumable.
    let view = service.get(&run_id).await.map_err(Failure::failed)?;
    let Some(state) = view.state else {
        printer::failed(&run_id, view.error.as_deref().unwrap_or_default());
        return Ok(FAILED);
    };
    if state.status.is_terminal() {
        printer::already_ended(&state);
        return Ok(if state.status == RunStatus::Completed {
            0
        } else {
            FAILED
        });
    }
    // A run a live process drives is refused before anything else is set up (checking the
    // sandbox backend starts a process, which must not be what a refusal waits for).
    if !view.resumable
        && let Some(lease) = &view.summary.lease
    {
        return Err(Failure::failed(anyhow!(
            "run {run_id} is being driven by {} until {:.0}; if that process has died, try \
             again once its lease has expired",
            lease.holder,
            lease.expires_at
        )));
    }
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    let host = Host::new(&state.agent, state.policy.as_ref(), &settings, &service).await?;
    let lease = host.acquire(&run_id).await?;
    // Anything written between our read and the lease (e.g. by a process that just
    // stopped) is folded by the driver; the summary is about what we read.
    printer::resuming(&state, &events);
    host.drive(lease, args.json).await
}

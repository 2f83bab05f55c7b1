//! `toren resume RUN`: continue a run whose process died, from its event log, under the
//! spec and policy pinned when it was created (never today's agent file or environment).

use toren_agent::RunState;
use toren_protocol::RunStatus;
use toren_worker::holder;

use crate::cli::ResumeArgs;
use crate::commands::host::{Host, LEASE_TTL};
use crate::commands::parse_run_id;
use crate::exit::{FAILED, Failure};
use crate::{printer, wiring};

pub(crate) async fn resume(args: ResumeArgs) -> Result<u8, Failure> {
    let run_id = parse_run_id(&args.run)?;
    let settings = wiring::settings()?;
    let store = wiring::store(&settings).await?;
    let events = store.read(&run_id, 0).await.map_err(Failure::failed)?;
    let state = match RunState::from_events(&events) {
        Ok(state) => state,
        Err(error) => {
            // Not a run anyone can continue: record it as failed, with the reason, so that
            // no surface goes on calling it resumable.
            let recorded = toren_worker::fail_if_unreplayable(
                store.as_ref(),
                &run_id,
                &holder::this_process(),
                LEASE_TTL,
            )
            .await
            .map_err(Failure::failed)?;
            let reason = recorded.unwrap_or_else(|| error.to_string());
            printer::failed(&run_id, &reason);
            return Ok(FAILED);
        }
    };
    if state.status.is_terminal() {
        printer::already_ended(&state);
        return Ok(if state.status == RunStatus::Completed {
            0
        } else {
            FAILED
        });
    }
    let host = Host::new(&state.agent, state.policy.as_ref(), &settings, store).await?;
    let lease = host.acquire(&run_id).await?;
    // Anything written between our read and the lease (e.g. by a process that just
    // stopped) is folded by the driver; the summary is about what we read.
    printer::resuming(&state, &events);
    host.drive(lease, args.json).await
}

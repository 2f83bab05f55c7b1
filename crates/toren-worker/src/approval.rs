//! Waiting for a human decision on a bash call: asked on the spot through the host's
//! [`Approver`](crate::Approver) if it has one, and in any case watched for in the log,
//! where `toren approve|deny` from another terminal records it. The first decision wins.

use toren_agent::RunState;
use toren_protocol::{ApprovalDecided, ApprovalRequested};

use crate::{Error, Outcome, Worker};

impl Worker {
    /// For a worker that parks approvals: the run waits for a decision on `request`;
    /// unless one is already in the log, it is announced and the run is let go of.
    pub(crate) async fn park(
        &self,
        state: &mut RunState,
        request: &ApprovalRequested,
    ) -> Result<Option<Outcome>, Error> {
        let before = state.last_seq;
        self.catch_up(state).await?;
        if state.last_seq != before {
            return Ok(None);
        }
        self.config
            .observer
            .awaiting_approval(&state.run_id, request);
        Ok(Some(Outcome::AwaitingApproval {
            call_id: request.call_id.clone(),
        }))
    }

    /// Waits until a decision on `request` is in the log: from this process's approver if
    /// it has one, or from anywhere else (another terminal's `toren approve`).
    pub(crate) async fn await_decision(
        &self,
        state: &mut RunState,
        request: &ApprovalRequested,
    ) -> Result<(), Error> {
        let run = state.run_id.clone();
        let ask = async {
            match &self.config.approver {
                Some(approver) => approver.ask(&run, request).await,
                None => None,
            }
        };
        let mut ask = std::pin::pin!(ask);
        let mut asking = true;
        let mut announced = false;
        loop {
            if !asking && !announced {
                self.config.observer.awaiting_approval(&run, request);
                announced = true;
            }
            tokio::select! {
                decision = &mut ask, if asking => {
                    asking = false;
                    if let Some(d) = decision {
                        let decided = ApprovalDecided {
                            call_id: request.call_id.clone(),
                            approved: d.approved,
                            by: d.by,
                            via: d.via,
                            reason: d.reason,
                        };
                        match self.config.store.decide_approval(&run, decided).await {
                            // Someone else decided first: their decision stands.
                            Ok(_) | Err(toren_store::Error::AlreadyDecided { .. }) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                () = tokio::time::sleep(self.config.approval_poll) => {}
            }
            let before = state.last_seq;
            self.catch_up(state).await?;
            if state.last_seq != before {
                return Ok(());
            }
        }
    }
}

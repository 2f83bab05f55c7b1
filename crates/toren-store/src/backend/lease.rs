//! A run's row as a write transaction sees it ([`RunState`]) and the lease rules checked
//! against it: ended runs refuse every write, a write under a lease needs the current token,
//! a live lease keeps other holders out unless it is a dead holder's being taken over.

use std::time::Duration;

use jiff::Timestamp;
use toren_protocol::{RunId, RunStatus};

use crate::{Error, Lease, LeaseInfo, Result, RunSummary};

/// The first token of every run, given with `create_run` (a queued run's token is `0`, so
/// its first acquisition gets this one too).
pub const FIRST_TOKEN: u64 = 1;

/// `at + ttl`, or the end of time if that overflows.
pub fn after(at: Timestamp, ttl: Duration) -> Timestamp {
    crate::clock::after(at, ttl)
}

/// The lease a new run is created with: [`FIRST_TOKEN`], held by `holder` for `ttl`.
pub fn first_lease(run_id: &RunId, holder: &str, now: Timestamp, ttl: Duration) -> Lease {
    Lease {
        run_id: run_id.clone(),
        token: FIRST_TOKEN,
        holder: holder.to_owned(),
        expires_at: after(now, ttl),
    }
}

/// The run row's columns that writes check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunState {
    pub status: RunStatus,
    pub last_seq: u64,
    /// The token of the run's latest lease (`0` before the first); never decreases.
    pub token: u64,
    /// The current lease; `None` once released or ended.
    pub lease: Option<LeaseInfo>,
}

impl RunState {
    /// [`Error::RunEnded`] if the run has ended.
    pub fn refuse_if_ended(&self, run_id: &RunId) -> Result<()> {
        if self.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: run_id.clone(),
                status: self.status,
            });
        }
        Ok(())
    }

    /// [`Error::LeaseLost`] unless `lease` is the run's current lease. Expiry does not
    /// matter here: while the token is current nobody else has acquired the run.
    pub fn fence(&self, lease: &Lease) -> Result<()> {
        match &self.lease {
            Some(_) if self.token == lease.token => Ok(()),
            current => Err(Error::LeaseLost {
                run_id: lease.run_id.clone(),
                token: lease.token,
                now_held_by: current.as_ref().map(|c| c.holder.clone()),
            }),
        }
    }

    /// [`Error::Leased`] if someone other than `holder` holds a live lease at `now`.
    pub fn refuse_if_leased(&self, run_id: &RunId, holder: &str, now: Timestamp) -> Result<()> {
        match &self.lease {
            Some(current) if current.holder != holder && current.is_live(now) => {
                Err(Error::Leased {
                    run_id: run_id.clone(),
                    holder: current.holder.clone(),
                    expires_at: current.expires_at,
                    expires_in: now.duration_until(current.expires_at).unsigned_abs(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The checks of [`EventLog::append`](crate::EventLog::append), in its order: the run
    /// has not ended, `lease` is current, and the log ends at `after_seq`
    /// ([`Error::Conflict`] otherwise).
    pub fn check_append(&self, lease: &Lease, after_seq: u64) -> Result<()> {
        self.refuse_if_ended(&lease.run_id)?;
        self.fence(lease)?;
        if self.last_seq != after_seq {
            return Err(Error::Conflict {
                run_id: lease.run_id.clone(),
                expected: after_seq,
                actual: self.last_seq,
            });
        }
        Ok(())
    }

    /// The lease [`EventLog::acquire_lease`](crate::EventLog::acquire_lease) (no
    /// `dead_holder`) or [`take_over_lease`](crate::EventLog::take_over_lease) stores: the
    /// next token, for `ttl` from `now`. Refused if the run has ended, or if another holder's
    /// live lease keeps `holder` out (unless that holder is `dead_holder`).
    pub fn next_lease(
        &self,
        run_id: &RunId,
        dead_holder: Option<&str>,
        holder: &str,
        now: Timestamp,
        ttl: Duration,
    ) -> Result<Lease> {
        self.refuse_if_ended(run_id)?;
        let held_by_the_dead =
            dead_holder.is_some_and(|dead| self.lease.as_ref().is_some_and(|l| l.holder == dead));
        if !held_by_the_dead {
            self.refuse_if_leased(run_id, holder, now)?;
        }
        Ok(Lease {
            token: self.token + 1,
            run_id: run_id.clone(),
            holder: holder.to_owned(),
            expires_at: after(now, ttl),
        })
    }

    /// `lease` renewed for `ttl` from `now`, if the run has not ended and it is current.
    pub fn renewed(&self, lease: &Lease, now: Timestamp, ttl: Duration) -> Result<Lease> {
        self.refuse_if_ended(&lease.run_id)?;
        self.fence(lease)?;
        Ok(Lease {
            expires_at: after(now, ttl),
            ..lease.clone()
        })
    }

    /// Whether releasing `lease` has anything to clear: not when it was released already,
    /// taken over (the new holder keeps it) or ended with its run.
    pub fn holds(&self, lease: &Lease) -> bool {
        self.fence(lease).is_ok()
    }
}

/// What claiming `run`, whose latest token is `token`, gives `holder` at `now`: the next
/// lease for `ttl`, and the run's summary showing it.
pub fn claimed(
    run: RunSummary,
    token: u64,
    holder: &str,
    now: Timestamp,
    ttl: Duration,
) -> (RunSummary, Lease) {
    let lease = Lease {
        run_id: run.id.clone(),
        token: token + 1,
        holder: holder.to_owned(),
        expires_at: after(now, ttl),
    };
    let summary = RunSummary {
        lease: Some(LeaseInfo {
            holder: lease.holder.clone(),
            expires_at: lease.expires_at,
        }),
        ..run
    };
    (summary, lease)
}

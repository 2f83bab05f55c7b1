//! Leases: which process drives a run. A [`Lease`] is what its holder keeps and shows the
//! store with every append; a [`LeaseInfo`] is what anyone else sees of it in a
//! [`RunSummary`](crate::RunSummary). The rules are on [`EventLog`](crate::EventLog).

use jiff::Timestamp;
use toren_protocol::RunId;

/// The right to append to one run, held by one process until it expires or is taken over.
///
/// The store issues it ([`EventLog::create_run`], [`EventLog::acquire_lease`]) and renews it
/// ([`EventLog::renew_lease`]); the holder passes it to every [`EventLog::append`], which
/// succeeds only while `token` is the run's current token.
///
/// [`EventLog::create_run`]: crate::EventLog::create_run
/// [`EventLog::acquire_lease`]: crate::EventLog::acquire_lease
/// [`EventLog::renew_lease`]: crate::EventLog::renew_lease
/// [`EventLog::append`]: crate::EventLog::append
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub run_id: RunId,
    /// The fencing token: every acquisition of the run gets a higher one than any before;
    /// renewing keeps it.
    pub token: u64,
    /// Who holds it, as the holder named itself (e.g. `host:pid`); shown to other processes.
    pub holder: String,
    /// After this instant (by the store's clock) another holder may take the run over.
    pub expires_at: Timestamp,
}

impl Lease {
    /// What other processes see of this lease.
    pub fn info(&self) -> LeaseInfo {
        LeaseInfo {
            holder: self.holder.clone(),
            expires_at: self.expires_at,
        }
    }
}

/// The current lease on a run as others see it: who drives it, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseInfo {
    pub holder: String,
    pub expires_at: Timestamp,
}

impl LeaseInfo {
    /// Whether the lease still keeps other holders out at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_live_until_its_expiry() {
        let expires_at = Timestamp::from_second(1_700_000_000).unwrap();
        let info = LeaseInfo {
            holder: "host:1".into(),
            expires_at,
        };
        assert!(info.is_live(Timestamp::from_second(1_699_999_999).unwrap()));
        assert!(!info.is_live(expires_at), "expired at its expiry instant");
        assert!(!info.is_live(Timestamp::from_second(1_700_000_001).unwrap()));
    }
}

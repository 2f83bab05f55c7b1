//! The lease heartbeat that runs beside a driven run.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toren_store::{EventLog, Lease};

/// Renews the lease every third of its lifetime; if the store says it was lost (taken over
/// by another process), fires `lost` so the driver stops at once.
pub(crate) async fn heartbeat(
    store: Arc<dyn EventLog>,
    lease: Lease,
    ttl: Duration,
    lost: CancellationToken,
) {
    let mut lease = lease;
    loop {
        tokio::time::sleep(ttl / 3).await;
        match store.renew_lease(&lease, ttl).await {
            Ok(renewed) => lease = renewed,
            Err(toren_store::Error::LeaseLost { .. }) => {
                lost.cancel();
                return;
            }
            // Only this holder can end the run (appends are fenced): it just did, and the
            // driver is returning its outcome. Nothing is lost.
            Err(toren_store::Error::RunEnded { .. }) => return,
            // A busy or briefly unavailable database: try again at the next beat; the
            // lease outlives two missed beats.
            Err(e) => tracing::warn!(run = %lease.run_id, "could not renew the lease: {e}"),
        }
    }
}

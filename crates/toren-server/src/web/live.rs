//! When the runs page's live stream (`/ui/live/runs`) lists the runs again: when a run
//! moved — in this process (the run service's notifier: a run created, decided or
//! cancelled here, every event of the runs this process's workers drive) or in another
//! (the store's `moves`, when it has them: Postgres `LISTEN`) — or else after a fallback
//! poll, which is short only when the store cannot tell of other processes' moves (SQLite:
//! a `toren worker` or `toren run` beside this server). A burst of moves makes one listing:
//! never more than one every [`GAP`].

use std::time::{Duration, Instant};

use tokio::sync::broadcast;
use toren_protocol::RunId;
use toren_runtime::Moves;

use crate::AppState;

/// The fallback poll when other processes' moves cannot be heard.
const POLL: Duration = Duration::from_secs(1);
/// The fallback poll when they can (the listing then only catches what was missed).
const SLOW_POLL: Duration = Duration::from_secs(15);
/// The shortest time between two listings.
const GAP: Duration = Duration::from_millis(500);

/// What wakes one live stream.
pub(super) struct Wake {
    moves: Moves,
    others: Option<broadcast::Receiver<RunId>>,
    poll: Duration,
    last: Instant,
}

impl Wake {
    pub(super) fn new(state: &AppState) -> Self {
        let others = state.service.store().moves();
        Self {
            moves: state.service.notifier().moves(),
            poll: if others.is_some() { SLOW_POLL } else { POLL },
            others,
            last: Instant::now(),
        }
    }

    /// Waits until the runs should be listed again.
    pub(super) async fn next(&mut self) {
        tokio::select! {
            _ = self.moves.next() => {}
            closed = other_move(&mut self.others) => {
                if closed {
                    // The store stopped telling: poll as if it never had.
                    self.others = None;
                    self.poll = POLL;
                }
            }
            () = tokio::time::sleep(self.poll) => {}
        }
        let since = self.last.elapsed();
        if since < GAP {
            tokio::time::sleep(GAP - since).await;
        }
        self.last = Instant::now();
    }
}

/// The next move another process made (`false`), or `true` once the store's channel
/// closed; never, without one.
async fn other_move(others: &mut Option<broadcast::Receiver<RunId>>) -> bool {
    match others {
        Some(rx) => matches!(rx.recv().await, Err(broadcast::error::RecvError::Closed)),
        None => std::future::pending().await,
    }
}

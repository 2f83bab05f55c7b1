//! The questions a front door or a worker asks about many runs: [`RunQuery`] (a page of
//! runs, newest first, filtered by status and agent, continued with a keyset
//! [`RunCursor`]), [`ClaimQuery`] (the runs a worker may claim, oldest first) and
//! [`ClaimRequest`] (what a worker asks to be given: one run it may claim, leased to it).
//! The [`EventLog`](crate::EventLog) methods that answer them document the rules; this
//! module holds the values and the cursor's wire form, shared by every backend.

use std::time::Duration;

use jiff::Timestamp;
use toren_protocol::{RunId, RunStatus};

use crate::{Error, Result, RunSummary};

/// A page of runs, newest first (`created_at` descending, then id descending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only runs in one of these statuses; empty: any status.
    pub statuses: Vec<RunStatus>,
    /// Only runs of the agent with this name.
    pub agent: Option<String>,
    /// At most this many runs.
    pub limit: u32,
    /// Only runs after this one in the order (older, or as old with a smaller id): the
    /// [`RunPage::next`] of the previous page.
    pub after: Option<RunCursor>,
}

impl RunQuery {
    /// The newest `limit` runs, unfiltered.
    pub fn newest(limit: u32) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }
}

/// One page of a [`RunQuery`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    /// Where the next page starts; `None` when no run matching the query comes after this
    /// page (as the query was answered: runs created later are newer, so never on a later
    /// page).
    pub next: Option<RunCursor>,
}

/// A position in the newest-first order of runs: the last run of a page. A keyset, not an
/// offset, so a page that follows it neither skips nor repeats runs while new ones are
/// created (they sort before it) or others end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCursor {
    pub created_at: Timestamp,
    pub id: RunId,
}

/// The version tag of a cursor's encoded form.
const CURSOR_VERSION: &str = "c1";

impl RunCursor {
    /// The position of `run`: the next page starts after it.
    pub fn after(run: &RunSummary) -> Self {
        Self {
            created_at: run.created_at,
            id: run.id.clone(),
        }
    }

    /// The cursor as clients see it: an opaque token (lower-case hex of a versioned
    /// `c1|<created_at>|<id>`), safe in a URL as it is.
    pub fn encode(&self) -> String {
        let plain = format!("{CURSOR_VERSION}|{}|{}", self.created_at, self.id);
        plain.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a token made by [`RunCursor::encode`]; anything else is
    /// [`Error::BadCursor`].
    pub fn decode(token: &str) -> Result<Self> {
        let bad = |reason: &str| Error::BadCursor {
            reason: reason.to_owned(),
        };
        let bytes = unhex(token).ok_or_else(|| bad("it is not a cursor this server made"))?;
        let plain = String::from_utf8(bytes).map_err(|_| bad("it is not a cursor"))?;
        let mut parts = plain.splitn(3, '|');
        if parts.next() != Some(CURSOR_VERSION) {
            return Err(bad("it is not a cursor of this version"));
        }
        let created_at = parts
            .next()
            .and_then(|at| at.parse::<Timestamp>().ok())
            .ok_or_else(|| bad("its time is unreadable"))?;
        let id = parts
            .next()
            .and_then(|id| id.parse::<RunId>().ok())
            .ok_or_else(|| bad("its run id is unreadable"))?;
        Ok(Self { created_at, id })
    }
}

/// The bytes of an even-length lower- or upper-case hex string.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The runs a worker may claim now, oldest first (`created_at` ascending, then id): not
/// ended and not waiting for a person (status `queued` or `running`; a run awaiting
/// approval becomes claimable when its decision is recorded, which makes it `running`),
/// and, as `leases` says, nobody driving them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimQuery {
    /// At most this many runs.
    pub limit: u32,
    pub leases: ClaimLeases,
}

impl ClaimQuery {
    /// The oldest `limit` runs nobody holds: no lease, or one that expired by the store's
    /// clock.
    pub fn free(limit: u32) -> Self {
        Self {
            limit,
            leases: ClaimLeases::Free,
        }
    }
}

/// Which leases a [`ClaimQuery`] looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimLeases {
    /// Runs without a lease, or whose lease has expired by the store's clock.
    Free,
    /// Runs whose lease is still live and whose holder's name ends with this text: the
    /// holders a caller may be able to prove gone (a process of its own boot and
    /// namespaces, named with the same suffix), to take over without waiting for expiry.
    /// The caller checks each holder itself.
    LiveHeldBySuffix(String),
}

/// What a worker asks [`EventLog::claim`](crate::EventLog::claim) for: the oldest run it
/// may claim that it can drive, leased to `holder` for `ttl`. Each filter leaves alone the
/// runs this worker cannot drive, so that they wait for one that can instead of being
/// leased and let go of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    /// Who gets the lease: a name unique to this process (see
    /// [`EventLog::acquire_lease`](crate::EventLog::acquire_lease)).
    pub holder: String,
    /// How long the lease lasts without renewal.
    pub ttl: Duration,
    /// The workspace volumes this worker serves. A run pinned to a volume
    /// (`ResolvedPolicy::volume`) is claimed only by a worker serving it; a run without one
    /// (no sandbox, or a remote one) by any worker.
    pub volumes: Vec<String>,
    /// The sandbox backends this worker drives, by name. A run pinned to another backend is
    /// left alone; a run without a sandbox needs none.
    pub backends: Vec<String>,
    /// The channel kinds this worker can deliver to. A run bound to a channel of another
    /// kind (a `toren chat` session's turn, bound to its terminal) is left alone.
    pub channels: Vec<String>,
    /// Only runs of these agents; empty: any agent.
    pub agents: Vec<String>,
    /// At most this many runs of one agent hold a live lease at once, across every worker:
    /// while an agent has that many, its waiting runs are passed over and other agents'
    /// runs go first. `None`: unlimited.
    pub per_agent_limit: Option<u32>,
    /// Runs this worker already tried and will not drive (e.g. its log could not be read):
    /// passed over.
    pub skip: Vec<RunId>,
}

impl ClaimRequest {
    /// A request for `holder`, leasing for `ttl`, that serves no volume, backend or channel
    /// (so it claims only runs without a sandbox or bound channel), any agent, without a
    /// per-agent limit; set the fields it serves.
    pub fn new(holder: impl Into<String>, ttl: Duration) -> Self {
        Self {
            holder: holder.into(),
            ttl,
            volumes: Vec::new(),
            backends: Vec::new(),
            channels: Vec::new(),
            agents: Vec::new(),
            per_agent_limit: None,
            skip: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_anything_else() {
        let cursor = RunCursor {
            created_at: "2026-03-14T09:27:00.123456789Z".parse().unwrap(),
            id: "run_01jq0000000000000000000000".parse().unwrap(),
        };
        let token = cursor.encode();
        assert!(
            token.chars().all(|c| c.is_ascii_hexdigit()),
            "URL-safe as it is: {token}"
        );
        assert_eq!(RunCursor::decode(&token).unwrap(), cursor);
        assert_eq!(
            RunCursor::decode(&token.to_ascii_uppercase()).unwrap(),
            cursor
        );
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        for bad in [
            String::new(),
            "abc".to_owned(),
            "zz".to_owned(),
            hex("c2|2026-03-14T09:27:00Z|run_x"),
            hex("c1|yesterday|run_x"),
            hex("c1|2026-03-14T09:27:00Z|../etc"),
            hex("c1|2026-03-14T09:27:00Z"),
            format!("{token}0"),
        ] {
            assert!(
                matches!(RunCursor::decode(&bad), Err(Error::BadCursor { .. })),
                "{bad}"
            );
        }
    }
}

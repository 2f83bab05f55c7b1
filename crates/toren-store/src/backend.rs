//! For store backends: the rules of [`EventLog`](crate::EventLog) and
//! [`SessionStore`](crate::SessionStore) that do not depend on the database, so that the
//! SQLite backend (in this crate) and the Postgres one (`toren-store-postgres`) check them
//! in one place. A backend reads a run's row inside its write transaction into a
//! [`RunState`], asks it whether a write may go on (ended, fenced, conflicting, leased —
//! in the order the trait documents) and what lease to store; it numbers and encodes the
//! events it writes with [`Sequence`]; it decodes rows through [`rows`] (times stored as
//! RFC 3339 text or as nanoseconds, both [`StoredTime`]); it builds the queries over many
//! runs with [`queries`] and decodes sessions with [`sessions`]. Nothing here does I/O.
//! Front doors and workers have no use for this module.

mod events;
mod lease;
pub mod queries;
pub mod rows;
pub mod sessions;

pub use events::{Sequence, check_decision};
pub use lease::{FIRST_TOKEN, RunState, after, claimed, first_lease};
pub use rows::StoredTime;

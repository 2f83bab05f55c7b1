//! The SQLite backend of [`EventLog`]: the embedded default store, one database file.
//!
//! Settings and why:
//! - WAL journal, so readers (`toren events --follow`, the API) never block the writer.
//! - One writer (`sqlite/writer.rs`): every write of this process is a job on one
//!   connection, queued in-process (FIFO) instead of sleeping in SQLite's busy handler,
//!   and the jobs waiting together commit in one `BEGIN IMMEDIATE` transaction (group
//!   commit), each inside its own savepoint so it stays all-or-nothing with its own checks.
//!   `BEGIN IMMEDIATE` takes the write lock before a job reads `last_seq`, so the
//!   check-then-insert is atomic across processes too, and a writer of another process
//!   waits for it under `busy_timeout` (5 s). Reads use a pool of their own.
//! - `synchronous = FULL`: every commit is fsynced before the call returns. In WAL mode
//!   `NORMAL` survives a process crash but may lose the last commits on power loss or an OS
//!   crash, and this log promises that an acknowledged event is durable: a worker starts a
//!   tool's side effect only after `tool_started` is acknowledged, and a human's approval must
//!   not silently vanish. Events arrive at the pace of model calls and tools, so one fsync
//!   per commit, shared by every write of a group commit, costs nothing that matters.
//! - Foreign keys on; migrations (`migrations/sqlite`) embedded and applied on open.
//!
//! - Times (event `at`, lease expiry) come from the store's [`Clock`], read once per call.
//! - Private files: the log holds everything the agent saw, so the database is created mode
//!   0600 (SQLite gives its `-wal` and `-shm` files the database's mode) and missing parent
//!   directories 0700. An existing database, `-wal` or `-shm` that others may read is
//!   tightened to 0600 when Toren's user owns it, with a warning; otherwise only warned
//!   about.
//!
//! Each event row stores the whole [`Event`](toren_protocol::Event) as JSON (serde of
//! `toren_protocol::Event`, the versioned format); the other columns repeat parts of it for
//! queries. Decoding always goes through the protocol's serde types. This module opens the
//! file; `sqlite/log.rs` implements the trait on top of `state.rs` (a run's row and the
//! lease rules), `batch.rs` (writing events), `read.rs` (reading a log in chunks of about a
//! megabyte, not a row per event) and `rows.rs` (decoding rows, through `decode.rs`: one
//! pass over a payload laid out as Toren writes it, the derive otherwise); `queries.rs`
//! answers the queries over many runs.

mod batch;
mod chats;
mod claim;
mod decode;
mod log;
mod queries;
mod read;
mod rows;
mod sessions;
mod state;
mod workers;
mod writer;

pub use writer::WriteStats;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::{Clock, Error, Result, SystemClock};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_CONNECTIONS: u32 = 8;

/// The event log in one SQLite file. Cheap to clone (a pool of reading connections and a
/// handle on the one writer, `sqlite/writer.rs`).
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: writer::Writer,
    path: PathBuf,
    clock: Arc<dyn Clock>,
    /// The descriptor `open` locked the file with, kept open (see `open`).
    _opener: Arc<std::fs::File>,
}

impl SqliteStore {
    /// Opens (creating the file and its parent directories if missing) the database at a
    /// `sqlite://PATH` URL (`sqlite:PATH` is accepted too) and brings its schema up to date.
    /// `sqlite:///var/lib/toren.db` is absolute, `sqlite://toren.db` relative to the current
    /// directory; `~` is not expanded (the caller resolves paths). The store reads the
    /// [`SystemClock`]; see [`SqliteStore::with_clock`].
    pub async fn open(url: &str) -> Result<Self> {
        let path = parse_url(url)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(PRIVATE_DIR)
                .create(dir)
                .map_err(|source| Error::CreateDir {
                    path: dir.to_owned(),
                    source,
                })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        // Opening a database file switches it to WAL and applies migrations; two processes
        // doing that at once on a new file fail ("database is locked" while one converts the
        // journal, "table runs already exists" when both migrate). An exclusive advisory lock
        // on the file (flock, which SQLite's own POSIX locks do not see) held from the first
        // connection to the last migration makes openers take turns.
        let lock = lock_file(&path).await?;
        for file in [path.clone(), sidecar(&path, "-wal"), sidecar(&path, "-shm")] {
            keep_private(&file);
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options.clone())
            .await
            .map_err(|source| Error::Open {
                path: path.clone(),
                source,
            })?;
        let migrated = MIGRATOR.run(&pool).await;
        // Unlocked, not closed: closing any descriptor of the file would drop every POSIX
        // lock this process holds on it, SQLite's included, and another process closing
        // its last connection would then take this one for gone and delete the WAL under
        // it (its later commits lost to every other reader). The descriptor stays open as
        // long as the store.
        let opener = unlock(lock);
        migrated.map_err(|source| Error::Migrate {
            path: path.clone(),
            source,
        })?;
        let write_conn = options.connect().await.map_err(|source| Error::Open {
            path: path.clone(),
            source,
        })?;
        let writer = writer::Writer::start(write_conn).map_err(|e| Error::Open {
            path: path.clone(),
            source: sqlx::Error::Io(e),
        })?;
        tracing::debug!(path = %path.display(), "opened the SQLite event store");
        Ok(Self {
            pool,
            writer,
            path,
            clock: Arc::new(SystemClock),
            _opener: Arc::new(opener),
        })
    }

    /// The same store reading `clock` instead: tests pass a [`TestClock`](crate::TestClock)
    /// to move past lease expiries without sleeping. Every store writing one file should
    /// read the same clock.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self { clock, ..self }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes every connection, waiting for in-flight calls to finish. Calls made after
    /// this fail.
    pub async fn close(&self) {
        self.writer.close().await;
        self.pool.close().await;
    }

    /// How many transactions the writer committed and how many writes they carried, since
    /// this store was opened (all its clones share them).
    pub fn write_stats(&self) -> WriteStats {
        self.writer.stats()
    }

    /// Runs `work` as one all-or-nothing write through the store's one writer (group
    /// commit: `sqlite/writer.rs`); returns once it is durable.
    async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut sqlx::SqliteConnection) -> writer::WriteFuture<'c, T>
            + Send
            + 'static,
    {
        self.writer.write(work).await
    }
}

/// The path of a `sqlite://PATH` or `sqlite:PATH` URL.
fn parse_url(url: &str) -> Result<PathBuf> {
    let unsupported = |reason: &str| Error::UnsupportedUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        return Err(unsupported(
            "expected `sqlite://PATH`, e.g. `sqlite:///home/me/.toren/toren.db` \
             (three slashes for an absolute path)",
        ));
    };
    if rest.is_empty() {
        return Err(unsupported("the path is empty; expected `sqlite://PATH`"));
    }
    if rest.starts_with(":memory:") {
        return Err(unsupported(
            "an in-memory database would lose every run when the process exits; give a file path",
        ));
    }
    if rest.contains('?') {
        return Err(unsupported(
            "URL parameters are not supported (the store sets its own SQLite options); \
             give just the path",
        ));
    }
    Ok(PathBuf::from(rest))
}

/// The mode of the database file: only its owner may read it.
const PRIVATE_FILE: u32 = 0o600;
/// The mode of directories the store creates.
const PRIVATE_DIR: u32 = 0o700;

/// `path` with `suffix` appended to its file name (SQLite's `-wal` and `-shm` files).
fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Makes an existing `file` mode 0600 if others may read or write it and Toren's user owns
/// it; warns when it cannot.
fn keep_private(file: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(meta) = std::fs::metadata(file) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 == 0 {
        return;
    }
    let mine = nix::unistd::geteuid().as_raw() == meta.uid();
    let tightened = mine
        && std::fs::set_permissions(file, std::fs::Permissions::from_mode(PRIVATE_FILE)).is_ok();
    if tightened {
        tracing::warn!(
            path = %file.display(),
            "the event log was readable by others (mode {mode:o}); made it private (0600)"
        );
    } else {
        tracing::warn!(
            path = %file.display(),
            "the event log is readable by others (mode {mode:o}) and Toren cannot change \
             that; it holds everything the agents saw: `chmod 600` it"
        );
    }
}

/// Gives the `flock` of [`lock_file`] up, keeping the descriptor open.
fn unlock(file: std::fs::File) -> std::fs::File {
    if let Err(e) = file.unlock() {
        // Closing it would unlock it too, at the cost that `open` explains.
        tracing::warn!("cannot release the lock on the event log: {e}");
    }
    file
}

/// Holds an exclusive `flock` on the database file (created empty, mode 0600, if missing,
/// which SQLite takes as an empty database) until dropped.
async fn lock_file(path: &Path) -> Result<std::fs::File> {
    let owned = path.to_owned();
    let locked = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(PRIVATE_FILE)
            .open(&owned)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    locked.map_err(|source| Error::Lock {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn the_database_and_its_directories_are_private() {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("home/.toren");
        let db = home.join("toren.db");
        let store = SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        // A write, so that SQLite has made its `-wal` and `-shm` files.
        sqlx::query("CREATE TABLE probe (x)")
            .execute(&store.pool)
            .await
            .unwrap();
        for file in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&base.path().join("home")), 0o700);
        store.close().await;
    }

    #[tokio::test]
    async fn a_database_others_can_read_is_made_private() {
        let base = tempfile::tempdir().unwrap();
        let db = base.path().join("toren.db");
        let first = SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        first.close().await;
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let again = SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        assert_eq!(mode(&db), 0o600);
        again.close().await;
    }

    #[test]
    fn urls_name_a_file() {
        assert_eq!(
            parse_url("sqlite:///var/lib/toren.db").unwrap(),
            PathBuf::from("/var/lib/toren.db")
        );
        assert_eq!(
            parse_url("sqlite://data/toren.db").unwrap(),
            PathBuf::from("data/toren.db")
        );
        assert_eq!(
            parse_url("sqlite:toren.db").unwrap(),
            PathBuf::from("toren.db")
        );
        for bad in [
            "postgres://localhost/toren",
            "sqlite://",
            "sqlite::memory:",
            "sqlite://x.db?mode=ro",
            "/tmp/x.db",
        ] {
            let err = parse_url(bad).unwrap_err();
            assert!(
                matches!(err, Error::UnsupportedUrl { ref url, .. } if url == bad),
                "{bad}: {err}"
            );
        }
    }
}

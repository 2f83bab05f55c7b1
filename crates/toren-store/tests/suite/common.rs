//! Temporary SQLite stores and raw access to their files.

use std::path::Path;
use std::sync::Arc;

use sqlx::{Connection, SqliteConnection};
use tempfile::TempDir;
use toren_store::{SqliteStore, TestClock};

/// The URL of a database file in a not-yet-existing subdirectory of `dir`.
pub(super) fn url_in(dir: &TempDir) -> String {
    format!("sqlite://{}", dir.path().join("state/toren.db").display())
}

/// A fresh store in its own temporary directory (keep the directory alive).
pub(super) async fn temp_store() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&url_in(&dir)).await.unwrap();
    (dir, store)
}

/// A fresh store reading a [`TestClock`] the test can move forward.
pub(super) async fn temp_store_with_clock() -> (TempDir, SqliteStore, Arc<TestClock>) {
    let (dir, store) = temp_store().await;
    let clock = Arc::new(TestClock::new());
    (dir, store.with_clock(clock.clone()), clock)
}

/// A plain connection to the file, with none of the store's settings: what another
/// program (or `sqlite3`) would see.
pub(super) async fn raw(path: &Path) -> SqliteConnection {
    SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

//! A throwaway cluster and stores on it.

use std::sync::Arc;

use toren_store::TestClock;
use toren_store_postgres::{PostgresOptions, PostgresStore};
use toren_test_support::postgres::Cluster;

/// A fresh cluster (its database created), started off the async threads.
pub(super) async fn cluster() -> Cluster {
    tokio::task::spawn_blocking(Cluster::start)
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start a test Postgres cluster: {e:#}"))
}

/// A store on `url` reading `clock`.
pub(super) async fn store_on(url: &str, clock: &Arc<TestClock>) -> PostgresStore {
    PostgresStore::open(url, &PostgresOptions::default())
        .await
        .unwrap()
        .with_clock(clock.clone())
}

/// A cluster and one store on its database, reading a fresh test clock.
pub(super) async fn cluster_and_store() -> (Cluster, PostgresStore, Arc<TestClock>) {
    let cluster = cluster().await;
    let clock = Arc::new(TestClock::new());
    let store = store_on(&cluster.url(), &clock).await;
    (cluster, store, clock)
}

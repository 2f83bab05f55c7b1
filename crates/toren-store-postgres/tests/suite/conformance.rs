//! The conformance suites against a real Postgres: the event log's whole suite on one
//! store, and through two stores (two pools, as two processes would have) on one
//! database; the session store's; the worker registry's. Every store reads a shared
//! `TestClock`.

use std::sync::Arc;
use std::time::Instant;

use toren_store::conformance::Alternating;
use toren_store::{TestClock, conformance};

use super::common::{cluster, cluster_and_store, store_on};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_on_one_store() {
    let (_cluster, store, clock) = cluster_and_store().await;
    let started = Instant::now();
    conformance::run_all(Arc::new(store), &clock).await;
    eprintln!("conformance::run_all on Postgres: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_through_two_stores_on_one_database() {
    let cluster = cluster().await;
    let clock = Arc::new(TestClock::new());
    let alternating = Alternating::new(
        Arc::new(store_on(&cluster.url(), &clock).await),
        Arc::new(store_on(&cluster.url(), &clock).await),
    );
    conformance::run_all(Arc::new(alternating), &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_store_and_worker_registry() {
    let (_cluster, store, clock) = cluster_and_store().await;
    conformance::run_all_workers(&store, &clock).await;
    let store = Arc::new(store);
    conformance::run_all_chats(store.clone()).await;
    conformance::run_all_sessions(store).await;
}

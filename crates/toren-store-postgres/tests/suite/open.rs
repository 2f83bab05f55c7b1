//! Opening: a server that is not there fails fast naming host and port and never the
//! password; a URL that is not Postgres's, or names no database, is refused plainly; two
//! processes opening one new database at once both get the schema, once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toren_store::{EventLog, TestClock};
use toren_store_postgres::{OpenError, PostgresOptions, PostgresStore};

use super::common::{cluster, store_on};

fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn an_unreachable_server_fails_fast_naming_host_and_port_not_the_password() {
    let port = unused_port();
    let url = format!("postgres://toren:hunter2-secret@127.0.0.1:{port}/toren");
    let started = Instant::now();
    let err = PostgresStore::open(&url, &PostgresOptions::default())
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "took {:?}",
        started.elapsed()
    );
    assert!(matches!(err, OpenError::Unreachable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_is_given_up_on_after_the_connect_timeout() {
    // A listener that accepts (the kernel does, from its backlog) and never speaks.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let options = PostgresOptions {
        connect_timeout: Duration::from_millis(500),
        ..PostgresOptions::default()
    };
    let started = Instant::now();
    let err = PostgresStore::open(&format!("postgres://u:pw@127.0.0.1:{port}/db"), &options)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        matches!(&err, OpenError::Unreachable { server, .. } if *server == format!("127.0.0.1:{port}")),
        "{err:?}"
    );
    drop(silent);
}

#[tokio::test]
async fn urls_that_are_not_postgres_or_name_no_database_are_refused() {
    let err = PostgresStore::open("sqlite:///tmp/x.db", &PostgresOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, OpenError::BadUrl { .. }), "{err:?}");
    let cluster = cluster().await;
    let err = PostgresStore::open(
        &cluster.database_url("no_such_database"),
        &PostgresOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, OpenError::Refused { .. }), "{err:?}");
    assert!(err.to_string().contains("no_such_database"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opened_at_once_on_a_new_database_migrate_it_once() {
    let cluster = cluster().await;
    let clock = Arc::new(TestClock::new());
    for round in 0..3 {
        let url = tokio::task::block_in_place(|| cluster.create_database(&format!("fresh{round}")))
            .unwrap();
        // Four at once, as four processes starting together would.
        let opens: Vec<_> = (0..4)
            .map(|_| {
                let (url, clock) = (url.clone(), clock.clone());
                tokio::spawn(async move { store_on(&url, &clock).await })
            })
            .collect();
        let mut stores = Vec::new();
        for open in opens {
            stores.push(open.await.unwrap());
        }
        for store in &stores {
            let counts = store.count_runs().await.unwrap();
            assert_eq!(counts.claimable, 0);
        }
        let applied: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&sqlx::PgPool::connect(&url).await.unwrap())
                .await
                .unwrap();
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
            .unwrap()
            .count();
        assert_eq!(
            applied,
            i64::try_from(files).unwrap(),
            "each migration applied once"
        );
    }
}

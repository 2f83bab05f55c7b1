//! What only the SQLite backend promises: the file keeps everything across reopening, the
//! schema migrates once, WAL is really on, damaged rows are reported by run and seq, and
//! URLs that are not `sqlite://PATH` are refused.

use std::time::Duration;

use pretty_assertions::assert_eq;
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalRequested, EventKind, RunCreated, RunId, RunStatus,
    ToolStarted,
};
use toren_store::{Error, EventLog, SqliteStore};

use super::common::{raw, temp_store, url_in};

const HOLDER: &str = "test-host:1";
const TTL: Duration = Duration::from_secs(60);

fn created(input: &str) -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "helper".into(),
            model: "scripted/helper".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: input.into(),
        session: None,
        channel: None,
        start: None,
    }
}

fn approval_requested(call_id: &str) -> EventKind {
    EventKind::ApprovalRequested(ApprovalRequested {
        call_id: call_id.into(),
        tool: "bash".into(),
        command: "make test".into(),
        attempt: 1,
    })
}

#[tokio::test]
async fn reopening_the_file_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = RunId::new();
    let store = SqliteStore::open(&url_in(&dir)).await.unwrap();
    let (_, lease) = store
        .create_run(&run_id, created("build it"), HOLDER, TTL)
        .await
        .unwrap();
    store
        .append(&lease, 1, vec![approval_requested("toolu_1")])
        .await
        .unwrap();
    let decision = ApprovalDecided {
        call_id: "toolu_1".into(),
        approved: true,
        by: "ana".into(),
        via: "cli".into(),
        reason: None,
    };
    store.decide_approval(&run_id, decision).await.unwrap();
    let events = store.read(&run_id, 0).await.unwrap();
    let summary = store.run(&run_id).await.unwrap();
    store.close().await;
    drop(store);

    let reopened = SqliteStore::open(&url_in(&dir)).await.unwrap();
    assert_eq!(reopened.read(&run_id, 0).await.unwrap(), events);
    assert_eq!(reopened.run(&run_id).await.unwrap(), summary);
    assert_eq!(reopened.list_runs(10).await.unwrap(), vec![summary]);
    let again = reopened
        .decide_approval(
            &run_id,
            ApprovalDecided {
                call_id: "toolu_1".into(),
                approved: false,
                by: "bo".into(),
                via: "cli".into(),
                reason: None,
            },
        )
        .await;
    assert!(
        matches!(again, Err(Error::AlreadyDecided { approved: true, .. })),
        "a decision survives reopening: {again:?}"
    );
    let next = reopened
        .append(
            &lease,
            3,
            vec![EventKind::ToolStarted(ToolStarted {
                call_id: "toolu_1".into(),
                tool: "bash".into(),
                attempt: 1,
                checkpoint: None,
            })],
        )
        .await
        .unwrap();
    assert_eq!(
        next[0].seq, 4,
        "seqs continue after reopening, and the lease still holds"
    );
}

/// Another program that closes its connection properly (a backup, `sqlite3`, a script)
/// must not take a running store for gone: if it did, it would checkpoint and delete the
/// WAL under the store, and the store's later commits would reach no other reader. It
/// would, if the store had let go of SQLite's POSIX locks on the file (closing any
/// descriptor of it does that).
#[tokio::test]
async fn another_program_closing_its_connection_leaves_the_store_s_wal_alone() {
    let (dir, store) = temp_store().await;
    let db = dir.path().join("state/toren.db");
    let run_id = RunId::new();
    let (_, lease) = store
        .create_run(&run_id, created("first"), HOLDER, TTL)
        .await
        .unwrap();
    let script = "import sqlite3, sys\n\
                  c = sqlite3.connect(sys.argv[1])\n\
                  c.execute('SELECT count(*) FROM events').fetchall()\n\
                  c.close()";
    let closed = std::process::Command::new("python3")
        .args(["-c", script, db.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(closed.success());
    store
        .append(&lease, 1, vec![approval_requested("c1")])
        .await
        .unwrap();
    let count = "import sqlite3, sys\n\
                 c = sqlite3.connect(sys.argv[1])\n\
                 print(c.execute('SELECT count(*) FROM events').fetchone()[0])";
    let out = std::process::Command::new("python3")
        .args(["-c", count, db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2",
        "another process sees the event appended after the other program closed"
    );
    store.close().await;
}

#[tokio::test]
async fn open_creates_missing_directories_and_migrates_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/toren.db");
    assert!(!db.parent().unwrap().exists());
    for _ in 0..3 {
        let store = SqliteStore::open(&url_in(&dir)).await.unwrap();
        assert_eq!(store.path(), db);
        store.close().await;
    }
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .count();
    let mut conn = raw(&db).await;
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        applied.len(),
        migrations,
        "each migration is applied once: {applied:?}"
    );
    assert!(applied.iter().all(|(_, success)| *success));
}

#[tokio::test]
async fn the_journal_is_wal() {
    let (_dir, store) = temp_store().await;
    store
        .create_run(&RunId::new(), created("hi"), HOLDER, TTL)
        .await
        .unwrap();
    // WAL is a property of the file: a plain connection that asked for nothing sees it.
    let mut conn = raw(store.path()).await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn a_database_from_a_newer_toren_is_refused() {
    let (dir, store) = temp_store().await;
    let path = store.path().to_owned();
    store.close().await;
    let mut conn = raw(&path).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES (9999, 'from the future', 1, x'00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let opened = SqliteStore::open(&url_in(&dir)).await;
    let Err(err @ Error::Migrate { .. }) = opened else {
        panic!("expected a migration error, got {opened:?}");
    };
    assert!(err.to_string().contains("newer Toren"), "{err}");
}

#[tokio::test]
async fn an_undecodable_event_names_its_run_and_seq() {
    let (_dir, store) = temp_store().await;
    let run_id = RunId::new();
    let (_, lease) = store
        .create_run(&run_id, created("hi"), HOLDER, TTL)
        .await
        .unwrap();
    store
        .append(&lease, 1, vec![approval_requested("toolu_x")])
        .await
        .unwrap();
    let mut conn = raw(store.path()).await;
    sqlx::query("UPDATE events SET payload = '{\"type\":\"from_the_future\"}' WHERE seq = 2")
        .execute(&mut conn)
        .await
        .unwrap();

    let read = store.read(&run_id, 0).await;
    assert!(
        matches!(&read, Err(Error::CorruptEvent { run_id: id, seq: 2, .. }) if *id == run_id.as_str()),
        "got {read:?}"
    );
    assert_eq!(
        store.read(&run_id, 2).await.unwrap(),
        vec![],
        "events after it still read"
    );
    assert_eq!(
        store.run(&run_id).await.unwrap().status,
        RunStatus::AwaitingApproval
    );
}

#[tokio::test]
async fn only_sqlite_file_urls_open() {
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().join("x.db");
    for url in [
        "postgres://toren@localhost/toren".to_owned(),
        "sqlite::memory:".to_owned(),
        format!("sqlite://{}?mode=rwc", inside.display()),
        inside.display().to_string(),
    ] {
        let opened = SqliteStore::open(&url).await;
        assert!(
            matches!(&opened, Err(Error::UnsupportedUrl { url: u, .. }) if *u == url),
            "{url}: {opened:?}"
        );
    }
    assert!(!inside.exists(), "a refused URL creates nothing");
}

#[tokio::test]
async fn an_unwritable_location_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let url = format!("sqlite://{}", blocker.join("toren.db").display());
    let opened = SqliteStore::open(&url).await;
    let Err(err) = opened else {
        panic!("opening under a file must fail")
    };
    assert!(
        matches!(&err, Error::CreateDir { path, .. } if *path == blocker),
        "got {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_openers_of_a_new_file_all_succeed() {
    // Two `toren` processes starting at once on a fresh home raced on the first migration
    // ("table runs already exists") before opening took a lock around migrating.
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let url = url_in(&dir);
        let opens: Vec<_> = (0..8)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { SqliteStore::open(&url).await.map(|_| ()) })
            })
            .collect();
        for open in opens {
            open.await.unwrap().unwrap();
        }
    }
}

#[tokio::test]
async fn a_database_from_before_leases_migrates_and_its_runs_resume() {
    // A database as the first release left it: only migration 0001, two runs in it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toren.db");
    std::fs::File::create(&path).unwrap();
    let mut conn = raw(&path).await;
    let migrations = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite");
    sqlx::migrate::Migrator::new(std::path::Path::new(migrations))
        .await
        .unwrap()
        .run_to(1, &mut conn)
        .await
        .unwrap();
    let (unfinished, finished) = (RunId::new(), RunId::new());
    for (run_id, status, last_seq) in [(&unfinished, "running", 1), (&finished, "completed", 2)] {
        sqlx::query(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq)
             VALUES (?, 'old', ?, '2026-03-14T09:26:53.589793238Z',
                     '2026-03-14T09:26:53.589793238Z', ?)",
        )
        .bind(run_id.as_str())
        .bind(status)
        .bind(last_seq)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let lease_columns: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name LIKE 'lease%'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(lease_columns, 0, "the old schema has no leases");
    drop(conn);

    let store = SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let old = store.run(&unfinished).await.unwrap();
    assert_eq!(old.lease, None, "old runs have no lease");
    assert!(
        old.is_resumable(jiff::Timestamp::now()),
        "an unfinished old run is resumable"
    );
    let lease = store.acquire_lease(&unfinished, HOLDER, TTL).await.unwrap();
    assert_eq!(lease.token, 1, "the first lease of an old run has token 1");
    let ended = store.acquire_lease(&finished, HOLDER, TTL).await;
    assert!(
        matches!(ended, Err(Error::RunEnded { .. })),
        "a finished old run cannot be leased: {ended:?}"
    );
    assert!(
        !store
            .run(&finished)
            .await
            .unwrap()
            .is_resumable(jiff::Timestamp::now())
    );
}

/// Runs written before claims filtered on them (migration 0005) get their backend, volume
/// and channel from their `run_created` when the database is migrated, so a claim treats
/// them as it treats new runs.
#[tokio::test]
async fn runs_from_before_claims_are_claimed_by_their_pinned_backend_and_channel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toren.db");
    std::fs::File::create(&path).unwrap();
    let mut conn = raw(&path).await;
    let migrations = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite");
    sqlx::migrate::Migrator::new(std::path::Path::new(migrations))
        .await
        .unwrap()
        .run_to(4, &mut conn)
        .await
        .unwrap();
    let docker = |mut created: RunCreated| {
        created.policy = Some(toren_protocol::ResolvedPolicy {
            checkpoints: Default::default(),
            backend: "docker".into(),
            image: None,
            network: false,
            egress: None,
            approval: toren_protocol::ApprovalPolicy::Never,
            env: Vec::new(),
            limits: Default::default(),
            workspace: None,
            on_interrupt: Default::default(),
            sandbox_key: None,
            volume: None,
        });
        created
    };
    let bound = |mut created: RunCreated| {
        created.channel = Some(toren_protocol::ChannelBinding {
            kind: "terminal".into(),
            address: "chat".into(),
        });
        created
    };
    let runs = [
        (RunId::new(), docker(created("in a container"))),
        (RunId::new(), bound(created("a chat's turn"))),
        (RunId::new(), created("no sandbox")),
    ];
    for (n, (run_id, created)) in runs.iter().enumerate() {
        let at = format!("2026-03-14T09:26:5{n}.000000000Z");
        let event = toren_protocol::Event {
            run_id: run_id.clone(),
            seq: 1,
            at: at.parse().unwrap(),
            v: toren_protocol::EVENT_FORMAT_VERSION,
            kind: EventKind::RunCreated(created.clone()),
        };
        sqlx::query(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq)
             VALUES (?, 'helper', 'queued', ?, ?, 1)",
        )
        .bind(run_id.as_str())
        .bind(&at)
        .bind(&at)
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO events (run_id, seq, kind, v, at, payload)
             VALUES (?, 1, 'run_created', 1, ?, ?)",
        )
        .bind(run_id.as_str())
        .bind(&at)
        .bind(serde_json::to_string(&event).unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
    }
    drop(conn);

    let store = SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let claim = |backends: &[&str], channels: &[&str]| toren_store::ClaimRequest {
        backends: backends.iter().map(|b| (*b).to_owned()).collect(),
        channels: channels.iter().map(|c| (*c).to_owned()).collect(),
        ..toren_store::ClaimRequest::new(HOLDER, TTL)
    };
    let got = |request: toren_store::ClaimRequest| {
        let store = store.clone();
        async move {
            store
                .claim(&request)
                .await
                .unwrap()
                .map(|(summary, _)| summary.id)
        }
    };
    assert_eq!(
        got(claim(&["local"], &[])).await,
        Some(runs[2].0.clone()),
        "a local worker without channels takes only the run without a sandbox"
    );
    assert_eq!(got(claim(&["local"], &[])).await, None);
    assert_eq!(got(claim(&["docker"], &[])).await, Some(runs[0].0.clone()));
    assert_eq!(
        got(claim(&[], &["terminal"])).await,
        Some(runs[1].0.clone())
    );
    store.close().await;
}

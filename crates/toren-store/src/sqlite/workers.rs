//! [`WorkerRegistry`] on SQLite: the `workers` table (migration 0005; `passed_over`, 0008), written through the
//! store's one writer, read from its pool.

use std::time::Duration;

use async_trait::async_trait;
use toren_protocol::RunId;

use super::SqliteStore;
use super::rows::stamp;
use crate::backend::rows::{WorkerRow, passed_over_json};
use crate::{Error, Result, WorkerBeat, WorkerInfo, WorkerRegistry};

#[async_trait]
impl WorkerRegistry for SqliteStore {
    async fn heartbeat_worker(&self, beat: &WorkerBeat) -> Result<WorkerInfo> {
        let (beat, clock) = (beat.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let now = clock.now();
                let runs = runs_json(&beat.runs);
                sqlx::query(
                    "INSERT INTO workers (id, instance, host, volume, concurrency, started_at,
                                          heartbeat_at, runs, passed_over)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT (id) DO UPDATE SET instance = ?2, host = ?3, volume = ?4,
                         concurrency = ?5, started_at = ?6, heartbeat_at = ?7, runs = ?8,
                         passed_over = ?9",
                )
                .bind(&beat.id)
                .bind(&beat.instance)
                .bind(&beat.host)
                .bind(&beat.volume)
                .bind(i64::from(beat.concurrency))
                .bind(stamp(beat.started_at))
                .bind(stamp(now))
                .bind(runs)
                .bind(passed_over_json(&beat.passed_over))
                .execute(&mut *tx)
                .await?;
                Ok(WorkerInfo {
                    beat,
                    heartbeat_at: now,
                })
            })
        })
        .await
    }

    async fn deregister_worker(&self, id: &str, instance: &str) -> Result<()> {
        let (id, instance) = (id.to_owned(), instance.to_owned());
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query("DELETE FROM workers WHERE id = ? AND instance = ?")
                    .bind(&id)
                    .bind(&instance)
                    .execute(&mut *tx)
                    .await?;
                Ok(())
            })
        })
        .await
    }

    async fn live_workers(&self, within: Duration) -> Result<Vec<WorkerInfo>> {
        let now = self.clock.now();
        let since = now
            .checked_sub(
                jiff::SignedDuration::try_from(within).unwrap_or(jiff::SignedDuration::MAX),
            )
            .unwrap_or(jiff::Timestamp::MIN);
        type Row = (
            String,
            String,
            String,
            Option<String>,
            i64,
            String,
            String,
            String,
            String,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT id, instance, host, volume, concurrency, started_at, heartbeat_at, runs,
                    passed_over
             FROM workers WHERE heartbeat_at > ? ORDER BY id",
        )
        .bind(stamp(since))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(
                |(
                    id,
                    instance,
                    host,
                    volume,
                    concurrency,
                    started_at,
                    heartbeat_at,
                    runs,
                    passed_over,
                )| {
                    let runs = serde_json::from_str::<Vec<String>>(&runs).map_err(|e| {
                        Error::CorruptWorker {
                            id: id.clone(),
                            reason: format!("runs is not a list of run ids: {e}"),
                        }
                    })?;
                    WorkerRow {
                        id,
                        instance,
                        host,
                        volume,
                        concurrency,
                        started_at,
                        heartbeat_at,
                        runs,
                        passed_over,
                    }
                    .decode()
                },
            )
            .collect()
    }
}

/// The run ids as a JSON array.
fn runs_json(runs: &[RunId]) -> String {
    let ids: Vec<&str> = runs.iter().map(RunId::as_str).collect();
    serde_json::to_string(&ids).unwrap_or_else(|_| "[]".to_owned())
}

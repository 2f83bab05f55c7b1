//! [`WorkerRegistry`] on Postgres: the `workers` table, one row per worker id, upserted by
//! each heartbeat with the store's clock.

use std::time::Duration;

use async_trait::async_trait;
use toren_store::backend::rows::{WorkerRow, passed_over_json};
use toren_store::{Result, WorkerBeat, WorkerInfo, WorkerRegistry};

use crate::rows::nanos;
use crate::store::PostgresStore;

#[async_trait]
impl WorkerRegistry for PostgresStore {
    async fn heartbeat_worker(&self, beat: &WorkerBeat) -> Result<WorkerInfo> {
        self.bounded(async {
            let now = self.clock.now();
            let runs: Vec<String> = beat.runs.iter().map(|r| r.as_str().to_owned()).collect();
            sqlx::query(
                "INSERT INTO workers (id, instance, host, volume, concurrency, started_at,
                                      heartbeat_at, runs, passed_over)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (id) DO UPDATE SET instance = $2, host = $3, volume = $4,
                     concurrency = $5, started_at = $6, heartbeat_at = $7, runs = $8,
                     passed_over = $9",
            )
            .bind(&beat.id)
            .bind(&beat.instance)
            .bind(&beat.host)
            .bind(&beat.volume)
            .bind(i64::from(beat.concurrency))
            .bind(nanos(beat.started_at))
            .bind(nanos(now))
            .bind(&runs)
            .bind(passed_over_json(&beat.passed_over))
            .execute(&self.pool)
            .await?;
            Ok(WorkerInfo {
                beat: beat.clone(),
                heartbeat_at: now,
            })
        })
        .await
    }

    async fn deregister_worker(&self, id: &str, instance: &str) -> Result<()> {
        self.bounded(async {
            sqlx::query("DELETE FROM workers WHERE id = $1 AND instance = $2")
                .bind(id)
                .bind(instance)
                .execute(&self.pool)
                .await?;
            Ok(())
        })
        .await
    }

    async fn live_workers(&self, within: Duration) -> Result<Vec<WorkerInfo>> {
        self.bounded(async {
            let since = nanos(self.clock.now())
                .saturating_sub(i64::try_from(within.as_nanos()).unwrap_or(i64::MAX));
            type Row = (
                String,
                String,
                String,
                Option<String>,
                i64,
                i64,
                i64,
                Vec<String>,
                String,
            );
            let rows: Vec<Row> = sqlx::query_as(
                "SELECT id, instance, host, volume, concurrency, started_at, heartbeat_at, runs,
                        passed_over
                 FROM workers WHERE heartbeat_at > $1 ORDER BY id",
            )
            .bind(since)
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
        })
        .await
    }
}

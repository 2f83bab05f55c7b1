-- Claims (toren_store::EventLog::claim) and the worker registry (WorkerRegistry).
--
-- A run's `volume`, `backend` and `channel` repeat what its run_created pinned (the
-- policy's workspace volume and backend, the bound channel's kind), taken when the run is
-- created like `agent`, so that a claim filters on them in SQL. Runs created before this
-- migration get them from their run_created payload here.

ALTER TABLE runs ADD COLUMN volume TEXT;
ALTER TABLE runs ADD COLUMN backend TEXT;
ALTER TABLE runs ADD COLUMN channel TEXT;

UPDATE runs SET
    volume = (SELECT json_extract(payload, '$.policy.volume') FROM events
              WHERE events.run_id = runs.id AND events.seq = 1),
    backend = (SELECT json_extract(payload, '$.policy.backend') FROM events
               WHERE events.run_id = runs.id AND events.seq = 1),
    channel = (SELECT json_extract(payload, '$.channel.kind') FROM events
               WHERE events.run_id = runs.id AND events.seq = 1);

-- The per-agent limit counts an agent's live leases: few rows hold one at a time.
CREATE INDEX runs_leased_by_agent ON runs (agent, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- One row per worker id; `runs` is a JSON array of the run ids it drives.
CREATE TABLE workers (
    id           TEXT    NOT NULL PRIMARY KEY,
    instance     TEXT    NOT NULL,
    host         TEXT    NOT NULL,
    volume       TEXT,
    concurrency  INTEGER NOT NULL,
    started_at   TEXT    NOT NULL,
    heartbeat_at TEXT    NOT NULL,
    runs         TEXT    NOT NULL CHECK (json_valid(runs))
) STRICT;

-- The event log, leases and sessions on Postgres (toren_store::EventLog, SessionStore).
--
-- Times are nanoseconds since the Unix epoch (UTC) in BIGINT: exact round trips of the
-- protocol's timestamps (timestamptz keeps microseconds) and plain integer comparisons.
-- Ids sort bytewise (COLLATE "C"), as on SQLite, whatever the database's collation.
-- `events.payload` holds the whole event as toren_protocol::Event serializes it (the
-- versioned format), as text: byte for byte what was written (jsonb would reorder keys);
-- the other event columns repeat parts of it for queries.
--
-- `lease_token` is the token of the run's latest lease, 0 before the first; every
-- acquisition writes a higher one and nothing lowers it. `lease_holder` and
-- `lease_expires_at` are both set while a lease is held and both null otherwise.

CREATE TABLE runs (
    id               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    agent            TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    last_seq         BIGINT NOT NULL,
    lease_token      BIGINT NOT NULL DEFAULT 0,
    lease_holder     TEXT,
    lease_expires_at BIGINT,
    -- What run_created pinned, repeated for claims (toren_store::EventLog::claim): the
    -- policy's workspace volume and sandbox backend, the bound channel's kind.
    volume           TEXT,
    backend          TEXT,
    channel          TEXT,
    CHECK ((lease_holder IS NULL) = (lease_expires_at IS NULL))
);

CREATE INDEX runs_newest_first ON runs (created_at DESC, id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at, id);
CREATE INDEX runs_by_agent ON runs (agent, created_at, id);
-- The claim's pick: claimable runs, oldest first.
CREATE INDEX runs_claimable ON runs (created_at, id) WHERE status IN ('queued', 'running');
-- The per-agent limit counts an agent's live leases: few rows hold one at a time.
CREATE INDEX runs_leased_by_agent ON runs (agent, lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

CREATE TABLE events (
    run_id  TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    seq     BIGINT  NOT NULL,
    kind    TEXT    NOT NULL,
    v       INTEGER NOT NULL,
    at      BIGINT  NOT NULL,
    payload TEXT    NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Sessions: see the SQLite migration 0003 for what each table holds.
CREATE TABLE sessions (
    id         TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    name       TEXT   NOT NULL UNIQUE,
    agent      TEXT   NOT NULL,
    spec       TEXT   NOT NULL,
    policy     TEXT,
    created_at BIGINT NOT NULL
);

CREATE TABLE session_turns (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    run_id     TEXT COLLATE "C" NOT NULL UNIQUE REFERENCES runs (id),
    PRIMARY KEY (session_id, turn)
);

CREATE TABLE session_messages (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    message    TEXT    NOT NULL,
    PRIMARY KEY (session_id, turn, idx)
);

CREATE TABLE session_queue (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    text       TEXT   NOT NULL,
    queued_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- The worker registry (toren_store::WorkerRegistry): one row per worker id.
CREATE TABLE workers (
    id           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    instance     TEXT    NOT NULL,
    host         TEXT    NOT NULL,
    volume       TEXT,
    concurrency  BIGINT  NOT NULL,
    started_at   BIGINT  NOT NULL,
    heartbeat_at BIGINT  NOT NULL,
    runs         TEXT[]  NOT NULL
);

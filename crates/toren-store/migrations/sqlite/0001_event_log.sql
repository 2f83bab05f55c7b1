-- The event log: one row per run, one row per event.
--
-- `events.payload` holds the whole event as serialized by toren_protocol::Event (the
-- versioned format); the other event columns repeat parts of it for querying only.
-- Timestamps are RFC 3339 in UTC with exactly nine fractional digits, so text order is
-- time order.

CREATE TABLE runs (
    id         TEXT    NOT NULL PRIMARY KEY,
    agent      TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL,
    last_seq   INTEGER NOT NULL
) STRICT;

CREATE INDEX runs_newest_first ON runs (created_at DESC, id DESC);

CREATE TABLE events (
    run_id  TEXT    NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    v       INTEGER NOT NULL,
    at      TEXT    NOT NULL,
    payload TEXT    NOT NULL CHECK (json_valid(payload)),
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

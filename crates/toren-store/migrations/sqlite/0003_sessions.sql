-- Sessions: a conversation of many turns with one agent, in one workspace.
--
-- `spec` and `policy` hold the agent spec and resolved policy pinned at creation (JSON, as
-- in run_created). Each turn is a run (`session_turns`, numbered from 1); a turn's own
-- messages (its input and what followed) are kept in `session_messages` once the turn has
-- ended, so the next turn starts from the conversation without re-reading every log.
-- Messages sent while a turn runs wait in `session_queue`.

CREATE TABLE sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    agent      TEXT NOT NULL,
    spec       TEXT NOT NULL CHECK (json_valid(spec)),
    policy     TEXT CHECK (policy IS NULL OR json_valid(policy)),
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE session_turns (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    run_id     TEXT    NOT NULL UNIQUE REFERENCES runs (id),
    PRIMARY KEY (session_id, turn)
) STRICT;

CREATE TABLE session_messages (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn       INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    message    TEXT    NOT NULL CHECK (json_valid(message)),
    PRIMARY KEY (session_id, turn, idx)
) STRICT;

CREATE TABLE session_queue (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    text       TEXT    NOT NULL,
    queued_at  TEXT    NOT NULL,
    PRIMARY KEY (session_id, seq)
) STRICT;

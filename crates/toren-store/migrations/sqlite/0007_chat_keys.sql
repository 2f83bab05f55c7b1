-- Idempotence of a chat front door (issue 15).

-- Messages already taken: a key (e.g. `telegram:<bot>:<update id>`) recorded in the same
-- write that creates the turn or queues the message, so the same update handled again
-- (after a crash before its offset was stored) is recognised and makes no second turn.
CREATE TABLE message_keys (
    key         TEXT NOT NULL PRIMARY KEY,
    -- The session whose turn or queue has it; NULL for a message that made no turn (a
    -- reason, a command).
    session_id  TEXT,
    -- The turn's run, or NULL when the message was queued.
    run_id      TEXT
);

-- Strangers told once that they may not talk to the bot (across restarts).
CREATE TABLE chat_refusals (
    key  TEXT NOT NULL PRIMARY KEY
);

-- Files a channel delivered, by run and call: a call run again after a crash is answered
-- with its first delivery instead of being sent twice.
CREATE TABLE chat_deliveries (
    run_id   TEXT NOT NULL,
    call_id  TEXT NOT NULL,
    receipt  TEXT NOT NULL,
    PRIMARY KEY (run_id, call_id)
);

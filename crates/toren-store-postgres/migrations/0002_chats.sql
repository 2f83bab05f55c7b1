-- A chat front door's durable state (toren_store::ChatStore; the Telegram bot).

CREATE TABLE chat_offsets (
    stream       TEXT   NOT NULL PRIMARY KEY,
    next_offset  BIGINT NOT NULL
);

CREATE TABLE chat_sessions (
    chat     TEXT NOT NULL PRIMARY KEY,
    session  TEXT NOT NULL
);

CREATE TABLE chat_buttons (
    id          TEXT   NOT NULL PRIMARY KEY,
    run_id      TEXT   NOT NULL,
    call_id     TEXT   NOT NULL,
    chat        TEXT   NOT NULL,
    message_id  BIGINT NOT NULL
);

CREATE TABLE chat_reasons (
    chat    TEXT NOT NULL PRIMARY KEY,
    button  TEXT NOT NULL
);

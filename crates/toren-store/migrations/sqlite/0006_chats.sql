-- A chat front door's durable state (toren_store::ChatStore; the Telegram bot).

-- Where each update stream stands: every update below `next_offset` is handled.
CREATE TABLE chat_offsets (
    stream       TEXT    NOT NULL PRIMARY KEY,
    next_offset  INTEGER NOT NULL
);

-- Which session (by name) each chat talks to.
CREATE TABLE chat_sessions (
    chat     TEXT NOT NULL PRIMARY KEY,
    session  TEXT NOT NULL
);

-- What each short button id stands for: a run's call, under a message of a chat.
CREATE TABLE chat_buttons (
    id          TEXT    NOT NULL PRIMARY KEY,
    run_id      TEXT    NOT NULL,
    call_id     TEXT    NOT NULL,
    chat        TEXT    NOT NULL,
    message_id  INTEGER NOT NULL
);

-- A chat whose next message is the reason for denying a button's call.
CREATE TABLE chat_reasons (
    chat    TEXT NOT NULL PRIMARY KEY,
    button  TEXT NOT NULL
);

-- The runs a worker claimed and could not drive, with why: a JSON array of
-- {"run": ..., "reason": ...}, as its last heartbeat said.
ALTER TABLE workers ADD COLUMN passed_over TEXT NOT NULL DEFAULT '[]';

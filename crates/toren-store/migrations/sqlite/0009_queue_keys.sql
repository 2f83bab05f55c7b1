-- A queued message's chat key (message_keys), so the turn it becomes keeps it: the queue
-- row, the turn and the key's run change in the one write of start_next_queued.
ALTER TABLE session_queue ADD COLUMN key TEXT;

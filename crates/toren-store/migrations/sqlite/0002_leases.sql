-- Leases: which process drives a run (see toren_store::EventLog).
--
-- `lease_token` is the token of the run's latest lease, 0 before the first; every
-- acquisition writes a higher one and nothing ever lowers it, so a holder whose token is no
-- longer the current one knows it was taken over. `lease_holder` and `lease_expires_at` are
-- both set while a lease is held and both null once it is released or the run has ended.
-- Runs created before this migration have no lease, so an unfinished one is resumable.

ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_holder TEXT;
ALTER TABLE runs ADD COLUMN lease_expires_at TEXT;

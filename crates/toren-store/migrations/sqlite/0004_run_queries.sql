-- Indexes for the queries over many runs (toren_store::EventLog::query_runs and
-- claimable_runs): runs of some statuses or of one agent, in creation order either way.
-- `runs_newest_first` (0001) already serves the unfiltered listing.

CREATE INDEX runs_by_status ON runs (status, created_at, id);
CREATE INDEX runs_by_agent ON runs (agent, created_at, id);

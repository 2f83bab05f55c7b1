mod chunked_read;
mod common;
mod conformance;
mod corpus;
mod crash;
mod group_commit;
mod sessions;
mod sqlite;

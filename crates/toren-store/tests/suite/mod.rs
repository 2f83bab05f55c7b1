mod common;
mod conformance;
mod corpus;
mod crash;
mod sessions;
mod sqlite;

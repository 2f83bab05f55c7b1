mod common;
mod conformance;
mod corpus;
mod crash;
mod sqlite;
mod sessions;

//! The toren-telegram tests: rendering, and the Bot API client and channel against the
//! local Bot API server of toren-test-support.
mod suite;

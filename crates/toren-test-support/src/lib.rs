//! Test helpers shared by every Toren crate's tests.
//!
//! [`FakeAnthropic`] and [`FakeOpenAi`] are local HTTP servers that speak the Anthropic
//! Messages and OpenAI Chat Completions streaming wire formats from a queue of scripted
//! [`Reply`]s, so the real clients can be tested offline — in-process, or from a `toren`
//! process pointed at [`FakeAnthropic::base_url`] through `ANTHROPIC_BASE_URL` /
//! `OPENAI_BASE_URL`.
//!
//! [`postgres::Cluster`] is a throwaway Postgres cluster (initdb in a temp dir, a unix
//! socket and optionally a TCP address), removed on drop.

pub mod e2b;
mod fake_llm;
pub mod git;
pub mod postgres;
pub mod telegram;

pub use fake_llm::{
    FAKE_USAGE, FakeAnthropic, FakeOpenAi, ReceivedRequest, Reply, anthropic_sse,
    fake_input_tokens, openai_sse,
};

//! toren-model's integration tests: the real Anthropic and OpenAI clients against the fake
//! servers of toren-test-support (chunk splits, tool calls, compatible-server quirks,
//! errors and retries, request shapes), the scripted provider, and `build_provider`.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;

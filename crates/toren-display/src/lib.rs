//! The one renderer for text that came from a model or a sandbox and is shown to a person.
//!
//! A command, a path, a tool's output, the model's own words or an error message may hold
//! characters that a terminal obeys instead of showing: C0 and C1 controls (and so every
//! escape sequence: cursor moves, erasing, titles, clipboard writes, hyperlinks), Unicode
//! bidirectional overrides and isolates that reorder what is read, and zero-width or
//! otherwise invisible characters that hide text. Every surface — the terminal's prompt and
//! progress lines, `toren runs`, `toren events`, error reports, and any later front door —
//! renders such text through this crate, so none of those characters ever reaches a screen
//! raw: each is shown as a visible marker such as `⟨ESC⟩`, `⟨CR⟩` or `⟨U+202E⟩`.
//!
//! [`classify`] decides which characters are dangerous and how each is named, [`render`]
//! turns text into its safe form (one line, or several lines) and
//! reports what it found, and [`json`] escapes them in JSON text so that `--json` output
//! stays the same data and is safe to print.

mod classify;
mod json;
mod number;
mod render;

pub use classify::{is_hidden, marker};
pub use json::escape_json;
pub use number::{count, thousands};
pub use render::{findings, hidden_count, visible, visible_lines};

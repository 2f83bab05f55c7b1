//! Text for Telegram, pure: the model's words made visible (`toren-display`: controls,
//! escapes, bidirectional and invisible characters as markers), then rendered as Telegram
//! HTML (`&`, `<`, `>` escaped; Markdown code fences as `<pre>`, inline code as `<code>`),
//! and split into messages of at most [`MESSAGE_LIMIT`] characters at line boundaries, a
//! code block cut by a split closed and reopened so each message stands alone. Tool calls
//! are summarised in a line each (the command, then its exit code).

use toren_display::{visible, visible_lines};

/// Telegram's limit on a message's text, in characters (after entities are parsed).
pub const MESSAGE_LIMIT: usize = 4096;
/// Room kept in each part for a fence closed and reopened across a split.
const FENCE_ROOM: usize = 8;
/// How much of a command an approval shows before "show all".
pub const COMMAND_PREVIEW: usize = 1500;

/// `&`, `<` and `>` as HTML entities (all Telegram's HTML mode needs).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Splits `text` into parts of at most `limit` characters, at line boundaries where a line
/// fits (a longer line is cut at a character boundary). A part that ends inside a code
/// fence gets a closing fence, and the next part reopens it.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let room = limit.saturating_sub(FENCE_ROOM).max(1);
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut len = 0;
    let mut in_fence = false;
    for line in text.split_inclusive('\n') {
        let mut line = line;
        loop {
            let line_len = line.chars().count();
            if len + line_len <= room {
                current.push_str(line);
                len += line_len;
                break;
            }
            if len > 0 {
                parts.push(close(&mut current, in_fence));
                len = reopen(&mut current, in_fence);
                continue;
            }
            // A line longer than a part: cut it.
            let cut = line
                .char_indices()
                .nth(room.saturating_sub(len))
                .map_or(line.len(), |(i, _)| i);
            current.push_str(&line[..cut]);
            parts.push(close(&mut current, in_fence));
            len = reopen(&mut current, in_fence);
            line = &line[cut..];
            if line.is_empty() {
                break;
            }
        }
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    parts
}

fn close(current: &mut String, in_fence: bool) -> String {
    let mut part = std::mem::take(current);
    if in_fence {
        if !part.ends_with('\n') {
            part.push('\n');
        }
        part.push_str("```");
    }
    part
}

fn reopen(current: &mut String, in_fence: bool) -> usize {
    if in_fence {
        current.push_str("```\n");
        4
    } else {
        0
    }
}

/// The model's text (one part of it) as Telegram HTML: made visible, escaped, code fences
/// as `<pre>` blocks and `inline code` as `<code>`.
pub fn markdown_html(text: &str) -> String {
    let text = visible_lines(text);
    let mut out = String::new();
    let mut in_fence = false;
    let mut block = String::new();
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            if in_fence {
                out.push_str("<pre>");
                out.push_str(&escape_html(block.trim_end_matches('\n')));
                out.push_str("</pre>\n");
                block.clear();
            }
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            block.push_str(line);
        } else {
            out.push_str(&inline_code(line));
        }
    }
    if in_fence {
        out.push_str("<pre>");
        out.push_str(&escape_html(block.trim_end_matches('\n')));
        out.push_str("</pre>");
    }
    out.trim_end().to_owned()
}

/// A line with `code` spans as `<code>`, everything escaped; an unpaired backtick stays.
fn inline_code(line: &str) -> String {
    let pieces: Vec<&str> = line.split('`').collect();
    if pieces.len() < 3 {
        return escape_html(line);
    }
    let mut out = String::new();
    let paired = if pieces.len() % 2 == 1 {
        pieces.len()
    } else {
        pieces.len() - 1
    };
    for (i, piece) in pieces.iter().enumerate() {
        if i >= paired {
            out.push('`');
            out.push_str(&escape_html(piece));
        } else if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(&escape_html(piece));
            out.push_str("</code>");
        } else {
            out.push_str(&escape_html(piece));
        }
    }
    out
}

/// The model's whole reply as HTML messages, each within Telegram's limit.
pub fn reply_html(text: &str) -> Vec<String> {
    split(text, MESSAGE_LIMIT)
        .iter()
        .map(|part| markdown_html(part))
        .filter(|part| !part.is_empty())
        .collect()
}

/// One line summarising a tool call as it starts, in the transcript's Markdown:
/// ``▸ bash: `ls -la` `` (backticks in the command shown as `ˋ` so the span holds).
pub fn tool_started(tool: &str, detail: &str) -> String {
    let detail = first_line(detail, 200).replace('`', "ˋ");
    let tool = visible(tool).replace('`', "ˋ");
    if detail.is_empty() {
        format!("▸ {tool}")
    } else {
        format!("▸ {tool}: `{detail}`")
    }
}

/// What a finished tool call adds to its line: ` → exit 0`, ` → error`, ` → ok`.
pub fn tool_finished(exit_code: Option<i32>, is_error: bool) -> String {
    match (exit_code, is_error) {
        (Some(code), _) => format!(" → exit {code}"),
        (None, true) => " → error".to_owned(),
        (None, false) => " → ok".to_owned(),
    }
}

/// The first line of `text`, at most `max` characters (with `…` when cut).
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let more = text.lines().nth(1).is_some();
    let mut out: String = line.chars().take(max).collect();
    if more || line.chars().count() > max {
        out.push('…');
    }
    out
}

/// `text` (already made visible) as one `<pre>` block: every byte escaped, nothing in it
/// read as Markdown or HTML, so a line starting with ```` ``` ```` or a `` `pair` `` of
/// backticks is shown exactly as it stands in the command.
fn pre(text: &str) -> String {
    format!("<pre>{}</pre>", escape_html(text))
}

/// The warning line for a command holding characters [`visible_lines`] marks, if any.
fn hidden_warning(command: &str) -> Option<String> {
    match toren_display::hidden_count(command) {
        0 => None,
        1 => Some("⚠ this command contains 1 hidden or control character".to_owned()),
        n => Some(format!(
            "⚠ this command contains {n} hidden or control characters"
        )),
    }
}

/// The approval message for `command`: the exact command in a code block, cut at
/// [`COMMAND_PREVIEW`] characters (then `truncated` is true and a "show all" button sends
/// it whole: [`command_html`]). The command is never read as Markdown: it goes into the
/// `<pre>` block escaped, as in the full view and the edited message.
pub fn approval_html(command: &str, attempt: u32) -> (String, bool) {
    let shown = visible_lines(command);
    let count = shown.chars().count();
    let (preview, truncated) = if count > COMMAND_PREVIEW {
        (
            shown.chars().take(COMMAND_PREVIEW).collect::<String>(),
            true,
        )
    } else {
        (shown.into_owned(), false)
    };
    let mut text = if attempt > 1 {
        format!(
            "⚠️ The agent wants to run this again (attempt {attempt}; it was interrupted and may have had effects):\n"
        )
    } else {
        "🔐 The agent wants to run:\n".to_owned()
    };
    text.push_str(&pre(&preview));
    if truncated {
        text.push_str(&format!(
            "\n… ({} more characters not shown; “Show all” sends the whole command)",
            count - COMMAND_PREVIEW
        ));
    }
    if let Some(warning) = hidden_warning(command) {
        text.push('\n');
        text.push_str(&warning);
    }
    (text, truncated)
}

/// The whole command, for "show all": Telegram HTML messages of one `<pre>` block each
/// (made visible, every character escaped; never read as Markdown), split at line
/// boundaries to fit [`MESSAGE_LIMIT`], each part numbered when there are several.
pub fn command_html(command: &str) -> Vec<String> {
    let shown = visible_lines(command);
    // Room for the header and the tags (which do not count, but the header does).
    let chunks = split_plain(&shown, MESSAGE_LIMIT - 200);
    let total = chunks.len();
    let warning = hidden_warning(command);
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            let mut text = if total > 1 {
                format!("📜 The whole command (part {} of {total}):\n", i + 1)
            } else {
                "📜 The whole command:\n".to_owned()
            };
            text.push_str(&pre(chunk));
            if i + 1 == total
                && let Some(warning) = &warning
            {
                text.push('\n');
                text.push_str(warning);
            }
            text
        })
        .collect()
}

/// `text` in parts of at most `limit` characters, cut after a newline where a line fits
/// (a longer line is cut at a character boundary); nothing added or dropped: the parts
/// joined are `text`.
fn split_plain(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut len = 0;
    for line in text.split_inclusive('\n') {
        let mut line = line;
        while !line.is_empty() {
            let line_len = line.chars().count();
            if len + line_len <= limit {
                current.push_str(line);
                len += line_len;
                break;
            }
            if len > 0 {
                parts.push(std::mem::take(&mut current));
                len = 0;
                continue;
            }
            let cut = line
                .char_indices()
                .nth(limit)
                .map_or(line.len(), |(i, _)| i);
            parts.push(line[..cut].to_owned());
            line = &line[cut..];
        }
    }
    if !current.is_empty() || parts.is_empty() {
        parts.push(current);
    }
    parts
}

/// The approval message once decided: the command, then who decided what.
pub fn decided_html(
    command: &str,
    approved: bool,
    by: &str,
    via: &str,
    reason: Option<&str>,
) -> String {
    let (mut text, _) = approval_html(command, 1);
    text.push('\n');
    text.push_str(if approved {
        "✅ Approved"
    } else {
        "❌ Denied"
    });
    text.push_str(&format!(
        " by {} via {}",
        escape_html(&visible(by)),
        escape_html(&visible(via))
    ));
    if let Some(reason) = reason {
        text.push_str(&format!(": {}", escape_html(&visible(reason))));
    }
    text
}

/// The offer posted when a turn pauses at its budget (plain text; escape it for HTML).
pub fn budget_offer(
    reached: &toren_protocol::BudgetReached,
    run: &toren_protocol::RunId,
) -> String {
    let limits: Vec<String> = reached.reached.iter().map(ToString::to_string).collect();
    format!(
        "⏸ The turn reached its budget ({}). The button raises each limit reached by the \
         agent's budget for it once more; `toren budget {run}` raises it by any amount.",
        limits.join(" and ")
    )
}

/// What a raise did, whoever made it (plain text, the names made visible).
pub fn budget_raised(raised: &toren_protocol::BudgetRaised) -> String {
    format!(
        "▶ Budget raised by {} ({} via {}); the turn goes on.",
        amounts(raised.tokens, raised.usd, raised.wall_secs),
        visible(&raised.by),
        visible(&raised.via)
    )
}

/// Amounts added to a budget, the zero ones left out: `+1,000 tokens, +$2.00, +30m`.
pub fn amounts(tokens: u64, usd: toren_protocol::Usd, wall_secs: u64) -> String {
    let mut parts = Vec::new();
    if tokens > 0 {
        parts.push(format!("+{} tokens", toren_display::thousands(tokens)));
    }
    if usd.0 > 0 {
        parts.push(format!("+{usd}"));
    }
    if wall_secs > 0 {
        parts.push(format!("+{}", duration(wall_secs)));
    }
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(", ")
    }
}

fn duration(secs: u64) -> String {
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (h, 0, 0) => format!("{h}h"),
        (0, m, 0) => format!("{m}m"),
        (h, m, 0) => format!("{h}h{m}m"),
        (0, 0, s) => format!("{s}s"),
        _ => format!("{secs}s"),
    }
}

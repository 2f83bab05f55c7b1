use pretty_assertions::assert_eq;
use toren_telegram::render::{
    MESSAGE_LIMIT, approval_html, command_html, escape_html, markdown_html, reply_html, split,
    tool_started,
};

#[test]
fn html_is_escaped_and_code_is_kept() {
    assert_eq!(
        escape_html("a < b && c > d"),
        "a &lt; b &amp;&amp; c &gt; d"
    );
    assert_eq!(
        markdown_html("Run `ls <dir>` then:\n```sh\necho '<b>' && true\n```\ndone"),
        "Run <code>ls &lt;dir&gt;</code> then:\n<pre>echo '&lt;b&gt;' &amp;&amp; true</pre>\ndone"
    );
    // Escape sequences and invisible characters are shown as markers, never raw.
    let shown = markdown_html("red \u{1b}[31mtext\u{202e}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
        "{shown}"
    );
}

#[test]
fn long_text_splits_at_line_boundaries_within_the_limit() {
    let line = "x".repeat(100);
    let text = (0..100)
        .map(|i| format!("{i:03} {line}\n"))
        .collect::<String>();
    let parts = split(&text, MESSAGE_LIMIT);
    assert!(parts.len() >= 3, "{} parts", parts.len());
    for part in &parts {
        assert!(part.chars().count() <= MESSAGE_LIMIT);
        assert!(part.ends_with('\n'), "a part ends at a line boundary");
    }
    assert_eq!(parts.concat(), text, "nothing is lost or repeated");
}

#[test]
fn a_code_block_cut_by_a_split_is_closed_and_reopened() {
    let body = "let x = 1;\n".repeat(600);
    let text = format!("Here:\n```\n{body}```\nend\n");
    let parts = reply_html(&text);
    assert!(parts.len() >= 2);
    for part in &parts {
        assert_eq!(
            part.matches("<pre>").count(),
            part.matches("</pre>").count(),
            "{part}"
        );
    }
    let rejoined: usize = parts.iter().map(|p| p.matches("let x = 1;").count()).sum();
    assert_eq!(rejoined, 600);
}

#[test]
fn a_line_longer_than_a_message_is_cut() {
    let text = "y".repeat(MESSAGE_LIMIT * 2 + 10);
    let parts = split(&text, MESSAGE_LIMIT);
    assert_eq!(parts.len(), 3);
    assert_eq!(parts.concat(), text);
}

#[test]
fn tool_lines_and_approvals() {
    assert_eq!(tool_started("bash", "ls -la\nmore"), "▸ bash: `ls -la…`");
    assert_eq!(tool_started("bash", "echo `id`"), "▸ bash: `echo ˋidˋ`");
    let (short, truncated) = approval_html("rm -rf <x>", 1);
    assert!(!truncated);
    assert!(short.contains("<pre>rm -rf &lt;x&gt;</pre>"), "{short}");
    let (long, truncated) = approval_html(&"a".repeat(5000), 1);
    assert!(truncated);
    assert!(
        long.contains("</pre>\n… (3500 more characters not shown;"),
        "{long}"
    );
}

/// The `<pre>` blocks of `html`, unescaped (what Telegram's HTML mode shows in them).
fn pre_blocks(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<pre>") {
        let after = &rest[start + 5..];
        let Some(end) = after.find("</pre>") else {
            panic!("an unclosed <pre> block: {html}");
        };
        let inner = &after[..end];
        assert!(!inner.contains('<') && !inner.contains('>'), "{inner}");
        out.push_str(
            &inner
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        );
        rest = &after[end + 6..];
    }
    out
}

#[test]
fn a_command_is_shown_exactly_whatever_markdown_it_holds() {
    let command = "echo a\n``` ; echo X\necho `id` <i>&lt;\n```sh\n  `x`\n```";
    let (preview, truncated) = approval_html(command, 1);
    assert!(!truncated);
    assert_eq!(pre_blocks(&preview), command, "{preview}");
    assert!(preview.contains("\n``` ; echo X\necho `id` &lt;i&gt;&amp;lt;\n"));
    assert!(!preview.contains("<code>"), "{preview}");
    let full = command_html(command);
    assert_eq!(full.len(), 1);
    assert_eq!(pre_blocks(&full[0]), command, "{}", full[0]);
    assert!(!full[0].contains("<code>"), "{}", full[0]);
}

#[test]
fn a_long_command_is_split_into_parts_that_join_to_it_exactly() {
    let mut command = String::new();
    for i in 0..400 {
        command.push_str(&format!("echo line {i} ```` `id` <&>\n"));
    }
    command.push_str(&"y".repeat(9000));
    command.push_str("\n```\n");
    let parts = command_html(&command);
    assert!(parts.len() > 3, "{}", parts.len());
    let joined: String = parts.iter().map(|p| pre_blocks(p)).collect();
    assert_eq!(joined, command);
    for (i, part) in parts.iter().enumerate() {
        let shown = part
            .replace("<pre>", "")
            .replace("</pre>", "")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        assert!(shown.chars().count() <= MESSAGE_LIMIT, "part {i}");
        assert!(
            part.starts_with(&format!(
                "📜 The whole command (part {} of {}):\n<pre>",
                i + 1,
                parts.len()
            )),
            "{part}"
        );
    }
    let (preview, truncated) = approval_html(&command, 1);
    assert!(truncated);
    assert!(command.starts_with(&pre_blocks(&preview)));
}

#[test]
fn hidden_characters_in_a_command_are_marked_and_counted_in_every_view() {
    let command = "echo \u{202e}txt.exe\u{200b}\r\n```\necho done";
    let (preview, _) = approval_html(command, 1);
    let full = command_html(command);
    for shown in [&preview, &full[0]] {
        assert!(
            !shown.contains('\u{202e}') && !shown.contains('\u{200b}') && !shown.contains('\r'),
            "{shown}"
        );
        assert!(shown.contains("\n```\necho done</pre>"), "{shown}");
        assert!(
            shown.contains("⚠ this command contains 3 hidden or control characters"),
            "{shown}"
        );
    }
}

use pretty_assertions::assert_eq;
use toren_telegram::render::{
    MESSAGE_LIMIT, approval_html, escape_html, markdown_html, reply_html, split, tool_started,
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
    assert!(long.contains("(3500 more characters)"), "{long}");
}

//! The tokens file (`TOREN_API_TOKENS_FILE`): one `name:token` per line, so that each
//! client's decisions are recorded under its own name. Blank lines and lines starting with
//! `#` are skipped; everything else must be a valid entry, or the whole file is refused
//! (a typo must not silently lock a client out or let a half-read file through).

use std::collections::HashSet;

use crate::Token;

/// The shortest token accepted: shorter ones can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;
/// The longest name: it is recorded in every decision.
const MAX_NAME_LEN: usize = 64;

/// What is wrong with one line of a tokens file (never quoting the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct TokensError {
    /// From 1.
    pub line: usize,
    pub problem: String,
}

/// The tokens of a tokens file's `text`, in file order.
pub fn parse_tokens(text: &str) -> Result<Vec<Token>, TokensError> {
    let mut tokens = Vec::new();
    let mut names = HashSet::new();
    let mut secrets = HashSet::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let fail = |problem: String| TokensError { line, problem };
        let entry = raw.trim();
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        let Some((name, secret)) = entry.split_once(':') else {
            return Err(fail("expected `name:token`".to_owned()));
        };
        let (name, secret) = (name.trim(), secret.trim());
        let name_ok = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'));
        if !name_ok {
            return Err(fail(format!(
                "the name must be 1 to {MAX_NAME_LEN} letters, digits or `_-.@`"
            )));
        }
        if secret.len() < MIN_TOKEN_LEN
            || secret.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(fail(format!(
                "the token of `{name}` must be at least {MIN_TOKEN_LEN} characters without \
                 spaces (e.g. `openssl rand -hex 24`)"
            )));
        }
        if !names.insert(name.to_owned()) {
            return Err(fail(format!("`{name}` is named twice")));
        }
        if !secrets.insert(secret.to_owned()) {
            return Err(fail(format!(
                "`{name}` has the token of an earlier line: decisions could not tell them apart"
            )));
        }
        tokens.push(Token {
            name: name.to_owned(),
            secret: secret.to_owned(),
        });
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        parse_tokens(text)
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    #[test]
    fn entries_comments_and_blank_lines() {
        let text = "# who may call\n\nada:0123456789abcdef0123\n  ci-bot : fedcba9876543210fedc \n";
        assert_eq!(names(text), ["ada", "ci-bot"]);
        let tokens = parse_tokens(text).unwrap();
        assert_eq!(tokens[1].secret, "fedcba9876543210fedc");
        // A token may itself hold a colon.
        assert_eq!(
            parse_tokens("x:abc:defghijklmnopq").unwrap()[0].secret,
            "abc:defghijklmnopq"
        );
    }

    #[test]
    fn each_bad_line_is_refused_with_its_number_and_never_the_token() {
        for (text, line, says) in [
            ("ada\n", 1, "name:token"),
            ("\n:0123456789abcdef0123\n", 2, "the name"),
            ("a b:0123456789abcdef0123\n", 1, "the name"),
            ("ada:short\n", 1, "at least 16"),
            (
                "ada:0123456789abcdef0123\nada:0123456789abcdef9999\n",
                2,
                "named twice",
            ),
            (
                "ada:0123456789abcdef0123\nbob:0123456789abcdef0123\n",
                2,
                "earlier line",
            ),
        ] {
            let error = parse_tokens(text).expect_err(text);
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(error.problem.contains(says), "{text:?}: {error}");
            assert!(!error.to_string().contains("0123456789"), "{error}");
        }
    }
}

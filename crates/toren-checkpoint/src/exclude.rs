//! Exclude patterns, gitignore-like and small: `node_modules/` (a directory of that name
//! anywhere), `*.log` (a file name anywhere), `build/out` (a path from the workspace root,
//! since it has a slash inside). `*` matches within one name, `?` one character.

use crate::{Error, Result};

#[derive(Clone, Debug)]
struct Pattern {
    /// The pattern's names, split at `/`.
    parts: Vec<String>,
    /// Anchored at the root (a `/` before the end), else matched against the last name.
    anchored: bool,
    /// Ends with `/`: directories only.
    dir_only: bool,
}

/// A set of exclude patterns.
#[derive(Clone, Debug, Default)]
pub struct Exclude {
    patterns: Vec<Pattern>,
}

impl Exclude {
    /// Parses the patterns; an empty one, or one with `..`, is refused.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self> {
        let mut parsed = Vec::new();
        for raw in patterns {
            let raw = raw.as_ref();
            let bad = |reason| Error::Pattern {
                pattern: raw.to_owned(),
                reason,
            };
            let dir_only = raw.ends_with('/');
            let body = raw.trim_end_matches('/');
            let anchored = body.contains('/');
            let body = body.trim_start_matches('/');
            if body.is_empty() {
                return Err(bad("it names nothing"));
            }
            let parts: Vec<String> = body.split('/').map(str::to_owned).collect();
            if parts.iter().any(|p| p.is_empty() || p == "." || p == "..") {
                return Err(bad("empty, `.` and `..` names are not allowed"));
            }
            parsed.push(Pattern {
                parts,
                anchored,
                dir_only,
            });
        }
        Ok(Self { patterns: parsed })
    }

    /// Whether the path (relative, `/`-separated) is excluded.
    pub fn excludes(&self, path: &str, is_dir: bool) -> bool {
        self.patterns.iter().any(|p| {
            if p.dir_only && !is_dir {
                return false;
            }
            if p.anchored {
                let names: Vec<&str> = path.split('/').collect();
                names.len() == p.parts.len() && names.iter().zip(&p.parts).all(|(n, g)| glob(g, n))
            } else {
                let name = path.rsplit('/').next().unwrap_or(path);
                p.parts.first().is_some_and(|g| glob(g, name))
            }
        })
    }
}

/// `*` and `?` within one name.
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_gitignore() -> Result<()> {
        let ex = Exclude::new(&["node_modules/", "*.log", "build/out", "a?c"])?;
        assert!(ex.excludes("node_modules", true));
        assert!(ex.excludes("web/node_modules", true));
        assert!(!ex.excludes("node_modules", false));
        assert!(ex.excludes("x.log", false));
        assert!(ex.excludes("deep/er/x.log", false));
        assert!(!ex.excludes("x.logs", false));
        assert!(ex.excludes("build/out", true));
        assert!(!ex.excludes("src/build/out", true));
        assert!(ex.excludes("abc", false));
        assert!(!ex.excludes("abbc", false));
        assert!(Exclude::new(&["/"]).is_err());
        assert!(Exclude::new(&["a/../b"]).is_err());
        Ok(())
    }

    #[test]
    fn glob_handles_stars() {
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXXbYc"));
        assert!(!glob("a*b*c", "aXXbY"));
        assert!(glob("*.tar.gz", "x.tar.gz"));
    }
}

//! Identifiers. A run id doubles as the name of the run's workspace directory, so parsing
//! one from user input accepts only a safe alphabet (no separators, no dots).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The id of one run: `run_` followed by a lowercase ULID, so ids sort by creation time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// A string that is not a valid run id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{0}` is not a run id: expected `run_` followed by letters and digits (see `toren runs list`)"
)]
pub struct InvalidRunId(pub String);

impl RunId {
    /// A fresh, time-ordered run id.
    pub fn new() -> Self {
        Self(format!(
            "run_{}",
            ulid::Ulid::generate().to_string().to_lowercase()
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = InvalidRunId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s
            .strip_prefix("run_")
            .ok_or_else(|| InvalidRunId(s.to_owned()))?;
        let ok = !rest.is_empty()
            && rest.len() <= 64
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidRunId(s.to_owned()))
        }
    }
}

impl TryFrom<String> for RunId {
    type Error = InvalidRunId;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> Self {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_parse_back_and_sort_by_time() {
        let a = RunId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = RunId::new();
        assert_eq!(a.as_str().parse::<RunId>(), Ok(a.clone()));
        assert!(a < b);
    }

    #[test]
    fn rejects_path_like_ids() {
        for bad in [
            "", "run_", "../x", "run_../x", "run_a/b", "abc", "run_a.b", "run_\0",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad:?} must be rejected");
        }
    }
}

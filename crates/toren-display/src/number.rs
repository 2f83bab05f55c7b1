//! Numbers for people.

use std::fmt::Display;

/// `n` with the noun that agrees with it: `1 line`, `0 lines`, `2 lines`. `many` is the
/// plural as written (`matches`, `replies`), so no rule of English is guessed at; a count
/// shown to a person never reads `1 lines` or `line(s)`.
pub fn count<N: Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

/// `48213` as `48,213`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{count, thousands};

    #[test]
    fn a_count_agrees_with_its_noun() {
        assert_eq!(count(1_usize, "line", "lines"), "1 line");
        assert_eq!(count(0_u32, "line", "lines"), "0 lines");
        assert_eq!(count(2_u64, "match", "matches"), "2 matches");
    }

    #[test]
    fn groups_of_three_from_the_right() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(48_213), "48,213");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}

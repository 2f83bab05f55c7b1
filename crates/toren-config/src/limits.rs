//! `sandbox.limits` of an agent file: memory, process count and CPU time of each command,
//! checked into a [`ResourceLimits`] with the defaults filled in. Sizes are written with
//! an explicit unit (`2GiB`, `500MB`); a bare `G` is refused as ambiguous. `agent_file`
//! calls in here with the raw, position-carrying values from `raw`.

use serde_saphyr::Spanned;
use toren_protocol::ResourceLimits;

use crate::agent_file::{Checker, Problems};
use crate::error::Result;
use crate::raw::{RawCount, RawLimits, RawLimitsMapping, RawSize};

/// The smallest `memory` accepted: bubblewrap and bash alone need a few megabytes.
pub const MIN_MEMORY: u64 = 16 * MIB;
/// The fewest `pids` accepted: the sandbox itself takes three processes.
pub const MIN_PIDS: u32 = 8;
/// The most `pids` accepted (the kernel's own ceiling).
pub const MAX_PIDS: u32 = 4_194_304;
/// The most `cpu_secs` accepted: a day.
pub const MAX_CPU_SECS: u64 = 86_400;

const MIB: u64 = 1024 * 1024;

const SIZE_HELP: &str = "write a number with a unit: B, KiB, MiB, GiB, TiB (powers of 1024) or \
                         KB, MB, GB, TB (powers of 1000), e.g. `memory: 2GiB`";

const UNITS: [(&str, u64); 13] = [
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("ki", 1 << 10),
    ("mi", 1 << 20),
    ("gi", 1 << 30),
    ("ti", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

impl Checker<'_> {
    pub(crate) fn limits(&self, limits: Spanned<RawLimits>) -> Result<ResourceLimits> {
        let mapping = match limits.value {
            RawLimits::Mapping(mapping) => *mapping,
            RawLimits::Other(found) => {
                return Err(self.error_with_help(
                    limits.referenced,
                    format!("`limits` must be a mapping, found {found}"),
                    "e.g. `limits: {memory: 2GiB, pids: 512, cpu_secs: 600}`; leave a key out \
                     to keep its default",
                ));
            }
        };
        let RawLimitsMapping {
            memory,
            pids,
            cpu_secs,
        } = mapping;
        let defaults = ResourceLimits::default();
        // Each key is checked even when another is wrong, so all are reported at once.
        let mut problems = Problems::default();
        let limits = ResourceLimits {
            memory: memory
                .and_then(|memory| problems.keep(self.memory(memory)))
                .unwrap_or(defaults.memory),
            pids: pids
                .and_then(|pids| {
                    problems.keep(self.count(
                        "pids",
                        pids,
                        u64::from(MIN_PIDS),
                        u64::from(MAX_PIDS),
                    ))
                })
                .map_or(defaults.pids, |value| {
                    u32::try_from(value).unwrap_or(MAX_PIDS)
                }),
            cpu_secs: cpu_secs
                .and_then(|secs| problems.keep(self.count("cpu_secs", secs, 1, MAX_CPU_SECS)))
                .unwrap_or(defaults.cpu_secs),
        };
        problems.into_result(limits)
    }

    fn memory(&self, memory: Spanned<RawSize>) -> Result<u64> {
        let at = memory.referenced;
        let bytes = match memory.value {
            RawSize::Integer(value) => u64::try_from(value).map_err(|_| {
                self.error_with_help(
                    at,
                    format!("`memory` must be a positive size, found {value}"),
                    SIZE_HELP,
                )
            })?,
            RawSize::Text(text) => parse_size(&text).map_err(|why| {
                self.error_with_help(at, format!("invalid `memory` `{text}`: {why}"), SIZE_HELP)
            })?,
            RawSize::Other(found) => {
                return Err(self.error_with_help(
                    at,
                    format!("`memory` must be a size such as `2GiB`, found {found}"),
                    SIZE_HELP,
                ));
            }
        };
        if bytes < MIN_MEMORY {
            return Err(self.error(
                at,
                format!(
                    "`memory` is {bytes} bytes, below the minimum of {}MiB: the sandbox's \
                     shell alone needs several megabytes",
                    MIN_MEMORY / MIB
                ),
            ));
        }
        Ok(bytes)
    }

    pub(crate) fn count(
        &self,
        key: &str,
        count: Spanned<RawCount>,
        min: u64,
        max: u64,
    ) -> Result<u64> {
        let message = match count.value {
            RawCount::Integer(value) => match u64::try_from(value) {
                Ok(n) if (min..=max).contains(&n) => return Ok(n),
                _ => format!("`{key}` must be an integer from {min} to {max}, found {value}"),
            },
            RawCount::Other(found) => {
                format!("`{key}` must be an integer from {min} to {max}, found {found}")
            }
        };
        Err(self.error(count.referenced, message))
    }
}

/// Bytes in a size written as a whole number and a unit (`2GiB`, `512 MiB`, `100MB`,
/// `4096B`). Units are case-insensitive; a bare `K`, `M`, `G` or `T` is refused because
/// tools disagree on whether it means 1000 or 1024.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err("expected a whole number followed by a unit".to_owned());
    }
    let unit = unit.trim_start();
    if unit.starts_with(['.', ',']) {
        return Err(
            "use a whole number with a smaller unit, e.g. `1536MiB` rather than `1.5GiB`"
                .to_owned(),
        );
    }
    if unit.is_empty() {
        return Err(format!(
            "the unit is missing; write e.g. `{number}MiB` (or a plain number for bytes)"
        ));
    }
    let lower = unit.to_ascii_lowercase();
    if ["k", "m", "g", "t"].contains(&lower.as_str()) {
        return Err(format!(
            "`{unit}` is ambiguous; write `{number}{unit}iB` (powers of 1024) or \
             `{number}{unit}B` (powers of 1000)"
        ));
    }
    let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == lower) else {
        return Err(format!("unknown unit `{unit}`"));
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| "the size is too large".to_owned())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_need_an_unambiguous_unit() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2gi"), Ok(2 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size(" 1 tib "), Ok(1 << 40));
        assert!(parse_size("2G").unwrap_err().contains("ambiguous"));
        assert!(parse_size("2").unwrap_err().contains("unit is missing"));
        assert!(parse_size("GiB").unwrap_err().contains("whole number"));
        assert!(parse_size("1.5GiB").unwrap_err().contains("`1536MiB`"));
        assert!(
            parse_size("2 parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            parse_size("99999999999TiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}

//! `sandbox.checkpoints` of an agent file: absent or `true` (the default: on, nothing
//! excluded, 100 kept), `false` (off: nothing to diff or rewind to), or a mapping
//! `{exclude: ["node_modules/", "*.log"], keep: 100}`. Each pattern is checked by
//! `toren-checkpoint`'s own parser, so what is accepted here is what the worker applies;
//! errors point at the pattern's line and column. `agent_file` calls in here with the raw,
//! position-carrying value from `raw`.

use serde_saphyr::Spanned;
use toren_protocol::CheckpointPolicy;

use crate::agent_file::{Checker, Problems};
use crate::error::Result;
use crate::raw::RawCheckpoints;

/// The most checkpoints `keep` accepts per workspace.
pub const MAX_CHECKPOINTS_KEPT: u64 = 10_000;

const CHECKPOINTS_HELP: &str = "`checkpoints` is `true` (the default), `false` (none: no diff \
                                or rewind), or a mapping such as `{exclude: [\"node_modules/\", \
                                \"*.log\"], keep: 100}`";

impl Checker<'_> {
    pub(crate) fn checkpoints(
        &self,
        checkpoints: Spanned<RawCheckpoints>,
    ) -> Result<CheckpointPolicy> {
        let mapping = match checkpoints.value {
            RawCheckpoints::Flag(true) => return Ok(CheckpointPolicy::default()),
            RawCheckpoints::Flag(false) => return Ok(CheckpointPolicy::off()),
            RawCheckpoints::Mapping(mapping) => *mapping,
            RawCheckpoints::Other(found) => {
                return Err(self.error_with_help(
                    checkpoints.referenced,
                    format!("`checkpoints` must be true, false or a mapping, found {found}"),
                    CHECKPOINTS_HELP,
                ));
            }
        };
        // Every pattern and `keep` are checked even when one is wrong.
        let mut problems = Problems::default();
        let mut exclude = Vec::new();
        for pattern in mapping.exclude.unwrap_or_default() {
            if let Err(e) = toren_checkpoint::Exclude::new(&[pattern.value.as_str()]) {
                problems.add(self.error_with_help(
                    pattern.referenced,
                    e.to_string(),
                    "a pattern is gitignore-like: `node_modules/` (a directory anywhere), \
                     `*.log` (a file name anywhere), `build/out` (a path from the workspace)",
                ));
            } else if exclude.contains(&pattern.value) {
                problems.add(self.error(
                    pattern.referenced,
                    format!("`{}` is listed twice in `exclude`", pattern.value),
                ));
            } else {
                exclude.push(pattern.value);
            }
        }
        let keep = mapping
            .keep
            .and_then(|keep| problems.keep(self.count("keep", keep, 1, MAX_CHECKPOINTS_KEPT)))
            .map_or(CheckpointPolicy::DEFAULT_KEEP, |n| {
                u32::try_from(n).unwrap_or(CheckpointPolicy::DEFAULT_KEEP)
            });
        problems.into_result(CheckpointPolicy {
            enabled: true,
            exclude,
            keep,
        })
    }
}

//! `toren-bench [--quick] model [options]`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct ModelArgs {
    /// Tool calls measured per provider, after a warm-up [default: 200; 5 with --quick].
    #[arg(long)]
    calls: Option<usize>,
    /// Where to write the figures [default: target/toren-bench/model.json, or
    /// model-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

/// [`ModelArgs`] with the defaults that depend on `--quick` filled in.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) quick: bool,
    pub(crate) calls: usize,
    pub(crate) json: Option<PathBuf>,
}

impl ModelArgs {
    pub(crate) fn resolve(self, quick: bool) -> Model {
        Model {
            quick,
            calls: self.calls.unwrap_or(if quick { 5 } else { 200 }).max(1),
            json: self.json,
        }
    }
}

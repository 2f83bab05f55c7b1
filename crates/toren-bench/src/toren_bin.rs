//! Where the programs under measurement are: the `toren` binary beside this one (cargo puts
//! both in `<target dir>/<profile>/`), and the target directory the figures are written into.
//! The benchmarks build nothing themselves, so a missing binary names the build command.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The `toren` binary: `explicit` if given, else `toren` beside this program.
pub(crate) fn toren(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => own_dir()?.join("toren"),
    };
    if !path.is_file() {
        bail!(
            "no toren binary at {}: build it first with `cargo build --release -p toren` \
             (or pass --toren PATH)",
            path.display()
        );
    }
    Ok(path)
}

/// `release` or `debug`: the cargo profile the binary was built with, read from its
/// directory's name (figures of a debug build are not comparable).
pub(crate) fn profile(binary: &Path) -> String {
    binary.parent().and_then(Path::file_name).map_or_else(
        || "unknown".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `toren-bench/<name>` in cargo's target directory this program runs from, whatever it
/// is called (`CARGO_TARGET_DIR`): the profile directory's parent, which cargo marks with a
/// `CACHEDIR.TAG`; under `./target` when it runs from elsewhere (an installed copy).
pub(crate) fn default_output(name: &str) -> PathBuf {
    let target = own_dir()
        .ok()
        .and_then(|dir| dir.parent().map(Path::to_owned))
        .filter(|t| t.join("CACHEDIR.TAG").is_file())
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("toren-bench").join(name)
}

fn own_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot tell where toren-bench runs from")?;
    exe.parent()
        .map(Path::to_owned)
        .context("toren-bench's own path has no directory")
}

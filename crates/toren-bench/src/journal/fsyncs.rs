//! Counting the fsyncs of a durable step for real: this program runs itself as a child
//! (`journal --child WORKLOAD`) under `strace -f -c -e trace=fsync,fdatasync`, once with the
//! workload's appends and once with none (opening the store, migrating and creating the
//! runs fsync too), and divides the difference by the appends made.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Sizes;

/// The `strace` binary, if one is installed.
pub(super) fn strace() -> Option<PathBuf> {
    ["/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// fsync + fdatasync calls per append of `workload` (`appends` of them).
pub(super) async fn per_append(
    strace: &Path,
    workload: &str,
    sizes: Sizes,
    quick: bool,
    appends: usize,
) -> anyhow::Result<f64> {
    let with = count(strace, workload, sizes, quick).await?;
    let setup_only = Sizes {
        steps: 0,
        steps_each: 0,
        ..sizes
    };
    let without = count(strace, workload, setup_only, quick).await?;
    Ok(with.saturating_sub(without) as f64 / appends.max(1) as f64)
}

/// The fsync + fdatasync calls of one child run.
async fn count(strace: &Path, workload: &str, sizes: Sizes, quick: bool) -> anyhow::Result<u64> {
    let me = std::env::current_exe().context("cannot find this program")?;
    let out = tempfile::NamedTempFile::new().context("cannot make a temporary file")?;
    let mut cmd = tokio::process::Command::new(strace);
    cmd.args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(out.path())
        .arg(&me);
    if quick {
        cmd.arg("--quick");
    }
    cmd.args(["journal", "--child", workload])
        .args(["--steps", &sizes.steps.to_string()])
        .args(["--runs", &sizes.runs.to_string()])
        .args(["--steps-each", &sizes.steps_each.to_string()])
        .stdout(std::process::Stdio::null());
    let status = cmd.status().await.context("cannot run strace")?;
    anyhow::ensure!(status.success(), "the strace'd child failed: {status}");
    let summary = std::fs::read_to_string(out.path()).context("cannot read strace's summary")?;
    Ok(calls(&summary))
}

/// The fsync and fdatasync calls in a `strace -c` summary.
fn calls(summary: &str) -> u64 {
    summary
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            match cols.last() {
                Some(&("fsync" | "fdatasync")) => cols.get(3)?.parse::<u64>().ok(),
                _ => None,
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_read_by_syscall() {
        let summary = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 82.14    0.000253         253       120           fsync
 17.86    0.000055          55         3         1 fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    0.000308         154       123         1 total
";
        assert_eq!(calls(summary), 123);
        assert_eq!(calls(""), 0);
    }
}

//! How a benchmark reports: its figures as a two-column table on stdout (data, so stdout)
//! and the same figures as a JSON document in a file, with the machine they were measured
//! on, so BENCHMARKS.md and later runs can compare them.

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

/// The machine a figure was measured on.
#[derive(Debug, Serialize)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) kernel: String,
}

impl Machine {
    pub(crate) fn this() -> Self {
        Self {
            cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|k| k.trim().to_owned())
                .unwrap_or_default(),
        }
    }
}

/// Rows of `figure | value`, printed aligned.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<(String, String)>,
}

impl Table {
    pub(crate) fn row(&mut self, figure: &str, value: impl Into<String>) {
        self.rows.push((figure.to_owned(), value.into()));
    }

    pub(crate) fn render(&self, title: &str) -> String {
        let width = self
            .rows
            .iter()
            .map(|(f, _)| f.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = format!("{title}\n");
        for (figure, value) in &self.rows {
            let pad = width - figure.chars().count();
            out.push_str(&format!("  {figure}{}  {value}\n", " ".repeat(pad)));
        }
        out
    }

    #[expect(clippy::print_stdout, reason = "a benchmark's figures are its output")]
    pub(crate) fn print(&self, title: &str) {
        print!("{}", self.render(title));
    }
}

/// Writes `value` as pretty JSON to `path`, making its directory.
pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(value).context("cannot encode the figures")?;
    std::fs::write(path, json + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_its_values() {
        let mut table = Table::default();
        table.row("runs", "500");
        table.row("POST /runs p99", "3.2 ms");
        assert_eq!(
            table.render("api-load"),
            "api-load\n  runs            500\n  POST /runs p99  3.2 ms\n"
        );
    }
}

//! Helpers: agent directories in temporary folders, and rendering errors for snapshots
//! with the temporary path replaced by `[TMP]`.

use std::path::{Path, PathBuf};

use tempfile::TempDir;
use toren_config::{Diagnostic, Error, parse_agent};

/// A temporary folder holding an `agents/` directory.
pub(crate) struct Home {
    pub(crate) dir: TempDir,
}

impl Home {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::create_dir(dir.path().join("agents")).expect("agents directory");
        Self { dir }
    }

    pub(crate) fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    /// Writes `text` at `relative` (under the temporary folder) and returns its path.
    pub(crate) fn write(&self, relative: &str, text: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("parent directory");
        }
        std::fs::write(&path, text).expect("write file");
        path
    }

    /// `error` as a person reads it, with the temporary folder shown as `[TMP]`.
    pub(crate) fn render(&self, error: &Error) -> String {
        error
            .to_string()
            .replace(&self.dir.path().display().to_string(), "[TMP]")
    }
}

/// The diagnostic for agent file text that must be invalid, named `agents/x.yaml`.
pub(crate) fn diagnostic(yaml: &str) -> Diagnostic {
    match parse_agent(Path::new("agents/x.yaml"), yaml) {
        Ok(spec) => panic!("expected an error for {yaml:?}, got {spec:?}"),
        Err(error) => match error.diagnostic() {
            Some(diagnostic) => diagnostic.clone(),
            None => panic!("expected a file:line:col diagnostic, got: {error}"),
        },
    }
}

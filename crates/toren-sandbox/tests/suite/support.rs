//! What the bubblewrap tests share: the two ways the local backend runs commands (a
//! sandbox kept per run with the `toren-exec` helper, or a fresh bubblewrap per command),
//! the helper built once per test process by `scripts/build-exec-helper`, and the backend
//! set up for either.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use toren_sandbox::{LocalBackend, LocalSettings};

/// How the backend runs commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One sandbox per run, the helper as its PID 1.
    Kept,
    /// A fresh `bwrap … bash -c` per command (no helper).
    PerCall,
}

/// The static helper, built once (seconds when up to date).
pub(crate) fn helper() -> PathBuf {
    static HELPER: OnceLock<PathBuf> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = Command::new(repo.join("scripts/build-exec-helper"))
                .output()
                .expect("cannot run scripts/build-exec-helper");
            assert!(
                out.status.success(),
                "scripts/build-exec-helper failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let path = String::from_utf8(out.stdout).unwrap();
            PathBuf::from(path.lines().last().unwrap().trim())
        })
        .clone()
}

/// The local backend over `sandbox_root`, run the way `mode` says.
pub(crate) fn backend(sandbox_root: &Path, mode: Mode) -> LocalBackend {
    let backend = LocalBackend::new(LocalSettings {
        sandbox_root: sandbox_root.to_owned(),
        bwrap: None,
    });
    match mode {
        Mode::Kept => backend.with_exec_helper(helper()),
        Mode::PerCall => backend,
    }
}

/// Defines `kept::NAME` and `per_call::NAME`, each running `async fn NAME(mode: Mode)`.
macro_rules! both_modes {
    ($($name:ident),* $(,)?) => {
        mod kept {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::suite::support::Mode::Kept).await;
                }
            )*
        }
        mod per_call {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::suite::support::Mode::PerCall).await;
                }
            )*
        }
    };
}
pub(crate) use both_modes;

/// Host pids of processes whose command line contains `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
        .collect()
}

/// Waits (polling, at most 10 s) until `done` holds; false if it never did.
pub(crate) async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    true
}

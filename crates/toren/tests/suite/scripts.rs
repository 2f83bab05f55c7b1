//! The scripts find what cargo built where cargo put it: `scripts/target-dir` follows
//! `CARGO_TARGET_DIR` (a relative one from the repository root, as the scripts run there),
//! and no script names a build product under a literal `./target`, which is not where it is
//! once `CARGO_TARGET_DIR` is set.

use std::process::Command;

use super::common::{read, repo_root, text};

#[test]
fn target_dir_follows_cargo_target_dir() {
    let root = repo_root().canonicalize().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    for (given, expected) in [
        (
            elsewhere.path().display().to_string(),
            elsewhere.path().to_owned(),
        ),
        ("build/here".to_owned(), root.join("build/here")),
    ] {
        let out = Command::new(root.join("scripts/target-dir"))
            // From elsewhere: the script goes to the repository root itself.
            .current_dir(elsewhere.path())
            .env("CARGO_TARGET_DIR", &given)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout).trim_end(),
            expected.display().to_string(),
            "CARGO_TARGET_DIR={given}"
        );
    }
}

/// What cargo (and `scripts/build-exec-helper`) make in the target directory.
const BUILD_PRODUCTS: &[&str] = &["debug", "release", "$profile", "${profile", "exec-helper"];

#[test]
fn no_script_looks_for_the_build_in_a_literal_target_directory() {
    let mut assumed = Vec::new();
    let dir = repo_root().join("scripts");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    scripts.sort();
    assert!(
        scripts.iter().any(|s| s.ends_with("quickstart")),
        "found the scripts: {scripts:?}"
    );
    for script in scripts {
        for (index, line) in read(&script).lines().enumerate() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            for (at, _) in line.match_indices("target/") {
                // `$target/…` and `${target}` are variables, `target-dir` the helper.
                let before = line[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || "_$".contains(c)) {
                    continue;
                }
                let after = &line[at + "target/".len()..];
                if BUILD_PRODUCTS.iter().any(|p| after.starts_with(p)) {
                    assumed.push(format!(
                        "scripts/{}:{}: {}",
                        script.file_name().unwrap().to_string_lossy(),
                        index + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        assumed.is_empty(),
        "scripts that look for the build under ./target (use \"$(./scripts/target-dir)\"):\n{}",
        assumed.join("\n")
    );
}

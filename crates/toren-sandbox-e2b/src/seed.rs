//! Putting the project a run's workspace started as into a new sandbox: on e2b the run's
//! host workspace directory holds that copy (`toren_worker::seed_workspace` fills it, as
//! for every backend, before the run is created), and the VM's `/workspace` is the real
//! workspace. Each sandbox made for the run (its first, or one replacing a lost one, before
//! what the log restores) gets it: the directory is packed on this host with `tar` (links
//! as links, modes kept; Toren's own note on the sandbox left out), uploaded through
//! envd's `/files` into `/tmp`, and unpacked into `/workspace` as the sandbox's user.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;

use crate::process::{Target, run, script_message};
use crate::{Error, Result};

/// The largest project packed into a sandbox (E2B's proxies refuse larger uploads).
pub(crate) const MAX_SEED_BYTES: usize = 256 << 20;
const ARCHIVE: &str = "/tmp/.toren-seed.tar";
const UNPACK: &str = "tar -xf \"$1\" -C /workspace && rm -f \"$1\"";

/// Copies the host workspace `host` (less the entry named `note`) into the sandbox's
/// `/workspace`; `Ok(false)` when it holds nothing to copy.
pub(crate) async fn seed(target: &Target<'_>, host: &Path, note: &str) -> Result<bool> {
    let protocol = |why: String| Error::Protocol {
        id: target.id.to_owned(),
        why,
    };
    let any = std::fs::read_dir(host)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy() != note)
        })
        .unwrap_or(false);
    if !any {
        return Ok(false);
    }
    let packed = tokio::process::Command::new("tar")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("-C")
        .arg(host)
        .arg(format!("--exclude=./{note}"))
        .args(["-cf", "-", "."])
        .output()
        .await
        .map_err(|e| {
            protocol(format!(
                "could not pack the workspace's project with tar: {e}"
            ))
        })?;
    if !packed.status.success() {
        return Err(protocol(format!(
            "could not pack the workspace's project ({}): {}",
            packed.status,
            String::from_utf8_lossy(&packed.stderr).trim()
        )));
    }
    let archive = packed.stdout;
    if archive.len() > MAX_SEED_BYTES {
        return Err(protocol(format!(
            "the project the workspace starts as is {} bytes packed, over the {} an E2B \
             sandbox takes in one upload; start from a smaller one",
            archive.len(),
            MAX_SEED_BYTES
        )));
    }
    let client = target.client;
    let uri = format!("/files?path={}", crate::client::encode(ARCHIVE));
    client
        .retrying("upload the workspace's project", || async {
            let request = client
                .envd(Method::POST, &uri, target.id, target.token)
                .header("Content-Type", "application/octet-stream")
                .body(archive.clone())
                .timeout(Duration::from_secs(300));
            let (status, body) = client.envd_send(target.id, request).await?;
            if status.is_success() {
                Ok(())
            } else {
                Err(protocol(format!(
                    "uploading the workspace's project answered {status}: {}",
                    String::from_utf8_lossy(&body)
                        .chars()
                        .take(200)
                        .collect::<String>()
                )))
            }
        })
        .await?;
    let ran = run(
        target,
        &script_message(UNPACK, &[ARCHIVE]),
        Duration::from_secs(300),
        4096,
        None,
    )
    .await?;
    if !matches!(ran.ended, crate::process::Ended::Exited(Some(0))) {
        return Err(protocol(format!(
            "could not unpack the workspace's project ({}): {}",
            ran.ended.describe(),
            ran.output.trim()
        )));
    }
    Ok(true)
}

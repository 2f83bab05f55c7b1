//! Filling a new run's workspace with a person's own project before the run is created: a
//! copy of a directory on this host, or a clone of a git repository where the agent's
//! network policy lets it reach the repository's host (`toren_checkpoint::Store::seed`
//! makes the copy, as the workspace's first checkpoint).
//!
//! A clone runs `git` on this host, not in the sandbox, so it is held to the agent's own
//! network policy first: `network: true`, or the URL's host allowed by its host list
//! (never asked about). Only `https://` and `http://` URLs without credentials in them are
//! taken (a URL is recorded in the run's log, and the other transports run programs or
//! read local paths); git runs with no configuration but its defaults, no credential
//! prompt and no hooks, into a directory beside the workspace that is removed after.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toren_checkpoint::{SeedLimits, Seeded};
use toren_protocol::{HostVerdict, ResolvedPolicy};

use crate::Error;

/// How long a clone may take before it is given up.
pub const CLONE_TIMEOUT: Duration = Duration::from_secs(300);

/// What a new run's workspace starts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedSource {
    /// A copy of this directory (on the host that creates the run).
    Dir(PathBuf),
    /// A clone of this repository.
    Git(String),
}

impl SeedSource {
    /// A git URL when `given` looks like one (`https://`, `http://`, `git@…`, `ssh://`,
    /// `git://`, or ending `.git` with a scheme), else a directory.
    pub fn parse(given: &str) -> Self {
        if given.contains("://") || given.starts_with("git@") {
            Self::Git(given.to_owned())
        } else {
            Self::Dir(PathBuf::from(given))
        }
    }

    /// As the run's log records it.
    pub fn label(&self) -> String {
        match self {
            Self::Dir(dir) => dir.display().to_string(),
            Self::Git(url) => url.clone(),
        }
    }
}

fn refuse(why: impl Into<String>) -> Error {
    Error::Seed { why: why.into() }
}

/// Fills the empty workspace `policy` pins with `source`, within `limits`.
pub async fn seed_workspace(
    policy: &ResolvedPolicy,
    source: &SeedSource,
    limits: SeedLimits,
) -> Result<Seeded, Error> {
    // An e2b run's host workspace holds the copy, which its sandbox takes when it is made.
    if !matches!(policy.backend.as_str(), "local" | "docker" | "e2b") {
        return Err(refuse(format!(
            "a workspace in a `{}` sandbox cannot start as a copy of a directory or a \
             repository; use the local, docker or e2b backend for that",
            policy.backend
        )));
    }
    let workspace = policy
        .workspace
        .as_deref()
        .map(PathBuf::from)
        .ok_or_else(|| refuse("the run has no workspace on this host"))?;
    let store_root = toren_checkpoint::Policy::store_for(&workspace)
        .ok_or_else(|| refuse("the workspace has no checkpoint store beside it"))?;
    let (dir, clone) = match source {
        SeedSource::Dir(dir) => {
            let dir =
                std::path::absolute(dir).map_err(|e| refuse(format!("{}: {e}", dir.display())))?;
            match std::fs::metadata(&dir) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(refuse(format!("{} is not a directory", dir.display()))),
                Err(e) => return Err(refuse(format!("{}: {e}", dir.display()))),
            }
            (dir, None)
        }
        SeedSource::Git(url) => {
            allowed(policy, url)?;
            let into = workspace
                .parent()
                .map(|run_dir| run_dir.join("seed-clone"))
                .ok_or_else(|| refuse("the workspace has no run directory"))?;
            clone(url, &into).await?;
            (into.clone(), Some(into))
        }
    };
    let seeded = tokio::task::spawn_blocking(move || {
        toren_checkpoint::Store::open(store_root)?.seed(&dir, &workspace, &limits)
    })
    .await;
    if let Some(clone) = clone
        && let Err(e) = tokio::fs::remove_dir_all(&clone).await
    {
        tracing::warn!(dir = %clone.display(), "could not remove the clone a workspace was seeded from: {e}");
    }
    match seeded {
        Ok(Ok(seeded)) => Ok(seeded),
        Ok(Err(e)) => Err(refuse(e.to_string())),
        Err(join) => Err(refuse(format!("the copy failed: {join}"))),
    }
}

/// Whether the agent's network policy lets it reach the host of `url`, which must be an
/// `http(s)` URL without credentials.
fn allowed(policy: &ResolvedPolicy, url: &str) -> Result<(), Error> {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return Err(refuse(format!(
            "`{url}` is not an https:// (or http://) URL; only those are cloned (ssh needs this \
             host's keys, and other transports run programs or read local paths): give the \
             repository's https URL, or a directory"
        )));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(refuse(
            "the URL has credentials in it, which the run's log would record; give a URL \
             without them (a public repository), or clone it yourself and give the directory",
        ));
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    }
    .to_ascii_lowercase();
    if host.is_empty() {
        return Err(refuse(format!("`{url}` names no host")));
    }
    let reachable = match &policy.egress {
        Some(egress) => egress.decide(&host) == HostVerdict::Allow,
        None => policy.network,
    };
    if reachable {
        Ok(())
    } else {
        Err(refuse(format!(
            "the agent's network policy does not let it reach `{host}`, so its repository is not \
             cloned for it; add `{host}` to the agent file's sandbox.network host list (or copy \
             a directory instead)"
        )))
    }
}

/// `git clone URL INTO`, with git's defaults only, no prompt, no hooks, within
/// [`CLONE_TIMEOUT`].
async fn clone(url: &str, into: &Path) -> Result<(), Error> {
    let hooks = into.with_file_name("seed-no-hooks");
    let mut command = tokio::process::Command::new("git");
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", "/nonexistent")
        .args(["-c", "protocol.allow=never"])
        .args(["-c", "protocol.https.allow=always"])
        .args(["-c", "protocol.http.allow=always"])
        .args(["-c", &format!("core.hooksPath={}", hooks.display())])
        .args(["clone", "--quiet", "--no-recurse-submodules", "--", url])
        .arg(into)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(CLONE_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(
                "git is not installed on this host; install it (apt-get install git), or give a \
                 directory",
            ));
        }
        Ok(Err(e)) => return Err(refuse(format!("git could not start: {e}"))),
        Err(_) => {
            return Err(refuse(format!(
                "cloning `{url}` took longer than {} s; clone it yourself and give the directory",
                CLONE_TIMEOUT.as_secs()
            )));
        }
    };
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let said: String = said.trim().chars().take(500).collect();
    Err(refuse(format!(
        "`git clone {url}` failed ({}): {said}",
        output.status
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(network: bool, allow: &[&str]) -> ResolvedPolicy {
        let mut policy: ResolvedPolicy = serde_json::from_value(serde_json::json!({
            "backend": "local", "image": null, "network": network,
            "approval": "always", "env": []
        }))
        .expect("a policy");
        if !allow.is_empty() {
            policy.egress = Some(
                serde_json::from_value(serde_json::json!({ "allow": allow })).expect("egress"),
            );
        }
        policy
    }

    #[test]
    fn a_clone_is_held_to_the_agents_network_policy() {
        let url = "https://git.example.test/team/repo.git";
        assert!(allowed(&policy(true, &[]), url).is_ok());
        assert!(allowed(&policy(false, &["git.example.test"]), url).is_ok());
        assert!(allowed(&policy(false, &["*.example.test"]), url).is_ok());
        let no = allowed(&policy(false, &[]), url).unwrap_err().to_string();
        assert!(
            no.contains("does not let it reach `git.example.test`"),
            "{no}"
        );
        let no = allowed(&policy(false, &["other.test"]), url)
            .unwrap_err()
            .to_string();
        assert!(no.contains("sandbox.network"), "{no}");
        for bad in [
            "git@github.com:team/repo.git",
            "ssh://github.com/team/repo",
            "file:///etc",
            "ext::sh -c id",
            "https://user:token@git.example.test/repo",
        ] {
            assert!(allowed(&policy(true, &[]), bad).is_err(), "{bad}");
        }
    }
}

//! The file tools on the VM: `toren_sandbox::Files` for an E2B sandbox. A path first passes
//! the same syntactic checks as on every backend (`check_tool_path`); then the check that
//! counts is made in the VM, where the files are: a small script resolves the path there
//! with `realpath` (following every symlink, the agent's own included) and refuses what does
//! not resolve beneath `/workspace`, directories and anything that is not a regular file,
//! reporting the size; only then are the bytes moved, by envd's `/files` on the resolved
//! path. (A process the agent left running could swap a symlink in between the check and
//! the transfer; no command of the run runs meanwhile, since a run's tools run one at a
//! time.) The trait is synchronous: each call blocks its blocking-pool thread on the
//! runtime.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use toren_sandbox::{EntryInfo, EntryKind, Error as SandboxError, check_tool_path};

use crate::client::{encode, envd_error};
use crate::error::{Error, Result};
use crate::process::{self, Ended, Target, script_message};
use crate::sandbox::E2bSandbox;

/// Resolves `$1` beneath `/workspace` in the VM and says what is there: `file SIZE PATH`,
/// `new PATH`, `dir`, `other LINK KIND`, `missing` or `escape`.
const RESOLVE: &str = r#"cd /workspace 2>/dev/null || { echo noworkspace; exit 0; }
p=$1
r=$(realpath -m -- "$p" 2>/dev/null) || { echo missing; exit 0; }
case "$r" in /workspace|/workspace/*) ;; *) echo escape; exit 0;; esac
if [ -d "$r" ]; then echo dir; exit 0; fi
if [ -e "$r" ] && [ ! -f "$r" ]; then
  if [ -L "$p" ]; then l=1; else l=0; fi
  echo "other $l $(stat -c %F -- "$r")"; exit 0
fi
if [ ! -e "$r" ]; then echo "new $r"; exit 0; fi
echo "file $(stat -c %s -- "$r") $r""#;

/// What the VM found at a path.
enum Found {
    File { size: u64, resolved: String },
    New { resolved: String },
    Dir,
    Other { kind: &'static str, via_link: bool },
    Missing,
}

/// The sandbox's files, reached from a blocking thread.
pub(crate) struct VmFiles {
    pub(crate) sandbox: Arc<E2bSandbox>,
    pub(crate) runtime: tokio::runtime::Handle,
}

impl VmFiles {
    async fn resolve(&self, path: &str) -> Result<(Found, String, Option<String>)> {
        check_tool_path(path)?;
        let (id, token) = self.sandbox.ensure().await?;
        let target = Target {
            client: self.sandbox.client(),
            id: &id,
            token: token.as_deref(),
        };
        let message = script_message(RESOLVE, &[path]);
        let ran = process::run(&target, &message, Duration::from_secs(30), 64 * 1024, None).await?;
        if !matches!(ran.ended, Ended::Exited(Some(0))) {
            return Err(Error::Protocol {
                id,
                why: format!("could not resolve a path: {}", ran.output.trim()),
            });
        }
        let line = ran.output.trim_end_matches('\n');
        let mut words = line.splitn(3, ' ');
        let found = match (words.next(), words.next(), words.next()) {
            (Some("file"), Some(size), Some(resolved)) => Found::File {
                size: size.parse().unwrap_or(u64::MAX),
                resolved: resolved.to_owned(),
            },
            (Some("new"), Some(first), rest) => Found::New {
                resolved: rest.map_or_else(|| first.to_owned(), |r| format!("{first} {r}")),
            },
            (Some("dir"), ..) => Found::Dir,
            (Some("other"), Some(link), kind) => Found::Other {
                kind: kind_name(kind.unwrap_or_default()),
                via_link: link == "1",
            },
            (Some("missing"), ..) => Found::Missing,
            (Some("escape"), ..) => {
                return Err(SandboxError::PathEscape {
                    path: path.to_owned(),
                }
                .into());
            }
            _ => {
                return Err(Error::Protocol {
                    id,
                    why: format!("answered a path check with `{line}`"),
                });
            }
        };
        Ok((found, id, token))
    }

    async fn read_async(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        let (found, id, token) = self.resolve(path).await?;
        let resolved = match found {
            Found::File { size, .. } if size > limit => {
                return Err(SandboxError::TooLarge {
                    path: path.to_owned(),
                    size,
                    limit,
                }
                .into());
            }
            Found::File { resolved, .. } => resolved,
            other => return Err(refusal(path, other)),
        };
        let request = self
            .sandbox
            .client()
            .envd(
                Method::GET,
                &format!("/files?path={}", encode(&resolved)),
                &id,
                token.as_deref(),
            )
            .timeout(Duration::from_secs(300));
        let (status, body) = self.sandbox.client().envd_send(&id, request).await?;
        match status.as_u16() {
            200 => Ok(body),
            404 => Err(SandboxError::NotFound {
                path: path.to_owned(),
            }
            .into()),
            _ => Err(envd_error(&id, "read a file", status, &body)),
        }
    }

    async fn write_async(&self, path: &str, contents: &[u8]) -> Result<()> {
        let (found, id, token) = self.resolve(path).await?;
        let resolved = match found {
            Found::File { resolved, .. } | Found::New { resolved } => resolved,
            other => return Err(refusal(path, other)),
        };
        let request = self
            .sandbox
            .client()
            .envd(
                Method::POST,
                &format!("/files?path={}", encode(&resolved)),
                &id,
                token.as_deref(),
            )
            .header("Content-Type", "application/octet-stream")
            .timeout(Duration::from_secs(300))
            .body(contents.to_vec());
        let (status, body) = self.sandbox.client().envd_send(&id, request).await?;
        match status.as_u16() {
            200 => Ok(()),
            507 => Err(SandboxError::WorkspaceFull {
                path: path.to_owned(),
            }
            .into()),
            _ => Err(envd_error(&id, "write a file", status, &body)),
        }
    }

    async fn metadata_async(&self, path: &str) -> Result<EntryInfo> {
        let (found, _, _) = self.resolve(path).await?;
        Ok(match found {
            Found::File { size, .. } => EntryInfo {
                kind: EntryKind::File,
                len: size,
            },
            Found::Dir => EntryInfo {
                kind: EntryKind::Directory,
                len: 0,
            },
            Found::Other { .. } => EntryInfo {
                kind: EntryKind::Other,
                len: 0,
            },
            Found::New { .. } | Found::Missing => {
                return Err(SandboxError::NotFound {
                    path: path.to_owned(),
                }
                .into());
            }
        })
    }
}

/// The error for what a read or write cannot work on.
fn refusal(path: &str, found: Found) -> Error {
    let path = path.to_owned();
    match found {
        Found::Dir => SandboxError::IsDirectory { path },
        Found::Other { kind, via_link } => SandboxError::NotAFile {
            path,
            kind,
            via_link,
        },
        Found::Missing | Found::New { .. } | Found::File { .. } => SandboxError::NotFound { path },
    }
    .into()
}

fn kind_name(stat: &str) -> &'static str {
    match stat {
        "fifo" => "named pipe",
        "socket" => "socket",
        "character special file" => "character device",
        "block special file" => "block device",
        _ => "special file",
    }
}

impl toren_sandbox::Files for VmFiles {
    fn read(&self, path: &str, limit: u64) -> toren_sandbox::Result<Vec<u8>> {
        Ok(self.runtime.block_on(self.read_async(path, limit))?)
    }

    fn write(&self, path: &str, contents: &[u8]) -> toren_sandbox::Result<()> {
        Ok(self.runtime.block_on(self.write_async(path, contents))?)
    }

    fn metadata(&self, path: &str) -> toren_sandbox::Result<EntryInfo> {
        Ok(self.runtime.block_on(self.metadata_async(path))?)
    }
}

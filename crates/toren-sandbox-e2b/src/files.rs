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

use std::io;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use toren_sandbox::{EntryInfo, EntryKind, Error as SandboxError, check_tool_path};

use crate::client::{encode, envd_error, message_of};
use crate::error::{Error, Result};
use crate::process::{self, Ended, Target, script_message};
use crate::sandbox::E2bSandbox;

/// Resolves `$1` beneath `/workspace` in the VM and says what is there: `file SIZE PATH`,
/// `new PATH`, `dir`, `other LINK KIND`, `missing`, `escape`, or `invalid WHY` for what the
/// VM's kernel would refuse as the host's refuses it on the local backends (a path or name
/// too long, a symlink loop, a file used as a directory). `realpath -e` first, as it meets
/// those (`-m` takes a loop or a file's child for a new file); `-m` for a path to create.
const RESOLVE: &str = r#"cd /workspace 2>/dev/null || { echo noworkspace; exit 0; }
p=$1
if [ ${#p} -ge 4096 ]; then echo "invalid long"; exit 0; fi
set -f; IFS=/
for c in $p; do if [ ${#c} -gt 255 ]; then echo "invalid long"; exit 0; fi; done
set +f; unset IFS
if ! r=$(realpath -e -- "$p" 2>&1); then
  case "$r" in
    *"Too many levels of symbolic links"*) echo "invalid loop"; exit 0;;
    *"Not a directory"*) echo "invalid notdir"; exit 0;;
    *"File name too long"*) echo "invalid long"; exit 0;;
  esac
  r=$(realpath -m -- "$p" 2>/dev/null) || { echo missing; exit 0; }
fi
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
    /// Resolves `path` in the VM. A sandbox found gone is replaced once (the loss is told
    /// with the next command's output, as for bash).
    async fn resolve(&self, path: &str) -> Result<(Found, String, Option<String>)> {
        check_tool_path(path)?;
        let mut replaced = false;
        loop {
            let (id, token) = self.sandbox.ensure().await?;
            match self.resolve_in(path, &id, token.as_deref()).await {
                Err(err) if err.is_gone() && !replaced => {
                    tracing::warn!(sandbox = %id, %err, "the E2B sandbox is gone; making a new one");
                    self.sandbox.forget(&id).await;
                    replaced = true;
                }
                other => return other.map(|found| (found, id, token)),
            }
        }
    }

    async fn resolve_in(&self, path: &str, id: &str, token: Option<&str>) -> Result<Found> {
        let target = Target {
            client: self.sandbox.client(),
            id,
            token,
        };
        let message = script_message(RESOLVE, &[path]);
        let ran = self
            .sandbox
            .client()
            .retrying("resolve a path", || {
                process::run(&target, &message, Duration::from_secs(30), 64 * 1024, None)
            })
            .await?;
        if !matches!(ran.ended, Ended::Exited(Some(0))) {
            return Err(Error::Protocol {
                id: id.to_owned(),
                why: format!("could not resolve a path: {}", ran.output.trim()),
            });
        }
        let line = ran.output.trim_end_matches('\n');
        let mut words = line.splitn(3, ' ');
        Ok(match (words.next(), words.next(), words.next()) {
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
            (Some("invalid"), Some(why), None) => {
                let why = match why {
                    "long" => "the path is too long",
                    "loop" => "too many levels of symbolic links",
                    _ => "a component of the path is a file, not a directory",
                };
                return Err(SandboxError::InvalidPath {
                    path: path.to_owned(),
                    why: why.to_owned(),
                }
                .into());
            }
            (Some("escape"), ..) => {
                return Err(SandboxError::PathEscape {
                    path: path.to_owned(),
                }
                .into());
            }
            _ => {
                return Err(Error::Protocol {
                    id: id.to_owned(),
                    why: format!("answered a path check with `{line}`"),
                });
            }
        })
    }

    /// Moves bytes through envd's `/files` (`contents`: an upload, else a download);
    /// transient refusals (429, 5xx, no connection) are retried, any other is classified
    /// by [`transfer_error`].
    async fn transfer(
        &self,
        path: &str,
        resolved: &str,
        (id, token): (&str, Option<&str>),
        contents: Option<&[u8]>,
    ) -> Result<Vec<u8>> {
        let client = self.sandbox.client();
        let uri = format!("/files?path={}", encode(resolved));
        let what = if contents.is_some() {
            "write a file"
        } else {
            "read a file"
        };
        client
            .retrying(what, || async {
                let request = match contents {
                    Some(bytes) => client
                        .envd(Method::POST, &uri, id, token)
                        .header("Content-Type", "application/octet-stream")
                        .body(bytes.to_vec()),
                    None => client.envd(Method::GET, &uri, id, token),
                };
                let request = request.timeout(Duration::from_secs(300));
                let (status, body) = client.envd_send(id, request).await?;
                if status.is_success() {
                    return Ok(body);
                }
                let transfer = match contents {
                    Some(bytes) => Transfer::Write {
                        size: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
                    },
                    None => Transfer::Read,
                };
                Err(transfer_error(transfer, path, id, status, &body))
            })
            .await
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
        self.transfer(path, &resolved, (&id, token.as_deref()), None)
            .await
    }

    /// Writes `path` in the sandbox `id` as the file tools do, without `ensure`: for
    /// restoring files into a sandbox just made (`restore`).
    pub(crate) async fn write_in(
        &self,
        path: &str,
        contents: &[u8],
        id: &str,
        token: Option<&str>,
    ) -> Result<()> {
        check_tool_path(path)?;
        let resolved = match self.resolve_in(path, id, token).await? {
            Found::File { resolved, .. } | Found::New { resolved } => resolved,
            other => return Err(refusal(path, other)),
        };
        self.transfer(path, &resolved, (id, token), Some(contents))
            .await
            .map(drop)
    }

    async fn write_async(&self, path: &str, contents: &[u8]) -> Result<()> {
        let (found, id, token) = self.resolve(path).await?;
        let resolved = match found {
            Found::File { resolved, .. } | Found::New { resolved } => resolved,
            other => return Err(refusal(path, other)),
        };
        self.transfer(path, &resolved, (&id, token.as_deref()), Some(contents))
            .await
            .map(drop)
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

/// Which way bytes moved through `/files`.
#[derive(Clone, Copy, Debug)]
enum Transfer {
    Read,
    Write { size: u64 },
}

/// envd's (or a proxy's before it) refusal of a transfer, classified. What the path or the
/// content causes becomes the workspace error every backend gives for it, which goes back
/// to the model: a path envd cannot take or that is no file (400), gone since the check
/// (404, 410), too long (414); content over what the sandbox takes in one upload (413) or
/// than its disk holds (507). The rest is the host's: the key or token (401, 403), rate
/// limits (429, retried), the sandbox gone (502), envd failing (5xx), and a request of ours
/// it could not take (405, 406, 411, 415, …).
fn transfer_error(
    transfer: Transfer,
    path: &str,
    id: &str,
    status: StatusCode,
    body: &[u8],
) -> Error {
    let path = path.to_owned();
    let op = match transfer {
        Transfer::Read => "read",
        Transfer::Write { .. } => "write",
    };
    let workspace = match (status.as_u16(), transfer) {
        (400, _) => SandboxError::InvalidPath {
            path,
            why: format!("the sandbox would not {op} it ({})", message_of(body)),
        },
        (404 | 410, _) => SandboxError::NotFound { path },
        (414, _) => SandboxError::InvalidPath {
            path,
            why: "the path is too long for the sandbox".to_owned(),
        },
        (413, Transfer::Write { size }) => SandboxError::Fs {
            op: "write",
            path,
            source: io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "{size} bytes are more than the E2B sandbox takes in one upload (413); \
                     nothing was written. Use bash for files that large (e.g. generate them \
                     with a script)"
                ),
            ),
        },
        (507, Transfer::Write { .. }) => SandboxError::WorkspaceFull { path },
        _ => return envd_error(id, &format!("{op} a file"), status, body),
    };
    Error::Sandbox(workspace)
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
        "fifo" => "named pipe (FIFO)",
        "socket" => "unix socket",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, transfer: Transfer) -> (bool, bool, String) {
        let status = StatusCode::from_u16(status).unwrap();
        let err = transfer_error(
            transfer,
            "a.txt",
            "sbx",
            status,
            br#"{"code":400,"message":"m"}"#,
        );
        (err.is_model_fixable(), err.is_retryable(), err.to_string())
    }

    #[test]
    fn what_the_path_or_content_causes_is_the_models_and_the_rest_the_hosts() {
        let write = Transfer::Write { size: 12 };
        let model = |status, transfer| {
            let (fixable, retryable, text) = classify(status, transfer);
            assert!(fixable && !retryable, "{status}: {text}");
            text
        };
        assert_eq!(
            model(413, write),
            "cannot write `a.txt`: 12 bytes are more than the E2B sandbox takes in one upload \
             (413); nothing was written. Use bash for files that large (e.g. generate them with \
             a script)"
        );
        assert_eq!(
            model(404, Transfer::Read),
            "`a.txt` does not exist in the workspace"
        );
        assert_eq!(
            model(400, Transfer::Read),
            "invalid path `a.txt`: the sandbox would not read it (m)"
        );
        model(410, write);
        model(414, write);
        model(507, write);
        for status in [401, 403] {
            let (fixable, retryable, _) = classify(status, write);
            assert!(!fixable && !retryable, "{status}");
        }
        for status in [429, 500, 502, 503, 504] {
            let (fixable, retryable, _) = classify(status, write);
            assert!(!fixable && (retryable || status == 502), "{status}");
        }
        // A request of ours envd could not take is a host fault, not the model's.
        for status in [405, 406, 411, 415] {
            let (fixable, retryable, _) = classify(status, Transfer::Read);
            assert!(!fixable && !retryable, "{status}");
        }
        // A download is never "too large" by 413 (the size was checked first): the host's.
        assert!(!classify(413, Transfer::Read).0);
    }
}

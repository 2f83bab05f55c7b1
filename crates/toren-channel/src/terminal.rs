//! The terminal channel: a file the agent sends is copied into a downloads directory of
//! the person's (one per session, or per run) and announced with one line on stderr, its
//! path, size and caption rendered through `toren-display`. How the directory is written —
//! never overwriting, private modes, a re-run call recognised — is `downloads`.

mod downloads;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::{ChannelBinding, RunId};

use crate::{Channel, ChannelError, ChannelFactory, Delivered, Delivery, FileKind};

/// The terminal channel's kind, as bindings name it.
pub const TERMINAL: &str = "terminal";

/// Tells the person that a file arrived.
pub type Announce = Arc<dyn Fn(&Announcement) + Send + Sync>;

/// A file just delivered to the downloads directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
    /// Where the file is now.
    pub path: PathBuf,
    pub bytes: u64,
    pub kind: FileKind,
    /// The agent's caption, as it sent it (render it with [`Announcement::line`]).
    pub caption: Option<String>,
}

impl Announcement {
    /// The announcement as one line for a terminal. Everything the agent chose (the file's
    /// name, the caption) is rendered through `toren-display`, so no control or invisible
    /// character reaches the terminal raw.
    pub fn line(&self) -> String {
        let path = self.path.display().to_string();
        let mut line = format!(
            "file from the agent: {} ({}, {})",
            toren_display::visible(&path),
            size(self.bytes),
            self.kind
        );
        if let Some(caption) = self.caption.as_deref().filter(|c| !c.is_empty()) {
            line.push_str(" — ");
            line.push_str(&toren_display::visible(caption));
        }
        line
    }
}

/// The default announcer: the line on stderr.
fn to_stderr(announcement: &Announcement) {
    let _ = writeln!(std::io::stderr().lock(), "{}", announcement.line());
}

/// Delivers into one downloads directory.
#[derive(Clone)]
pub struct TerminalChannel {
    dir: PathBuf,
    announce: Announce,
}

impl TerminalChannel {
    /// Delivers into `dir` (made, 0700, at the first delivery), announcing on stderr.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            announce: Arc::new(to_stderr),
        }
    }

    /// Announces deliveries with `announce` instead (a chat front door printing between
    /// its own lines).
    pub fn announce_with(mut self, announce: Announce) -> Self {
        self.announce = announce;
        self
    }

    /// The downloads directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl fmt::Debug for TerminalChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerminalChannel")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Channel for TerminalChannel {
    fn name(&self) -> &str {
        TERMINAL
    }

    async fn deliver(&self, delivery: &Delivery) -> Result<Delivered, ChannelError> {
        let dir = self.dir.clone();
        let owned = delivery.clone();
        let saved = tokio::task::spawn_blocking(move || downloads::save(&dir, &owned))
            .await
            .map_err(|e| ChannelError::io("save into", &self.dir, std::io::Error::other(e)))??;
        if saved.repeated {
            tracing::info!(run = %delivery.run_id(), call = delivery.call_id(), path = %saved.path.display(), "already delivered by an earlier attempt; not copied again");
        } else {
            (self.announce)(&Announcement {
                path: saved.path.clone(),
                bytes: delivery.len(),
                kind: delivery.kind(),
                caption: delivery.caption().map(str::to_owned),
            });
        }
        let file = saved
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Delivered {
            receipt: saved.path.display().to_string(),
            summary: format!("saved as `{file}` in the person's downloads folder"),
            repeated: saved.repeated,
        })
    }
}

/// Terminal channels under one downloads root (`TOREN_DOWNLOADS`): a run bound to
/// `terminal` at address `NAME` delivers into `root/NAME` (a session's name), at the empty
/// address into `root/<run id>`.
#[derive(Clone)]
pub struct TerminalChannels {
    root: PathBuf,
    announce: Announce,
}

impl TerminalChannels {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            announce: Arc::new(to_stderr),
        }
    }

    /// Announces deliveries with `announce` instead of a line on stderr.
    pub fn announce_with(mut self, announce: Announce) -> Self {
        self.announce = announce;
        self
    }

    /// The downloads directory of `run` bound at `address`.
    pub fn dir(&self, run: &RunId, address: &str) -> Result<PathBuf, ChannelError> {
        let bad = |why| ChannelError::BadAddress {
            kind: TERMINAL.to_owned(),
            address: address.to_owned(),
            why,
        };
        if address.is_empty() {
            return Ok(self.root.join(run.as_str()));
        }
        if address == "." || address == ".." || address.contains(['/', '\0']) {
            return Err(bad("it must be one directory name"));
        }
        if address.chars().any(toren_display::is_hidden) {
            return Err(bad("it holds control or invisible characters"));
        }
        Ok(self.root.join(address))
    }
}

impl fmt::Debug for TerminalChannels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerminalChannels")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ChannelFactory for TerminalChannels {
    fn channel(
        &self,
        run: &RunId,
        binding: &ChannelBinding,
    ) -> Result<Arc<dyn Channel>, ChannelError> {
        if binding.kind != TERMINAL {
            return Err(ChannelError::Unavailable {
                kind: binding.kind.clone(),
            });
        }
        let dir = self.dir(run, &binding.address)?;
        Ok(Arc::new(TerminalChannel {
            dir,
            announce: Arc::clone(&self.announce),
        }))
    }
}

/// A size as people read it: `512 bytes`, `12.1 KiB`, `3.4 MiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(0), "0 bytes");
        assert_eq!(size(1023), "1023 bytes");
        assert_eq!(size(1024), "1.0 KiB");
        assert_eq!(size(12_390), "12.1 KiB");
        assert_eq!(size(3 * 1024 * 1024 + 400 * 1024), "3.4 MiB");
        assert_eq!(size(5 * 1024 * 1024 * 1024 * 1024), "5120.0 GiB");
    }
}

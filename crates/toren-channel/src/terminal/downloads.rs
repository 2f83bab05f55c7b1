//! Saving a delivery into a downloads directory: never overwriting (a numbered name
//! instead: `report.pdf`, `report-1.pdf`, …), the directory made 0700 and every file 0600,
//! and a call delivered before recognised so that it is not copied again.
//!
//! The file is written whole to a temporary name first, then hard-linked to its public
//! name (a link fails rather than replace an existing file), then recorded in the
//! directory's ledger (`.toren-deliveries.jsonl`, one line per delivery keyed by run and
//! call id), and only then is the temporary name removed. A process killed at any point
//! leaves a state the next attempt of the same call completes without a second copy: a
//! ledger line means delivered; a complete temporary file means written, and if it is
//! already linked under a public name (the same inode) that name is the delivery.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{ChannelError, Delivery};

/// The ledger of a downloads directory.
const LEDGER: &str = ".toren-deliveries.jsonl";

/// The longest file name kept, in bytes (names are cut, keeping the extension).
const MAX_NAME: usize = 200;

/// How many numbered names are tried before giving up.
const MAX_NUMBER: u32 = 100_000;

/// Where a delivery was saved.
#[derive(Debug)]
pub(super) struct Saved {
    pub(super) path: PathBuf,
    /// Saved by an earlier attempt of the same call; nothing was copied now.
    pub(super) repeated: bool,
}

/// One line of the ledger.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    run: String,
    call: String,
    /// The file's name in the directory.
    file: String,
    bytes: u64,
    sha256: String,
}

/// Saves `delivery` into `dir`, or finds where an earlier attempt of its call saved it.
pub(super) fn save(dir: &Path, delivery: &Delivery) -> Result<Saved, ChannelError> {
    make_dir(dir)?;
    let run = delivery.run_id().as_str();
    let call = delivery.call_id();
    let temp = dir.join(temp_name(run, call));
    if let Some(entry) = find(dir, run, call)? {
        remove_quietly(&temp);
        return Ok(Saved {
            path: dir.join(entry.file),
            repeated: true,
        });
    }
    // A complete temporary file already linked under a public name: delivered, but killed
    // before the ledger line was written.
    if let Some(name) = linked_name(dir, &temp, delivery)? {
        record(dir, delivery, &name)?;
        remove_quietly(&temp);
        return Ok(Saved {
            path: dir.join(name),
            repeated: true,
        });
    }
    write_new(&temp, delivery.bytes())?;
    let name = link_numbered(dir, &temp, &safe_name(delivery.name()))?;
    sync_dir(dir)?;
    record(dir, delivery, &name)?;
    remove_quietly(&temp);
    Ok(Saved {
        path: dir.join(name),
        repeated: false,
    })
}

/// Makes `dir` (0700) and its parent if missing; an existing one is kept as it is.
fn make_dir(dir: &Path) -> Result<(), ChannelError> {
    if let Some(parent) = dir.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| ChannelError::io("create the downloads directory", parent, e))?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(ChannelError::io("create the downloads directory", dir, e))
        }
        _ if !dir.is_dir() => Err(ChannelError::io(
            "use the downloads directory",
            dir,
            io::Error::new(io::ErrorKind::NotADirectory, "it is not a directory"),
        )),
        _ => Ok(()),
    }
}

/// The temporary name of the call's file: hidden, and from a hash so that no id can make
/// it a path.
fn temp_name(run: &str, call: &str) -> String {
    let key = Sha256::digest(format!("{run}\0{call}").as_bytes());
    format!(".toren-{}.part", &hex::encode(key)[..32])
}

/// The ledger line of `run`'s `call`, if it was delivered here.
fn find(dir: &Path, run: &str, call: &str) -> Result<Option<Entry>, ChannelError> {
    let path = dir.join(LEDGER);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ChannelError::io("read the ledger", path, e)),
    };
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| ChannelError::io("read the ledger", &path, e))?;
        // A line cut short by a crash never counted: its delivery is found again by its
        // temporary file, or made again.
        match serde_json::from_str::<Entry>(&line) {
            Ok(entry) if entry.run == run && entry.call == call => return Ok(Some(entry)),
            _ => {}
        }
    }
    Ok(None)
}

/// The public name already linked to a complete `temp` holding `delivery`'s bytes.
fn linked_name(
    dir: &Path,
    temp: &Path,
    delivery: &Delivery,
) -> Result<Option<String>, ChannelError> {
    let Ok(meta) = fs::symlink_metadata(temp) else {
        return Ok(None);
    };
    if !meta.is_file() || meta.nlink() < 2 || meta.len() != delivery.len() {
        return Ok(None);
    }
    let complete = fs::read(temp)
        .map(|bytes| bytes == delivery.bytes())
        .map_err(|e| ChannelError::io("read", temp, e))?;
    if !complete {
        return Ok(None);
    }
    let entries = fs::read_dir(dir).map_err(|e| ChannelError::io("list", dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let same = entry
            .metadata()
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        if same && entry.path() != temp {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Writes `bytes` to `path` (0600), replacing an incomplete earlier attempt, and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ChannelError> {
    remove_quietly(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| ChannelError::io("write", path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ChannelError::io("write", path, e))
}

/// Links `temp` under `name`, or the first free numbered name (`name-1.ext`, …): a link
/// never replaces an existing file. Where links are not supported (some removable
/// drives), the bytes are copied into a file created only if the name is free.
fn link_numbered(dir: &Path, temp: &Path, name: &str) -> Result<String, ChannelError> {
    for n in 0..MAX_NUMBER {
        let candidate = numbered(name, n);
        let target = dir.join(&candidate);
        match fs::hard_link(temp, &target) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) if links_unsupported(&e) => match copy_new(temp, &target) {
                Ok(()) => return Ok(candidate),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(ChannelError::io("write", target, e)),
            },
            Err(e) => return Err(ChannelError::io("write", target, e)),
        }
    }
    Err(ChannelError::io(
        "find a free name in",
        dir,
        io::Error::other(format!("{MAX_NUMBER} files named like `{name}` exist")),
    ))
}

fn links_unsupported(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Unsupported
            | io::ErrorKind::PermissionDenied
            | io::ErrorKind::CrossesDevices
    )
}

fn copy_new(from: &Path, to: &Path) -> io::Result<()> {
    let bytes = fs::read(from)?;
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    file.write_all(&bytes)?;
    file.sync_all()
}

/// Appends the ledger line of `delivery`, saved as `name`, and syncs it.
fn record(dir: &Path, delivery: &Delivery, name: &str) -> Result<(), ChannelError> {
    let path = dir.join(LEDGER);
    let entry = Entry {
        run: delivery.run_id().to_string(),
        call: delivery.call_id().to_owned(),
        file: name.to_owned(),
        bytes: delivery.len(),
        sha256: delivery.sha256().to_owned(),
    };
    let mut line = serde_json::to_string(&entry)
        .map_err(|e| ChannelError::io("write the ledger", &path, io::Error::other(e)))?;
    line.push('\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| ChannelError::io("write the ledger", &path, e))?;
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ChannelError::io("write the ledger", &path, e))
}

fn sync_dir(dir: &Path) -> Result<(), ChannelError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ChannelError::io("sync", dir, e))
}

fn remove_quietly(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), "could not remove a temporary file: {e}");
    }
}

/// A name safe to create in the directory: controls and invisible characters become `_`,
/// leading dots are dropped (no hidden files, nothing like the ledger's own names), and a
/// long name is cut to [`MAX_NAME`] bytes, keeping its extension.
pub(super) fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() || toren_display::is_hidden(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    let trimmed = cleaned.trim_start_matches('.').trim();
    if trimmed.is_empty() {
        return "file".to_owned();
    }
    if trimmed.len() <= MAX_NAME {
        return trimmed.to_owned();
    }
    let (stem, ext) = split_extension(trimmed);
    let ext = if ext.len() > 20 { "" } else { ext };
    let mut cut = MAX_NAME.saturating_sub(ext.len());
    while !stem.is_char_boundary(cut.min(stem.len())) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut.min(stem.len())])
}

/// `name` numbered `n`: `report.pdf`, `report-1.pdf`, `report-2.pdf`, …
pub(super) fn numbered(name: &str, n: u32) -> String {
    if n == 0 {
        return name.to_owned();
    }
    let (stem, ext) = split_extension(name);
    format!("{stem}-{n}{ext}")
}

/// `report.pdf` → (`report`, `.pdf`); `notes` → (`notes`, ``).
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot) if dot > 0 => name.split_at(dot),
        _ => (name, ""),
    }
}

#[cfg(test)]
mod tests {
    use toren_protocol::RunId;

    use super::{LEDGER, numbered, safe_name, save, temp_name};
    use crate::Delivery;

    /// Killed after the file was linked under its name, before the ledger line: the next
    /// attempt finds the link by its inode and records it instead of copying again.
    #[test]
    fn a_delivery_killed_before_its_ledger_line_is_found_again() {
        let dir = tempfile::tempdir().unwrap();
        let delivery = Delivery::new(RunId::new(), "c1", "out.csv", b"a,b\n".to_vec(), None);
        let temp = dir.path().join(temp_name(delivery.run_id().as_str(), "c1"));
        std::fs::write(&temp, delivery.bytes()).unwrap();
        std::fs::hard_link(&temp, dir.path().join("out.csv")).unwrap();

        let saved = save(dir.path(), &delivery).unwrap();
        assert_eq!(saved.path, dir.path().join("out.csv"));
        assert!(saved.repeated);
        assert!(!temp.exists());
        let ledger = std::fs::read_to_string(dir.path().join(LEDGER)).unwrap();
        assert!(ledger.contains("\"file\":\"out.csv\""), "{ledger}");
        // And from now on the ledger answers.
        assert!(save(dir.path(), &delivery).unwrap().repeated);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// Killed while writing the temporary file: it is written again and delivered once.
    #[test]
    fn a_delivery_killed_while_writing_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let delivery = Delivery::new(RunId::new(), "c1", "out.csv", b"a,b\n".to_vec(), None);
        let temp = dir.path().join(temp_name(delivery.run_id().as_str(), "c1"));
        std::fs::write(&temp, b"a,").unwrap();

        let saved = save(dir.path(), &delivery).unwrap();
        assert_eq!(saved.path, dir.path().join("out.csv"));
        assert!(!saved.repeated);
        assert_eq!(std::fs::read(&saved.path).unwrap(), b"a,b\n");
        assert!(!temp.exists());
    }

    #[test]
    fn numbered_names_keep_the_extension() {
        assert_eq!(numbered("report.pdf", 0), "report.pdf");
        assert_eq!(numbered("report.pdf", 1), "report-1.pdf");
        assert_eq!(numbered("report.pdf", 12), "report-12.pdf");
        assert_eq!(numbered("notes", 2), "notes-2");
        assert_eq!(numbered("archive.tar.gz", 1), "archive.tar-1.gz");
    }

    #[test]
    fn names_are_made_safe() {
        assert_eq!(safe_name("report.pdf"), "report.pdf");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(
            safe_name(".toren-deliveries.jsonl"),
            "toren-deliveries.jsonl"
        );
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name(""), "file");
        assert_eq!(safe_name("a\u{1b}[31mb\n.txt"), "a_[31mb_.txt");
        assert_eq!(safe_name("evil\u{202e}fdp.exe"), "evil_fdp.exe");
        let long = format!("{}.pdf", "é".repeat(300));
        let safe = safe_name(&long);
        assert!(safe.len() <= 200, "{}", safe.len());
        assert!(safe.ends_with("é.pdf"), "{safe}");
    }
}

//! Where a workspace lives on the host, and the private directory around it.
//!
//! A run's workspace is `<sandbox root>/<name>/workspace` ([`workspace_path`]). The
//! directory `<sandbox root>/<name>` is the run's *private directory*: mode 0700, owned by
//! the user running Toren, and never mounted into a sandbox. The sandbox sees only the
//! inner `workspace`, so whatever the agent does to it — `chmod 777 /workspace`, set-uid
//! programs, world-writable files — other local users cannot get past the private
//! directory to reach it, whatever the sandbox root's own mode. Mounting the workspace
//! directory itself cannot give that: the agent runs as Toren's user and can chmod the
//! mount point; the private directory it cannot even name.
//!
//! The private directory is opened without following symlinks and checked to be a
//! directory owned by Toren's user (so another user cannot plant a directory or a link
//! there in a shared sandbox root), then tightened to 0700. Every step works on open
//! descriptors, whenever a workspace is created or opened (by name or by its exact path).
//! Workspaces made before this layout (`<sandbox root>/<name>` itself) still open: with
//! their exact path ([`open_path`](super::Workspace::open_path)), and by name when the
//! directory holds anything but a `workspace` directory.

use std::fs::DirBuilder;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::error::{Error, Result};

/// The name of the workspace directory inside a run's private directory.
pub const WORKSPACE_DIR: &str = "workspace";

/// The private directory's mode: only its owner may enter.
const PRIVATE_MODE: u32 = 0o700;

/// The host path of the workspace `name` under the sandbox root `root`.
pub fn workspace_path(root: &Path, name: &str) -> PathBuf {
    root.join(name).join(WORKSPACE_DIR)
}

/// Whether to make what is missing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Missing {
    Create,
    Fail,
}

/// Finds (making it with [`Missing::Create`]) the workspace `name` under `root`: its host
/// path and its directory, opened.
pub(super) fn locate(root: &Path, name: &str, missing: Missing) -> Result<(PathBuf, Dir)> {
    let private_path = root.join(name);
    if missing == Missing::Create {
        DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_MODE)
            .create(root)
            .map_err(|e| {
                Error::io(
                    format!("cannot create the sandbox root `{}`", root.display()),
                    e,
                )
            })?;
    }
    let root_dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::WorkspaceMissing {
                path: workspace_path(root, name).display().to_string(),
            }
        } else {
            Error::io(
                format!("cannot open the sandbox root `{}`", root.display()),
                e,
            )
        }
    })?;
    if missing == Missing::Create {
        make_dir(&root_dir, Path::new(name), &private_path)?;
    }
    let private = open_dir(&root_dir, Path::new(name), &private_path, root, name)?;
    make_private(&private, &private_path)?;
    if !holds_only_workspace(&private, &private_path)? {
        // A workspace of the flat layout: the directory itself is the workspace.
        tracing::warn!(
            path = %private_path.display(),
            "opening a workspace made by an earlier version (no private directory around it)"
        );
        return Ok((private_path, private));
    }
    let path = private_path.join(WORKSPACE_DIR);
    if missing == Missing::Create {
        make_dir(&private, Path::new(WORKSPACE_DIR), &path)?;
    }
    // Its owner and mode are left alone: an operator may hand a workspace to another user
    // (the docker backend then runs commands as that user).
    let workspace = open_dir(&private, Path::new(WORKSPACE_DIR), &path, root, name)?;
    Ok((path, workspace))
}

/// Opens the workspace at exactly `path`. When it is a workspace of this layout (named
/// [`WORKSPACE_DIR`]; a flat one is named after its run), its private directory is checked
/// and tightened as [`locate`] does.
pub(super) fn open_exact(path: &Path) -> Result<Dir> {
    let missing = || Error::WorkspaceMissing {
        path: path.display().to_string(),
    };
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let (Some(parent), Some(name)) = (parent, path.file_name())
        && name == WORKSPACE_DIR
    {
        let (Some(root), Some(run)) = (parent.parent(), parent.file_name()) else {
            return Err(missing());
        };
        let root_dir =
            Dir::open_ambient_dir(root, cap_std::ambient_authority()).map_err(|_| missing())?;
        let run = run.to_string_lossy();
        let private = open_dir(&root_dir, Path::new(run.as_ref()), parent, root, &run)?;
        make_private(&private, parent)?;
        return open_dir(&private, Path::new(WORKSPACE_DIR), path, root, &run).map_err(
            |e| match e {
                Error::WorkspaceMissing { .. } => missing(),
                other => other,
            },
        );
    }
    // The one use of ambient authority for a flat workspace: its host path, which the
    // runtime chose, becomes the capability every later access goes through.
    Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            missing()
        } else {
            Error::io(format!("cannot open the workspace `{}`", path.display()), e)
        }
    })
}

/// `mkdirat(parent, name, 0700)`; an existing entry is left for [`open_dir`] to check.
fn make_dir(parent: &Dir, name: &Path, shown: &Path) -> Result<()> {
    let mut builder = cap_std::fs::DirBuilder::new();
    cap_std::fs::DirBuilderExt::mode(&mut builder, PRIVATE_MODE);
    match parent.create_dir_with(name, &builder) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(
            format!("cannot create the workspace `{}`", shown.display()),
            e,
        )),
    }
}

/// Opens `parent/name` as a directory without following a symlink.
fn open_dir(parent: &Dir, name: &Path, shown: &Path, root: &Path, run: &str) -> Result<Dir> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits());
    let file = parent
        .open_with(name, &options)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => Error::WorkspaceMissing {
                path: workspace_path(root, run).display().to_string(),
            },
            _ => Error::io(
                format!(
                    "cannot open the workspace `{}` (it must be a directory, not a symlink)",
                    shown.display()
                ),
                e,
            ),
        })?;
    Ok(Dir::from_std_file(file.into_std()))
}

/// Checks that Toren's user owns `dir`, and makes it mode 0700.
fn make_private(dir: &Dir, shown: &Path) -> Result<()> {
    let meta = dir.dir_metadata().map_err(|e| {
        Error::io(
            format!("cannot inspect the workspace `{}`", shown.display()),
            e,
        )
    })?;
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(Error::ForeignWorkspace {
            path: shown.display().to_string(),
            owner: meta.uid(),
            uid,
        });
    }
    if meta.mode() & 0o7777 != PRIVATE_MODE {
        nix::sys::stat::fchmod(dir.as_fd(), Mode::from_bits_truncate(PRIVATE_MODE)).map_err(
            |e| {
                Error::io(
                    format!("cannot make `{}` private (mode 0700)", shown.display()),
                    e.into(),
                )
            },
        )?;
    }
    Ok(())
}

/// Whether `private` is a private directory of this layout: empty, or holding only the
/// `workspace` directory.
fn holds_only_workspace(private: &Dir, shown: &Path) -> Result<bool> {
    let entries = private.entries().map_err(|e| {
        Error::io(
            format!("cannot list the workspace `{}`", shown.display()),
            e,
        )
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| {
            Error::io(
                format!("cannot list the workspace `{}`", shown.display()),
                e,
            )
        })?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if entry.file_name() != WORKSPACE_DIR || !is_dir {
            return Ok(false);
        }
    }
    Ok(true)
}

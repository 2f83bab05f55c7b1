//! Keeping inherited descriptors away from commands: at startup every descriptor above the
//! standard three is marked close-on-exec. The helper still uses the ones it adopted (the
//! local backend's cgroup directories); no command it starts inherits any of them.

use std::os::fd::{BorrowedFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};

/// Marks every open descriptor from 3 up close-on-exec (as listed in `/proc/self/fd`;
/// where that cannot be read, nothing is done: a container's helper inherits none).
#[expect(
    unsafe_code,
    reason = "descriptors known only by number must be borrowed unsafely"
)]
pub fn close_inherited_on_exec() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<RawFd> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: the descriptor is only borrowed for one fcntl call; one that was closed
        // meanwhile (the directory listing's own) fails with EBADF, which is ignored.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
}

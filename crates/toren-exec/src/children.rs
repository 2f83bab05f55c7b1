//! The helper's children: spawning a command as the leader of its own process group,
//! delivering its exit status, killing its group, and reaping every other process that ends
//! up as our child. As a container's PID 1 the helper inherits every orphan in the
//! container; elsewhere it makes itself a child subreaper to get the same.
//!
//! One thread reaps for everyone. It looks at an exited child without reaping it
//! (`waitid(WNOWAIT)`), takes the table's lock, kills what is left of a command's group
//! while the leader's pid still pins the group id, and only then reaps. Spawning happens
//! under the same lock, so a child is always in the table before the reaper can see it
//! exit, and the standard library's own wait on a child whose exec failed never races the
//! reaper.

use std::collections::HashMap;
use std::io;
use std::process::Command;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;

use crate::serve::diag;

/// How a command's leader ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
}

/// The running commands, by leader pid.
#[derive(Debug, Default)]
pub(crate) struct Children {
    table: Mutex<Table>,
    spawned: Condvar,
}

#[derive(Debug, Default)]
struct Table {
    waiting: HashMap<i32, Sender<Exit>>,
    /// Counts spawns, so the reaper never sleeps through one.
    generation: u64,
}

impl Children {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Spawns `command` (which must make itself a process group leader) and returns its
    /// pid and where its exit will be reported.
    pub(crate) fn spawn(&self, command: &mut Command) -> io::Result<(Pid, Receiver<Exit>)> {
        let mut table = self.lock();
        let child = command.spawn()?;
        let pid = i32::try_from(child.id()).map_err(io::Error::other)?;
        // The reaper waits for it; dropping the handle neither waits nor kills.
        drop(child);
        let (sender, receiver) = mpsc::channel();
        table.waiting.insert(pid, sender);
        table.generation += 1;
        self.spawned.notify_all();
        Ok((Pid::from_raw(pid), receiver))
    }

    /// SIGKILL to the group `leader` leads, if the leader has not been reaped yet (so the
    /// group id cannot have been reused). Repeated briefly: a member may be forking.
    pub(crate) fn kill_group(&self, leader: Pid) {
        let table = self.lock();
        if table.waiting.contains_key(&leader.as_raw()) {
            for _ in 0..3 {
                if killpg(leader, Signal::SIGKILL).is_err() {
                    break;
                }
            }
        }
    }

    /// Kills every running command's group (the helper is going away).
    pub(crate) fn kill_all(&self) {
        let table = self.lock();
        for pid in table.waiting.keys() {
            let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
        }
    }

    /// As PID 1 with no command running: kills every other process in the container —
    /// what a finished command left behind outside its group (`setsid`, double forks).
    /// Returns whether it swept. Never called elsewhere: `kill(-1)` outside a pid
    /// namespace would reach the whole machine.
    pub(crate) fn sweep_if_idle(&self) -> bool {
        if std::process::id() != 1 {
            return false;
        }
        // Each round holds the lock (no command can start meanwhile) and lets go between
        // rounds so the reaper can take the zombies, which `kill` still counts. ESRCH means
        // nothing is left; more rounds catch processes that were forking.
        for round in 0..100 {
            let table = self.lock();
            if !table.waiting.is_empty() {
                return round > 0;
            }
            if kill(Pid::from_raw(-1), Signal::SIGKILL) == Err(Errno::ESRCH) {
                return true;
            }
            drop(table);
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Reaps forever; run on a thread of its own.
    pub(crate) fn reap(&self) {
        loop {
            let generation = self.lock().generation;
            match waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
                Ok(status) => {
                    if let Some(pid) = status.pid() {
                        self.reap_one(pid);
                    }
                }
                Err(Errno::ECHILD) => {
                    // No children: sleep until the next spawn.
                    let table = self.lock();
                    if table.generation == generation {
                        let _unused = self
                            .spawned
                            .wait_timeout(table, Duration::from_secs(1))
                            .unwrap_or_else(PoisonError::into_inner);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(err) => {
                    diag(format_args!("waitid failed: {err}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    fn reap_one(&self, pid: Pid) {
        let mut table = self.lock();
        let Some(sender) = table.waiting.remove(&pid.as_raw()) else {
            // An orphan, or a child whose failed exec the standard library already reaped.
            let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
            return;
        };
        // The leader is a zombie, so its pid still names its group: kill what it left
        // running (background jobs), as the end of a sandboxed command does.
        let _ = killpg(pid, Signal::SIGKILL);
        let exit = match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => Exit::Code(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => Exit::Signal(signal as i32),
            Ok(other) => {
                diag(format_args!("unexpected wait status {other:?}"));
                Exit::Signal(Signal::SIGKILL as i32)
            }
            Err(err) => {
                diag(format_args!("cannot reap {pid}: {err}"));
                Exit::Signal(Signal::SIGKILL as i32)
            }
        };
        drop(table);
        let _ = sender.send(exit);
    }
}

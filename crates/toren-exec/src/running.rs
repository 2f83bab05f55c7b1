//! The commands the helper runs, by request id, so that a [`Cancel`] finds its command.
//! `serve` registers each request as it reads it, before the command's thread starts, so
//! a cancel that follows the request on the input always finds it — even before its
//! process exists, in which case the process is killed the moment it is spawned.
//!
//! [`Cancel`]: crate::protocol::Cancel

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::unistd::Pid;

use crate::children::Children;

/// The running requests.
#[derive(Debug, Default)]
pub(crate) struct Running {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One request's command: its process group leader once spawned, and whether it was
/// cancelled.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    state: Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    leader: Option<Pid>,
    cancelled: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Running {
    /// Registers the request `id` as it is read.
    pub(crate) fn register(&self, id: &str) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        lock(&self.slots).insert(id.to_owned(), Arc::clone(&slot));
        slot
    }

    /// Kills the process group of request `id`, now or as soon as it is spawned. An id
    /// that is not running (answered already, or never sent) is ignored.
    pub(crate) fn cancel(&self, id: &str, children: &Children) {
        let Some(slot) = lock(&self.slots).get(id).cloned() else {
            return;
        };
        let mut state = lock(&slot.state);
        state.cancelled = true;
        if let Some(leader) = state.leader {
            children.kill_group(leader);
        }
    }

    /// Forgets request `id` once it was answered (unless a later request took the id).
    pub(crate) fn finish(&self, id: &str, slot: &Arc<Slot>) {
        let mut slots = lock(&self.slots);
        if slots.get(id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(id);
        }
    }
}

impl Slot {
    /// Records the command's process group leader, right after it was spawned; kills the
    /// group at once if the request was cancelled in the meantime.
    pub(crate) fn started(&self, leader: Pid, children: &Children) {
        let mut state = lock(&self.state);
        state.leader = Some(leader);
        if state.cancelled {
            children.kill_group(leader);
        }
    }
}

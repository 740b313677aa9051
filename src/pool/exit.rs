//! Thread-exit hooks: an exiting thread hands its stashed objects to the
//! overflow of each pool it used.
//!
//! Without this, objects in the stash of an exited thread would wait for the
//! next thread that is given the exited thread's id (thread ids are reused,
//! `per_thread::thread_id`), or for two sweeps to drop them. With it, a value put on a thread
//! that was then joined can be got on any other thread at once, as in Go.
//!
//! The hooks also end this thread's claim on its stashes as the thread
//! itself sees it (`owner.rs`): its owner token and stash cache, which must
//! not outlive its thread id.
//!
//! Each hook holds its pool's shared state strongly, so the stash it points
//! to stays valid; a hook whose pool has dropped does nothing and is pruned
//! when the thread registers more hooks, so a long-lived thread that uses
//! many short-lived pools keeps a bounded list.

use std::cell::RefCell;

use crate::pool::owner;
use crate::pool::shared::Shared;
use crate::pool::stash::Stash;
use crate::sync::{thread_local, Arc};

/// A pool's side of a hook, with its element type erased.
trait Flush {
    /// Moves this thread's stashed objects to the pool's overflow.
    fn flush(&self);
    fn is_closed(&self) -> bool;
    /// Whether this thread still owns the stash (holds its id).
    fn still_owned(&self) -> bool;
}

struct Hook<T: Send> {
    shared: Arc<Shared<T>>,
    /// This thread's stash in `shared`.
    stash: *const Stash<T>,
}

impl<T: Send> Flush for Hook<T> {
    fn flush(&self) {
        // SAFETY: a stash lives in its own allocation (`StashBox`), freed
        // only when its pool's shared state drops (`PerThread` keeps every
        // thread's value until then), and `self.shared` keeps that alive.
        // The pointer is the allocation's own (`StashBox::as_ptr`).
        self.shared.flush(unsafe { &*self.stash });
    }

    fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    fn still_owned(&self) -> bool {
        self.shared.owns(self.stash)
    }
}

#[derive(Default)]
struct Hooks {
    hooks: RefCell<Vec<Box<dyn Flush>>>,
    /// Under loom: this thread's model id, given back once the hooks have
    /// run (`sync::ThreadSlot`), the order the real id guard keeps.
    #[cfg(stashpool_loom)]
    slot: RefCell<Option<crate::sync::ThreadSlot>>,
}

impl Drop for Hooks {
    fn drop(&mut self) {
        // From here on this thread makes no new stashes, and guards dropped
        // on it look their stash up. Hooks are registered after the thread's
        // id (whose release ends the thread's claim on its stashes), so where
        // `SHORTCUTS` holds they are destroyed before it (module docs); the
        // owner token and the stash cache rely on that, and debug builds
        // check it.
        owner::end();
        if owner::SHORTCUTS {
            for hook in self.hooks.get_mut().iter() {
                debug_assert!(
                    hook.is_closed() || hook.still_owned(),
                    "stashpool: a thread gave up its thread id before its exit hooks ran"
                );
            }
        }
        // Flushing runs no user code (objects move, none drop), so nothing
        // here can re-enter this thread's hooks.
        for hook in self.hooks.get_mut().drain(..) {
            hook.flush();
        }
        #[cfg(stashpool_loom)]
        if let Some(slot) = self.slot.get_mut().take() {
            slot.release();
        }
    }
}

thread_local! {
    static HOOKS: Hooks = Hooks::default();
}

/// Flushes `stash` into `shared`'s overflow when this thread exits.
pub(crate) fn register<T: Send + 'static>(shared: Arc<Shared<T>>, stash: *const Stash<T>) {
    let hook = Box::new(Hook { shared, stash });
    // Fails only while this thread's thread-locals are being destroyed; the
    // stash is then simply left for sweeps.
    let _ = HOOKS.try_with(|all| {
        #[cfg(stashpool_loom)]
        if all.slot.borrow().is_none() {
            *all.slot.borrow_mut() = crate::sync::ThreadSlot::this_thread();
        }
        let mut hooks = all.hooks.borrow_mut();
        // Prune hooks of dropped pools whenever the list doubles, keeping
        // the amortised cost constant and the list as long as the live ones.
        if hooks.len() >= 8 && hooks.len().is_power_of_two() {
            hooks.retain(|hook| !hook.is_closed());
        }
        hooks.push(hook);
        owner::begin();
    });
}

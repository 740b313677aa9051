//! Thread-exit hooks: an exiting thread ends its claim on its stashes
//! (`owner::end`), then hands each pool it used its stashed objects and its
//! slot, so that a value put on a thread that was joined can be got on any
//! other thread at once, as in Go.
//!
//! The hooks run before the thread gives its id back (where
//! `owner::SHORTCUTS` holds), and the late exit (`late`) runs them for a
//! thread that first uses a pool after its thread-local destructors ran:
//! [`implementation`](crate::implementation), section 6.
//!
//! Each hook holds its pool's shared state strongly, so the stash it points
//! to stays valid; a hook whose pool has dropped does nothing and is pruned
//! when the thread registers more hooks, so a long-lived thread that uses
//! many short-lived pools keeps a bounded list.

use std::cell::RefCell;

use crate::pool::owner;
use crate::sync::thread_local;

/// A pool's side of a hook, with its element type erased (`shared.rs`).
pub(crate) trait Flush {
    /// Moves this thread's stashed objects to the pool's overflow.
    fn flush(&self);
    fn is_closed(&self) -> bool;
    /// Whether this thread still owns the stash (holds its id).
    fn still_owned(&self) -> bool;
}

#[derive(Default)]
struct Hooks {
    hooks: RefCell<Vec<Box<dyn Flush>>>,
    /// Under loom: this thread's model id, given back once the hooks have
    /// run (`sync::ThreadSlot`), the order the real id guard keeps.
    #[cfg(stashpool_loom)]
    slot: RefCell<Option<crate::sync::ThreadSlot>>,
}

impl Hooks {
    /// Runs and forgets every hook: the thread is exiting.
    fn run(&self) {
        // First: from here on this thread makes no new stashes, and its
        // gets and returns look their stash up. That this runs before the
        // thread's id goes back (where `SHORTCUTS` holds) is what the owner
        // token and the stash cache rest on (`implementation`, section 6);
        // debug builds check it below.
        owner::end();
        // Taken out whole, so the list's memory goes too (the late exit
        // runs where this thread-local's own destructor never will).
        let hooks = std::mem::take(&mut *self.hooks.borrow_mut());
        if owner::SHORTCUTS {
            for hook in &hooks {
                debug_assert!(
                    hook.is_closed() || hook.still_owned(),
                    "stashpool: a thread gave up its thread id before its exit hooks ran"
                );
            }
        }
        // Flushing runs no user code (objects move, none drop), so nothing
        // here can re-enter this thread's hooks.
        for hook in hooks {
            hook.flush();
        }
        #[cfg(stashpool_loom)]
        if let Some(slot) = self.slot.borrow_mut().take() {
            slot.release();
        }
    }
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.run();
    }
}

thread_local! {
    static HOOKS: Hooks = Hooks::default();
}

/// Runs `hook` when this thread exits.
pub(crate) fn register(hook: Box<dyn Flush>) {
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

/// Makes sure what this thread leaves behind (its exit hooks, its thread
/// id) is dealt with even where its thread-local destructors have already
/// run (`late`); called when the thread takes a thread id for a stash.
pub(crate) fn arm() {
    late::arm();
}

/// The late exit, for a thread whose first use of a pool comes after its
/// thread-local destructors ran (`implementation`, section 6, rule 3): a
/// pthread key of stashpool's own, set when a thread takes its id for a
/// stash (`arm`), whose destructor runs the thread's hooks and then gives
/// its id back. A thread whose ordinary teardown did both finds nothing
/// left to do there.
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
mod late {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The key, plus one; 0 until made. Not a `OnceLock` (`implementation`,
    /// section 7a): racing threads each make one and the losers delete
    /// theirs.
    static KEY: AtomicUsize = AtomicUsize::new(0);

    fn key() -> Option<libc::pthread_key_t> {
        let known = KEY.load(Ordering::Acquire);
        if known != 0 {
            return libc::pthread_key_t::try_from(known - 1).ok();
        }
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is a valid place for the new key; `run` is an
        // `extern "C"` function that lives as long as the process.
        if unsafe { libc::pthread_key_create(&mut key, Some(run)) } != 0 {
            return None; // Out of keys: the ordinary teardown still works.
        }
        let new = usize::try_from(key).ok()?.checked_add(1)?;
        match KEY.compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(key),
            Err(winner) => {
                // SAFETY: the key was made above and never set by anyone.
                unsafe { libc::pthread_key_delete(key) };
                libc::pthread_key_t::try_from(winner - 1).ok()
            }
        }
    }

    /// Makes the key's destructor run when this thread exits.
    pub(super) fn arm() {
        if let Some(key) = key() {
            // Any non-null value: the destructor only needs to run.
            // SAFETY: `key` is a live key made by `pthread_key_create`.
            unsafe {
                libc::pthread_setspecific(key, std::ptr::NonNull::<u8>::dangling().as_ptr().cast())
            };
        }
    }

    /// The key's destructor: what the thread-local destructors did not do.
    extern "C" fn run(_: *mut libc::c_void) {
        let _ = super::HOOKS.try_with(super::Hooks::run);
        crate::per_thread::give_back_id();
    }
}

/// Elsewhere the late exit is not needed or not available (see above).
#[cfg(not(all(target_os = "linux", not(stashpool_loom))))]
mod late {
    pub(super) fn arm() {}
}

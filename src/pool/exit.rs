//! Thread-exit hooks: an exiting thread hands each pool it used its
//! stashed objects and its slot, so that a value put on a thread that was
//! joined can be got on any other thread at once, as in Go.
//!
//! Each hook holds its pool's shared state strongly, so the stash it points
//! to stays valid; a hook whose pool has dropped does nothing and is pruned
//! when the thread registers more hooks, so a long-lived thread that uses
//! many short-lived pools keeps a bounded list. The late exit (`late`) runs
//! the hooks for a thread that first uses a pool after its thread-local
//! destructors ran: [`implementation`](crate::implementation), section 6.

use std::cell::{Cell, RefCell};

use crate::sync::thread_local;

/// A pool's side of a hook, with its element type erased (`shared.rs`).
pub(crate) trait Flush {
    /// Moves this thread's stashed objects to the pool's overflow and gives
    /// its slot back.
    fn flush(&self);
    fn is_closed(&self) -> bool;
}

#[derive(Default)]
struct Hooks {
    hooks: RefCell<Vec<Box<dyn Flush>>>,
    /// Set when the hooks run: the thread then makes no new stash.
    ran: Cell<bool>,
    /// Under loom: this thread's model id, given back once the hooks have
    /// run (`sync::ThreadSlot`), as the real id guard gives the id back
    /// after them.
    #[cfg(stashpool_loom)]
    slot: RefCell<Option<crate::sync::ThreadSlot>>,
}

impl Hooks {
    /// Runs and forgets every hook: the thread is exiting.
    fn run(&self) {
        self.ran.set(true);
        // Taken out whole, so the list's memory goes too (the late exit
        // runs where this thread-local's own destructor never will).
        let hooks = std::mem::take(&mut *self.hooks.borrow_mut());
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

/// Whether this thread may still make a stash: its exit hooks have not run
/// (nor been destroyed), so a hook registered now will run.
pub(crate) fn alive() -> bool {
    HOOKS.try_with(|all| !all.ran.get()).unwrap_or(false)
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
    });
}

/// In a forked child: this thread's hooks are for its parent's pool state,
/// which the child never touches (`fork.rs`); they are leaked.
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
pub(crate) fn forget() {
    let _ = HOOKS.try_with(|all| std::mem::forget(all.hooks.take()));
}

/// `arm`: makes sure what this thread leaves behind (its exit hooks, its
/// thread id) is dealt with even where its thread-local destructors have
/// already run (`late`); called when the thread takes a thread id for a
/// stash.
pub(crate) use late::arm;

/// The late exit, for a thread whose first use of a pool comes after its
/// thread-local destructors ran (`implementation`, section 6, "Late use"): a
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
    pub(crate) fn arm() {
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
    pub(crate) fn arm() {}
}

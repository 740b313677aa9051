//! Thread-exit hooks: an exiting thread hands its stashed objects to the
//! overflow of each pool it used.
//!
//! Without this, objects in the stash of an exited thread would wait for the
//! next thread that is given the exited thread's id (`thread_local` reuses
//! ids), or for two sweeps to drop them. With it, a value put on a thread
//! that was then joined can be got on any other thread at once, as in Go.
//!
//! The hooks also end the thread's *owner token*, the number by which a
//! guard recognises that it is dropped on the thread that got it and can go
//! straight back to the stash it came from (`node::Home`). A thread is given
//! a token when it registers its first hook, and loses it when its hooks run.
//! That is before the thread releases its `thread_local` id, after which
//! another thread may be given the same stashes: the hooks are registered
//! after the thread took its id (a stash is made through the id first), and
//! where std has native thread-locals their destructors run in the reverse
//! order of registration (the C++ ABI rule that glibc's
//! `__cxa_thread_atexit_impl`, macOS's `_tlv_atexit` and std's own
//! destructor list all follow; a test checks it). Where std falls back to
//! one pthread key per thread-local (Android, OpenBSD, illumos, ...), keys
//! are destroyed in the order they were created in the process, which puts
//! `thread_local`'s id release first; tokens are never given out there
//! (`SHORTCUTS`), and every return looks its stash up. Tokens come from a
//! global counter and are never reused. The per-thread stash cache
//! (`last_stash`) follows the same rule: filled only while the thread has a
//! token, emptied by its hooks.
//!
//! Each hook holds its pool's shared state strongly, so the stash it points
//! to stays valid; a hook whose pool has dropped does nothing and is pruned
//! when the thread registers more hooks, so a long-lived thread that uses
//! many short-lived pools keeps a bounded list.

use std::cell::{Cell, RefCell};

use crate::shared::Shared;
use crate::stash::Stash;
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
}

impl Drop for Hooks {
    fn drop(&mut self) {
        // From here on this thread makes no new stashes, and guards dropped
        // on it look their stash up. Hooks are registered after the thread's
        // id (whose release ends the thread's claim on its stashes), so where
        // `SHORTCUTS` holds they are destroyed before it (module docs); the
        // owner token and the stash cache rely on that, and debug builds
        // check it.
        let _ = EXITING.try_with(|exiting| exiting.set(true));
        let _ = TOKEN.try_with(|token| token.set(0));
        let _ = RECENT.try_with(Recent::forget);
        if SHORTCUTS {
            for hook in self.hooks.get_mut().iter() {
                debug_assert!(
                    hook.is_closed() || hook.still_owned(),
                    "stashpool: a thread gave up its `thread_local` id before its exit hooks ran"
                );
            }
        }
        // Flushing runs no user code (objects move, none drop), so nothing
        // here can re-enter this thread's hooks.
        for hook in self.hooks.get_mut().drain(..) {
            hook.flush();
        }
    }
}

thread_local! {
    static HOOKS: Hooks = Hooks::default();
}

#[cfg(not(loom))]
thread_local! {
    static EXITING: Cell<bool> = const { Cell::new(false) };
}

// loom's `thread_local!` has no `const` form.
#[cfg(loom)]
thread_local! {
    static EXITING: Cell<bool> = Cell::new(false);
}

#[cfg(not(loom))]
thread_local! {
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

#[cfg(loom)]
thread_local! {
    static TOKEN: Cell<u64> = Cell::new(0);
}

/// Whether owner tokens and the stash cache are used: only on targets where
/// std keeps thread-local destructors in a last-in-first-out list (native
/// thread-locals), so that the hooks run before `thread_local` releases the
/// thread's id (module docs). Elsewhere every return and every get looks
/// its stash up in the pool's table, which is always sound.
const SHORTCUTS: bool = cfg!(any(
    target_os = "linux",
    target_vendor = "apple",
    all(windows, target_env = "msvc"),
    target_os = "freebsd",
    target_os = "netbsd",
));

/// The next owner token. Not part of the concurrency protocol (it only has
/// to hand out distinct numbers), so a plain atomic even under loom.
static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// This thread's owner token: nonzero from its first stash's hook until its
/// hooks run at thread exit, and never the same for two threads.
#[inline(always)]
pub(crate) fn token() -> u64 {
    if !SHORTCUTS {
        return 0;
    }
    TOKEN.try_with(Cell::get).unwrap_or(0)
}

/// A stash this thread found: its pool's id and its address.
type Found = (u64, *const ());

const FORGOTTEN: Found = (0, std::ptr::null());

/// The two stashes this thread found last, most recent first.
struct Recent {
    last: Cell<Found>,
    previous: Cell<Found>,
}

impl Recent {
    const fn new() -> Self {
        Self {
            last: Cell::new(FORGOTTEN),
            previous: Cell::new(FORGOTTEN),
        }
    }

    fn forget(&self) {
        self.last.set(FORGOTTEN);
        self.previous.set(FORGOTTEN);
    }
}

#[cfg(not(loom))]
thread_local! {
    static RECENT: Recent = const { Recent::new() };
}

#[cfg(loom)]
thread_local! {
    static RECENT: Recent = Recent::new();
}

/// This thread's stash in the pool with id `pool`, if it is the one this
/// thread found last: a two-entry cache in front of the pool's per-thread
/// table, which a thread that uses one pool at a time hits on every get
/// (`previous_stash` serves a thread that uses two in turn). It obeys the
/// owner token's rule: it is filled only while the thread has a token and
/// emptied when the thread's hooks run, so it never outlives the thread's
/// claim on a stash. Pool ids are never reused (and never 0), so an entry
/// of a dropped pool matches nothing.
#[inline(always)]
pub(crate) fn last_stash(pool: u64) -> Option<*const ()> {
    if !SHORTCUTS {
        return None;
    }
    let (id, stash) = RECENT
        .try_with(|recent| recent.last.get())
        .unwrap_or(FORGOTTEN);
    (id == pool && !stash.is_null()).then_some(stash)
}

/// After a miss in `last_stash`: this thread's stash in the pool with id
/// `pool`, if it is the one found before the last; it becomes the last.
pub(crate) fn previous_stash(pool: u64) -> Option<*const ()> {
    if !SHORTCUTS {
        return None;
    }
    RECENT
        .try_with(|recent| {
            let previous = recent.previous.get();
            if previous.0 != pool || previous.1.is_null() {
                return None;
            }
            recent.previous.set(recent.last.get());
            recent.last.set(previous);
            Some(previous.1)
        })
        .ok()
        .flatten()
}

/// Remembers `stash`, this thread's stash in the pool with id `pool`, as
/// the last one found.
pub(crate) fn remember(pool: u64, stash: *const ()) {
    if token() != 0 {
        let _ = RECENT.try_with(|recent| {
            recent.previous.set(recent.last.get());
            recent.last.set((pool, stash));
        });
    }
}

/// Whether this thread is destroying its thread-locals: it then gets no new
/// stash, and pool use goes around stashes (see `LocalPool`'s stashless paths).
pub(crate) fn exiting() -> bool {
    EXITING.try_with(Cell::get).unwrap_or(true)
}

/// Flushes `stash` into `shared`'s overflow when this thread exits.
pub(crate) fn register<T: Send + 'static>(shared: &Arc<Shared<T>>, stash: *const Stash<T>) {
    let hook = Box::new(Hook {
        shared: Arc::clone(shared),
        stash,
    });
    // Fails only while this thread's thread-locals are being destroyed; the
    // stash is then simply left for sweeps.
    let _ = HOOKS.try_with(|hooks| {
        let mut hooks = hooks.hooks.borrow_mut();
        // Prune hooks of dropped pools whenever the list doubles, keeping
        // the amortised cost constant and the list as long as the live ones.
        if hooks.len() >= 8 && hooks.len().is_power_of_two() {
            hooks.retain(|hook| !hook.is_closed());
        }
        hooks.push(hook);
        if SHORTCUTS {
            let _ = TOKEN.try_with(|token| {
                if token.get() == 0 {
                    let next = NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    token.set(next);
                }
            });
        }
    });
}

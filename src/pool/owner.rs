//! This thread's claim on its stashes, as this thread itself sees it: its
//! serial number, the owner token and the stash cache, and the flag that
//! says the claim has ended.
//!
//! A stash belongs to a thread through the thread's id
//! (`per_thread::thread_id`), and asking the pool's table for it is a chain
//! of dependent loads. Two shortcuts skip it: the *owner token*, by which a
//! guard dropped on the thread that got it goes straight back to its stash
//! (`node::Home`), and the *stash cache*, the [`CACHED`] stashes this
//! thread found last, keyed by pool id, most recent first. Tokens and pool
//! ids are never reused, and never 0.
//!
//! The invariant: the cache is filled only while the thread has a token,
//! and the thread's exit hooks end both ([`end`]) before anything else,
//! before the thread gives its id back and another thread may be given the
//! same stashes. That order holds only where std runs thread-local
//! destructors last in, first out ([`SHORTCUTS`]); elsewhere the shortcuts
//! are off and every get and return looks its stash up. Why the order
//! holds: [`implementation`](crate::implementation), section 6.

use std::cell::Cell;

use crate::sync::{thread_local, UniqueIds};

/// Whether owner tokens and the stash cache are used: only on targets where
/// std keeps thread-local destructors in a last-in-first-out list (native
/// thread-locals), so that the hooks run before the thread gives its id
/// back ([`implementation`](crate::implementation), section 6). Elsewhere
/// every return and every get looks its stash up in the pool's table,
/// which is always sound.
pub(crate) const SHORTCUTS: bool = cfg!(any(
    target_os = "linux",
    target_vendor = "apple",
    all(windows, target_env = "msvc"),
    target_os = "freebsd",
    target_os = "netbsd",
));

/// The next owner token. Not part of the concurrency protocol (it only has
/// to hand out distinct numbers), so a plain atomic even under loom.
static NEXT_TOKEN: UniqueIds = UniqueIds::new();

/// A stash this thread found: its pool's id and its address.
type Found = (u64, *const ());

const FORGOTTEN: Found = (0, std::ptr::null());

/// How many stashes the cache remembers. A multi-size pool
/// (`bytes::BytePools`, `mmap::MmapPools`, `image::RgbaPools`) is
/// one pool per size class, so a thread whose requests cycle through a few
/// classes (a server whose messages vary in size), and uses another pool or
/// two in between, uses that many pools in turn:
/// with room for all of them, each get finds its stash here rather than in
/// the pool's table. Only the first entry is on the hit path; the others
/// are searched after a miss there, before the table.
const CACHED: usize = 8;

/// This thread's side of its claim on its stashes.
struct Owner {
    /// Set when the thread's exit hooks run: it then makes no new stash.
    ended: Cell<bool>,
    /// The owner token; 0 for none.
    token: Cell<u64>,
    /// This thread's number, never another thread's: taken with its first
    /// exit hook, and unlike the token kept to the end (see [`serial`]).
    serial: Cell<u64>,
    /// The stash cache, most recent first.
    cache: [Cell<Found>; CACHED],
}

impl Owner {
    const fn new() -> Self {
        Self {
            ended: Cell::new(false),
            token: Cell::new(0),
            serial: Cell::new(0),
            cache: [const { Cell::new(FORGOTTEN) }; CACHED],
        }
    }
}

#[cfg(not(stashpool_loom))]
thread_local! {
    static OWNER: Owner = const { Owner::new() };
}

// loom's `thread_local!` has no `const` form.
#[cfg(stashpool_loom)]
thread_local! {
    static OWNER: Owner = Owner::new();
}

/// Gives this thread its serial number and its owner token, if it has none
/// yet. Called when it registers an exit hook, which will take the token
/// back.
pub(crate) fn begin() {
    let _ = OWNER.try_with(|owner| {
        if owner.serial.get() == 0 {
            owner.serial.set(NEXT_TOKEN.next());
        }
        if SHORTCUTS && owner.token.get() == 0 && !owner.ended.get() {
            owner.token.set(owner.serial.get());
        }
    });
}

/// This thread's serial number: nonzero once it has registered an exit
/// hook, and never the same for two threads. A stash records the serial of
/// the thread that registered a hook for it (`Stash::hooked_by`), so that a
/// thread given an exited thread's id, and with it that
/// thread's stashes, sees that it has no hook for them yet.
pub(crate) fn serial() -> u64 {
    OWNER.try_with(|owner| owner.serial.get()).unwrap_or(0)
}

/// Ends this thread's claim, from its exit hooks: no new stashes, no token,
/// an empty stash cache. From here on gets and returns look stashes up.
pub(crate) fn end() {
    let _ = OWNER.try_with(|owner| {
        owner.ended.set(true);
        owner.token.set(0);
        for entry in &owner.cache {
            entry.set(FORGOTTEN);
        }
    });
}

/// Whether this thread's claim has ended (its thread-locals are being
/// destroyed): it then gets no new stash, and pool use goes around stashes
/// (see `LocalPool`'s stashless paths).
pub(crate) fn ended() -> bool {
    OWNER.try_with(|owner| owner.ended.get()).unwrap_or(true)
}

/// This thread's owner token: nonzero from its first exit hook until its
/// hooks run, and never the same for two threads.
#[inline(always)]
pub(crate) fn token() -> u64 {
    if !SHORTCUTS {
        return 0;
    }
    OWNER.try_with(|owner| owner.token.get()).unwrap_or(0)
}

/// This thread's stash in the pool with id `pool`, if it is the one this
/// thread found last: the cache's first entry, which a thread that uses one
/// pool at a time hits on every get.
#[inline(always)]
pub(crate) fn last_stash(pool: u64) -> Option<*const ()> {
    if !SHORTCUTS {
        return None;
    }
    let (id, stash) = OWNER
        .try_with(|owner| owner.cache[0].get())
        .unwrap_or(FORGOTTEN);
    (id == pool && !stash.is_null()).then_some(stash)
}

/// After a miss in `last_stash`: this thread's stash in the pool with id
/// `pool`, if the cache's other entries have it; it moves to the front (so
/// a thread that uses a few pools in turn finds each one here).
pub(crate) fn previous_stash(pool: u64) -> Option<*const ()> {
    if !SHORTCUTS {
        return None;
    }
    OWNER
        .try_with(|owner| {
            let at = (1..CACHED).find(|&i| {
                let (id, stash) = owner.cache[i].get();
                id == pool && !stash.is_null()
            })?;
            let found = owner.cache[at].get();
            push_front(&owner.cache[..=at], found);
            Some(found.1)
        })
        .ok()
        .flatten()
}

/// Puts `found` first in `entries`, moving the others one place back; the
/// last one falls out.
fn push_front(entries: &[Cell<Found>], found: Found) {
    for i in (1..entries.len()).rev() {
        entries[i].set(entries[i - 1].get());
    }
    entries[0].set(found);
}

/// Remembers `stash`, this thread's stash in the pool with id `pool`, as
/// the last one found; only while this thread has a token.
pub(crate) fn remember(pool: u64, stash: *const ()) {
    if token() != 0 {
        let _ = OWNER.try_with(|owner| push_front(&owner.cache, (pool, stash)));
    }
}

/// The serial number the next thread to ask will get: every thread that
/// has one now has a lower one (`fork::forked`).
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
pub(crate) fn next_serial() -> u64 {
    NEXT_TOKEN.peek()
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;

    /// A stand-in for a stash's address: the cache never dereferences it.
    fn stash(n: usize) -> *const () {
        std::ptr::without_provenance(n * 64)
    }

    #[test]
    fn the_cache_finds_its_last_stashes_most_recent_first() {
        // On a thread of its own, so no pool's entries are in its cache.
        std::thread::spawn(|| {
            begin();
            if !SHORTCUTS {
                return;
            }
            for pool in 1..=CACHED as u64 {
                remember(pool, stash(pool as usize));
            }
            assert_eq!(last_stash(CACHED as u64), Some(stash(CACHED)));
            assert_eq!(last_stash(1), None, "only the first entry is checked");
            // Every remembered stash is found, and moves to the front.
            for pool in 1..CACHED as u64 {
                assert_eq!(previous_stash(pool), Some(stash(pool as usize)));
                assert_eq!(last_stash(pool), Some(stash(pool as usize)));
            }
            // Pool CACHED is now the least recent: a new one pushes it out.
            remember(100, stash(100));
            assert_eq!(previous_stash(CACHED as u64), None);
            assert_eq!(previous_stash(1), Some(stash(1)));
            end();
            assert_eq!(last_stash(1), None);
            assert_eq!(previous_stash(100), None);
        })
        .join()
        .unwrap();
    }
}

//! stashpool's thread ids: small numbers, one per live thread that uses a
//! pool, given back when the thread exits and reused lowest first.
//!
//! A thread's id is the index of its entry in every [`PerThread`] table, so
//! reusing ids keeps the tables as small as the most threads alive at once;
//! lowest first keeps them dense. The scheme is `thread_local`'s (a free
//! list behind a lock, and two thread-locals: one read on every lookup, one
//! whose destructor gives the id back), made ours so that a thread in its
//! teardown can ask whether it still holds an id without taking one
//! ([`implementation`](crate::implementation), section 6).
//!
//! Two shortcuts rest on the id and are kept beside it: the thread's
//! *token* (a number no other holding of any id ever gets) and a *cache*
//! of the entries it found last. The guard that gives the id back ends
//! both first, so a token that still matches, or a cache hit, proves the
//! entry is still this thread's, whatever order a target runs thread-local
//! destructors in.
//!
//! [`PerThread`]: super::PerThread

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;

use crate::sync::UniqueIds;

/// Where a thread's entry lives in a [`PerThread`](super::PerThread) table:
/// bucket `b` holds `2^b` entries, for ids `2^b - 1 ..= 2^(b+1) - 2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Which bucket: always below `usize::BITS`.
    pub(crate) bucket: usize,
    /// The entry within the bucket: always below `2^bucket`.
    pub(crate) index: usize,
}

impl Slot {
    /// The slot of thread id `id` (any id up to `usize::MAX - 1`).
    pub(crate) const fn new(id: usize) -> Self {
        let bucket = (usize::BITS - 1 - (id + 1).leading_zeros()) as usize;
        Self {
            bucket,
            index: id + 1 - (1 << bucket),
        }
    }

    /// The number of entries in this slot's bucket.
    pub(crate) const fn bucket_len(self) -> usize {
        1 << self.bucket
    }

    /// The thread id this slot belongs to.
    pub(crate) const fn id(self) -> usize {
        self.index + self.bucket_len() - 1
    }
}

/// The ids in use and the free ones.
pub(crate) struct Ids {
    /// Every id from here up has never been handed out.
    next: usize,
    /// Ids given back, lowest on top.
    free: BinaryHeap<Reverse<usize>>,
}

impl Ids {
    pub(crate) const fn new() -> Self {
        Self {
            next: 0,
            free: BinaryHeap::new(),
        }
    }

    /// The lowest id not in use.
    pub(crate) fn take(&mut self) -> usize {
        match self.free.pop() {
            Some(Reverse(id)) => id,
            None => {
                // Cannot overflow: every thread that holds an id has a stack
                // and a thread-local block, so fewer than `usize::MAX / 2`
                // threads can exist at once.
                let id = self.next;
                self.next += 1;
                id
            }
        }
    }

    /// Makes `id` available again.
    pub(crate) fn give_back(&mut self, id: usize) {
        debug_assert!(id < self.next, "stashpool: an id that was never taken");
        self.free.push(Reverse(id));
    }

    /// How many ids are held now.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.next - self.free.len()
    }
}

static IDS: Mutex<Ids> = Mutex::new(Ids::new());

/// Runs `f` on the process's ids, under their lock (poisoning ignored:
/// nothing panics under it) and inside the fork gate (`sync::FORK_GATE`), so
/// that a `fork()` never leaves the lock held in the child, whose new
/// threads would then wait forever for an id. Never called from within
/// another fork-gate section (ids are taken outside the sweep lock, and
/// given back at thread exit).
fn with_ids<R>(f: impl FnOnce(&mut Ids) -> R) -> R {
    let _gate = crate::sync::FORK_GATE.shared();
    let mut ids = IDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut ids)
}

/// Gives the thread's id back when the thread-local is destroyed.
struct IdGuard {
    /// A copy of the id: the guard cannot count on reading `THREAD` in its
    /// destructor on every target.
    id: Cell<Option<usize>>,
}

impl Drop for IdGuard {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl IdGuard {
    fn give_back(&self) {
        let Some(id) = self.id.take() else { return };
        // First end everything that rests on the id (its entry in every
        // table, the token, the cache), then free it: from here on this
        // thread finds no entry of its own, and once the id is free another
        // thread may be given it.
        let _ = THREAD.try_with(Thread::end);
        with_ids(|ids| ids.give_back(id));
        #[cfg(test)]
        tests::log_release(id);
    }
}

/// A table entry this thread found: the table's id and the entry's address.
type Found = (u64, *const ());

const FORGOTTEN: Found = (0, std::ptr::null());

/// How many table entries the cache remembers. A multi-size pool
/// (`bytes::BytePools`, `mmap::MmapPools`, `image::RgbaPools`) is one pool
/// (one table) per size class, so a thread whose requests cycle through a
/// few classes, and uses another pool or two in between, uses that many
/// tables in turn: with room for all of them, each lookup finds its entry
/// here rather than in the table. Only the first entry is on the hit path.
const CACHED: usize = 8;

/// What a thread knows of its id without a destructor, so that reading it
/// costs no "is it alive" check and works through the whole teardown.
struct Thread {
    slot: Cell<Option<Slot>>,
    /// Nonzero while the thread holds its id, and never the same for two
    /// holdings: a value recorded with an entry found through the id (a
    /// guard's stash, `pool::node::Home`) proves, while this still equals
    /// it, that the entry is still this thread's.
    token: Cell<u64>,
    /// The entries this thread found last, most recent first, keyed by
    /// table id (never reused, never 0).
    cache: [Cell<Found>; CACHED],
}

impl Thread {
    const fn new() -> Self {
        Self {
            slot: Cell::new(None),
            token: Cell::new(0),
            cache: [const { Cell::new(FORGOTTEN) }; CACHED],
        }
    }

    /// Forgets the id and everything that rests on it.
    fn end(&self) {
        self.slot.set(None);
        self.token.set(0);
        self.forget();
    }

    fn forget(&self) {
        for entry in &self.cache {
            entry.set(FORGOTTEN);
        }
    }
}

/// Numbers for tokens and table ids, never reused.
static NEXT: UniqueIds = UniqueIds::new();

/// A new table's id (`PerThread::new`).
pub(crate) fn table_id() -> u64 {
    NEXT.next()
}

/// Keeps every other thread from taking a token or a table id while it
/// lives (`UniqueIds::hold`): held across a `fork()`.
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
pub(crate) fn hold_numbers() -> Option<std::sync::MutexGuard<'static, u64>> {
    NEXT.hold()
}

// Two thread-locals, as in `thread_local`: `THREAD` has no destructor, so
// reading it costs no "is it still alive" check and it is readable through
// the whole teardown; `GUARD` has one, registered when the thread takes its
// id. std's own, not the `sync` shim's: loom never sees this structure
// (`sync.rs`).
std::thread_local! {
    static THREAD: Thread = const { Thread::new() };
    static GUARD: IdGuard = const { IdGuard { id: Cell::new(None) } };
}

/// Gives this thread's id back now, if its id guard still holds one: for a
/// thread whose guard's destructor will not run, having been registered
/// after the thread's thread-local destructors ran (`pool::exit`'s late
/// exit). Its thread-locals without destructors are still readable then.
#[cfg(target_os = "linux")]
pub(crate) fn give_back_id() {
    let _ = GUARD.try_with(IdGuard::give_back);
}

/// This thread's slot, if it holds an id. Never takes one.
#[inline(always)]
pub(crate) fn current() -> Option<Slot> {
    THREAD.with(|thread| thread.slot.get())
}

/// This thread's token: nonzero while it holds its id (see `Thread`).
#[inline(always)]
pub(crate) fn token() -> u64 {
    THREAD.with(|thread| thread.token.get())
}

/// The entry of table `table` this thread found last, if it is the cache's
/// first entry: what a thread that uses one table at a time finds on every
/// lookup.
#[inline(always)]
pub(crate) fn cached(table: u64) -> Option<*const ()> {
    let (id, entry) = THREAD.with(|thread| thread.cache[0].get());
    (id == table).then_some(entry)
}

/// After a miss in `cached`: the entry of table `table`, if the cache's
/// other entries have it; it moves to the front.
pub(crate) fn cached_later(table: u64) -> Option<*const ()> {
    THREAD.with(|thread| {
        let at = (1..CACHED).find(|&i| thread.cache[i].get().0 == table)?;
        let found = thread.cache[at].get();
        push_front(&thread.cache[..=at], found);
        Some(found.1)
    })
}

/// Remembers `entry`, this thread's entry in table `table`, as the last one
/// found; only while the thread holds its id.
pub(crate) fn remember(table: u64, entry: *const ()) {
    THREAD.with(|thread| {
        if thread.token.get() != 0 {
            push_front(&thread.cache, (table, entry));
        }
    });
}

/// Puts `found` first in `entries`, moving the others one place back; the
/// last one falls out.
fn push_front(entries: &[Cell<Found>], found: Found) {
    for i in (1..entries.len()).rev() {
        entries[i].set(entries[i - 1].get());
    }
    entries[0].set(found);
}

/// In a forked child, on its one thread: a new token and an empty cache,
/// so that nothing found or lent before the fork is taken for this
/// process's (`pool::fork`). The id stays: the parent's other threads
/// never give theirs back here.
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
pub(crate) fn forked() {
    let _ = THREAD.try_with(|thread| {
        if thread.token.get() != 0 {
            thread.token.set(NEXT.next());
        }
        thread.forget();
    });
}

/// This thread's slot, taking an id if it holds none; `None` only if the
/// thread is past the destruction of its id guard (it has given its id back,
/// or never had one and is too far into its teardown to take one).
///
/// A thread whose first use of an id is in its teardown, before the guard is
/// destroyed, takes an id here and gives it back like any other
/// (`implementation`, section 6).
///
/// Where std keeps thread-locals in pthread keys rather than native
/// thread-locals, a key whose destructor has run reads as new on its next
/// use instead of failing, so a use after the guard's destructor takes a
/// fresh id rather than `None`; it is given back if pthread runs the
/// destructors again (it does so a bounded number of rounds), and kept for
/// good otherwise.
#[inline]
pub(crate) fn current_or_take() -> Option<Slot> {
    THREAD.with(|thread| thread.slot.get().or_else(|| take(thread)))
}

#[cold]
fn take(thread: &Thread) -> Option<Slot> {
    GUARD
        .try_with(|guard| {
            // The guard still holds an id while `THREAD` reads `None` only
            // where std keeps each thread-local in a pthread key of its own:
            // there a key destroyed earlier in the teardown (`THREAD`) is
            // made afresh on its next use. Taking the guard's id again keeps
            // it from being overwritten, and so from never going back.
            let id = match guard.id.get() {
                Some(id) => id,
                None => {
                    let id = with_ids(Ids::take);
                    guard.id.set(Some(id));
                    id
                }
            };
            let slot = Slot::new(id);
            thread.slot.set(Some(slot));
            thread.token.set(NEXT.next());
            slot
        })
        .ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Every id given back by a thread that set a tag, with the tag: lets a
    /// test see its own thread's id go back while other tests take and give
    /// back ids in parallel.
    static RELEASED: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());

    std::thread_local! {
        /// No destructor: readable when the id guard is destroyed.
        pub(crate) static TAG: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) fn log_release(id: usize) {
        let tag = TAG.try_with(Cell::get).unwrap_or(0);
        if tag != 0 {
            RELEASED.lock().unwrap().push((tag, id));
        }
    }

    /// The ids that threads tagged `tag` gave back.
    pub(crate) fn released_by(tag: u64) -> Vec<usize> {
        let released = RELEASED.lock().unwrap();
        released
            .iter()
            .filter(|(t, _)| *t == tag)
            .map(|(_, id)| *id)
            .collect()
    }

    #[test]
    fn slots_follow_the_doubling_buckets() {
        let slots: Vec<_> = (0..8).map(Slot::new).map(|s| (s.bucket, s.index)).collect();
        assert_eq!(
            slots,
            [
                (0, 0),
                (1, 0),
                (1, 1),
                (2, 0),
                (2, 1),
                (2, 2),
                (2, 3),
                (3, 0)
            ]
        );
        for id in (0..5000).chain([usize::MAX / 2, usize::MAX - 1]) {
            let slot = Slot::new(id);
            assert!(slot.bucket < usize::BITS as usize);
            assert!(slot.index < slot.bucket_len(), "{id}");
            assert_eq!(slot.id(), id);
        }
    }

    #[test]
    fn ids_are_reused_lowest_first() {
        let mut ids = Ids::new();
        assert_eq!(
            [ids.take(), ids.take(), ids.take(), ids.take()],
            [0, 1, 2, 3]
        );
        ids.give_back(2);
        ids.give_back(0);
        ids.give_back(3);
        assert_eq!(ids.in_use(), 1);
        assert_eq!(
            [ids.take(), ids.take(), ids.take(), ids.take()],
            [0, 2, 3, 4]
        );
        assert_eq!(ids.in_use(), 5);
    }

    #[test]
    fn a_thread_keeps_its_id_and_gives_it_back_at_exit() {
        const TAG: u64 = 1;
        let (before, during, after) = std::thread::spawn(|| {
            tests::TAG.with(|tag| tag.set(TAG));
            let before = current();
            let during = current_or_take();
            (before, during, current_or_take())
        })
        .join()
        .unwrap();
        assert_eq!(before, None, "looking never takes an id");
        assert!(during.is_some());
        assert_eq!(during, after, "one id for the thread's life");
        assert_eq!(released_by(TAG), [during.unwrap().id()]);
    }
}

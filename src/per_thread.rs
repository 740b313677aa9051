//! One value per thread, owned by a pool: a table indexed by stashpool's
//! own thread ids ([`thread_id`]).
//!
//! The layout is `thread_local::ThreadLocal`'s: buckets of doubling size
//! (bucket `b` holds the entries of ids `2^b - 1 ..= 2^(b+1) - 2`), each
//! allocated by the first thread whose id falls in it and published with a
//! compare-and-swap, and never moved or freed before the table drops, so a
//! reference to an entry stays valid as long as the table. An entry is
//! written once, by the thread that holds its id, and marked present with a
//! release store; the value then stays for the next thread given the same
//! id, and for sweeps, which visit every present entry.
//!
//! Not `thread_local::ThreadLocal` itself, because a pool used from a late
//! thread-local destructor must learn "no id" and go around its stashes
//! ([`PerThread::get_or`] returns `None` then), where `ThreadLocal` panics
//! ([`implementation`](crate::implementation), section 6, "Late use").

mod thread_id;

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use self::thread_id::Slot;

/// This thread's id (the index of its entries), taking one if it holds
/// none; `None` as for [`PerThread::get_or`]. Ids are dense and reused
/// lowest first, so a bound on them bounds how many threads a table serves
/// (a pool's stashes, `pool::shared`).
#[inline]
pub(crate) fn thread_index() -> Option<usize> {
    thread_id::current_or_take().map(Slot::id)
}

#[cfg(target_os = "linux")]
pub(crate) use thread_id::give_back_id;
pub(crate) use thread_id::token;
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
pub(crate) use thread_id::{forked, hold_numbers};

/// One bucket per bit of an id, so every id has one.
const BUCKETS: usize = usize::BITS as usize;

/// One thread's entry: its value once `present`.
struct Entry<T> {
    present: AtomicBool,
    value: UnsafeCell<MaybeUninit<T>>,
}

impl<T> Entry<T> {
    /// The value, if it has been written.
    fn get(&self) -> Option<&T> {
        // Acquire: pairs with the release in `PerThread::insert`, for the
        // threads that did not write the value (sweeps, and the next thread
        // given the same id, which also has the id lock's ordering).
        if self.present.load(Ordering::Acquire) {
            // SAFETY: `present` is set only after the value was written, and
            // the value is never written again or moved while `self` lives.
            Some(unsafe { (*self.value.get()).assume_init_ref() })
        } else {
            None
        }
    }
}

impl<T> Drop for Entry<T> {
    fn drop(&mut self) {
        if *self.present.get_mut() {
            // SAFETY: present, so initialised; `&mut self` means no
            // reference handed out by `get` is alive.
            unsafe { self.value.get_mut().assume_init_drop() }
        }
    }
}

/// One value per thread, owned by its table.
///
/// Unlike a `thread_local!` static, many of these can exist at once and each
/// one, with every thread's value in it, is dropped with its owner. Values
/// of exited threads stay in place (and are handed to the next thread that
/// gets the exited thread's id), so a sweep still reaches them.
pub(crate) struct PerThread<T: Send> {
    /// Bucket `b`: null, or the first of `2^b` entries (a leaked boxed
    /// slice).
    buckets: [AtomicPtr<Entry<T>>; BUCKETS],
    /// This table's key in the threads' caches ([`thread_id`]).
    id: u64,
    /// The entries hold `T`s (`Drop` says they are dropped with the table).
    /// A function pointer, as `thread_local::ThreadLocal` holds only atomics:
    /// `Send` as `T: Send` allows, `Sync` by the impl below, and unwind-safe,
    /// so that pools stay `RefUnwindSafe` (an unwinding thread leaves every
    /// entry either absent or fully written).
    _entries: PhantomData<fn() -> T>,
}

// SAFETY: an entry's value is written only by the thread that holds the
// entry's id, before `present` is set, and never again; a thread gets `&T`
// from `get`/`get_or` only for its own entry (no two threads hold an id at
// once), and from `for_each` only when `T: Sync`. Values are dropped by
// whichever thread drops the table, hence `T: Send`. The table is
// crate-private, and its one caller (the pool's stash lookup) keeps that
// `&T` no longer than the thread holds its id: what outlives a lookup (raw
// stash pointers in the owner cache and in exit hooks) ends in the exit
// hooks, which run before the id guard's destructor gives the id back, and
// a stash handed on through the id is claimed (`flush`) before reuse.
unsafe impl<T: Send> Sync for PerThread<T> {}

impl<T: Send> PerThread<T> {
    pub(crate) fn new() -> Self {
        Self {
            buckets: [const { AtomicPtr::new(ptr::null_mut()) }; BUCKETS],
            id: thread_id::table_id(),
            _entries: PhantomData,
        }
    }

    /// This thread's value, if it has one. Never takes a thread id.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.entry(thread_id::current()?)?.get()
    }

    /// This thread's value, made by `create` on first use; `None` if this
    /// thread can no longer hold an id (it is past the destruction of its id
    /// guard, late in its teardown). Takes an id if the thread has none.
    pub(crate) fn get_or(&self, create: impl FnOnce() -> T) -> Option<&T> {
        let slot = thread_id::current_or_take()?;
        if let Some(value) = self.entry(slot).and_then(Entry::get) {
            return Some(value);
        }
        Some(self.insert(slot, create()))
    }

    /// Every thread's value (live and exited threads alike).
    pub(crate) fn for_each<'a>(&'a self, mut f: impl FnMut(&'a T))
    where
        T: Sync,
    {
        for (bucket, first) in self.buckets.iter().enumerate() {
            let first = first.load(Ordering::Acquire);
            if first.is_null() {
                continue;
            }
            for index in 0..1usize << bucket {
                // SAFETY: a non-null bucket pointer is a live allocation of
                // `2^bucket` entries (`allocate`), freed only by `drop`.
                let entry = unsafe { &*first.add(index) };
                if let Some(value) = entry.get() {
                    f(value);
                }
            }
        }
    }

    /// `slot`'s entry, if its bucket exists.
    #[inline(always)]
    fn entry(&self, slot: Slot) -> Option<&Entry<T>> {
        let first = self.buckets[slot.bucket].load(Ordering::Acquire);
        if first.is_null() {
            return None;
        }
        // SAFETY: a non-null bucket pointer is a live allocation of
        // `slot.bucket_len()` entries, freed only by `drop`, and
        // `slot.index` is below that (`Slot::new`).
        Some(unsafe { &*first.add(slot.index) })
    }

    /// Writes this thread's value into its entry, allocating the bucket if
    /// no thread has yet.
    #[cold]
    fn insert(&self, slot: Slot, value: T) -> &T {
        let bucket = &self.buckets[slot.bucket];
        let mut first = bucket.load(Ordering::Acquire);
        if first.is_null() {
            let new = allocate::<T>(slot.bucket_len());
            // AcqRel: publishes the new bucket's initialised entries, and on
            // failure acquires the winner's.
            match bucket.compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => first = new,
                Err(winner) => {
                    // SAFETY: `new` came from `allocate` with this length and
                    // was never shared.
                    unsafe { deallocate(new, slot.bucket_len()) };
                    first = winner;
                }
            }
        }
        // SAFETY: as in `entry`.
        let entry = unsafe { &*first.add(slot.index) };
        // `create` may have used this table on this thread and filled the
        // entry meanwhile: keep that value, as a second write would move a
        // value some reference points to.
        if let Some(existing) = entry.get() {
            return existing;
        }
        // SAFETY: the entry is not present, so no reference to its value
        // exists, and only this thread (which holds the entry's id) writes
        // it.
        let value = unsafe { (*entry.value.get()).write(value) };
        entry.present.store(true, Ordering::Release);
        value
    }
}

/// The thread's cache (`thread_id`) in front of a table of boxes: it keeps
/// what a value points to, one load from the thread-local instead of three
/// through the table, and the value itself one more.
impl<T: Send + std::ops::Deref<Target: Sized>> PerThread<T> {
    /// What this thread's value points to, if it is the one this thread
    /// found last in any table (see [`remember`](Self::remember)): the hot
    /// path, a thread-local read and a compare.
    #[inline(always)]
    pub(crate) fn cached(&self) -> Option<&T::Target> {
        let target = thread_id::cached(self.id)?;
        // SAFETY: `remember` stored the target of this thread's own value
        // in this table (table ids are never reused): a box's, which never
        // moves while the value lives, and the value lives as long as the
        // table, which `&self` keeps alive. The id guard empties the cache
        // before it gives the id, and with it the entry, away.
        Some(unsafe { &*target.cast::<T::Target>() })
    }

    /// `cached` after a miss in the cache's first entry: its other entries.
    #[inline(never)]
    pub(crate) fn cached_later(&self) -> Option<&T::Target> {
        let target = thread_id::cached_later(self.id)?;
        // SAFETY: as in `cached`.
        Some(unsafe { &*target.cast::<T::Target>() })
    }

    /// Makes `value`, this thread's own value in this table (from `get` or
    /// `get_or`), the one whose target `cached` finds next. The table's
    /// values must be boxes: their targets never move.
    pub(crate) fn remember(&self, value: &T) {
        thread_id::remember(self.id, ptr::from_ref(&**value).cast());
    }
}

impl<T: Send> Drop for PerThread<T> {
    fn drop(&mut self) {
        for (bucket, first) in self.buckets.iter_mut().enumerate() {
            let first = *first.get_mut();
            if !first.is_null() {
                // SAFETY: a non-null bucket came from `allocate` with this
                // length; `&mut self` means no entry is borrowed.
                unsafe { deallocate(first, 1 << bucket) };
            }
        }
    }
}

/// `len` empty entries, as a leaked boxed slice's first element.
fn allocate<T>(len: usize) -> *mut Entry<T> {
    let entries: Box<[Entry<T>]> = (0..len)
        .map(|_| Entry {
            present: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        })
        .collect();
    Box::into_raw(entries).cast()
}

/// Drops the entries `allocate` made (and the values present in them).
///
/// # Safety
///
/// `first` and `len` come from one `allocate` call, and nothing else uses the
/// entries now or later.
unsafe fn deallocate<T>(first: *mut Entry<T>, len: usize) {
    // SAFETY: the caller's contract: this is the boxed slice `allocate`
    // leaked, whole.
    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(first, len)) });
}

#[cfg(test)]
mod tests {
    use super::thread_id::tests::{TAG, released_by};
    use super::*;
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier, Mutex};
    use std::thread;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_thread_finds_the_value_it_made() {
        let table = PerThread::new();
        assert!(table.get().is_none());
        let made = *table.get_or(|| 7).unwrap();
        assert_eq!(made, 7);
        assert_eq!(table.get(), Some(&7));
        assert_eq!(table.get_or(|| unreachable!()), Some(&7));
    }

    #[test]
    fn every_threads_value_is_visited_and_dropped_once() {
        const THREADS: usize = if cfg!(miri) { 4 } else { 40 };
        let dropped = Arc::new(AtomicUsize::new(0));
        let table = PerThread::new();
        // All alive at once: each holds an id of its own, so the values
        // spread over several buckets.
        let barrier = Barrier::new(THREADS);
        thread::scope(|s| {
            for n in 0..THREADS {
                let (table, barrier, dropped) = (&table, &barrier, &dropped);
                s.spawn(move || {
                    table.get_or(|| (n, Counted(Arc::clone(dropped))));
                    barrier.wait();
                });
            }
        });
        let mut seen = Vec::new();
        table.for_each(|(n, _)| seen.push(*n));
        seen.sort_unstable();
        assert_eq!(seen, (0..THREADS).collect::<Vec<_>>());
        assert_eq!(dropped.load(Ordering::Relaxed), 0);
        drop(table);
        assert_eq!(dropped.load(Ordering::Relaxed), THREADS);
    }

    #[test]
    fn a_value_made_while_making_it_is_kept() {
        let table = PerThread::new();
        let outer = table.get_or(|| {
            assert_eq!(table.get_or(|| 1), Some(&1));
            2
        });
        assert_eq!(outer, Some(&1), "the first value stays where it is");
    }

    /// Runs its closure when dropped.
    struct Late(Option<Box<dyn FnOnce()>>);

    impl Drop for Late {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }

    std::thread_local! {
        static LATE: Cell<Option<Late>> = const { Cell::new(None) };
    }

    /// Runs `f` in a thread-local destructor of this thread, registered now.
    fn on_teardown(f: impl FnOnce() + 'static) {
        LATE.with(|late| late.set(Some(Late(Some(Box::new(f))))));
    }

    /// A thread whose only use of an id is in a thread-local destructor
    /// takes an id there, and gives it back at exit like any other thread.
    #[test]
    fn a_first_use_in_teardown_takes_an_id_and_gives_it_back() {
        const TAG_HERE: u64 = 2;
        let got = Arc::new(Mutex::new(None));
        let g = Arc::clone(&got);
        thread::spawn(move || {
            // A static keeps it reachable: the sanitizers' leak check
            // sees no leak.
            static TABLE: std::sync::LazyLock<PerThread<u32>> =
                std::sync::LazyLock::new(PerThread::new);
            let table: &'static PerThread<u32> = &TABLE;
            TAG.with(|tag| tag.set(TAG_HERE));
            on_teardown(move || {
                let found = (thread_id::current(), table.get_or(|| 5).copied());
                *g.lock().unwrap() = Some(found);
            });
        })
        .join()
        .unwrap();
        let (before, value) = got.lock().unwrap().take().expect("the destructor ran");
        assert_eq!(before, None, "no id before the destructor");
        assert_eq!(value, Some(5));
        assert_eq!(released_by(TAG_HERE).len(), 1, "its id went back");
    }

    /// A thread that used its id and gave it back gets none in a destructor
    /// that runs later: no new id, no panic.
    #[test]
    fn a_use_after_the_id_went_back_gets_none() {
        const TAG_HERE: u64 = 3;
        let got = Arc::new(Mutex::new(None));
        let g = Arc::clone(&got);
        let id = thread::spawn(move || {
            // A static keeps it reachable: the sanitizers' leak check
            // sees no leak.
            static TABLE: std::sync::LazyLock<PerThread<u32>> =
                std::sync::LazyLock::new(PerThread::new);
            let table: &'static PerThread<u32> = &TABLE;
            TAG.with(|tag| tag.set(TAG_HERE));
            // Registered before the id guard, so destroyed after it.
            on_teardown(move || {
                let found = (table.get().copied(), table.get_or(|| 6).copied());
                *g.lock().unwrap() = Some(found);
            });
            table.get_or(|| 4);
            thread_id::current().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got.lock().unwrap().take(), Some((None, None)));
        assert_eq!(released_by(TAG_HERE), [id.id()], "one id, given back once");
    }

    /// A thread whose first use of a pool is in a `pthread_key_create`
    /// destructor, after its thread-local destructors ran, takes an id
    /// there and still gives it back (the pool's late exit, `pool::exit`).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_first_use_in_a_pthread_key_destructor_gives_the_id_back() {
        const TAG_HERE: u64 = 4;
        static POOL: crate::LocalPool<Vec<u8>> = crate::LocalPool::new(Vec::new);
        extern "C" fn late(_: *mut libc::c_void) {
            TAG.with(|tag| tag.set(TAG_HERE));
            POOL.put(vec![1]);
        }
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: a valid place for the key; `late` lives as long as the
        // process.
        assert_eq!(unsafe { libc::pthread_key_create(&mut key, Some(late)) }, 0);
        thread::spawn(move || {
            let value = std::ptr::NonNull::<u8>::dangling().as_ptr().cast();
            // SAFETY: a live key; any non-null value runs its destructor.
            let set = unsafe { libc::pthread_setspecific(key, value) };
            assert_eq!(set, 0);
        })
        .join()
        .unwrap();
        assert_eq!(released_by(TAG_HERE).len(), 1, "its id went back");
        // SAFETY: no thread uses the key any more.
        unsafe { libc::pthread_key_delete(key) };
    }
}

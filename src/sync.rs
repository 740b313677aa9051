//! Every synchronisation primitive the pool uses, from one place.
//!
//! Every atomic, cell, lock and thread-local the pool's protocol touches is
//! imported from here, so that under `--cfg stashpool_loom` the [loom]
//! models see all of them: this module then swaps in loom's versions, and
//! for the two building blocks loom does not model, [`PerThread`]
//! (`crate::per_thread`'s table) and [`Queue`] (`crossbeam_deque::Injector`,
//! the overflow's queue), stand-ins with the same interface (a registry
//! keyed by model thread ids that are reused as the real ones are, a locked
//! `VecDeque`). What the models check, and what they leave to tests and
//! Miri: [`implementation`](crate::implementation), section 9.
//!
//! [loom]: https://docs.rs/loom

// Parts of the shim serve only the worker pool.
#![cfg_attr(not(feature = "workers"), allow(dead_code, unused_imports))]

use std::sync::PoisonError;
#[cfg(all(not(stashpool_loom), target_has_atomic = "64"))]
pub(crate) use std::sync::atomic::AtomicU64;
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(stashpool_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, fence};
#[cfg(not(stashpool_loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(stashpool_loom))]
pub(crate) use std::thread_local;

#[cfg(stashpool_loom)]
pub(crate) use self::loom_impl::AtomicBool;
#[cfg(stashpool_loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, fence};
#[cfg(stashpool_loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(stashpool_loom)]
pub(crate) use loom::thread_local;

pub(crate) use self::imp::{PerThread, Queue, UnsafeCell, thread_index, token};
#[cfg(stashpool_loom)]
pub(crate) use self::imp::{ThreadSlot, end_thread_id};

/// The atomic behind [`AtomicCount`]: 64 bits where the target has 64-bit
/// atomics, else pointer-sized (32-bit targets such as `powerpc` and `mips`
/// have no `AtomicU64`).
#[cfg(target_has_atomic = "64")]
type CountWord = AtomicU64;
#[cfg(not(target_has_atomic = "64"))]
type CountWord = AtomicUsize;

/// A statistics counter read as a `u64`. On targets without 64-bit atomics
/// it is pointer-sized and wraps at 2^32: counts there are exact modulo
/// 2^32, which is what a counter that must stay lock-free can give.
pub(crate) struct AtomicCount(CountWord);

impl Default for AtomicCount {
    fn default() -> Self {
        Self::new(0)
    }
}

// Truncation is the documented wrap on narrow targets.
#[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
impl AtomicCount {
    pub(crate) fn new(value: u64) -> Self {
        Self(CountWord::new(value as _))
    }

    #[inline(always)]
    pub(crate) fn load(&self, order: Ordering) -> u64 {
        self.0.load(order) as u64
    }

    #[inline(always)]
    pub(crate) fn store(&self, value: u64, order: Ordering) {
        self.0.store(value as _, order)
    }

    #[inline(always)]
    pub(crate) fn fetch_add(&self, value: u64, order: Ordering) {
        self.0.fetch_add(value as _, order);
    }
}

/// A source of distinct numbers for the life of the process (pool ids,
/// owner tokens), which must never repeat: a 64-bit atomic where the target
/// has one, else a lock around a `u64` (these numbers are taken once per
/// pool or per thread, never on a hot path). Plain std even under loom: it
/// is not part of any protocol loom checks, only a counter.
#[cfg(not(stashpool_loom))]
pub(crate) struct UniqueIds {
    #[cfg(target_has_atomic = "64")]
    next: std::sync::atomic::AtomicU64,
    #[cfg(not(target_has_atomic = "64"))]
    next: std::sync::Mutex<u64>,
}

#[cfg(not(stashpool_loom))]
impl UniqueIds {
    /// Numbers from 1 up (0 is left for "none").
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(target_has_atomic = "64")]
            next: std::sync::atomic::AtomicU64::new(1),
            #[cfg(not(target_has_atomic = "64"))]
            next: std::sync::Mutex::new(1),
        }
    }

    /// A number never handed out before.
    pub(crate) fn next(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        {
            self.next.fetch_add(1, Ordering::Relaxed)
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            let mut next = lock(&self.next);
            let id = *next;
            *next += 1;
            id
        }
    }

    /// Keeps every other thread from taking a number while it lives: the
    /// fork handlers (`pool::fork`) hold it across a `fork()`, since a lock
    /// held then by another thread would stay held in the child for ever.
    /// `None` where the numbers are one atomic: nothing to hold.
    #[cfg(target_os = "linux")]
    pub(crate) fn hold(&self) -> Option<MutexGuard<'_, u64>> {
        #[cfg(target_has_atomic = "64")]
        return None;
        #[cfg(not(target_has_atomic = "64"))]
        Some(lock(&self.next))
    }
}

/// A `const fn` but under loom, whose atomics and locks cannot be made in a
/// `const` context: one body for both.
macro_rules! loom_const_fn {
    ($(#[$attr:meta])* $vis:vis fn $($rest:tt)*) => {
        #[cfg(not(stashpool_loom))]
        $(#[$attr])* $vis const fn $($rest)*
        #[cfg(stashpool_loom)]
        $(#[$attr])* $vis fn $($rest)*
    };
}
pub(crate) use loom_const_fn;

/// Clears a flag when dropped, also on unwinding: a stash's `busy` or
/// `claimed`, the singles' stack claim. Release: publishes what its holder
/// did to the next acquire of the flag.
pub(crate) struct Unset<'a>(pub(crate) &'a AtomicBool);

impl Drop for Unset<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Locks `mutex`, ignoring poisoning.
///
/// The pool never runs user code while it holds one of its locks, so a
/// poisoned lock can only come from a panic in the pool's own bookkeeping,
/// which leaves the protected state consistent at every step.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The fork gate: every section that holds a pool's sweep lock (and with
/// it, claims on other threads' stashes) is entered through it, shared,
/// and a `fork()` (`pool::fork`'s `pthread_atfork` handlers) and the switch
/// of barriers (`pool::barrier::register`) take it exclusively, so that
/// neither happens while such a section runs
/// ([`implementation`](crate::implementation), sections 4 and 7a).
/// Sections never nest (none runs user code, and none takes another pool's
/// lock), which a lock that prefers writers needs.
#[cfg(not(stashpool_loom))]
pub(crate) static FORK_GATE: Gate = Gate::new();

/// A readers-writer lock that guards nothing but the sections it spans.
///
/// Under loom only the models that take it exclusively take it at all (they
/// say so first, `model`): loom orders every two readers of a lock as it
/// orders two writers, while a reader with no writer anywhere neither waits
/// nor, as far as the pool may assume, orders anything. The flag says
/// which.
pub(crate) struct Gate(
    RwLock<()>,
    #[cfg(stashpool_loom)] std::sync::atomic::AtomicBool,
);

#[cfg(not(stashpool_loom))]
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(stashpool_loom)]
use loom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A shared section of the gate, held (`None`: a loom model without one).
pub(crate) type GateGuard<'a> = Option<RwLockReadGuard<'a, ()>>;

impl Gate {
    #[cfg(not(stashpool_loom))]
    pub(crate) const fn new() -> Self {
        Self(RwLock::new(()))
    }

    /// Not `const` under loom, whose locks are not.
    #[cfg(stashpool_loom)]
    pub(crate) fn new() -> Self {
        Self(RwLock::new(()), std::sync::atomic::AtomicBool::new(false))
    }

    /// Under loom: this model takes the gate exclusively; called before it
    /// starts its threads.
    #[cfg(stashpool_loom)]
    pub(crate) fn model(&self) {
        self.1.store(true, Ordering::Relaxed);
    }

    /// Enters a section that excludes a fork and the switch of barriers.
    pub(crate) fn shared(&self) -> GateGuard<'_> {
        #[cfg(stashpool_loom)]
        if !self.1.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.0.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits for every shared section in progress, and keeps new ones out.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        #[cfg(stashpool_loom)]
        assert!(
            self.1.load(Ordering::Relaxed),
            "a model that switches barriers calls `LocalPool::loom_model_gate` first"
        );
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A timeout this long is "never": timers clamp to it, which also keeps the
/// `Instant` arithmetic of timed waits from overflowing.
pub(crate) const NEVER: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);

/// Blocks on `condvar` until notified, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Blocks on `condvar` until notified or until `timeout` has passed; returns
/// the guard of `mutex` (the mutex `guard` came from) and whether the wait
/// timed out.
///
/// loom has no clock, and its `Condvar::wait_timeout` never times out. Under
/// loom this releases the lock, lets the other threads run, and reports a
/// timeout: the earliest a timer can fire, which is the case that races
/// hardest with a notification. Callers must handle a timeout that crosses a
/// notification in any case, so the models check that they do.
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    mutex: &'a Mutex<T>,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> (MutexGuard<'a, T>, bool) {
    #[cfg(not(stashpool_loom))]
    {
        let _ = mutex;
        let (guard, result) = condvar
            .wait_timeout(guard, timeout)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (guard, result.timed_out())
    }
    #[cfg(stashpool_loom)]
    {
        let _ = (condvar, timeout);
        drop(guard);
        loom::thread::yield_now();
        (lock(mutex), true)
    }
}

/// Threads: spawning, joining and identity, from std or from loom's model.
pub(crate) mod thread {
    #[cfg(not(stashpool_loom))]
    pub(crate) use std::thread::{Builder, JoinHandle, current, yield_now};

    #[cfg(stashpool_loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle, current, yield_now};

    /// Whether `handle`'s thread has finished running. loom's handles cannot
    /// tell; there the answer is always no, which only means the handle is
    /// joined later instead of released early.
    pub(crate) fn is_finished<T>(handle: &JoinHandle<T>) -> bool {
        #[cfg(not(stashpool_loom))]
        {
            handle.is_finished()
        }
        #[cfg(stashpool_loom)]
        {
            let _ = handle;
            false
        }
    }
}

/// Backs off inside a wait loop: spin a little, then give the core away.
///
/// Waits in the pool are short (an owner finishing a push or a pop, a sweeper
/// finishing one stash), so spinning first is right; yielding after that keeps
/// a waiter from burning a core when the thread it waits for was preempted.
///
/// Every such loop waits for an [`AtomicBool`] it has just loaded to change. Under loom this blocks until one is stored to, if
/// the load saw the latest value (`loom_impl::wait_for_a_store`, which says
/// why).
pub(crate) fn backoff(step: &mut u32) {
    #[cfg(not(stashpool_loom))]
    {
        if *step < 6 {
            for _ in 0..1u32 << *step {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        *step = step.saturating_add(1);
    }
    #[cfg(stashpool_loom)]
    {
        let _ = step;
        loom_impl::wait_for_a_store();
    }
}

#[cfg(not(stashpool_loom))]
mod imp {
    use crossbeam_deque::{Injector, Steal};

    pub(crate) use crate::per_thread::{PerThread, thread_index, token};

    /// `std::cell::UnsafeCell` with loom's closure-based access API.
    #[derive(Debug, Default)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// A multi-producer, multi-consumer FIFO (`crossbeam_deque::Injector`).
    pub(crate) struct Queue<T>(Injector<T>);

    impl<T> Queue<T> {
        pub(crate) fn new() -> Self {
            Self(Injector::new())
        }

        pub(crate) fn push(&self, value: T) {
            self.0.push(value)
        }

        /// Takes the oldest value, if any. `Injector::steal` can fail
        /// spuriously under contention (`Steal::Retry`); this retries.
        pub(crate) fn pop(&self) -> Option<T> {
            loop {
                match self.0.steal() {
                    Steal::Success(value) => return Some(value),
                    Steal::Empty => return None,
                    Steal::Retry => std::hint::spin_loop(),
                }
            }
        }

        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }
    }
}

#[cfg(stashpool_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;

    use loom::sync::Mutex;
    use loom::sync::atomic::AtomicBool;
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;

    /// The model's thread ids. A thread takes the lowest free one at its
    /// first `PerThread::get_or` and gives it back once its exit hooks have
    /// run ([`ThreadSlot::release`], called by them), as the real id guard
    /// (`per_thread::thread_id`) gives it back from a destructor registered
    /// before the pool's hooks. A thread that starts later is then given the
    /// exited thread's id and inherits its value in every `PerThread`, as
    /// with the real table, so the models see threads inherit stashes.
    struct Slots {
        next: usize,
        free: Vec<usize>,
    }

    // In a std `Arc`, so that a thread's hooks can give its id back while
    // the model shuts down, after loom has dropped its lazy statics.
    loom::lazy_static! {
        static ref SLOTS: std::sync::Arc<Mutex<Slots>> =
            std::sync::Arc::new(Mutex::new(Slots { next: 0, free: Vec::new() }));
    }

    loom::thread_local! {
        static SLOT: std::cell::Cell<Option<usize>> = std::cell::Cell::new(None);
    }

    loom::thread_local! {
        /// As the real token (`per_thread::thread_id`): nonzero while the
        /// thread holds its id, never the same for two holdings.
        static TOKEN: std::cell::Cell<u64> = std::cell::Cell::new(0);
    }

    /// Tokens: a plain counter, not part of any protocol the models check.
    static NEXT_TOKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

    /// This thread's token (0: it holds no id).
    pub(crate) fn token() -> u64 {
        TOKEN.try_with(std::cell::Cell::get).unwrap_or(0)
    }

    fn end_token() {
        let _ = TOKEN.try_with(|token| token.set(0));
    }

    loom::thread_local! {
        /// Set once this thread has given its id up for good
        /// ([`end_thread_id`]).
        static ENDED: std::cell::Cell<bool> = std::cell::Cell::new(false);
    }

    /// Whether this thread has given its id up for good.
    fn ended() -> bool {
        ENDED.try_with(|ended| ended.get()).unwrap_or(true)
    }

    /// This thread's id, if it holds one (none once its thread-locals are
    /// being destroyed).
    fn thread_slot() -> Option<usize> {
        if ended() {
            return None;
        }
        SLOT.try_with(|slot| slot.get()).ok().flatten()
    }

    /// Makes this thread one whose id guard is gone, as a thread is late in
    /// its teardown: it gives its id back, if it holds one, and takes none
    /// again, so the pool goes around its stashes (the stashless paths).
    ///
    /// A model reaches those paths this way, not from a thread-local
    /// destructor (`implementation`, section 9, says why).
    pub(crate) fn end_thread_id() {
        let _ = ENDED.try_with(|ended| ended.set(true));
        end_token();
        if let Ok(Some(id)) = SLOT.try_with(|slot| slot.take()) {
            SLOTS.lock().unwrap().free.push(id);
        }
    }

    /// A thread's hold on its id, for its exit hooks to give back.
    pub(crate) struct ThreadSlot {
        id: usize,
        slots: std::sync::Arc<Mutex<Slots>>,
    }

    impl ThreadSlot {
        /// This thread's hold on its id, if it has one.
        pub(crate) fn this_thread() -> Option<Self> {
            Some(Self {
                id: thread_slot()?,
                slots: std::sync::Arc::clone(&SLOTS),
            })
        }

        /// Gives an exited thread's id back, for the next thread (on the
        /// exiting thread, whose token ends first).
        pub(crate) fn release(self) {
            end_token();
            self.slots.lock().unwrap().free.push(self.id);
        }
    }

    /// This thread's id, taken now if it has none (as the real
    /// `per_thread::thread_index`); `None` once its thread-locals are being
    /// destroyed, as the real `get_or` answers past the destruction of its
    /// id guard.
    pub(crate) fn thread_index() -> Option<usize> {
        if ended() {
            return None;
        }
        SLOT.try_with(|slot| {
            if let Some(id) = slot.get() {
                return id;
            }
            let mut slots = SLOTS.lock().unwrap();
            let id = match slots.free.iter().enumerate().min_by_key(|(_, id)| **id) {
                Some((at, _)) => slots.free.swap_remove(at),
                None => {
                    assert!(slots.next < IDS, "more model threads at once than ids");
                    slots.next += 1;
                    slots.next - 1
                }
            };
            slot.set(Some(id));
            let token = NEXT_TOKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = TOKEN.try_with(|cell| cell.set(token));
            id
        })
        .ok()
    }

    /// loom stand-in for `per_thread::PerThread`: one entry per model
    /// thread id (above), which are reused as the real ones are. As in the
    /// real table, a thread finds its own entry with one acquire load of
    /// its flag, which only the entry's making writes (so lookups on
    /// different threads are independent, and loom does not order them),
    /// and values are boxed and never removed before the table drops, so
    /// references to them stay valid.
    pub(crate) struct PerThread<T: Send> {
        /// Whether the entry is made, and its value: written once, by the
        /// id's holder, before the flag is set.
        entries: [(AtomicBool, std::cell::UnsafeCell<Option<Box<T>>>); IDS],
    }

    /// More ids than any model has threads alive at once.
    const IDS: usize = 8;

    // SAFETY: an entry's value is written once, before its flag is set with
    // release, and only read after the flag is seen set with acquire;
    // `T: Send` as the real table asks, shared as `&T` only where `T: Sync`
    // (`for_each`), or on the thread that holds the id.
    unsafe impl<T: Send> Sync for PerThread<T> {}

    impl<T: Send> PerThread<T> {
        pub(crate) fn new() -> Self {
            Self {
                entries: std::array::from_fn(|_| Default::default()),
            }
        }

        fn lookup(&self, id: usize) -> Option<&T> {
            let (made, value) = &self.entries[id];
            if !made.load(Ordering::Acquire) {
                return None;
            }
            // SAFETY: set, so written and never written again (`Sync`).
            unsafe { (*value.get()).as_deref() }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            self.lookup(thread_slot()?)
        }
    }

    /// The real table's per-thread cache is not modelled: every lookup goes
    /// to the table.
    impl<T: Send + std::ops::Deref<Target: Sized>> PerThread<T> {
        pub(crate) fn cached(&self) -> Option<&T::Target> {
            None
        }

        pub(crate) fn cached_later(&self) -> Option<&T::Target> {
            None
        }

        pub(crate) fn remember(&self, _: &T) {}

        pub(crate) fn get_or(&self, create: impl FnOnce() -> T) -> Option<&T> {
            let id = thread_index()?;
            if let Some(value) = self.lookup(id) {
                return Some(value);
            }
            let (made, value) = &self.entries[id];
            // SAFETY: not yet set, and only this thread, which holds the
            // id, writes it (`Sync`).
            unsafe { *value.get() = Some(Box::new(create())) };
            made.store(true, Ordering::Release);
            self.lookup(id)
        }

        pub(crate) fn for_each<'a>(&'a self, mut f: impl FnMut(&'a T))
        where
            T: Sync,
        {
            (0..IDS).filter_map(|id| self.lookup(id)).for_each(&mut f)
        }
    }

    /// loom stand-in for `crossbeam_deque::Injector`.
    pub(crate) struct Queue<T>(Mutex<VecDeque<T>>);

    impl<T> Queue<T> {
        pub(crate) fn new() -> Self {
            Self(Mutex::new(VecDeque::new()))
        }

        pub(crate) fn push(&self, value: T) {
            self.0.lock().unwrap().push_back(value)
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.0.lock().unwrap().pop_front()
        }

        pub(crate) fn len(&self) -> usize {
            self.0.lock().unwrap().len()
        }
    }
}

#[cfg(stashpool_loom)]
mod loom_impl {
    use loom::sync::{Condvar, Mutex};
    use std::cell::Cell;
    use std::sync::atomic::Ordering;

    // === wait loops that block ===
    //
    // A wait loop (`while flag.load(..) { backoff(..) }`) that yields gives
    // loom a choice at every operation of the thread it waits for: run that
    // thread on, or go round the loop once more. The loop itself changes
    // nothing, so those branches only repeat states, but a model with a long
    // sweep and a waiting owner then exceeds loom's branch limit at three
    // preemptions. So under loom `backoff` blocks the waiter instead, until
    // the next store to any `AtomicBool` (watched, below), which is when its
    // load could next return something new, provided its last load returned
    // the latest value. If that load returned an older value (loom models
    // stale loads), `backoff` yields as before: after a yield loom's loads
    // no longer return values the thread saw before it, so the loop moves
    // on.
    //
    // "The latest value" is judged by value: a stale load that returned an
    // older store equal to the latest one counts as latest. That gives up
    // only interleavings in which the waiter would next read a still older
    // store of another value (it waits for the next store instead), and
    // never reports a false deadlock: a
    // waiter blocked with no store to come would spin forever on the
    // latest value anyway.
    //
    // The bookkeeping is plain std, not loom: loom runs one model thread at a
    // time on the thread that called `loom::model`, so it is exact between
    // loom's scheduling points and adds no branches of its own. Only the
    // blocking itself (a loom `Mutex` and `Condvar`) is modelled.

    std::thread_local! {
        /// Stores to watched atomics so far, in this model run.
        static STORES: Cell<u64> = const { Cell::new(0) };
        /// Threads blocked in `wait_for_a_store`, in this model run.
        static WAITING: Cell<usize> = const { Cell::new(0) };
    }

    loom::thread_local! {
        /// `STORES` when this model thread's last watched load returned
        /// the latest value; `None` if it returned an older one.
        static LAST_LOAD: Cell<Option<u64>> = Cell::new(None);
    }

    loom::lazy_static! {
        static ref STORED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
    }

    /// `backoff` under loom: blocks until a watched atomic is stored to, if
    /// none was since this thread's last load of one and that load returned
    /// the latest value; otherwise yields.
    pub(super) fn wait_for_a_store() {
        let seen = LAST_LOAD.try_with(Cell::take).ok().flatten();
        let Some(seen) = seen else {
            // A stale load, or in a thread-local destructor.
            return loom::thread::yield_now();
        };
        let (lock, stored) = &*STORED;
        let mut guard = lock.lock().unwrap();
        // No scheduling point from here to the wait, which releases the lock
        // atomically: a store either came before this check or notifies us.
        if STORES.with(Cell::get) == seen {
            WAITING.with(|waiting| waiting.set(waiting.get() + 1));
            guard = stored.wait(guard).unwrap();
        }
        drop(guard);
    }

    /// Counts a store, and wakes the threads blocked in `wait_for_a_store`.
    fn stored() {
        STORES.with(|stores| stores.set(stores.get() + 1));
        if WAITING.with(|waiting| waiting.replace(0)) > 0 {
            let (lock, stored) = &*STORED;
            let _guard = lock.lock().unwrap();
            stored.notify_all();
        }
    }

    /// loom's `AtomicBool`, with the bookkeeping `wait_for_a_store` needs:
    /// the value of the latest store (in modification order, which under
    /// loom is the order stores run in), so that a load can tell whether it
    /// returned it.
    pub(crate) struct AtomicBool {
        inner: loom::sync::atomic::AtomicBool,
        latest: std::sync::atomic::AtomicBool,
    }

    impl AtomicBool {
        pub(crate) fn new(value: bool) -> Self {
            Self {
                inner: loom::sync::atomic::AtomicBool::new(value),
                latest: std::sync::atomic::AtomicBool::new(value),
            }
        }

        pub(crate) fn load(&self, order: Ordering) -> bool {
            let value = self.inner.load(order);
            let latest = value == self.latest.load(Ordering::Relaxed);
            let stores = STORES.with(Cell::get);
            let _ = LAST_LOAD.try_with(|last| last.set(latest.then_some(stores)));
            value
        }

        pub(crate) fn store(&self, value: bool, order: Ordering) {
            self.inner.store(value, order);
            self.latest.store(value, Ordering::Relaxed);
            stored();
        }

        pub(crate) fn swap(&self, value: bool, order: Ordering) -> bool {
            let old = self.inner.swap(value, order);
            self.latest.store(value, Ordering::Relaxed);
            stored();
            old
        }

        /// A store only when it succeeds; when it fails it read the latest
        /// value, as a load that returned it does.
        pub(crate) fn compare_exchange(
            &self,
            current: bool,
            new: bool,
            success: Ordering,
            failure: Ordering,
        ) -> Result<bool, bool> {
            let result = self.inner.compare_exchange(current, new, success, failure);
            match result {
                Ok(_) => {
                    self.latest.store(new, Ordering::Relaxed);
                    stored();
                }
                Err(_) => {
                    let stores = STORES.with(Cell::get);
                    let _ = LAST_LOAD.try_with(|last| last.set(Some(stores)));
                }
            }
            result
        }
    }
}

/// A bounded multi-producer, multi-consumer FIFO: the overflow's queue of
/// single objects (`pool/singles.rs`) and the worker pool's fast queue
/// (`workers/queue.rs`). `crossbeam_queue::ArrayQueue`, Vyukov's ring;
/// under loom, a locked `VecDeque` that refuses values past its capacity,
/// as the ring does when full.
pub(crate) use self::ring::Ring;

#[cfg(not(stashpool_loom))]
mod ring {
    use crossbeam_queue::ArrayQueue;

    pub(crate) struct Ring<T>(ArrayQueue<T>);

    impl<T> Ring<T> {
        /// A ring of `capacity` slots, at least one.
        pub(crate) fn new(capacity: usize) -> Self {
            Self(ArrayQueue::new(capacity))
        }

        /// Appends `value`, or gives it back if the ring is full.
        #[inline]
        pub(crate) fn push(&self, value: T) -> Result<(), T> {
            self.0.push(value)
        }

        /// Takes the oldest value, if any.
        #[inline]
        pub(crate) fn pop(&self) -> Option<T> {
            self.0.pop()
        }

        /// Values held (a snapshot).
        pub(crate) fn len(&self) -> usize {
            self.0.len()
        }

        /// Values it can hold.
        #[cfg(test)]
        pub(crate) fn capacity(&self) -> usize {
            self.0.capacity()
        }
    }
}

#[cfg(stashpool_loom)]
mod ring {
    use loom::sync::Mutex;
    use std::collections::VecDeque;

    /// loom stand-in for `crossbeam_queue::ArrayQueue`.
    pub(crate) struct Ring<T> {
        values: Mutex<VecDeque<T>>,
        capacity: usize,
    }

    impl<T> Ring<T> {
        pub(crate) fn new(capacity: usize) -> Self {
            assert!(capacity > 0, "a ring needs a slot");
            Self {
                values: Mutex::new(VecDeque::new()),
                capacity,
            }
        }

        pub(crate) fn push(&self, value: T) -> Result<(), T> {
            let mut values = self.values.lock().unwrap();
            if values.len() == self.capacity {
                return Err(value);
            }
            values.push_back(value);
            Ok(())
        }

        pub(crate) fn pop(&self) -> Option<T> {
            self.values.lock().unwrap().pop_front()
        }

        pub(crate) fn len(&self) -> usize {
            self.values.lock().unwrap().len()
        }
    }
}

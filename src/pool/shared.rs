//! A pool's shared state: every thread's stash, the overflow, and the sweep.
//!
//! `LocalPool` keeps this behind an `Arc` made on first use, so that a pool
//! can be built in a `const` context, the background sweeper can hold it
//! weakly, and exiting threads can reach it to flush their stashes.
//!
//! A pool makes stashes only for threads whose thread id is below
//! `max_stashes` (`builder::STASHES_PER_CORE` per core), and at most
//! `max_idle` of them, past which a stash's share would be zero; a thread
//! without one has none, and its
//! gets and returns go to the overflow one object at a time, as those of a
//! thread in its teardown do (the stashless paths). Ids are dense and
//! reused lowest first, so the stashes go to the threads that came first,
//! and a stash whose thread exited goes, with its id, to the next thread.
//!
//! The sweep lock serialises everything that touches another thread's stash
//! or changes the pool's epoch: sweeps, making a stash, flushing the stash
//! of an exiting thread, and closing the pool. None of them runs user code
//! while holding it: the objects they drop are dropped after it is released.

use crate::pool::barrier::{self, Strategy};
use crate::pool::cell::SharedRef;
use crate::pool::node::Node;
use crate::pool::overflow::Overflow;
use crate::pool::owner;
use crate::pool::stash::{Counters, Spill, Stash, StashBox};
use crate::sync::{
    fork_gate, lock, thread_index, AtomicBool, AtomicCount, AtomicUsize, ForkGuard, Mutex,
    MutexGuard, Ordering, PerThread,
};
use crate::Stats;

/// What the sweep lock protects.
pub(super) struct Sweeping {
    /// The sweep count: the pool's epoch.
    pub(super) epoch: u64,
    /// How many stashes the pool has made: the `max_idle` shares are cut
    /// for this many. (Stashes of exited threads stay, for the next thread
    /// given the same id, so this counts the most threads that used the
    /// pool at once, not every thread that ever did.)
    pub(super) stashes: usize,
}

/// The sweep lock, held (see `Shared::lock_sweep`).
pub(super) struct SweepLock<'a> {
    // Fields drop in order: the lock is released before the gate.
    sweeping: MutexGuard<'a, Sweeping>,
    _gate: ForkGuard,
}

impl std::ops::Deref for SweepLock<'_> {
    type Target = Sweeping;

    fn deref(&self) -> &Sweeping {
        &self.sweeping
    }
}

impl std::ops::DerefMut for SweepLock<'_> {
    fn deref_mut(&mut self) -> &mut Sweeping {
        &mut self.sweeping
    }
}

pub(crate) struct Shared<T: Send> {
    pub(super) stashes: PerThread<StashBox<T>>,
    pub(super) overflow: Overflow<T>,
    /// The sweep count and the stash count, under the lock that sweeps
    /// hold (see the module docs).
    pub(super) sweep: Mutex<Sweeping>,
    /// The sweep count, as `Sweeping::epoch`, for readers that take no lock
    /// (stashless returns stamp their objects with it); stored by sweeps
    /// under the lock. An `AtomicCount`, so it wraps at 2^32 on targets
    /// without 64-bit atomics: a stamp that wrapped reads as old, and its
    /// object is trimmed a sweep early, never kept too long.
    pub(super) epoch: AtomicCount,
    /// The bound on stashes by thread id: threads whose id (`per_thread`)
    /// is at or past this have none and use the overflow directly.
    pub(crate) max_stashes: usize,
    /// `Sweeping::stashes`, for threads that check without the lock
    /// whether the pool has made `max_idle` stashes, past which a stash's
    /// share would be zero. Stored under the sweep lock; kept only when
    /// `max_idle` bounds the pool.
    stashes_made: AtomicUsize,
    /// Set (under the sweep lock) once the pool has dropped.
    pub(super) closed: AtomicBool,
    /// Objects dropped by sweeps.
    pub(super) trimmed: AtomicCount,
    /// Counts for threads without a stash (see `exit.rs`); shared by them
    /// all, so bumped with atomic read-modify-writes.
    pub(crate) orphans: Counters<true>,
    pub(crate) local_capacity: usize,
    /// `Builder::max_idle`: the most idle objects of all stashes and the
    /// overflow together, after a sweep.
    pub(crate) max_idle: usize,
    pub(crate) strategy: Strategy,
    /// This pool's key in the background sweeper's registry.
    #[cfg_attr(stashpool_loom, allow(dead_code))]
    pub(crate) id: u64,
}

impl<T: Send> Shared<T> {
    pub(crate) fn new(local_capacity: usize, max_idle: usize, max_stashes: usize, id: u64) -> Self {
        #[cfg(not(stashpool_loom))]
        crate::pool::background::guard_forks();
        Self {
            stashes: PerThread::new(),
            overflow: Overflow::new(max_idle),
            sweep: Mutex::new(Sweeping {
                epoch: 0,
                stashes: 0,
            }),
            epoch: AtomicCount::new(0),
            max_stashes,
            stashes_made: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            trimmed: AtomicCount::new(0),
            orphans: Counters::default(),
            local_capacity,
            max_idle,
            strategy: barrier::strategy(),
            id,
        }
    }

    // === owner paths ===

    /// This thread's stash, made on first use; `None` once this thread's
    /// thread-locals are being destroyed (see `exit.rs`).
    #[inline(always)]
    pub(crate) fn stash(this: SharedRef<'_, T>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        if let Some(stash) = owner::last_stash(this.id) {
            // SAFETY: `last_stash` returns only what `remember` stored for
            // this pool on this thread (ids are never reused): this thread's
            // stash in `this`, which keeps it alive. It is still this
            // thread's: `remember` stores only while the thread has an owner
            // token, and the thread's exit hooks empty the cache before it
            // gives up its thread id (`owner.rs`).
            return Some(unsafe { &*stash.cast::<Stash<T>>() });
        }
        Self::find_stash(this)
    }

    /// `stash` after a miss in the cache's first entry: its second entry,
    /// else this thread's entry in the table.
    #[inline(never)]
    fn find_stash(this: SharedRef<'_, T>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        if let Some(stash) = owner::previous_stash(this.id) {
            // SAFETY: as in `stash`.
            return Some(unsafe { &*stash.cast::<Stash<T>>() });
        }
        match this.get().stashes.get() {
            Some(stash) => Some(Self::claim(this, stash)),
            None => Self::new_stash(this),
        }
    }

    /// `stash`, this thread's entry in the table, hooked for this thread's
    /// exit and remembered in its cache.
    fn claim<'a>(this: SharedRef<'a, T>, stash: &'a StashBox<T>) -> &'a Stash<T>
    where
        T: 'static,
    {
        // Zero: a stash this thread just made, never hooked (a thread's
        // serial is zero, too, until it registers its first hook).
        let hooked_by = stash.hooked_by.load(Ordering::Relaxed);
        if hooked_by == 0 || hooked_by != owner::serial() {
            Self::adopt(this, stash);
        }
        owner::remember(this.id, stash.as_ptr().cast());
        stash
    }

    /// Registers this thread's exit hook for `stash`, which this thread
    /// owns: one it made, or one it inherited with the thread id of
    /// an exited thread (that thread's hook has run, so without a hook of
    /// its own this thread's objects would not be flushed when it exits).
    #[cold]
    fn adopt(this: SharedRef<'_, T>, stash: &StashBox<T>)
    where
        T: 'static,
    {
        // A thread whose hooks have run registers none (it could not).
        if owner::ended() {
            return;
        }
        crate::pool::exit::register(this.to_arc(), stash.as_ptr());
        stash.hooked_by.store(owner::serial(), Ordering::Relaxed);
    }

    #[cold]
    fn new_stash(this: SharedRef<'_, T>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        let shared = this.get();
        if owner::ended() {
            return None;
        }
        // A pool whose stashes can keep nothing (`local_capacity(0)`, or
        // `max_idle(0)`) makes none: every object goes through the overflow.
        if shared.stash_capacity(1) == 0 {
            return None;
        }
        // Past the bound, no stash (module docs): checked before the lock,
        // since a thread without a stash comes here on every get and return.
        if thread_index().is_none_or(|id| id >= shared.max_stashes) {
            return None;
        }
        // The id just taken may be an exited thread's, whose stash this
        // thread takes over.
        if let Some(stash) = shared.stashes.get() {
            return Some(Self::claim(this, stash));
        }
        // Nor past `max_idle` stashes, whose shares would be zero: such a
        // stash could keep nothing, only cost its bookkeeping. Checked
        // without the lock first, for the same reason.
        let bounded = shared.max_idle != usize::MAX;
        if bounded && shared.stashes_made.load(Ordering::Relaxed) >= shared.max_idle {
            return None;
        }
        let (epoch, capacity) = {
            let mut sweeping = shared.lock_sweep();
            if sweeping.stashes >= shared.max_idle {
                return None;
            }
            // Counted now, so that threads racing to make stashes make no
            // more than `max_idle` between them; given back below if this
            // thread makes none.
            let stashes = sweeping.stashes + 1;
            shared.count_stashes(&mut sweeping, stashes);
            (sweeping.epoch, shared.stash_capacity(sweeping.stashes))
        };
        let mut made = false;
        // `None` once this thread is too far into its teardown to hold a
        // thread id (its id guard is destroyed): go around stashes then.
        let stash = shared.stashes.get_or(|| {
            made = true;
            StashBox::new(Stash::new(epoch, capacity))
        });
        let mut sweeping = shared.lock_sweep();
        let Some(stash) = stash else {
            let stashes = sweeping.stashes - 1;
            shared.count_stashes(&mut sweeping, stashes);
            return None;
        };
        debug_assert!(made, "only this thread makes its entry, and it had none");
        // A sweep that ran between reading the epoch and the stash entering
        // the table did not see it: the stash is still empty (only this
        // thread fills it), so catching up is all it needs.
        let epoch = sweeping.epoch;
        stash.with_owner(shared.strategy, |local| {
            local.epoch = local.epoch.max(epoch)
        });
        if bounded {
            // One more stash: every other one's share shrinks.
            let capacity = shared.stash_capacity(sweeping.stashes);
            shared.rebalance(capacity);
        }
        drop(sweeping);
        Some(Self::claim(this, stash))
    }

    /// Sets the count of stashes made, under the sweep lock, and its
    /// mirror for the check made without the lock (bounded pools only).
    fn count_stashes(&self, sweeping: &mut Sweeping, stashes: usize) {
        sweeping.stashes = stashes;
        if self.max_idle != usize::MAX {
            self.stashes_made.store(stashes, Ordering::Relaxed);
        }
    }

    /// Takes the sweep lock, inside the fork gate (`sync::fork_gate`).
    pub(super) fn lock_sweep(&self) -> SweepLock<'_> {
        let gate = fork_gate();
        SweepLock {
            sweeping: lock(&self.sweep),
            _gate: gate,
        }
    }

    /// The capacity of each stash when the pool has `stashes` of them: the
    /// pool's `local_capacity`, or the stash's share of `max_idle`.
    pub(super) fn stash_capacity(&self, stashes: usize) -> usize {
        if self.max_idle == usize::MAX {
            self.local_capacity
        } else {
            self.local_capacity.min(self.max_idle / stashes.max(1))
        }
    }

    /// Whether `stash` is this thread's stash now.
    pub(crate) fn owns(&self, stash: *const Stash<T>) -> bool {
        self.stashes
            .get()
            .is_some_and(|mine| std::ptr::eq(mine.as_ptr(), stash))
    }

    /// The most recently returned object of this thread's stash.
    #[inline(always)]
    pub(crate) fn pop(&self, stash: &Stash<T>) -> Option<Box<Node<T>>> {
        let node = stash.with_owner(self.strategy, |local| local.pop())?;
        stash.counters.reused.bump();
        Some(node)
    }

    /// An object from the overflow, taking its whole batch into the stash;
    /// else a single object.
    #[cold]
    pub(crate) fn pop_overflow(&self, stash: &Stash<T>) -> Option<Box<Node<T>>> {
        crate::pool::local_pool::after_fork();
        let Some(mut batch) = self.overflow.pop() else {
            let node = self.overflow.pop_one()?;
            stash.counters.reused.bump();
            return Some(node);
        };
        // Batches are never empty (see `Overflow::push`).
        let node = batch.items.pop()?;
        if batch.items.is_empty() {
            // A batch of one (a stash with no room spills objects one by
            // one): its buffer serves this stash's next spill.
            stash.with_owner(self.strategy, |local| local.keep_spare(batch.items));
        } else {
            stash.with_owner(self.strategy, |local| local.install(batch));
        }
        stash.counters.reused.bump();
        Some(node)
    }

    /// Pools a returned (already recycled) object in this thread's stash.
    #[inline(always)]
    pub(crate) fn push(&self, stash: &Stash<T>, node: Box<Node<T>>) {
        match stash.with_owner(self.strategy, |local| local.push(node, local.capacity)) {
            Ok(()) => stash.counters.returned.bump(),
            Err(node) => self.push_full(stash, node),
        }
    }

    #[cold]
    fn push_full(&self, stash: &Stash<T>, node: Box<Node<T>>) {
        crate::pool::local_pool::after_fork();
        let spill = stash.with_owner(self.strategy, |local| {
            local.spill(node, local.capacity, &self.overflow)
        });
        match spill {
            Spill::Kept => stash.counters.returned.bump(),
            Spill::Batch(batch) => {
                // Outside the critical section: the owner's hold on its stash
                // stays as short as a push. The batch is counted idle while
                // in transit; its room in the overflow is reserved.
                self.overflow.push(batch);
                stash.counters.returned.bump();
            }
            Spill::One(node, stamp) => {
                self.overflow.push_one(node, stamp);
                stash.counters.returned.bump();
            }
            Spill::Rejected(node) => {
                stash.counters.rejected.bump();
                drop(node);
            }
        }
    }

    /// Pools an object returned by a thread without a stash: straight to
    /// the overflow's singles, or dropped (rejected) if it is full. Takes no
    /// lock and allocates nothing (once the queue has room in its block):
    /// past the bound on stashes, this is every return of most threads.
    #[cold]
    pub(crate) fn push_stashless(&self, node: Box<Node<T>>) {
        if self.overflow.reserve(1) == 0 {
            self.orphans.rejected.bump();
            return drop(node);
        }
        // Stamped with the sweep count as of now; a sweep running meanwhile
        // sees the object as returned during it, which keeps it one sweep.
        // (It cannot race the pool's close: a return borrows the pool.)
        let stamp = self.epoch.load(Ordering::Acquire);
        self.overflow.push_one(node, stamp);
        self.orphans.returned.bump();
    }

    /// An object from the overflow for a thread without a stash: a single
    /// if there is one, else one of a batch, the rest of which goes back to
    /// the overflow, keeping its stamp.
    #[cold]
    pub(crate) fn pop_stashless(&self) -> Option<Box<Node<T>>> {
        if let Some(node) = self.overflow.pop_one() {
            self.orphans.reused.bump();
            return Some(node);
        }
        let mut batch = self.overflow.pop()?;
        let node = batch.items.pop()?;
        if !batch.items.is_empty() {
            self.overflow.put_back(batch);
        }
        self.orphans.reused.bump();
        Some(node)
    }

    /// Whether the pool has dropped (exit hooks of dead pools are pruned).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    // === stats ===

    pub(crate) fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        let mut sums = self.orphans.snapshot();
        self.stashes.for_each(|stash| {
            for (sum, n) in sums.iter_mut().zip(stash.counters.snapshot()) {
                *sum += n;
            }
        });
        let [created, reused, returned, rejected] = sums;
        stats.created = created;
        stats.reused = reused;
        stats.returned = returned;
        stats.rejected = rejected;
        stats.trimmed = self.trimmed.load(Ordering::Relaxed);
        // Exact at quiescence; a snapshot of moving counters otherwise, so
        // it saturates rather than wrapping.
        let idle = stats
            .returned
            .saturating_sub(stats.reused)
            .saturating_sub(stats.trimmed);
        stats.idle = usize::try_from(idle).unwrap_or(usize::MAX);
        stats
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::collections::HashMap;
    use std::sync::{mpsc, Barrier, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::LocalPool;

    /// How long a threaded test may take before it counts as deadlocked.
    const DEADLINE: Duration = Duration::from_secs(60);

    /// Runs `body` on its own thread; fails if it is not done by `DEADLINE`.
    fn within_deadline(body: impl FnOnce() + Send + 'static) {
        let (done, finished) = mpsc::channel();
        let runner = std::thread::spawn(move || {
            body();
            let _ = done.send(());
        });
        match finished.recv_timeout(DEADLINE) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(panic) = runner.join() {
                    std::panic::resume_unwind(panic);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("not done within {DEADLINE:?}"),
        }
    }

    fn stashes<T: Send>(shared: &Shared<T>) -> Vec<usize> {
        let mut all = Vec::new();
        shared
            .stashes
            .for_each(|stash| all.push(stash.as_ptr() as usize));
        all
    }

    /// One round: `threads` threads, all alive at once (so each holds an id
    /// of its own), take turns using `pool` once. Each records its id and,
    /// if it found one, its stash.
    fn round(pool: &LocalPool<Vec<u8>>, threads: usize) -> Vec<(usize, Option<usize>)> {
        let turn = Mutex::new(());
        let all_used = Barrier::new(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (turn, all_used) = (&turn, &all_used);
                    s.spawn(move || {
                        {
                            let _turn = turn.lock().unwrap();
                            pool.with(|buf| buf.push(1));
                        }
                        let shared = pool.shared.get().expect("used");
                        let id = thread_index().expect("a live thread has an id");
                        let stash = shared.stashes.get().map(|s| s.as_ptr() as usize);
                        // Held until every thread has used the pool, so no
                        // id is given back and taken again within a round.
                        all_used.wait();
                        (id, stash)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// 64 threads that take turns with a pool bounded to 4 stashes: only
    /// the threads with ids below 4 get one (ids are shared with every other
    /// test running, so which threads those are varies), the others share
    /// objects through the overflow, so the pool makes at most one object
    /// per stash and one for all the rest. A second round of 64 threads
    /// makes no new stash: a thread given the id of an exited thread takes
    /// over that thread's stash.
    #[test]
    fn threads_past_the_bound_share_the_overflow() {
        within_deadline(|| {
            const BOUND: usize = 4;
            const THREADS: usize = if cfg!(miri) { 8 } else { 64 };
            let mut pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .manual_sweep()
                .build();
            pool.config.max_stashes = Some(BOUND);
            let first = round(&pool, THREADS);
            let shared = pool.shared.get().unwrap();
            for &(id, stash) in &first {
                assert_eq!(
                    stash.is_some(),
                    id < BOUND,
                    "thread {id}: a stash iff below the bound"
                );
            }
            let made = stashes(&shared);
            assert!(made.len() <= BOUND, "{} stashes", made.len());
            let stats = pool.stats();
            assert!(
                stats.created <= BOUND as u64 + 1,
                "turn-taking threads reuse objects: {stats:?}"
            );
            assert!(stats.created >= 1 && stats.idle as u64 == stats.created);

            let by_id: HashMap<usize, usize> = first
                .iter()
                .filter_map(|&(id, stash)| Some((id, stash?)))
                .collect();
            let second = round(&pool, THREADS);
            for &(id, stash) in &second {
                assert_eq!(stash.is_some(), id < BOUND);
                if let (Some(stash), Some(&before)) = (stash, by_id.get(&id)) {
                    assert_eq!(
                        stash, before,
                        "id {id}: the exited thread's stash is reused"
                    );
                }
            }
            assert!(stashes(&shared).len() <= BOUND);
            let stats = pool.stats();
            assert!(stats.created <= BOUND as u64 + 1, "{stats:?}");
        });
    }

    /// A pool that keeps at most 2 idle objects makes at most 2 stashes (a
    /// third would have a share of zero), for the first threads that use
    /// it, whatever their thread ids: two threads that took ids for another
    /// pool first, and stay alive, do not take this pool's stashes.
    #[test]
    fn a_pool_makes_no_more_stashes_than_it_keeps_idle_objects() {
        within_deadline(|| {
            const MAX_IDLE: usize = 2;
            let threads = if cfg!(miri) { 4 } else { 8 };
            let other: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
            let (hold, release) = (Barrier::new(3), Barrier::new(3));
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        other.with(|buf| buf.push(1)); // takes a thread id
                        hold.wait();
                        release.wait();
                    });
                }
                hold.wait();
                let pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                    .max_idle(MAX_IDLE)
                    .manual_sweep()
                    .build();
                let used = round(&pool, threads);
                let shared = pool.shared.get().unwrap();
                let eligible = used
                    .iter()
                    .filter(|&&(id, _)| id < shared.max_stashes)
                    .count();
                let with_stash = used.iter().filter(|&&(_, stash)| stash.is_some()).count();
                assert_eq!(with_stash, eligible.min(MAX_IDLE), "{used:?}");
                assert_eq!(stashes(&shared).len(), with_stash);
                release.wait();
            });
        });
    }

    /// A pool whose stashes could keep nothing makes none: its threads take
    /// and return objects through the overflow, which holds them.
    #[test]
    fn a_pool_without_room_in_stashes_makes_none() {
        let pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
            .local_capacity(0)
            .manual_sweep()
            .build();
        let used = round(&pool, 2);
        assert!(used.iter().all(|&(_, stash)| stash.is_none()), "{used:?}");
        let shared = pool.shared.get().unwrap();
        assert!(stashes(&shared).is_empty());
        let stats = pool.stats();
        assert_eq!(
            (stats.created, stats.idle),
            (1, 1),
            "one object, shared: {stats:?}"
        );
    }
}

//! A pool's shared state: every thread's stash, the overflow, and the sweep.
//!
//! `LocalPool` keeps this behind an `Arc` made on first use, so that a pool
//! can be built in a `const` context, the background sweeper can hold it
//! weakly, and exiting threads can reach it to flush their stashes.
//!
//! The sweep lock serialises everything that touches another thread's stash
//! or changes the pool's epoch: sweeps, making a stash, flushing the stash
//! of an exiting thread, and closing the pool. None of them runs user code
//! while holding it: the objects they drop are dropped after it is released.

use crate::pool::barrier::{self, Strategy};
use crate::pool::node::Node;
use crate::pool::overflow::{Batch, Overflow};
use crate::pool::owner;
use crate::pool::stash::{Counters, Spill, Stash, StashBox};
use crate::sync::{
    fork_gate, lock, Arc, AtomicBool, AtomicCount, ForkGuard, Mutex, MutexGuard, Ordering,
    PerThread,
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
    pub(crate) fn new(local_capacity: usize, max_idle: usize, id: u64) -> Self {
        #[cfg(not(stashpool_loom))]
        crate::pool::background::guard_forks();
        Self {
            stashes: PerThread::new(),
            overflow: Overflow::new(max_idle),
            sweep: Mutex::new(Sweeping {
                epoch: 0,
                stashes: 0,
            }),
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
    pub(crate) fn stash(this: &Arc<Self>) -> Option<&Stash<T>>
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
    fn find_stash(this: &Arc<Self>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        if let Some(stash) = owner::previous_stash(this.id) {
            // SAFETY: as in `stash`.
            return Some(unsafe { &*stash.cast::<Stash<T>>() });
        }
        match this.stashes.get() {
            Some(stash) => {
                if stash.hooked_by.load(Ordering::Relaxed) != owner::serial() {
                    Self::adopt(this, stash);
                }
                owner::remember(this.id, stash.as_ptr().cast());
                Some(stash)
            }
            None => Self::new_stash(this),
        }
    }

    /// Registers this thread's exit hook for `stash`, which this thread
    /// owns: one it made, or one it inherited with the thread id of
    /// an exited thread (that thread's hook has run, so without a hook of
    /// its own this thread's objects would not be flushed when it exits).
    #[cold]
    fn adopt(this: &Arc<Self>, stash: &StashBox<T>)
    where
        T: 'static,
    {
        // A thread whose hooks have run registers none (it could not).
        if owner::ended() {
            return;
        }
        crate::pool::exit::register(this, stash.as_ptr());
        stash.hooked_by.store(owner::serial(), Ordering::Relaxed);
    }

    #[cold]
    fn new_stash(this: &Arc<Self>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        if owner::ended() {
            return None;
        }
        let (epoch, capacity) = {
            let sweeping = this.lock_sweep();
            (sweeping.epoch, this.stash_capacity(sweeping.stashes + 1))
        };
        let mut made = false;
        // `None` once this thread is too far into its teardown to hold a
        // thread id (its id guard is destroyed): go around stashes then.
        let stash = this.stashes.get_or(|| {
            made = true;
            StashBox::new(Stash::new(epoch, capacity))
        })?;
        if made {
            let mut sweeping = this.lock_sweep();
            // A sweep that ran between reading the epoch and the stash
            // entering the table did not see it: the stash is still empty
            // (only this thread fills it), so catching up is all it needs.
            let epoch = sweeping.epoch;
            stash.with_owner(this.strategy, |local| local.epoch = local.epoch.max(epoch));
            sweeping.stashes += 1;
            if this.max_idle != usize::MAX {
                // One more stash: every other one's share shrinks.
                let capacity = this.stash_capacity(sweeping.stashes);
                this.rebalance(capacity);
            }
        }
        Self::adopt(this, stash);
        owner::remember(this.id, stash.as_ptr().cast());
        Some(stash)
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

    /// An object from the overflow, taking its whole batch into the stash.
    #[cold]
    pub(crate) fn pop_overflow(&self, stash: &Stash<T>) -> Option<Box<Node<T>>> {
        crate::pool::local_pool::after_fork();
        let mut batch = self.overflow.pop()?;
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
            Spill::Rejected(node) => {
                stash.counters.rejected.bump();
                drop(node);
            }
        }
    }

    /// Pools an object returned by a thread without a stash: straight to
    /// the overflow, or dropped (rejected) if it is full.
    #[cold]
    pub(crate) fn push_stashless(&self, node: Box<Node<T>>) {
        if self.overflow.reserve(1) == 0 {
            self.orphans.rejected.bump();
            return drop(node);
        }
        // The lock gives the batch the pool's current epoch as its stamp.
        let sweeping = self.lock_sweep();
        self.overflow.push(Batch::new(vec![node], sweeping.epoch));
        self.orphans.returned.bump();
    }

    /// An object from the overflow for a thread without a stash: the rest of
    /// its batch goes back to the overflow, keeping its stamp.
    #[cold]
    pub(crate) fn pop_stashless(&self) -> Option<Box<Node<T>>> {
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

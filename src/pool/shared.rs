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

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::pool::barrier::{self, Strategy};
use crate::pool::node::Node;
use crate::pool::overflow::{Batch, Overflow};
use crate::pool::stash::{Counters, Spill, Stash, StashBox};
use crate::sync::thread::ThreadId;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering, PerThread};
use crate::Stats;

/// What the sweep lock protects.
pub(super) struct Sweeping {
    /// The sweep count: the pool's epoch.
    pub(super) epoch: u64,
    /// The threads whose sweeps are dropping what they trimmed.
    pub(super) droppers: Vec<ThreadId>,
}

pub(crate) struct Shared<T: Send> {
    pub(super) stashes: PerThread<StashBox<T>>,
    pub(super) overflow: Overflow<T>,
    /// The sweep count and the sweeps dropping objects, under the lock that
    /// sweeps hold (see the module docs).
    pub(super) sweep: Mutex<Sweeping>,
    /// Signalled when a sweep has finished dropping what it trimmed.
    pub(super) dropped: Condvar,
    /// Set (under the sweep lock) once the pool has dropped.
    pub(super) closed: AtomicBool,
    /// Objects dropped by sweeps.
    pub(super) trimmed: AtomicU64,
    /// Counts for threads without a stash (see `exit.rs`); shared by them
    /// all, so bumped with atomic read-modify-writes.
    pub(crate) orphans: Counters<true>,
    pub(crate) local_capacity: usize,
    pub(crate) strategy: Strategy,
    /// This pool's key in the background sweeper's registry.
    #[cfg_attr(stashpool_loom, allow(dead_code))]
    pub(crate) id: u64,
}

impl<T: Send> Shared<T> {
    pub(crate) fn new(local_capacity: usize, max_idle: usize, id: u64) -> Self {
        Self {
            stashes: PerThread::new(),
            overflow: Overflow::new(max_idle),
            sweep: Mutex::new(Sweeping {
                epoch: 0,
                droppers: Vec::new(),
            }),
            dropped: Condvar::new(),
            closed: AtomicBool::new(false),
            trimmed: AtomicU64::new(0),
            orphans: Counters::default(),
            local_capacity,
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
        if let Some(stash) = crate::pool::owner::last_stash(this.id) {
            // SAFETY: `last_stash` returns only what `remember` stored for
            // this pool on this thread (ids are never reused): this thread's
            // stash in `this`, which keeps it alive. It is still this
            // thread's: `remember` stores only while the thread has an owner
            // token, and the thread's exit hooks empty the cache before it
            // gives up its `thread_local` id (`owner.rs`).
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
        if let Some(stash) = crate::pool::owner::previous_stash(this.id) {
            // SAFETY: as in `stash`.
            return Some(unsafe { &*stash.cast::<Stash<T>>() });
        }
        match this.stashes.get() {
            Some(stash) => {
                crate::pool::owner::remember(this.id, stash.as_ptr().cast());
                Some(stash)
            }
            None => Self::new_stash(this),
        }
    }

    #[cold]
    fn new_stash(this: &Arc<Self>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        if crate::pool::owner::ended() {
            return None;
        }
        // Under the sweep lock, so that the stash's epoch is the pool's and
        // no sweep runs between reading one and making the other.
        let sweeping = lock(&this.sweep);
        // `thread_local` panics if this thread's thread-locals are being
        // destroyed and its own are gone already (a thread whose first pool
        // use is in a late thread-local destructor): go around stashes then.
        let stash = catch_unwind(AssertUnwindSafe(|| {
            this.stashes
                .get_or(|| StashBox::new(Stash::new(sweeping.epoch)))
        }))
        .ok()?;
        drop(sweeping);
        crate::pool::exit::register(this, stash.as_ptr());
        crate::pool::owner::remember(this.id, stash.as_ptr().cast());
        Some(stash)
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
        let mut batch = self.overflow.pop()?;
        // Batches are never empty (see `Overflow::push`).
        let node = batch.items.pop()?;
        if !batch.items.is_empty() {
            stash.with_owner(self.strategy, |local| local.install(batch));
        }
        stash.counters.reused.bump();
        Some(node)
    }

    /// Pools a returned (already recycled) object in this thread's stash.
    #[inline(always)]
    pub(crate) fn push(&self, stash: &Stash<T>, node: Box<Node<T>>) {
        let capacity = self.local_capacity;
        match stash.with_owner(self.strategy, |local| local.push(node, capacity)) {
            Ok(()) => stash.counters.returned.bump(),
            Err(node) => self.push_full(stash, node),
        }
    }

    #[cold]
    fn push_full(&self, stash: &Stash<T>, node: Box<Node<T>>) {
        let capacity = self.local_capacity;
        let spill = stash.with_owner(self.strategy, |local| {
            local.spill(node, capacity, &self.overflow)
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
        let sweeping = lock(&self.sweep);
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

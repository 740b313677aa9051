//! A pool's shared state: every thread's stash, the overflow, and the sweep.
//!
//! `LocalPool` keeps this behind an `Arc` made on first use
//! ([`implementation`](crate::implementation), section 1, says why).
//!
//! **Slots.** A pool's stashes live in its table, one per thread id (an
//! index, never a ration), but only `max_stashes` of them at once hold a
//! *slot*, and only a stash that holds one keeps objects. Slots go to the
//! threads that use this pool, first come first served, and come back when
//! a thread exits (its exit flush) or, once a thread has found none free,
//! when a sweep finds a holder that has not touched the pool since the
//! previous sweep. A thread without a slot goes to the overflow one object
//! at a time (the stashless paths) and asks for one again when a get finds
//! nothing or when it gives back an object for several takers. Why:
//! [`implementation`](crate::implementation), section 3a.
//!
//! The sweep lock serialises everything that touches another thread's stash
//! or changes the pool's epoch or its slots: sweeps, making a stash, taking
//! a slot, registering and running an exit hook, and closing the pool.
//! None of them runs user code while holding it: the objects they drop are
//! dropped after it is released.

use crate::Stats;
use std::ptr::NonNull;

use crate::lazy::LazyArcRef;
use crate::pool::barrier::{self, Strategy};
use crate::pool::budget::Budget;
use crate::pool::config::{Config, STASHES_PER_CORE, default_max_stashes};
use crate::pool::exit::{self, Flush};
use crate::pool::node::{Home, Node};
use crate::pool::overflow::{Batch, Overflow};
use crate::pool::stash::{Counters, Local, Stash, StashBox};
use crate::sync::{
    Arc, AtomicBool, AtomicCount, AtomicUsize, Mutex, MutexGuard, Ordering, PerThread, lock,
    thread_index, token,
};

/// What the sweep lock protects.
pub(super) struct Sweeping {
    /// The sweep count: the pool's epoch.
    pub(super) epoch: u64,
    /// How many stashes hold a slot now (module docs): at most
    /// `Shared::max_stashes`; the `max_idle` shares are cut for this many.
    pub(super) held: usize,
}

/// The sweep lock, held (see `Shared::lock_sweep`).
pub(super) struct SweepLock<'a> {
    // Fields drop in order: the lock is released before the gate.
    sweeping: MutexGuard<'a, Sweeping>,
    _gate: crate::sync::GateGuard<'static>,
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
    /// The most stashes that hold a slot at once, if set (models, tests);
    /// `None`: `config::default_max_stashes`. Never more than `max_idle`
    /// (a stash past that many would have a share of zero): `no_slot_free`.
    pub(crate) max_stashes: Option<usize>,
    /// `Sweeping::held`, for threads without a slot, which check without
    /// the lock whether one is free. Stored under the sweep lock.
    held: AtomicUsize,
    /// Set when a thread found no slot free; a sweep then takes back the
    /// slots of threads that have not used the pool since the previous one,
    /// and clears it. (With no thread waiting, an idle thread keeps its
    /// slot: its objects age out all the same.)
    pub(super) wanted: AtomicBool,
    /// Set (under the sweep lock) once the pool has dropped.
    pub(super) closed: AtomicBool,
    /// Objects dropped by sweeps, and their footprints.
    pub(super) trimmed: AtomicCount,
    pub(super) trimmed_bytes: AtomicCount,
    /// The bound on idle bytes, if the pool has one (`budget.rs`).
    pub(super) budget: Option<Arc<Budget>>,
    /// `Recycle::FIXED_FOOTPRINT`: what every object weighs, if the same.
    fixed_footprint: Option<usize>,
    /// Counts for threads without a stash (the stashless paths of
    /// `local_pool.rs`, `returning.rs`); shared by them all, so bumped with atomic
    /// read-modify-writes.
    pub(crate) orphans: Counters<true>,
    pub(crate) max_stashed: usize,
    pub(crate) strategy: Strategy,
}

impl<T: Send> Shared<T> {
    pub(crate) fn new(config: &Config, fixed_footprint: Option<usize>) -> Self {
        crate::pool::fork::guard();
        Self {
            stashes: PerThread::new(),
            overflow: Overflow::new(config.max_idle),
            sweep: Mutex::new(Sweeping { epoch: 0, held: 0 }),
            epoch: AtomicCount::new(0),
            max_stashes: config.max_stashes,
            held: AtomicUsize::new(0),
            wanted: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            trimmed: AtomicCount::new(0),
            trimmed_bytes: AtomicCount::new(0),
            budget: match config.family {
                // SAFETY: only a pool of the family makes its state, while
                // borrowed (`FamilyRef::get`).
                Some(family) => Some(unsafe { family.get() }.current()),
                None => (config.max_idle_bytes != usize::MAX)
                    .then(|| Budget::new(config.max_idle_bytes)),
            },
            fixed_footprint,
            orphans: Counters::default(),
            max_stashed: config.max_stashed,
            strategy: barrier::strategy(),
        }
    }

    // === finding this thread's stash ===

    /// This thread's stash after a miss in the first entry of its cache
    /// (`PerThread::cached`): the cache's other entries, else this
    /// thread's entry in the table, else a new stash; `None` for a thread
    /// without a stash (no slot free, or too far into its teardown).
    #[inline(never)]
    pub(crate) fn find_stash(this: LazyArcRef<'_, Shared<T>>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        let shared = this.get();
        // A pool whose stashes could keep nothing (`max_stashed(0)`,
        // `max_idle(0)`, a byte budget) has none: every get and return
        // comes here, and goes straight to the overflow.
        if shared.stash_capacity(1) == 0 {
            return None;
        }
        if let Some(stash) = shared.stashes.cached_later() {
            return Some(stash);
        }
        match shared.stashes.get() {
            Some(stash) => Some(Self::found(this, stash)),
            None => Self::new_stash(this),
        }
    }

    /// `stash`, this thread's entry in the table, hooked for this thread's
    /// exit and remembered in its cache.
    fn found<'a>(this: LazyArcRef<'a, Shared<T>>, stash: &'a StashBox<T>) -> &'a Stash<T>
    where
        T: 'static,
    {
        // Another thread's token: a stash this thread inherited with the id
        // of an exited thread, whose hook has run.
        if stash.hooked_by.load(Ordering::Relaxed) != token() {
            Self::adopt(this, stash);
        }
        this.get().stashes.remember(stash);
        stash
    }

    /// Takes over `stash`, an exited thread's entry in the table that this
    /// thread inherited with its id, and hooks it for this thread's exit.
    #[cold]
    fn adopt(this: LazyArcRef<'_, Shared<T>>, stash: &StashBox<T>)
    where
        T: 'static,
    {
        let token = token();
        if token == 0 || !exit::alive() {
            return;
        }
        {
            // Under the lock, as the previous owner's flush reads them.
            let _sweeping = this.get().lock_sweep();
            stash.hooked_by.store(token, Ordering::Relaxed);
            // A stash that still holds its slot (its exited owner's flush
            // has yet to run) is this thread's now, loans and all.
            if stash.returns.is_open() {
                stash.returns.open.store(token, Ordering::Relaxed);
            }
        }
        Self::hook(this, stash, token);
    }

    /// Registers this thread's exit hook for `stash`, which this thread
    /// owns: without one, its objects and its slot would not come back
    /// when it exits. Outside the sweep lock: pruning the hooks of dropped
    /// pools may drop a pool's last reference.
    fn hook(this: LazyArcRef<'_, Shared<T>>, stash: &StashBox<T>, token: u64)
    where
        T: 'static,
    {
        exit::register(Box::new(Hook {
            shared: this.to_arc(),
            stash: &**stash,
            token,
        }));
    }

    #[cold]
    fn new_stash(this: LazyArcRef<'_, Shared<T>>) -> Option<&Stash<T>>
    where
        T: 'static,
    {
        let shared = this.get();
        // No slot free: no stash. Checked without the lock first, since a
        // thread without a stash comes here on every get and return.
        if shared.no_slot_free(shared.held.load(Ordering::Relaxed)) {
            return None;
        }
        // The thread's id, taken now if it has none (an index into the
        // table, not a ration), outside the sweep lock (taking one enters the
        // fork gate too); `None` once this thread is too far into its
        // teardown to hold one: go around stashes then. Taken before the
        // exit hooks are first asked for, so that the hooks' destructor
        // runs first, and a thread flushes its stashes before its id can
        // go to another thread. A thread whose hooks have run makes no
        // stash.
        thread_index()?;
        if !exit::alive() {
            return None;
        }
        exit::arm();
        // The id may be an exited thread's, whose stash this thread takes
        // over: it holds no slot once the exited thread's flush has run,
        // and this thread then asks for one when a get finds nothing or
        // when it gathers (`take_slot`), never on its own returns.
        if let Some(stash) = shared.stashes.get() {
            return Some(Self::found(this, stash));
        }
        // Nonzero: this thread holds its id.
        let token = token();
        let stash = {
            let mut sweeping = shared.lock_sweep();
            let capacity = shared.take_held(&mut sweeping)?;
            let epoch = sweeping.epoch;
            let books = shared.overflow.max_idle.is_none();
            let stash = shared
                .stashes
                .get_or(|| StashBox::new(Stash::new(epoch, capacity, token, books)))?;
            // Hooked for this thread in the section that made it.
            stash.hooked_by.store(token, Ordering::Relaxed);
            shared.rebalance(capacity);
            stash
        };
        Self::hook(this, stash, token);
        shared.stashes.remember(stash);
        Some(stash)
    }

    // === slots ===

    /// Gives `stash`, this thread's, a slot again after the pool took its
    /// last one back (module docs), or after it inherited the stash of an
    /// exited thread, and runs `then` on it in the same critical section;
    /// `None` if no slot is free, or this thread is tearing down (its exit
    /// flush has run, and would not run again to give the slot back). A
    /// get that finds nothing asks (`take_without_slot`), and takes an
    /// object with the slot; so does a return for several takers
    /// (`gather`), which gathers its object there (unless the recut of
    /// `max_idle`'s shares that follows sheds it). Other returns to a stash
    /// without a slot spill (`Local::spill`) and ask for none.
    #[cold]
    pub(super) fn take_slot<R>(
        &self,
        stash: &Stash<T>,
        then: impl FnOnce(&mut Local<T>) -> R,
    ) -> Option<R> {
        if !exit::alive() || self.no_slot_free(self.held.load(Ordering::Relaxed)) {
            return None;
        }
        let mut sweeping = self.lock_sweep();
        let capacity = self.take_held(&mut sweeping)?;
        let seen = stash.counters.total();
        stash.returns.open.store(token(), Ordering::Relaxed);
        // Under the sweep lock no sweeper holds a claim, so this enters at
        // once; sweeps keep an unheld stash's epoch current too.
        let done = stash.with_owner(self.strategy, |local| {
            // A slot again: it starts over as a new stash does (`give_up`).
            local.set_capacity(capacity);
            local.seen = seen;
            then(local)
        });
        self.rebalance(capacity);
        Some(done)
    }

    /// Whether all slots are held, `held` of them being held; if so, tells
    /// the next sweep that a thread found none free, so that it takes back
    /// the slots of idle threads. `wanted` is read first: a thread without a
    /// slot comes here on every get and return, and a store each time would
    /// bounce the line between them.
    fn no_slot_free(&self, held: usize) -> bool {
        let full = self.overflow.max_idle.is_some_and(|max| held >= max)
            || match self.max_stashes {
                Some(max) => held >= max,
                // No default bound is below one core's slots, so the core
                // count (read from system files) is read only once that many
                // are held, never on a pool's first use (`implementation`,
                // section 3a).
                None => held >= STASHES_PER_CORE && held >= default_max_stashes(),
            };
        if full && !self.wanted.load(Ordering::Relaxed) {
            self.wanted.store(true, Ordering::Relaxed);
        }
        full
    }

    /// Sets the count of slots held, under the sweep lock, and its mirror
    /// for the check made without the lock.
    pub(super) fn count_held(&self, sweeping: &mut Sweeping, held: usize) {
        sweeping.held = held;
        self.held.store(held, Ordering::Relaxed);
    }

    /// Moves an exiting thread's objects to the overflow, as far as it has
    /// room, and gives the stash's slot back (`exit.rs`); unless the stash
    /// is no longer the exiting thread's (`token`): its id went to another
    /// thread first, where a target destroys thread-locals in another order.
    pub(crate) fn flush(&self, stash: &Stash<T>, token: u64) {
        let mut sweeping = self.lock_sweep();
        if self.closed.load(Ordering::Relaxed) || stash.hooked_by.load(Ordering::Relaxed) != token {
            return;
        }
        // Closed before the claim's heavy barrier: a thread that gives a
        // loan back from now on either has it collected below or finds the
        // book closed and collects it itself (`give_back`).
        let held = stash.returns.is_open();
        stash.returns.open.store(0, Ordering::Relaxed);
        // Claimed like a sweep: the thread's id may already be another's.
        let mut batches = Vec::new();
        self.with_claimed_stashes(&[stash], |stash| {
            stash.with_claimed(|local| batches = local.give_up(&self.overflow));
        });
        if held {
            let held = sweeping.held - 1;
            self.count_held(&mut sweeping, held);
        }
        // Pushed under the lock, so `close` cannot miss them.
        for batch in batches {
            self.overflow.push(batch);
        }
    }

    /// Takes one more slot, under the sweep lock, if one is free: the
    /// capacity of each stash with a slot then.
    fn take_held(&self, sweeping: &mut Sweeping) -> Option<usize> {
        if self.no_slot_free(sweeping.held) {
            return None;
        }
        let held = sweeping.held + 1;
        self.count_held(sweeping, held);
        Some(self.stash_capacity(held))
    }

    /// Under a `max_idle`, cuts every stash's share to `capacity`, as one
    /// more slot is held.
    fn rebalance(&self, capacity: usize) {
        if self.overflow.max_idle.is_none() {
            return;
        }
        let mut shed = Vec::new();
        self.with_every_stash(|stash| {
            let share = if stash.returns.is_open() { capacity } else { 0 };
            stash.with_claimed(|local| {
                local.set_capacity(share);
                local.shed(&mut shed);
            });
        });
        // Past the overflow's bound if need be: these objects were pooled
        // already, and the next sweep enforces `max_idle` on the whole pool.
        shed.into_iter()
            .for_each(|batch| self.overflow.put_back(batch));
    }

    // === reaching other threads' stashes ===

    /// Claims every stash, issues one heavy barrier for them all, and runs
    /// `f` on each. Call with the sweep lock held.
    pub(super) fn with_every_stash(&self, f: impl FnMut(&Stash<T>)) {
        let mut stashes = Vec::new();
        self.stashes.for_each(|stash| stashes.push(&**stash));
        self.with_claimed_stashes(&stashes, f);
    }

    /// Claims `stashes`, issues one heavy barrier for them all, and runs `f`
    /// on each, which must end with `with_claimed`. Call with the sweep lock
    /// held. If anything unwinds (the barrier cannot fail in practice, but a
    /// kernel may refuse it), the claims `f` did not release are released,
    /// so owners are never locked out.
    pub(super) fn with_claimed_stashes(&self, stashes: &[&Stash<T>], mut f: impl FnMut(&Stash<T>)) {
        struct Release<'a, T>(&'a [&'a Stash<T>], usize);
        impl<T> Drop for Release<'_, T> {
            fn drop(&mut self) {
                self.0[self.1..].iter().for_each(|stash| stash.release());
            }
        }
        // Picked before the claims, inside the gate (held with the lock).
        let heavy = barrier::Heavy::new(self.strategy);
        stashes.iter().for_each(|stash| stash.claim());
        let mut unclaimed = Release(stashes, 0);
        heavy.issue();
        for stash in stashes {
            f(stash);
            unclaimed.1 += 1;
        }
    }

    /// Takes the sweep lock, inside the fork gate (`sync::FORK_GATE`).
    pub(super) fn lock_sweep(&self) -> SweepLock<'_> {
        let gate = barrier::gate(self.strategy).shared();
        SweepLock {
            sweeping: lock(&self.sweep),
            _gate: gate,
        }
    }

    /// The capacity of each stash when the pool has `stashes` of them: the
    /// pool's `max_stashed`, or the stash's share of `max_idle`; none under
    /// a byte budget, which every get and return that moves an object
    /// updates, so that the paths a budget takes are the stashless ones
    /// (`budget.rs`).
    pub(super) fn stash_capacity(&self, stashes: usize) -> usize {
        match self.overflow.max_idle {
            _ if self.budget.is_some() => 0,
            None => self.max_stashed,
            Some(max_idle) => self.max_stashed.min(max_idle / stashes.max(1)),
        }
    }

    // === the owner's paths ===

    /// An object for this thread, from `stash` (its own), in one critical
    /// section: the stash's newest, else what came back to its book, else
    /// the overflow's (`Local::take`). `None`: make one.
    ///
    /// Counted reused, and its bytes if `weighed`: a pool whose objects all
    /// weigh the same (`LocalPool::WEIGHED`) counts no bytes, and `stats`
    /// multiplies instead. Here and in `push`, the paths every use takes,
    /// the caller says so at compile time; the others test (`weigh`).
    #[inline(always)]
    pub(crate) fn take(&self, stash: &Stash<T>, weighed: bool) -> Option<Box<Node<T>>> {
        let node = stash
            .with_owner(self.strategy, |local| {
                local.take(&stash.returns, &self.overflow)
            })
            .or_else(|| self.take_without_slot(stash))?;
        Self::count_reused(&stash.counters, weighed.then_some(node.bytes));
        Some(node)
    }

    /// `take`, for a guard: the object is lent from `stash` (`Local::lend`).
    #[inline(always)]
    pub(crate) fn lend(&self, stash: &Stash<T>, weighed: bool) -> Option<NonNull<Node<T>>> {
        let home = Home::here(std::ptr::from_ref(stash).cast());
        let node = stash
            .with_owner(self.strategy, |local| {
                local.lend(home, &stash.returns, &self.overflow)
            })
            .or_else(|| Some(self.take_without_slot(stash)?.lend(home)))?;
        // SAFETY: lent to this thread, which holds it.
        let bytes = weighed.then(|| unsafe { Node::bytes(node.as_ptr()) });
        Self::count_reused(&stash.counters, bytes);
        Some(node)
    }

    /// Lends `node`, which this thread made, from `stash`, its own: into
    /// the stash's loan book if it keeps one.
    #[cold]
    pub(crate) fn lend_made(&self, stash: &Stash<T>, node: Box<Node<T>>) -> NonNull<Node<T>> {
        let home = Home::here(std::ptr::from_ref(stash).cast());
        stash.with_owner(self.strategy, |local| local.lend_node(node, home))
    }

    /// `take` of a stash that found nothing: if it holds no slot, it asks
    /// for one and takes with it, else takes one object as a thread without
    /// a stash does.
    #[cold]
    fn take_without_slot(&self, stash: &Stash<T>) -> Option<Box<Node<T>>> {
        if stash.returns.is_open() {
            return None;
        }
        match self.take_slot(stash, |local| local.take(&stash.returns, &self.overflow)) {
            Some(taken) => taken,
            None => self.overflow.pop_one(),
        }
    }

    /// Pools an object that `LocalPool::preload` made, in a pool's state
    /// not yet published: as a batch of one, which any thread's get finds
    /// (a single can be missed by a get that finds the singles' stack held
    /// by another, and makes an object instead).
    pub(crate) fn preload<const S: bool>(&self, counters: &Counters<S>, node: Box<Node<T>>) {
        self.pool_one(counters, node, |overflow, node, stamp| {
            overflow.push(Batch::new(vec![node], stamp));
        });
    }

    /// Pools one object, returned or preloaded, with `push`, or drops it
    /// (rejected) if the overflow is full.
    pub(super) fn pool_one<const S: bool>(
        &self,
        counters: &Counters<S>,
        node: Box<Node<T>>,
        push: impl FnOnce(&Overflow<T>, Box<Node<T>>, u64),
    ) {
        let bytes = node.bytes;
        if !self.admit(counters, bytes) {
            return drop(node);
        }
        if self.overflow.reserve(1) == 0 {
            self.refuse(counters, bytes);
            return drop(node);
        }
        // Stamped with the sweep count as of now; a sweep running meanwhile
        // sees the object as returned during it, which keeps it one sweep.
        // (It cannot race the pool's close: a return borrows the pool.)
        let stamp = self.epoch.load(Ordering::Acquire);
        push(&self.overflow, node, stamp);
        Self::count_returned(counters, self.weigh(bytes));
    }

    /// One object from the overflow, for a thread without a stash.
    #[cold]
    pub(crate) fn pop_single<const S: bool>(&self, counters: &Counters<S>) -> Option<Box<Node<T>>> {
        let node = self.overflow.pop_one()?;
        Self::count_reused(counters, self.weigh(node.bytes));
        if let Some(budget) = &self.budget {
            budget.give(node.bytes);
        }
        Some(node)
    }

    // === counting objects in and out ===

    /// Reserves the footprint `bytes` of an object about to be pooled in
    /// the budget, if the pool has one: false if it has no room, the
    /// object counted rejected, for the caller to drop.
    #[inline(always)]
    pub(super) fn admit<const S: bool>(&self, counters: &Counters<S>, bytes: usize) -> bool {
        match &self.budget {
            Some(budget) if !budget.take(bytes) => {
                counters.rejected.bump();
                false
            }
            _ => true,
        }
    }

    /// An object `admit`ted and then refused for want of room in the
    /// overflow: rejected, its bytes given back.
    #[cold]
    pub(super) fn refuse<const S: bool>(&self, counters: &Counters<S>, bytes: usize) {
        counters.rejected.bump();
        if let Some(budget) = &self.budget {
            budget.give(bytes);
        }
    }

    /// `bytes` to count, if this pool weighs its objects: for the paths
    /// that `take` and `push` leave out, which test for it.
    pub(super) fn weigh(&self, bytes: usize) -> Option<usize> {
        self.fixed_footprint.is_none().then_some(bytes)
    }

    /// An object pooled: one more idle, `bytes` more idle bytes (`None`:
    /// not weighed, see `take`).
    #[inline(always)]
    pub(super) fn count_returned<const S: bool>(counters: &Counters<S>, bytes: Option<usize>) {
        counters.returned.bump();
        if let Some(bytes) = bytes {
            counters.returned_bytes.add(bytes);
        }
    }

    /// An object a get took: one less idle, `bytes` fewer idle bytes
    /// (`None`: not weighed, see `take`).
    #[inline(always)]
    fn count_reused<const S: bool>(counters: &Counters<S>, bytes: Option<usize>) {
        counters.reused.bump();
        if let Some(bytes) = bytes {
            counters.reused_bytes.add(bytes);
        }
    }

    // === stats ===

    pub(crate) fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        let mut sums = self.orphans.snapshot();
        let mut bytes = self.orphans.bytes();
        self.stashes.for_each(|stash| {
            for (sum, n) in sums.iter_mut().zip(stash.counters.snapshot()) {
                *sum += n;
            }
            for (sum, n) in bytes.iter_mut().zip(stash.counters.bytes()) {
                *sum = sum.wrapping_add(n);
            }
        });
        let [created, reused, returned, discarded, rejected] = sums;
        stats.created = created;
        stats.reused = reused;
        stats.returned = returned;
        stats.discarded = discarded;
        stats.rejected = rejected;
        stats.gets = created + reused;
        stats.trimmed = self.trimmed.load(Ordering::Relaxed);
        // Exact at quiescence; a snapshot of moving counters otherwise, so
        // it saturates rather than wrapping.
        let idle = stats
            .returned
            .saturating_sub(stats.reused)
            .saturating_sub(stats.trimmed);
        stats.idle = usize::try_from(idle).unwrap_or(usize::MAX);
        stats.idle_bytes = match self.fixed_footprint {
            Some(footprint) => stats.idle.saturating_mul(footprint),
            None => {
                let [returned_bytes, reused_bytes] = bytes;
                let idle_bytes = returned_bytes
                    .saturating_sub(reused_bytes)
                    .saturating_sub(self.trimmed_bytes.load(Ordering::Relaxed));
                usize::try_from(idle_bytes).unwrap_or(usize::MAX)
            }
        };
        stats
    }
}

/// In a forked child, a parent's state is dropped without its objects:
/// they are the parent's, and a stash or queue may be mid-operation in a
/// thread the child lacks, so walking them could free what the parent
/// still uses. They are leaked, left in the child's copy of the parent's
/// memory (`fork.rs`): a child drops only what it made. In the process
/// that made it, the state drops as its fields do: closed by the pool's
/// drop (`close` dropped its objects), or empty, made by a thread that
/// lost the race to publish it.
impl<T: Send> Drop for Shared<T> {
    fn drop(&mut self) {
        if !self.overflow.here() {
            std::mem::forget(std::mem::replace(&mut self.stashes, PerThread::new()));
            std::mem::forget(std::mem::replace(&mut self.overflow, Overflow::new(0)));
        }
    }
}

// === impl Hook ===

/// An exit hook (`exit.rs`): flushes this thread's stash in a pool when the
/// thread exits, and gives its slot back.
struct Hook<T: Send> {
    shared: Arc<Shared<T>>,
    /// This thread's stash in `shared`.
    stash: *const Stash<T>,
    /// This thread's token when it registered the hook.
    token: u64,
}

impl<T: Send> Flush for Hook<T> {
    fn flush(&self) {
        // SAFETY: a stash lives in its own allocation (`StashBox`), freed
        // only when its pool's shared state drops (`PerThread` keeps every
        // thread's value until then), and `self.shared` keeps that alive.
        self.shared.flush(unsafe { &*self.stash }, self.token);
    }

    /// Whether the pool has dropped (exit hooks of dead pools are pruned).
    fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::sync::{Barrier, Mutex, mpsc};
    use std::time::Duration;

    use super::*;
    use crate::{LocalPool, Pooled};

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
            .for_each(|stash| all.push(std::ptr::from_ref::<Stash<_>>(stash) as usize));
        all
    }

    /// What a thread of a `round` saw: its id, and its stash (address and
    /// whether it held a slot) if it had one.
    type Seen = (usize, Option<(usize, bool)>);

    /// One round: `threads` threads, all alive at once (so each holds an id
    /// of its own), take turns using `pool` once, then exit; joined one by
    /// one, so every thread's exit hooks have run when this returns.
    fn round(pool: &LocalPool<Vec<u8>>, threads: usize) -> Vec<Seen> {
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
                        let stash = shared.stashes.get().map(|stash| {
                            let held = stash.returns.is_open();
                            (std::ptr::from_ref::<Stash<_>>(stash) as usize, held)
                        });
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

    fn holding(seen: &[Seen]) -> usize {
        seen.iter()
            .filter(|(_, stash)| matches!(stash, Some((_, true))))
            .count()
    }

    /// 64 threads that take turns with a pool of 4 slots: the first 4 to
    /// use it hold one each, whatever their thread ids, and the others share
    /// objects through the overflow, so the pool makes at most one object
    /// per slot and one for all the rest. Their exits give the slots back:
    /// a second round's first 4 threads hold them again.
    #[test]
    fn threads_past_the_slots_share_the_overflow() {
        within_deadline(|| {
            const BOUND: usize = 4;
            const THREADS: usize = if cfg!(miri) { 8 } else { 64 };
            let mut pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .manual_sweep()
                .build();
            pool.config.max_stashes = Some(BOUND);
            for round_number in 0..2 {
                let seen = round(&pool, THREADS);
                assert_eq!(holding(&seen), BOUND, "round {round_number}: {seen:?}");
                let stats = pool.stats();
                assert!(
                    stats.created <= BOUND as u64 + 1,
                    "turn-taking threads reuse objects: {stats:?}"
                );
                assert!(stats.created >= 1 && stats.idle as u64 == stats.created);
                let shared = pool.shared.get().unwrap();
                assert_eq!(
                    shared.held.load(Ordering::Relaxed),
                    0,
                    "exits give slots back"
                );
            }
        });
    }

    /// A pool that keeps at most 2 idle objects has 2 slots (a third would
    /// have a share of zero), for the first threads that use it, whatever
    /// their thread ids: threads that took ids for another pool first, and
    /// stay alive, take none of this pool's slots, and neither do the
    /// threads that used this pool before and exited.
    #[test]
    fn a_pool_has_no_more_slots_than_it_keeps_idle_objects() {
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
                for _ in 0..2 {
                    let seen = round(&pool, threads);
                    assert_eq!(holding(&seen), MAX_IDLE, "{seen:?}");
                }
                release.wait();
            });
        });
    }

    /// A pool whose stashes could keep nothing makes none: its threads take
    /// and return objects through the overflow, which holds them.
    #[test]
    fn a_pool_without_room_in_stashes_makes_none() {
        let pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
            .max_stashed(0)
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

    /// Whether this thread's stash in `pool` holds a slot (`None`: no stash).
    fn holds_slot(pool: &LocalPool<Vec<u8>>) -> Option<bool> {
        let shared = pool.shared.get()?;
        let stash = shared.stashes.get()?;
        Some(stash.returns.is_open())
    }

    /// The slot of a thread that stopped using the pool (blocked here) goes,
    /// after a full sweep without use, to a thread that asks for one; the
    /// blocked thread's objects stay pooled, and when it comes back it goes
    /// through the overflow until a slot is free again.
    #[test]
    fn a_sweep_takes_an_idle_slot_back_for_the_next_thread() {
        within_deadline(|| {
            let mut pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .manual_sweep()
                .build();
            pool.config.max_stashes = Some(1);
            let (a_used, b_used, a_again) = (Barrier::new(2), Barrier::new(2), Barrier::new(2));
            std::thread::scope(|s| {
                let a = s.spawn(|| {
                    pool.put(vec![1]);
                    assert_eq!(holds_slot(&pool), Some(true));
                    a_used.wait();
                    b_used.wait(); // blocked while the sweeps run
                    pool.put(vec![2]);
                    assert_eq!(
                        holds_slot(&pool),
                        Some(false),
                        "the slot is the other's now"
                    );
                    a_again.wait();
                });
                a_used.wait();
                pool.sweep(); // the slot's owner's count, as of now
                let b = s.spawn(|| {
                    pool.put(vec![3]);
                    assert_eq!(holds_slot(&pool), None, "no slot free: no stash");
                    // The owner has not used the pool since the last sweep,
                    // and this thread wants a slot: the next one takes it.
                    pool.sweep();
                    assert_eq!(pool.stats().idle, 1, "the victim rule is unchanged");
                    pool.put(vec![4]);
                    assert_eq!(holds_slot(&pool), Some(true), "the freed slot");
                    // A new stash passes its first return on; once a get
                    // then finds it empty, it keeps what its thread returns.
                    let four = pool.try_get().map(Pooled::into_inner);
                    assert_eq!(four, Some(vec![4]), "the newest single");
                    pool.put(vec![4]);
                    b_used.wait();
                    a_again.wait();
                    let mine = pool.try_get().map(Pooled::into_inner);
                    assert_eq!(mine, Some(vec![4]), "from its stash");
                    pool.put(vec![4]);
                });
                // Joined, not left to the scope's end: `join` waits for a
                // thread's exit hooks, the scope only for its closure.
                a.join().unwrap();
                b.join().unwrap();
            });
            // Both threads' exits flushed what they held: nothing was lost.
            let mut left: Vec<_> = std::iter::from_fn(|| pool.try_get().map(Pooled::into_inner))
                .map(|v| v[0])
                .collect();
            left.sort_unstable();
            assert_eq!(left, [2, 3, 4]);
            assert_eq!(pool.stats().created, 0);
        });
    }

    /// A thread whose stash holds no slot (as an heir's, whose exited
    /// owner's flush gave it back) and that gives back objects taken on
    /// two other threads asks for a slot, and gathers them: they go on as
    /// one batch, not one at a time.
    #[test]
    fn a_slotless_thread_returning_for_several_takers_passes_batches_on() {
        use crate::pool::stash::BATCH;
        within_deadline(|| {
            let pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .manual_sweep()
                .build();
            std::thread::scope(|s| {
                let (to_returner, guards) = mpsc::channel::<Pooled<'_, Vec<u8>>>();
                let pool = &pool;
                let returner = s.spawn(move || {
                    // A stash, empty (a flushed object would race the
                    // takers' gets).
                    Pooled::into_inner(pool.get());
                    let shared = pool.shared.get().unwrap();
                    let stash = shared.stashes.get().expect("a stash");
                    // What an exiting owner's flush does: the slot goes back.
                    shared.flush(stash, token());
                    assert!(!stash.returns.is_open(), "slotless");
                    let mut guards = guards.iter();
                    // One taker so far: its own return, a single.
                    drop(guards.next());
                    // A second taker's: gathered, in a slot taken in the
                    // same critical section.
                    let sections = crate::pool::stash::sections::count(|| drop(guards.next()));
                    assert_eq!(sections, 1, "the gather that takes a slot enters once");
                    guards.for_each(drop);
                    stash.returns.is_open()
                });
                // This thread's first, so that it holds its own id (and
                // does not inherit the other taker's once that exits).
                let mine: Vec<_> = (0..=BATCH).map(|_| pool.get()).collect();
                let theirs: Vec<_> = s
                    .spawn(move || (0..=BATCH).map(|_| pool.get()).collect::<Vec<_>>())
                    .join()
                    .unwrap();
                for (a, b) in mine.into_iter().zip(theirs) {
                    to_returner.send(a).unwrap();
                    to_returner.send(b).unwrap();
                }
                drop(to_returner);
                assert!(returner.join().unwrap(), "it took a slot");
            });
            let shared = pool.shared.get().unwrap();
            let batch = shared.overflow.pop().expect("a batch went on");
            assert_eq!(batch.items.len(), BATCH);
        });
    }

    /// What a thread gathered for several takers and left part-filled when
    /// it stopped (blocked, not exited) is idle as any object: the first
    /// sweep sheds it (a thread that only gives back keeps nothing), the
    /// second drops it. Under a `max_idle` of two, the stash gathers no
    /// more than its share.
    #[test]
    fn a_part_filled_gather_ages_out_and_keeps_within_max_idle() {
        use crate::pool::stash::BATCH;
        for max_idle in [None, Some(2)] {
            let mut builder = LocalPool::builder(Vec::new as fn() -> Vec<u8>).manual_sweep();
            if let Some(n) = max_idle {
                builder = builder.max_idle(n);
            }
            let pool: LocalPool<Vec<u8>> = builder.build();
            std::thread::scope(|s| {
                let pool = &pool;
                let mine: Vec<_> = (0..BATCH / 2).map(|_| pool.get()).collect();
                let theirs: Vec<_> = s
                    .spawn(move || (0..BATCH / 2).map(|_| pool.get()).collect::<Vec<_>>())
                    .join()
                    .unwrap();
                let (to_gatherer, guards) = mpsc::channel::<Pooled<'_, Vec<u8>>>();
                let (gathered, stop) = (mpsc::channel(), mpsc::channel::<()>());
                let gatherer = s.spawn(move || {
                    guards.iter().for_each(drop);
                    let shared = pool.shared.get().unwrap();
                    let stash = shared.stashes.get();
                    let held = stash.map(|s| s.with_owner(shared.strategy, |l| l.items.len()));
                    gathered.0.send(held).unwrap();
                    stop.1.recv().unwrap();
                });
                for (a, b) in mine.into_iter().zip(theirs) {
                    to_gatherer.send(a).unwrap();
                    to_gatherer.send(b).unwrap();
                }
                drop(to_gatherer);
                let held = gathered.1.recv().unwrap().expect("a stash");
                let before = pool.stats();
                match max_idle {
                    // The first went as any return (one taker so far), the
                    // rest were gathered: less than a batch, none spilled.
                    None => assert_eq!((held, before.idle), (BATCH - 1, BATCH), "{before:?}"),
                    // The stash gathers within its share of the bound.
                    Some(n) => assert!(held <= n / 2, "{held} gathered past a share of {n}"),
                }
                pool.sweep();
                // Shed to the overflow as victims, not dropped yet (but what
                // exceeds `max_idle`).
                let shed = pool.stats();
                let kept = before.idle.min(max_idle.unwrap_or(usize::MAX));
                let cut = (before.idle - kept) as u64;
                assert_eq!((shed.idle, shed.trimmed), (kept, cut), "{shed:?}");
                pool.sweep();
                let after = pool.stats();
                assert_eq!(
                    (after.idle, after.trimmed),
                    (0, before.idle as u64),
                    "{after:?}"
                );
                stop.0.send(()).unwrap();
                gatherer.join().unwrap();
            });
        }
    }

    /// Many live threads that each return many objects keep at most
    /// `slots x max_stashed` of them in stashes, however many threads
    /// there are: the rest is in the overflow, where sweeps and `max_idle`
    /// reach it.
    #[test]
    fn what_stashes_keep_is_bounded_by_slots_not_threads() {
        within_deadline(|| {
            const SLOTS: usize = 4;
            let (threads, each) = if cfg!(miri) { (8, 4) } else { (64, 40) };
            let mut pool: LocalPool<Vec<u8>> = LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .manual_sweep()
                .build();
            pool.config.max_stashes = Some(SLOTS);
            let (returned, measured) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        let got: Vec<_> = (0..each).map(|_| pool.get()).collect();
                        drop(got);
                        returned.wait();
                        measured.wait(); // alive, stash and all
                    });
                }
                returned.wait();
                let shared = pool.shared.get().unwrap();
                let (mut in_stashes, mut holding) = (0, 0);
                shared.stashes.for_each(|stash| {
                    let heavy = crate::pool::barrier::Heavy::new(shared.strategy);
                    stash.claim();
                    heavy.issue();
                    stash.with_claimed(|local| {
                        in_stashes += local.items.len();
                        holding += usize::from(stash.returns.is_open());
                    });
                });
                assert!(holding <= SLOTS, "{holding} slots held");
                let max_stashed = shared.max_stashed;
                assert!(in_stashes <= SLOTS * max_stashed, "{in_stashes} in stashes");
                let stats = pool.stats();
                assert_eq!(
                    stats.idle as u64, stats.created,
                    "the rest is pooled: {stats:?}"
                );
                assert_eq!(stats.returned, (threads * each) as u64, "{stats:?}");
                measured.wait();
            });
        });
    }
}

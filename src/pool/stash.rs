//! One thread's private stash, and the handshake that lets a sweeper reach it.
//!
//! A stash belongs to the thread whose id finds it in the pool's table (its
//! *owner*); the owner's gets and puts touch only the stash's own cache
//! line. Its objects (`Local`) are touched by the owner only between
//! setting `busy` and clearing it, having seen `claimed` clear after a
//! light barrier (`Stash::with_owner`), and by any other thread only under
//! the pool's sweep lock, between setting `claimed` and clearing it, having
//! issued a heavy barrier and then seen `busy` clear
//! (`Stash::with_claimed`). Why that excludes the two while owners pay
//! only a compiler fence (a `SeqCst` fence until the process uses
//! `membarrier`): [`implementation`](crate::implementation), section 4.
//!
//! Threads that give the owner's objects back touch none of that: they
//! read and advise through `Returns`, on a line of its own, and store into
//! the lent node itself (`loans.rs`;
//! [`implementation`](crate::implementation), section 3c).

use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::pool::barrier::{self, Strategy};
use crate::pool::loans::Loans;
use crate::pool::node::{Home, Node, loan};
use crate::pool::overflow::{Batch, Overflow};
use crate::sync::{
    AtomicBool, AtomicCount, AtomicU8, AtomicUsize, Ordering, UnsafeCell, Unset, backoff,
};

/// One thread's objects and counters.
///
/// In declaration order (`repr(C)`): what the owner's gets and returns touch
/// first, on as few cache lines as possible; what other threads write last.
#[repr(C)]
pub(crate) struct Stash<T> {
    /// Set by the owner around each access to `local`.
    busy: AtomicBool,
    /// Set by a sweeper that wants `local`; cleared when it is done.
    claimed: AtomicBool,
    /// The objects. Accessed only inside the handshake.
    local: UnsafeCell<Local<T>>,
    /// Operation counters, written by the owner alone.
    pub(crate) counters: Counters,
    /// Where the objects this thread gave back for other threads came from.
    pub(crate) returner: Returner,
    /// The token (`per_thread::token`) of the thread that registered an exit
    /// hook for this stash last; written and read under the sweep lock. A
    /// thread that inherits the stash with an exited thread's id finds
    /// another thread's token here and registers its own hook.
    pub(crate) hooked_by: AtomicCount,
    /// What threads that give this stash's loans back read and write, on
    /// a line of its own, which the owner does not write on its gets and
    /// returns.
    pub(crate) returns: CachePadded<Returns>,
}

/// A stash's side for the threads that give its loans back (`loans.rs`).
pub(crate) struct Returns {
    /// The token of the thread whose loans come back to this stash's book
    /// while the stash holds one of its pool's slots (`shared.rs`); 0 for
    /// a stash without one, which keeps nothing (its capacity is zero): its
    /// owner's gets and returns go to the overflow one by one, and its
    /// owner asks for a slot again when a get finds nothing or when it
    /// gathers (`Shared::gather`). Written under
    /// the sweep lock: an exit flush or a sweep that takes the slot back
    /// closes the book.
    pub(crate) open: AtomicCount,
    /// The advice of the threads that give this stash's loans back, for
    /// its owner's next refill: `START`, from a thread that gives back this
    /// stash's loans alone and gave one back that had no place in the book
    /// (keep one); `STOP`, from a thread that gives back the loans of
    /// several stashes and gave one back through this book (keep none, so
    /// that what this stash lends is shared); `NONE`.
    advice: AtomicU8,
    /// The process generation that made the stash (`fork::generation`): a
    /// forked child gives nothing back to its parent's stashes.
    generation: usize,
}

impl Returns {
    pub(crate) const NONE: u8 = 0;
    pub(crate) const START: u8 = 1;
    pub(crate) const STOP: u8 = 2;

    /// Open for the thread with token `open` (0: closed, no slot).
    fn new(open: u64) -> Self {
        Self {
            open: AtomicCount::new(open),
            advice: AtomicU8::new(Self::NONE),
            generation: crate::pool::fork::generation(),
        }
    }

    /// Whether the stash holds a slot (see `open`). Exact under the sweep
    /// lock and in the owner's critical section; a hint elsewhere.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed) != 0
    }

    /// Whether this process made the stash.
    pub(crate) fn here(&self) -> bool {
        self.generation == crate::pool::fork::generation()
    }

    /// Gives `advice` (`START` or `STOP`, which wins). A load first, so
    /// that threads giving the same advice again leave the line shared.
    pub(crate) fn advise(&self, advice: u8) {
        let now = self.advice.load(Ordering::Relaxed);
        if now != advice && now != Self::STOP {
            self.advice.store(advice, Ordering::Relaxed);
        }
    }

    /// Takes the advice given since the owner last looked: `Some(true)` to
    /// keep a book, `Some(false)` to keep none, `None`.
    fn take_advice(&self) -> Option<bool> {
        match self.advice.load(Ordering::Relaxed) {
            Self::NONE => None,
            advice => {
                self.advice.store(Self::NONE, Ordering::Relaxed);
                Some(advice == Self::START)
            }
        }
    }
}

// SAFETY: a `Stash` is shared between its owner and sweepers. `local` is
// only accessed inside `with_owner` or `with_claimed`, which exclude each
// other by the handshake described in the module docs, and sweepers exclude
// each other with the pool's sweep lock. Every other field is atomic. The
// objects move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Stash<T> {}

impl<T> Stash<T> {
    /// A stash for a new thread, holding a slot for the thread with token
    /// `open`; `epoch` is the pool's sweep count now, `capacity` the most
    /// objects it may keep (see `Local::capacity`), `books` whether it may
    /// keep a loan book (`Loans::new`).
    pub(crate) fn new(epoch: u64, capacity: usize, open: u64, books: bool) -> Self {
        Self {
            busy: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            local: UnsafeCell::new(Local {
                items: Vec::new(),
                victims: 0,
                epoch,
                capacity,
                limit: 0,
                // As if it had spilled: its owner's first get lets it keep
                // one object, so a thread that takes and returns keeps what
                // it uses from the start, and one that only returns never
                // keeps any.
                spilled: true,
                underflowed: false,
                spares: Vec::new(),
                seen: 0,
                gets_seen: 0,
                loans: Loans::new(books),
            }),
            counters: Counters::default(),
            returner: Returner::new(),
            hooked_by: AtomicCount::new(0),
            returns: CachePadded::new(Returns::new(open)),
        }
    }

    /// Runs `f` on the stash as its owner. Only the owning thread may call
    /// this (the thread whose `PerThread` entry holds this stash).
    #[inline(always)]
    pub(crate) fn with_owner<R>(
        &self,
        strategy: Strategy,
        f: impl FnOnce(&mut Local<T>) -> R,
    ) -> R {
        #[cfg(test)]
        sections::enter();
        // Relaxed: the store only has to be ordered before the load of
        // `claimed`, and the barrier does that.
        self.busy.store(true, Ordering::Relaxed);
        barrier::light(strategy);
        // Acquire: pairs with the sweeper's release of its claim, so we see
        // what it did to the stash.
        if self.claimed.load(Ordering::Acquire) {
            self.enter_contended(strategy);
        }
        // Clears `busy` even if `f` unwinds (it never should: `f` is the
        // pool's own code), so a sweeper can never wait forever.
        let _busy = Unset(&self.busy);
        // SAFETY: we set `busy` and then saw `claimed` clear, with a fence
        // between (see the module docs), here or in `enter_contended`, so
        // no sweeper touches `local` until `busy` is cleared; only the owner
        // calls this, so no other owner does.
        self.local.with_mut(|local| f(unsafe { &mut *local }))
    }

    /// `with_owner` when a sweeper holds the stash: steps aside until it is
    /// done, and returns once this thread has set `busy` again and seen
    /// `claimed` clear after it. Out of line, and blind to `with_owner`'s
    /// closure, so that the closure's captures stay in registers on the
    /// fast path rather than being stored for this one.
    #[cold]
    #[inline(never)]
    fn enter_contended(&self, strategy: Strategy) {
        loop {
            self.busy.store(false, Ordering::Release);
            let mut step = 0;
            while self.claimed.load(Ordering::Acquire) {
                backoff(&mut step);
            }
            self.busy.store(true, Ordering::Relaxed);
            barrier::light(strategy);
            if !self.claimed.load(Ordering::Acquire) {
                return;
            }
        }
    }

    /// First step of a sweeper's access: announce it. Call with the pool's
    /// sweep lock held, then issue `barrier::heavy` once for all the
    /// stashes claimed, then `with_claimed` on each.
    pub(crate) fn claim(&self) {
        // Relaxed: ordered before the loads of `busy` by the heavy barrier.
        self.claimed.store(true, Ordering::Relaxed);
    }

    /// Releases a claim without touching the stash (a sweep that unwinds).
    pub(crate) fn release(&self) {
        self.claimed.store(false, Ordering::Release);
    }

    /// Runs `f` on a stash this thread claimed, then releases the claim.
    pub(crate) fn with_claimed<R>(&self, f: impl FnOnce(&mut Local<T>) -> R) -> R {
        let mut step = 0;
        // Acquire: pairs with the owner's release of `busy`, so we see what
        // the owner did in its last critical section.
        while self.busy.load(Ordering::Acquire) {
            backoff(&mut step);
        }
        // Released even if `f` unwinds (it runs only the pool's own code).
        let _release = Unset(&self.claimed);
        // SAFETY: we claimed the stash and issued the heavy barrier before
        // this load saw `busy` clear, so the owner is outside its critical
        // section and will not enter one until we release the claim (module
        // docs); the sweep lock keeps every other sweeper out.
        self.local.with_mut(|local| f(unsafe { &mut *local }))
    }
}

// === impl StashBox ===

/// A stash in its own cache-line-aligned allocation, owned through a raw
/// pointer.
///
/// The pool's per-thread table holds one of these per thread id, so a
/// table's buckets stay one word an entry, and each thread's hot stash line
/// stays apart from its neighbours'. Every access goes through the one
/// pointer `Box::into_raw` returned, including the one an exit hook keeps
/// (`exit.rs`), so under the aliasing model no reference made by one thread
/// invalidates the pointer another holds.
pub(crate) struct StashBox<T>(NonNull<CachePadded<Stash<T>>>);

// SAFETY: a `StashBox` owns its stash like a `Box` does; `Stash<T>` is
// `Send` and `Sync` when `T: Send`.
unsafe impl<T: Send> Send for StashBox<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for StashBox<T> {}

impl<T> StashBox<T> {
    pub(crate) fn new(stash: Stash<T>) -> Self {
        Self(NonNull::from(Box::leak(Box::new(CachePadded::new(stash)))))
    }
}

impl<T> std::ops::Deref for StashBox<T> {
    type Target = Stash<T>;

    #[inline(always)]
    fn deref(&self) -> &Stash<T> {
        // SAFETY: the allocation lives until `drop` and is only ever shared.
        unsafe { self.0.as_ref() }
    }
}

impl<T> Drop for StashBox<T> {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed only here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// Test-only: how many owner critical sections this thread entered.
#[cfg(test)]
pub(crate) mod sections {
    use std::cell::Cell;

    std::thread_local! {
        static ENTERED: Cell<usize> = const { Cell::new(0) };
    }

    pub(super) fn enter() {
        ENTERED.with(|n| n.set(n.get() + 1));
    }

    /// The critical sections this thread entered while running `f`.
    pub(crate) fn count(f: impl FnOnce()) -> usize {
        let before = ENTERED.with(Cell::get);
        f();
        ENTERED.with(Cell::get) - before
    }
}

// === impl Returner ===

/// Which stashes the objects this thread gave back for other threads came
/// from since the last sweep, kept by the owner (and reset by sweeps):
/// one, or several (`implementation`, section 3c).
pub(crate) struct Returner {
    /// The stash that lent the first object this thread gave back on
    /// another thread's behalf since the last sweep (its address).
    first: AtomicUsize,
    /// Whether one lent by another stash came back here since.
    several: AtomicBool,
}

impl Returner {
    fn new() -> Self {
        Self {
            first: AtomicUsize::new(0),
            several: AtomicBool::new(false),
        }
    }

    /// Notes an object lent by `origin` given back here; whether every
    /// object given back here since the last sweep came from `origin`:
    /// whether this thread returns one thread's objects (a pipeline stage
    /// fed by one producer) rather than several threads' (a writer fed by
    /// many readers).
    pub(crate) fn note(&self, origin: *const ()) -> bool {
        if self.several.load(Ordering::Relaxed) {
            return false;
        }
        match self.first.load(Ordering::Relaxed) {
            0 => self.first.store(origin as usize, Ordering::Relaxed),
            first if first == origin as usize => {}
            _ => {
                self.several.store(true, Ordering::Relaxed);
                return false;
            }
        }
        true
    }

    /// Forgets what came back so far (a sweep).
    pub(crate) fn reset(&self) {
        // `several` is set only after `first`: one load for the threads
        // that gave back nothing for others.
        if self.first.load(Ordering::Relaxed) != 0 {
            self.first.store(0, Ordering::Relaxed);
            self.several.store(false, Ordering::Relaxed);
        }
    }
}

// === impl Local ===

/// The objects of one stash, with their ages.
///
/// `items[..victims]` survived one sweep (Go's victim cache);
/// `items[victims..]` were returned since the last sweep, newest last. Gets
/// pop from the top, so recently used (cache-warm) objects are reused first
/// and victims are only taken when nothing fresher is left.
pub(crate) struct Local<T> {
    pub(super) items: Vec<Box<Node<T>>>,
    pub(super) victims: usize,
    /// The pool's sweep count when this stash was last swept (or made). It
    /// equals the pool's count whenever the sweep lock is free, because
    /// stashes are made and swept under that lock.
    pub(super) epoch: u64,
    /// The most objects this stash keeps: the pool's `max_stashed`, or
    /// this stash's share of `max_idle` if that is smaller, or none without
    /// a slot (but what `give_up` found no room for, until a get or the
    /// next sweep takes it). Changed only under the sweep lock, inside the
    /// handshake (shares are rebalanced as stashes are made and at every
    /// sweep), so the owner reads it from its own cache line, which no
    /// other thread writes while the owner is in its section.
    pub(super) capacity: usize,
    /// The most objects this stash keeps *now*, at most `capacity`: it
    /// starts at zero and adapts to how the owner uses the pool (see
    /// `underflow` and `age`), so a stash that only receives objects
    /// (returned on this thread, taken on others) passes them on instead of
    /// keeping them from the threads that take them: at once for one taker,
    /// a batch at a time for several (`gather`).
    pub(super) limit: usize,
    /// Whether the stash spilled since its last underflow.
    spilled: bool,
    /// Whether the stash underflowed since the last sweep.
    underflowed: bool,
    /// Empty buffers of batches installed here, for the next spills.
    spares: Vec<Vec<Box<Node<T>>>>,
    /// The owner's operation count (`Counters::total`) when a sweep last
    /// looked: a held stash whose count has not moved since is idle, and the
    /// next sweep takes its slot back.
    pub(super) seen: u64,
    /// The owner's gets (`Counters::gets`) when a sweep last aged this
    /// stash: an owner that took nothing since only returns (`age`).
    gets_seen: u64,
    /// What the owner lent to guards, so that a guard dropped on another
    /// thread comes back here (`loans.rs`).
    pub(super) loans: Loans<T>,
}

/// Most batch buffers a stash keeps for reuse: enough for a thread that
/// holds several stashes' worth of objects at once to spill and steal
/// without allocating.
const MAX_SPARES: usize = 8;

/// The fewest objects a stash gathers, capacity permitting, of those its
/// thread gives back for several takers (`gather`) before it spills: a
/// writer fed by many workers passes them on in batches of this many, one
/// queue operation each (`implementation`, section 3b). Each is an idle
/// object more per gathering thread: sixteen cost pkg/sftp's flow a tenth
/// more memory.
#[cfg(not(stashpool_loom))]
pub(crate) const BATCH: usize = 8;

/// Under loom, two: a model gathers and spills a batch in a few steps.
#[cfg(stashpool_loom)]
pub(crate) const BATCH: usize = 2;

impl<T> Local<T> {
    /// Takes the most recently returned object.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<Box<Node<T>>> {
        let node = self.items.pop()?;
        if self.victims > self.items.len() {
            self.victims = self.items.len();
        }
        Some(node)
    }

    /// Takes an object: the most recently returned, else (`refill`) what
    /// other threads gave back, else from the overflow. `None`: the caller
    /// makes one.
    #[inline(always)]
    pub(crate) fn take(
        &mut self,
        returns: &Returns,
        overflow: &Overflow<T>,
    ) -> Option<Box<Node<T>>> {
        if !self.loans.coming_back
            && let Some(node) = self.pop()
        {
            return Some(node);
        }
        self.refill(returns, overflow)
    }

    /// An object for a guard, as `take` gives it, lent from this stash:
    /// `home` recorded in it and, while this stash keeps a loan book, the
    /// node entered there (out of line: one test for a stash that keeps
    /// none).
    #[inline(always)]
    pub(crate) fn lend(
        &mut self,
        home: Home,
        returns: &Returns,
        overflow: &Overflow<T>,
    ) -> Option<NonNull<Node<T>>> {
        if !self.loans.is_on()
            && let Some(node) = self.pop()
        {
            return Some(node.lend(home));
        }
        self.lend_slow(home, returns, overflow)
    }

    #[cold]
    #[inline(never)]
    fn lend_slow(
        &mut self,
        home: Home,
        returns: &Returns,
        overflow: &Overflow<T>,
    ) -> Option<NonNull<Node<T>>> {
        let node = self.take(returns, overflow)?;
        Some(self.lend_node(node, home))
    }

    /// Lends `node`, from here or made, to a guard: records `home` in it
    /// and, while this stash keeps a loan book, enters it there.
    pub(crate) fn lend_node(&mut self, node: Box<Node<T>>, home: Home) -> NonNull<Node<T>> {
        let node = node.lend(home);
        if self.loans.is_on() {
            // SAFETY: a node this thread owns, in no book (pooled nodes are
            // untracked); a guard holds it until it is given back, which
            // takes it out of the book.
            unsafe { self.loans.track(node.as_ptr(), self.capacity) };
        }
        node
    }

    /// Takes back a node lent from this stash, on its owner's thread: out
    /// of the loan book, if it is in it.
    ///
    /// # Safety
    ///
    /// `node` was lent from this stash (`lend`), and this thread holds it.
    pub(crate) unsafe fn reclaim(&mut self, node: NonNull<Node<T>>) -> Box<Node<T>> {
        let node = node.as_ptr();
        // SAFETY: the caller holds the node. Relaxed: this thread wrote the
        // state when it lent the node, and no other thread writes it while
        // the node is lent and held here.
        if unsafe { Node::loan(node) }.load(Ordering::Relaxed) == loan::LENT {
            // SAFETY: lent from this stash and in its book.
            unsafe { self.loans.untrack(node) };
        }
        // SAFETY: out of the book, so this thread's alone; from
        // `Box::into_raw` (`lent`).
        unsafe { Box::from_raw(node) }
    }

    /// `take` for an empty stash, in the same critical section: what other
    /// threads gave back to its loan book (the newest on top, its buffer
    /// the likeliest still in a cache), heeding their advice first; else
    /// (an *underflow*) a batch from the overflow, else a single. A stash
    /// without a slot takes nothing: its owner asks for a slot first
    /// (`Shared::take_slot`).
    #[cold]
    #[inline(never)]
    fn refill(&mut self, returns: &Returns, overflow: &Overflow<T>) -> Option<Box<Node<T>>> {
        if !returns.is_open() {
            return None;
        }
        if let Some(on) = returns.take_advice() {
            self.loans.turn(on);
        }
        if self.items.is_empty() || self.items.len() > 1 {
            self.loans.take_back(&mut self.items);
            let excess = self.items.len().saturating_sub(self.capacity);
            if excess > 0 {
                overflow.put_back(self.take_bottom(excess, self.epoch));
            }
        }
        if let Some(node) = self.pop() {
            return Some(node);
        }
        self.underflow();
        match overflow.pop() {
            Some(batch) => self.install(batch, overflow),
            None => overflow.pop_one(),
        }
    }

    /// Keeps `node` if the stash is below its limit, else spills
    /// (`spill`).
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        node: Box<Node<T>>,
        overflow: &Overflow<T>,
    ) -> Result<(), Box<Node<T>>> {
        if self.items.len() < self.limit {
            self.items.push(node);
            return Ok(());
        }
        self.spill(node, overflow)
    }

    /// Keeps `node`, which this thread gives back for several takers, if
    /// the stash holds fewer than a batch (or its limit, if higher) and has
    /// room, else spills: whole batches, from a stash that keeps nothing
    /// for its owner.
    #[inline]
    pub(crate) fn gather(
        &mut self,
        node: Box<Node<T>>,
        overflow: &Overflow<T>,
    ) -> Result<(), Box<Node<T>>> {
        if self.items.len() < self.limit.max(BATCH).min(self.capacity) {
            self.items.push(node);
            return Ok(());
        }
        self.spill(node, overflow)
    }

    /// Keeps `node` in a stash at its limit by moving its oldest objects
    /// into the overflow: down to half the limit (all that a steal
    /// installed beyond it, too), in one batch of one age, victims first
    /// since they are the likeliest to go unused. One object goes over as a
    /// single, without a batch's `Vec`: the returned object itself from a
    /// stash that keeps none, or the oldest when only one goes. If the
    /// overflow has no room (`max_idle`), a stash below its capacity keeps
    /// the object after all (its limit rises to hold it); an object is
    /// refused only when neither has room, and handed back for the caller
    /// to drop outside the critical section (it runs the object's `Drop`).
    /// A stash without a slot keeps nothing: each return goes over.
    ///
    /// The push to the overflow is done here, inside the owner's critical
    /// section: a queue operation that never waits, so the hold on the
    /// stash stays bounded, and a return walks down the files (pool,
    /// shared, stash, overflow) and never comes back up with objects.
    #[cold]
    fn spill(&mut self, node: Box<Node<T>>, overflow: &Overflow<T>) -> Result<(), Box<Node<T>>> {
        self.spilled = true;
        let (same_age, stamp) = if self.victims > 0 {
            (self.victims, self.epoch - 1)
        } else {
            (self.items.len(), self.epoch)
        };
        let want = self
            .items
            .len()
            .saturating_sub(self.limit / 2)
            .min(same_age);
        match overflow.reserve(want.max(1)) {
            0 if self.items.len() < self.capacity => {
                self.items.push(node);
                self.limit = self.items.len();
            }
            0 => return Err(node),
            _ if want == 0 => overflow.push_one(node, self.epoch),
            1 => {
                let oldest = self.items.remove(0);
                self.victims = self.victims.saturating_sub(1);
                self.items.push(node);
                overflow.push_one(oldest, stamp);
            }
            granted => {
                let batch = self.take_bottom(granted, stamp);
                self.items.push(node);
                overflow.push(batch);
            }
        }
        Ok(())
    }

    /// Moves the `n` oldest objects into a batch stamped `stamp`.
    fn take_bottom(&mut self, n: usize, stamp: u64) -> Batch<T> {
        let mut items = self.spares.pop().unwrap_or_default();
        items.extend(self.items.drain(..n));
        self.victims -= n.min(self.victims);
        Batch::new(items, stamp)
    }

    /// Fills this (empty) stash from a batch taken from the overflow:
    /// returns its newest object and keeps the next newest, with the
    /// batch's age, up to the capacity while the stash keeps a loan book
    /// (its objects come back to it alone), else up to its limit; the rest
    /// is queued again. A taker that shares what comes back with others
    /// keeps what its own use calls for: one of many that blocks holding a
    /// whole batch makes the others create (`implementation`, section 3b).
    /// An emptied batch's buffer is kept for the next spill: buffers
    /// circulate with the batches, so spilling and stealing allocate
    /// nothing once warm.
    fn install(&mut self, mut batch: Batch<T>, overflow: &Overflow<T>) -> Option<Box<Node<T>>> {
        // A get steals only after finding the stash empty, and only the
        // owner adds to it.
        debug_assert!(self.items.is_empty(), "a batch goes into an empty stash");
        let node = batch.items.pop();
        let room = if self.loans.is_on() {
            self.capacity
        } else {
            self.limit
        };
        let keep = batch.items.len().min(room);
        self.victims = if batch.stamp < self.epoch { keep } else { 0 };
        self.items
            .extend(batch.items.drain(batch.items.len() - keep..));
        if !batch.items.is_empty() {
            overflow.put_back(batch);
        } else if self.spares.len() < MAX_SPARES {
            self.spares.push(batch.items);
        }
        node
    }

    /// Notes that a get found this stash empty. If the stash spilled since
    /// its last underflow, it gave away objects its owner then needed: it
    /// may keep twice as many (up to `capacity`). tcmalloc grows its
    /// per-CPU caches by the same rule, so a stash whose owner only returns
    /// (it never underflows) keeps nothing, one whose owner only takes (it
    /// never spills) keeps one, and one whose owner does both grows to
    /// what the owner holds.
    fn underflow(&mut self) {
        if self.spilled {
            self.spilled = false;
            self.limit = self.limit.saturating_mul(2).max(1).min(self.capacity);
        }
        self.underflowed = true;
    }

    /// Sets `capacity`, and the limit within it.
    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.limit = self.limit.min(capacity);
    }

    /// Frees the allocations of an empty stash, so an idle pool holds no
    /// memory but its bookkeeping.
    fn release_memory(&mut self) {
        if self.items.is_empty() {
            self.items = Vec::new();
        }
        self.spares = Vec::new();
    }
}

// === impl Local: sweeps ===
//
// Called by a sweeper holding the stash's claim (or by its owner under the
// sweep lock, where no sweeper can hold it).

impl<T> Local<T> {
    /// Moves the oldest objects beyond the limit into batches for the
    /// overflow: victims and fresh objects apart, each with its stamp.
    pub(crate) fn shed(&mut self, batches: &mut Vec<Batch<T>>) {
        let excess = self.items.len().saturating_sub(self.limit);
        let victims = excess.min(self.victims);
        if victims > 0 {
            batches.push(self.take_bottom(victims, self.epoch.saturating_sub(1)));
        }
        if excess > victims {
            batches.push(self.take_bottom(excess - victims, self.epoch));
        }
    }

    /// One sweep (Go's victim rule): what other threads gave back to the
    /// book joins the stash as fresh objects; the victims go to `dead` and every remaining
    /// object becomes a victim. A stash that did not underflow since the
    /// last sweep had all it needed: its limit halves. One whose owner took
    /// nothing since (`gets`, the owner's count now, has not moved) only
    /// receives, and has no use for what it keeps: it keeps nothing from
    /// now on, as a new stash. What a stash then holds beyond its limit is
    /// for the caller to shed (`shed`).
    pub(crate) fn age(&mut self, epoch: u64, gets: u64, dead: &mut Vec<Box<Node<T>>>) {
        self.loans.age(&mut self.items);
        dead.extend(self.items.drain(..self.victims));
        self.victims = self.items.len();
        self.epoch = epoch;
        if gets == self.gets_seen {
            self.limit = 0;
            self.spilled = true;
        } else if !self.underflowed {
            self.limit /= 2;
        }
        self.gets_seen = gets;
        self.underflowed = false;
        self.release_memory();
    }

    /// Gives this stash's slot back (`shared.rs`): its objects, with what
    /// other threads gave back to its book, go to the overflow as far as it
    /// has room (the batches returned, whose room is reserved), and from
    /// now on it keeps nothing. What does not fit stays for sweeps to age.
    /// The caller closed the book (`Returns::open`).
    pub(crate) fn give_up(&mut self, overflow: &Overflow<T>) -> Vec<Batch<T>> {
        self.set_capacity(0);
        // When it gets a slot again, it starts over as a new stash does.
        self.spilled = true;
        self.loans.collect(&mut self.items);
        let mut batches = Vec::new();
        let fresh = self.items.len() - self.victims;
        let groups = [
            (self.victims, self.epoch.saturating_sub(1)),
            (fresh, self.epoch),
        ];
        for (count, stamp) in groups {
            let granted = overflow.reserve(count);
            if granted > 0 {
                batches.push(self.take_bottom(granted, stamp));
            }
            if granted < count {
                break; // keep the ages in order: the rest stays here
            }
        }
        self.release_memory();
        batches
    }

    /// Moves every object, and what other threads gave back, into `dead`
    /// (`clear`, the pool's drop).
    pub(crate) fn drain(&mut self, dead: &mut Vec<Box<Node<T>>>) {
        self.loans.collect(dead);
        dead.append(&mut self.items);
        self.victims = 0;
        self.release_memory();
    }
}

// === impl Counters ===

/// Operation counts (see [`crate::Stats`]). A stash's counters have one
/// writer, its owner; `SHARED` counters are bumped by any thread.
///
/// In declaration order (`repr(C)`): those a get or a return writes first,
/// so that in a stash they share one cache line.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Counters<const SHARED: bool = false> {
    pub(crate) created: Counter<SHARED>,
    pub(crate) reused: Counter<SHARED>,
    /// The footprints of the objects counted in `reused`.
    pub(crate) reused_bytes: Counter<SHARED>,
    pub(crate) returned: Counter<SHARED>,
    /// The footprints of the objects counted in `returned`.
    pub(crate) returned_bytes: Counter<SHARED>,
    pub(crate) discarded: Counter<SHARED>,
    pub(crate) rejected: Counter<SHARED>,
}

/// A counter; see [`Counters`].
///
/// With one writer a bump is a load and a store, not a `fetch_add`: no
/// increment can be lost and no locked instruction is paid on the hot path.
#[derive(Default)]
pub(crate) struct Counter<const SHARED: bool>(AtomicCount);

impl<const SHARED: bool> Counters<SHARED> {
    /// `[created, reused, returned, discarded, rejected]` now.
    pub(crate) fn snapshot(&self) -> [u64; 5] {
        [
            &self.created,
            &self.reused,
            &self.returned,
            &self.discarded,
            &self.rejected,
        ]
        .map(Counter::get)
    }

    /// `[returned_bytes, reused_bytes]` now.
    pub(crate) fn bytes(&self) -> [u64; 2] {
        [&self.returned_bytes, &self.reused_bytes].map(Counter::get)
    }

    /// Every get counted so far, served or made.
    pub(crate) fn gets(&self) -> u64 {
        self.created.get().wrapping_add(self.reused.get())
    }

    /// Every get and return counted so far: it moves whenever the owner
    /// uses its stash, which is how a sweep tells an idle slot.
    pub(crate) fn total(&self) -> u64 {
        self.snapshot()
            .iter()
            .fold(0, |sum, n| sum.wrapping_add(*n))
    }
}

impl<const SHARED: bool> Counter<SHARED> {
    #[inline(always)]
    pub(crate) fn bump(&self) {
        self.add(1);
    }

    #[inline(always)]
    pub(crate) fn add(&self, n: usize) {
        if SHARED {
            self.0.fetch_add(n as u64, Ordering::Relaxed);
        } else {
            let now = self.0.load(Ordering::Relaxed);
            self.0.store(now.wrapping_add(n as u64), Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(values: &[u32]) -> Vec<Box<Node<u32>>> {
        values.iter().map(|&v| Node::boxed(v)).collect()
    }

    fn values(nodes: &[Box<Node<u32>>]) -> Vec<u32> {
        nodes.iter().map(|node| *node.value()).collect()
    }

    fn local(items: &[u32], victims: usize, epoch: u64) -> Local<u32> {
        Local {
            items: nodes(items),
            victims,
            epoch,
            capacity: usize::MAX,
            limit: usize::MAX,
            spilled: false,
            underflowed: false,
            spares: Vec::new(),
            seen: 0,
            gets_seen: 0,
            loans: Loans::new(true),
        }
    }

    /// `local` keeping at most `limit` objects.
    fn limited(items: &[u32], victims: usize, epoch: u64, limit: usize) -> Local<u32> {
        Local {
            limit,
            ..local(items, victims, epoch)
        }
    }

    fn open() -> Returns {
        Returns::new(7)
    }

    fn pop(local: &mut Local<u32>) -> Option<u32> {
        local.pop().map(|node| *node.value())
    }

    /// The batch that a spill just pushed to `overflow`: its objects and
    /// stamp.
    fn spilled(overflow: &Overflow<u32>) -> (Vec<u32>, u64) {
        let batch = overflow.pop().expect("a batch was spilled");
        assert!(overflow.singles.pop().is_none(), "and no single");
        (values(&batch.items), batch.stamp)
    }

    /// The single that a spill just pushed to `overflow`: its object and
    /// stamp.
    fn spilled_one(overflow: &Overflow<u32>) -> (u32, u64) {
        let single = overflow.singles.pop().expect("a single was spilled");
        assert!(overflow.pop().is_none(), "and no batch");
        (*single.node.value(), single.stamp)
    }

    #[test]
    fn pop_takes_the_newest_and_keeps_victims_in_range() {
        let overflow = Overflow::new(usize::MAX);
        let mut l = local(&[1, 2, 3], 2, 1);
        assert_eq!(pop(&mut l), Some(3));
        assert_eq!(l.victims, 2);
        assert_eq!(pop(&mut l), Some(2));
        assert_eq!(l.victims, 1, "a popped victim is no longer one");
        assert!(l.push(Node::boxed(9), &overflow).is_ok());
        assert_eq!(l.victims, 1, "a pushed object is fresh");
        assert_eq!(
            (pop(&mut l), pop(&mut l), pop(&mut l)),
            (Some(9), Some(1), None)
        );
    }

    /// Lends `values` from `l` with its book on, as another thread's
    /// returns will give them back.
    fn lend_tracked(l: &mut Local<u32>, values: &[u32]) -> Vec<NonNull<Node<u32>>> {
        l.loans.turn(true);
        values
            .iter()
            .map(|&value| {
                let node = Node::boxed(value).lend(Home::with_token(7));
                // SAFETY: a fresh node, held here.
                unsafe { l.loans.track(node.as_ptr(), l.capacity) };
                node
            })
            .collect()
    }

    /// What another thread's return does (`Shared::give_back`).
    fn give_back(node: NonNull<Node<u32>>) {
        // SAFETY: a node of the book, held by the test until now.
        unsafe { Node::loan(node.as_ptr()) }.store(loan::BACK, Ordering::Release);
    }

    #[test]
    fn an_empty_stash_takes_what_came_back_newest_on_top() {
        let (returns, overflow) = (open(), Overflow::new(usize::MAX));
        let mut l = local(&[], 0, 0);
        l.capacity = 8;
        lend_tracked(&mut l, &[1, 2, 3])
            .into_iter()
            .for_each(give_back);
        let taken = l.take(&returns, &overflow).map(|node| *node.value());
        assert_eq!(taken, Some(3), "the newest");
        assert_eq!(values(&l.items), [1, 2]);
    }

    #[test]
    fn a_stash_without_a_slot_takes_and_keeps_nothing() {
        let (returns, overflow) = (Returns::new(0), Overflow::new(usize::MAX));
        overflow.push_one(Node::boxed(1), 0);
        let mut l = limited(&[], 0, 0, 0);
        assert!(
            l.take(&returns, &overflow).is_none(),
            "its owner asks for a slot"
        );
        assert!(l.push(Node::boxed(2), &overflow).is_ok());
        assert!(l.items.is_empty(), "it went over");
    }

    #[test]
    fn push_refuses_past_capacity_when_the_overflow_is_full() {
        let overflow = Overflow::new(0);
        let mut l = limited(&[1, 2], 0, 0, 2);
        l.capacity = 2;
        let refused = l
            .push(Node::boxed(3), &overflow)
            .map_err(|node| *node.value());
        assert_eq!(refused, Err(3), "refused for want of room");
        assert_eq!(values(&l.items), [1, 2]);
    }

    #[test]
    fn age_drops_victims_and_marks_the_rest() {
        let mut l = local(&[1, 2, 3, 4], 1, 3);
        let mut dead = Vec::new();
        l.age(4, 1, &mut dead);
        assert_eq!(values(&dead), [1]);
        assert_eq!(
            (values(&l.items), l.victims, l.epoch),
            (vec![2, 3, 4], 3, 4)
        );
        l.age(5, 2, &mut dead);
        assert_eq!(values(&dead), [1, 2, 3, 4]);
        assert!(l.items.is_empty());
        assert_eq!(l.items.capacity(), 0, "an empty stash frees its buffer");
    }

    #[test]
    fn what_came_back_ages_as_a_fresh_return() {
        let mut l = local(&[1], 1, 3);
        lend_tracked(&mut l, &[7]).into_iter().for_each(give_back);
        let mut dead = Vec::new();
        l.age(4, 1, &mut dead);
        assert_eq!((values(&dead), values(&l.items)), (vec![1], vec![7]));
        l.age(5, 2, &mut dead);
        assert_eq!(values(&dead), [1, 7], "the second sweep drops it");
    }

    #[test]
    fn a_sweep_halves_the_limit_of_a_stash_that_did_not_underflow() {
        let mut l = limited(&[], 0, 0, 8);
        let mut dead = Vec::new();
        l.underflow();
        l.age(1, 1, &mut dead);
        assert_eq!(l.limit, 8, "it underflowed: it keeps its limit");
        l.age(2, 2, &mut dead);
        assert_eq!(l.limit, 4, "it had all it needed: half");
    }

    #[test]
    fn a_stash_whose_owner_took_nothing_keeps_nothing() {
        let overflow = Overflow::new(usize::MAX);
        let mut l = limited(&[], 0, 0, 8);
        let mut dead = Vec::new();
        l.age(1, 5, &mut dead);
        assert_eq!(l.limit, 4, "it took, and did not underflow: half");
        for value in 1..=3 {
            assert!(l.push(Node::boxed(value), &overflow).is_ok());
        }
        l.age(2, 5, &mut dead);
        assert!(dead.is_empty(), "none was a victim yet");
        assert_eq!(l.limit, 0, "no get since the last sweep");
        let mut shed = Vec::new();
        l.shed(&mut shed);
        let shed: Vec<u32> = shed.iter().flat_map(|b| values(&b.items)).collect();
        assert_eq!(shed, [1, 2, 3], "all it held goes to the overflow");
        l.underflow();
        assert_eq!(
            l.limit, 1,
            "its owner's next get keeps one, as in a new stash"
        );
    }

    #[test]
    fn spill_moves_victims_first_with_their_stamp() {
        let overflow = Overflow::new(usize::MAX);
        let mut l = limited(&[1, 2, 3, 4], 1, 7, 4);
        assert!(l.push(Node::boxed(5), &overflow).is_ok());
        assert_eq!(spilled_one(&overflow), (1, 6), "one victim");
        assert_eq!((values(&l.items), l.victims), (vec![2, 3, 4, 5], 0));
        assert!(l.push(Node::boxed(6), &overflow).is_ok());
        assert_eq!(spilled(&overflow), (vec![2, 3], 7), "half of the fresh");
        assert_eq!(values(&l.items), [4, 5, 6]);
    }

    #[test]
    fn a_stash_below_its_capacity_keeps_what_the_overflow_has_no_room_for() {
        let overflow = Overflow::new(0);
        let mut l = limited(&[1, 2], 0, 0, 2);
        l.capacity = 8;
        for value in [3, 4, 5] {
            assert!(l.push(Node::boxed(value), &overflow).is_ok());
        }
        assert_eq!((values(&l.items), l.limit), (vec![1, 2, 3, 4, 5], 5));
    }

    #[test]
    fn a_stash_past_its_limit_spills_down_to_half_of_it_at_once() {
        let overflow = Overflow::new(usize::MAX);
        // Six from a steal, with a book; the stash keeps two.
        let mut l = limited(&[1, 2, 3, 4, 5, 6], 0, 3, 2);
        assert!(l.push(Node::boxed(7), &overflow).is_ok());
        assert_eq!(spilled(&overflow), (vec![1, 2, 3, 4, 5], 3));
        assert_eq!(values(&l.items), [6, 7]);
    }

    #[test]
    fn objects_given_back_for_several_takers_go_on_in_batches() {
        let overflow = Overflow::new(usize::MAX);
        let mut l = limited(&[], 0, 4, 0);
        l.capacity = 128;
        for value in 0..BATCH as u32 {
            assert!(l.gather(Node::boxed(value), &overflow).is_ok());
        }
        assert!(overflow.pop().is_none(), "gathered, not spilled");
        assert!(l.gather(Node::boxed(99), &overflow).is_ok());
        let (batch, stamp) = spilled(&overflow);
        assert_eq!((batch.len(), stamp), (BATCH, 4), "one batch, of them all");
        assert_eq!(values(&l.items), [99]);
        // Its owner's own returns keep the limit: the next spills.
        assert!(l.push(Node::boxed(100), &overflow).is_ok());
        assert_eq!(spilled_one(&overflow).0, 99);
        // A stash whose capacity is below a batch gathers up to it.
        l.capacity = 2;
        assert!(l.gather(Node::boxed(1), &overflow).is_ok());
        assert!(overflow.pop().is_none(), "room for two");
        assert!(l.gather(Node::boxed(2), &overflow).is_ok());
        assert_eq!(spilled(&overflow).0, [100, 1]);
        assert_eq!(values(&l.items), [2]);
    }

    #[test]
    fn zero_limit_spills_the_object_itself() {
        let overflow = Overflow::new(usize::MAX);
        let mut l = limited(&[], 0, 2, 0);
        assert!(l.push(Node::boxed(8), &overflow).is_ok());
        assert_eq!(spilled_one(&overflow), (8, 2));
        assert!(l.items.is_empty());
        assert_eq!(l.items.capacity(), 0, "no buffer for a stash with no room");
        assert!(l.spares.is_empty());
    }

    #[test]
    fn install_keeps_the_age_of_a_batch_and_no_more_than_the_limit() {
        let (returns, overflow) = (open(), Overflow::new(usize::MAX));
        let mut l = limited(&[], 0, 5, 2);
        overflow.push(Batch::new(nodes(&[1, 2, 3, 4]), 4));
        let taken = l.take(&returns, &overflow).map(|node| *node.value());
        assert_eq!(taken, Some(4), "the newest of the batch");
        assert_eq!(
            (values(&l.items), l.victims),
            (vec![2, 3], 2),
            "stamped before"
        );
        assert_eq!(spilled(&overflow), (vec![1], 4), "the oldest goes back");
        // A batch that fits whole leaves its buffer for the next spill.
        l.items.clear();
        l.victims = 0;
        overflow.push(Batch::new(nodes(&[5, 6]), 5));
        assert_eq!(
            l.take(&returns, &overflow).map(|node| *node.value()),
            Some(6)
        );
        assert_eq!((values(&l.items), l.victims), (vec![5], 0), "fresh");
        assert_eq!(l.spares.len(), 1, "the batch's buffer is kept");
        // A stash that keeps a book installs up to its capacity.
        l.items.clear();
        l.capacity = 3;
        l.loans.turn(true);
        overflow.push(Batch::new(nodes(&[7, 8, 9, 10, 11]), 5));
        assert_eq!(
            l.take(&returns, &overflow).map(|node| *node.value()),
            Some(11)
        );
        assert_eq!(values(&l.items), [8, 9, 10]);
        assert_eq!(spilled(&overflow).0, [7]);
    }

    #[test]
    fn give_up_moves_everything_that_fits() {
        let overflow = Overflow::new(3);
        let mut l = local(&[1, 2, 3, 4], 2, 2);
        let batches = l.give_up(&overflow);
        assert_eq!(batches.len(), 2);
        assert_eq!(
            (values(&batches[0].items), batches[0].stamp),
            (vec![1, 2], 1)
        );
        assert_eq!((values(&batches[1].items), batches[1].stamp), (vec![3], 2));
        assert_eq!(
            (values(&l.items), l.victims, l.capacity),
            (vec![4], 0, 0),
            "what did not fit stays; it keeps nothing from now on"
        );
    }

    #[test]
    fn handshake_gives_the_sweeper_the_owners_writes() {
        // An owner pushes 0, 1, 2, ... while a sweeper takes whatever is
        // there, again and again. Without the handshake both would change
        // the stash's `Vec` at once (a data race Miri and TSan report, and
        // lost or doubled values here); with it every value is seen once,
        // in order. (Miri and TSan see the race on every run; a native run
        // catches it often in release, where the two sides overlap most.)
        // The sweeper registers the process for `membarrier` after its
        // first round (if no other test has), so both may switch barriers
        // midway.
        const N: u32 = if cfg!(miri) {
            40
        } else if cfg!(debug_assertions) {
            50_000
        } else {
            1_000_000
        };
        let stash = Stash::<u32>::new(0, usize::MAX, 7, true);
        let overflow = Overflow::new(usize::MAX);
        let strategy = crate::pool::barrier::strategy();
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut seen = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..N {
                    let pushed = stash.with_owner(strategy, |l| {
                        l.limit = usize::MAX;
                        l.push(Node::boxed(i), &overflow)
                    });
                    assert!(pushed.is_ok());
                }
                done.store(true, Ordering::Release);
            });
            for round in 0.. {
                if round == 1 {
                    crate::pool::barrier::register();
                }
                let finished = done.load(Ordering::Acquire);
                let _gate = crate::pool::barrier::gate(strategy).shared();
                let heavy = crate::pool::barrier::Heavy::new(strategy);
                stash.claim();
                heavy.issue();
                let mut taken = Vec::new();
                stash.with_claimed(|l| l.drain(&mut taken));
                seen.extend(values(&taken));
                if finished {
                    break;
                }
            }
        });
        assert_eq!(seen, (0..N).collect::<Vec<_>>());
        // Released: the owner can enter again.
        assert_eq!(stash.with_owner(strategy, |l| l.items.len()), 0);
    }

    /// A sweeper that claims the stash again the moment it releases it, two
    /// claims a round with nothing between, does not keep the owner out:
    /// every release leaves the owner a window, and an owner that sets
    /// `busy` in it is waited for by the next claim.
    #[test]
    fn back_to_back_claims_cannot_keep_an_owner_out() {
        const OPS: u32 = if cfg!(miri) { 20 } else { 20_000 };
        let stash = Stash::<u32>::new(0, usize::MAX, 7, true);
        let overflow = Overflow::new(usize::MAX);
        let strategy = crate::pool::barrier::strategy();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    let _gate = crate::pool::barrier::gate(strategy).shared();
                    for _ in 0..2 {
                        let heavy = crate::pool::barrier::Heavy::new(strategy);
                        stash.claim();
                        heavy.issue();
                        stash.with_claimed(|_| ());
                    }
                }
            });
            for i in 0..OPS {
                let pushed = stash.with_owner(strategy, |l| {
                    l.limit = usize::MAX;
                    l.push(Node::boxed(i), &overflow)
                });
                assert!(pushed.is_ok());
            }
            done.store(true, Ordering::Relaxed);
        });
        let len = stash.with_owner(strategy, |l| l.items.len());
        assert_eq!(len, OPS as usize);
    }
}

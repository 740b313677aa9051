//! The paths an object takes back to its pool, and the policy that picks
//! one. Every return starts here; the one a guard takes most
//! (`LocalPool::return_lent`'s first branch: into the stash of the thread
//! that took it) is inlined into the guard's drop.
//!
//! A return on the thread that took the object goes into its stash
//! (`Local::push`: kept below the limit, else a spill). A return on
//! another thread takes one of four routes (`Route`), by the table of
//! [`implementation`](crate::implementation), section 3c: into the taker's
//! loan book, into this thread's stash, gathered there for several takers,
//! or to the overflow alone.
//!
//! Each path says whether the object may have been written, which picks
//! `recycle` or `recycle_unwritten`: a guard's node records it, `with` and
//! `put` lend or take `&mut` access, so theirs always was. No path runs
//! user code inside a critical section: `recycle` runs before, a refused
//! object's `Drop` after.

use std::mem::{self, ManuallyDrop};
use std::ptr::NonNull;

use crate::Recycle;
use crate::pool::barrier;
use crate::pool::local_pool::LocalPool;
use crate::pool::node::{Node, loan};
use crate::pool::overflow::{Batch, Overflow};
use crate::pool::shared::Shared;
use crate::pool::stash::{Counters, Local, Returns, Stash};
use crate::sync::Ordering;

// === the routes ===

/// Where an object given back on another thread than took it goes (the
/// module docs' table).
enum Route<'a, T> {
    /// Into the loan book of `origin`, which lent it; `stop`: advising it
    /// to keep none.
    Book { origin: &'a Stash<T>, stop: bool },
    /// Into `mine`, this thread's stash, as its own return; `taker`, if
    /// this thread gives back its objects alone, is advised to keep a book.
    /// (With no taker to name, a thread without a stash or another
    /// process's, there is no book to advise.)
    Stash {
        mine: &'a Stash<T>,
        taker: Option<&'a Stash<T>>,
    },
    /// Gathered in `mine`, this thread's stash, for several takers.
    Gather(&'a Stash<T>),
    /// To the overflow alone: this thread has no stash.
    Overflow,
}

impl<'a, T> Route<'a, T> {
    /// The route of an object lent by `origin` (if a stash of this process
    /// lent it), in its book if `tracked`, given back on a thread whose
    /// stash is `mine`; notes `origin` in `mine`'s `Returner`.
    fn of(mine: Option<&'a Stash<T>>, origin: Option<&'a Stash<T>>, tracked: bool) -> Self {
        let one_taker = match (mine, origin) {
            (Some(mine), Some(origin)) => mine.returner.note(std::ptr::from_ref(origin).cast()),
            _ => false,
        };
        match (mine, origin) {
            (_, Some(origin)) if tracked => Route::Book {
                origin,
                stop: !one_taker,
            },
            (Some(mine), Some(origin)) if one_taker => Route::Stash {
                mine,
                taker: Some(origin),
            },
            (Some(mine), Some(_)) => Route::Gather(mine),
            (Some(mine), None) => Route::Stash { mine, taker: None },
            (None, _) => Route::Overflow,
        }
    }
}

// === impl LocalPool: the paths back ===

impl<T: Send + 'static, R: Recycle<T>> LocalPool<T, R> {
    /// Returns a node lent by `lend` (from a dropped guard) through
    /// `recycle`: straight to the stash it came from when this thread took
    /// it and it is in no book, else as `return_elsewhere` does.
    ///
    /// # Safety
    ///
    /// `node` must have been lent by this pool's `lend`, and be held by
    /// the caller, who gives it up.
    #[inline(always)]
    pub(crate) unsafe fn return_lent(&self, node: NonNull<Node<T>>) {
        // SAFETY: the caller holds the node.
        let (written, home) = unsafe {
            (
                Node::take_written(node.as_ptr()),
                (*node.as_ptr()).home.owned(),
            )
        };
        let Some(stash) = home else {
            // Out of line, so that the common case stays small enough to
            // inline into the guard's drop.
            // SAFETY: the caller's word.
            return outlined(move || unsafe { self.return_elsewhere(node, written) });
        };
        // SAFETY: `owned` found this thread's own stash in the pool that
        // lent `node` (the caller's word), whose object type is `T`;
        // stashes live in their own allocations until the pool's shared
        // state drops (`StashBox`), and `&self` keeps the pool alive for
        // this call.
        let stash = unsafe { &*stash.cast::<Stash<T>>() };
        // SAFETY: in no loan book (`owned`), so the caller's alone; from
        // `Box::leak`.
        let node = unsafe { Box::from_raw(node.as_ptr()) };
        // `lend` made the shared state, and this thread took the node in
        // this process (a fork gives the child's thread a new token).
        self.recycle_into_stash(&self.shared(), stash, node, written)
    }

    /// Returns a lent node in this thread's loan book, or on another thread
    /// than the one that took it (or on a thread in its teardown), by its
    /// `Route`.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    unsafe fn return_elsewhere(&self, node: NonNull<Node<T>>, written: bool) {
        let at = node.as_ptr();
        // SAFETY: the caller holds the node.
        if let Some(stash) = unsafe { (*at).home.mine() } {
            // Taken on this thread, and in its stash's book.
            // SAFETY: `mine` found this thread's own stash (see
            // `return_lent`).
            let stash = unsafe { &*stash.cast::<Stash<T>>() };
            // SAFETY: the caller's word.
            if let Some(node) = unsafe { self.recycle_lent(&stash.counters, node, written) } {
                // SAFETY: lent from this thread's `stash`, held until now.
                unsafe { self.shared().push_lent(stash, node) }
            }
            return;
        }
        let (shared, mine) = self.local();
        // SAFETY: the caller holds the node. Relaxed: its state was set when
        // it was lent, and published to this thread with the guard.
        let tracked = unsafe { Node::loan(at) }.load(Ordering::Relaxed) == loan::LENT;
        // The stash that lent it, if a thread with a token lent it from one,
        // in this process.
        // SAFETY: `lend` recorded a stash of this pool, which lives as long
        // as the pool's shared state (a forked child's parent state is
        // never freed).
        let origin = unsafe { (*at).home.origin() }
            .map(|origin| unsafe { &*origin.cast::<Stash<T>>() })
            .filter(|origin| origin.returns.here());
        if tracked && origin.is_none() {
            // In a forked child, in its parent's book, which nothing reads
            // here: this process's now, in no book.
            // SAFETY: the caller holds the node.
            unsafe {
                (*at).home.leave_book();
                Node::loan(at).store(loan::UNTRACKED, Ordering::Relaxed);
            }
        }
        // Called once, on every route but `Book`.
        // SAFETY: in no book, so the caller's alone; from `Box::leak`.
        let boxed = || unsafe { Box::from_raw(at) };
        match Route::of(mine, origin, tracked) {
            // SAFETY: the caller's word; `origin` lent it, in its book.
            Route::Book { origin, stop } => unsafe {
                match mine {
                    Some(mine) => self.give_back(&mine.counters, origin, node, written, stop),
                    None => self.give_back(&shared.orphans, origin, node, written, stop),
                }
            },
            Route::Stash { mine, taker } => {
                if let Some(taker) = taker {
                    // From now on its objects go back to it.
                    taker.returns.advise(Returns::START);
                }
                self.recycle_into_stash(&shared, mine, boxed(), written);
            }
            Route::Gather(mine) => {
                if let Some(node) = self.recycle(&mine.counters, boxed(), written) {
                    shared.gather(mine, node);
                }
            }
            Route::Overflow => self.recycle_into_overflow(&shared, boxed(), written),
        }
    }

    /// Recycles a node that `origin`'s loan book holds, another thread's,
    /// and gives it back there, counted in `counters` (this thread's).
    ///
    /// # Safety
    ///
    /// As `return_lent`, for a node in `origin`'s book.
    unsafe fn give_back<const S: bool>(
        &self,
        counters: &Counters<S>,
        origin: &Stash<T>,
        node: NonNull<Node<T>>,
        written: bool,
        stop: bool,
    ) {
        // SAFETY: the caller's word.
        if let Some(node) = unsafe { self.recycle_lent(counters, node, written) } {
            // SAFETY: the caller held it until now.
            let bytes = Self::WEIGHED.then(|| unsafe { Node::bytes(node.as_ptr()) });
            Shared::<T>::count_returned(counters, bytes);
            // SAFETY: the caller's word; `lend` made the shared state.
            unsafe { self.shared().give_back(origin, node, stop) };
        }
    }

    /// Passes a lent node's object through `recycle` where it is (it may
    /// be in a loan book, which other threads read): the node if kept;
    /// else `None`, its object dropped (`let_go`) and counted discarded,
    /// also if the recycler panics.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    #[inline(always)]
    unsafe fn recycle_lent<const S: bool>(
        &self,
        counters: &Counters<S>,
        node: NonNull<Node<T>>,
        written: bool,
    ) -> Option<NonNull<Node<T>>> {
        /// Lets the object go, counted discarded, if `recycle` panics.
        struct OnUnwind<'a, T: Send + 'static, R: Recycle<T>, const S: bool>(
            &'a LocalPool<T, R>,
            &'a Counters<S>,
            NonNull<Node<T>>,
        );
        impl<T: Send + 'static, R: Recycle<T>, const S: bool> Drop for OnUnwind<'_, T, R, S> {
            fn drop(&mut self) {
                self.1.discarded.bump();
                // SAFETY: `recycle_lent`'s caller held the node, and gives
                // it up.
                unsafe { self.0.let_go(self.2) }
            }
        }
        let unwinding = OnUnwind(self, counters, node);
        // SAFETY: the caller holds the node.
        let value = unsafe { Node::object_mut(node.as_ptr()) };
        let keep = if written {
            self.recycler.recycle(value)
        } else {
            self.recycler.recycle_unwritten(value)
        };
        if keep {
            if Self::WEIGHED {
                let bytes = self.recycler.footprint(value);
                // SAFETY: the caller holds the node; field by field, as the
                // book may read its `loan`.
                unsafe { (*node.as_ptr()).bytes = bytes };
            }
            mem::forget(unwinding);
            return Some(node);
        }
        mem::forget(unwinding);
        counters.discarded.bump();
        // SAFETY: the caller's word.
        unsafe { self.let_go(node) };
        None
    }

    /// Drops the object of a lent node that leaves the pool.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    #[cold]
    unsafe fn let_go(&self, node: NonNull<Node<T>>) {
        // SAFETY: the caller's word.
        unsafe { self.leave(node, |value| drop(ManuallyDrop::into_inner(value))) }
    }

    /// The object of a lent node, out of the pool for good (`into_inner`).
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    pub(crate) unsafe fn keep_lent(&self, node: NonNull<Node<T>>) -> T {
        // SAFETY: the caller's word.
        unsafe { self.leave(node, ManuallyDrop::into_inner) }
    }

    /// A lent node whose object leaves the pool, handed to `take`: out of
    /// this thread's loan book if it is in it, and freed; or, in another
    /// thread's book, left there as an empty shell for that book to free
    /// (`Node::leave`).
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    unsafe fn leave<U>(
        &self,
        node: NonNull<Node<T>>,
        take: impl FnOnce(ManuallyDrop<T>) -> U,
    ) -> U {
        // SAFETY: the caller holds the node. Relaxed: as in
        // `return_elsewhere`.
        let tracked = unsafe { Node::loan(node.as_ptr()) }.load(Ordering::Relaxed) == loan::LENT;
        // SAFETY: the caller holds the node.
        let node = match unsafe { (*node.as_ptr()).home.mine() } {
            // SAFETY: the caller's word: lent from `stash`, this thread's
            // (see `return_lent`), in its book.
            Some(stash) if tracked => unsafe {
                self.shared().reclaim(&*stash.cast::<Stash<T>>(), node)
            },
            // SAFETY: the caller held the node, in another thread's book.
            None if tracked => return unsafe { Node::leave(node.as_ptr(), take) },
            // SAFETY: in no book, so the caller's alone; from `Box::leak`.
            _ => unsafe { Box::from_raw(node.as_ptr()) },
        };
        take(node.into_inner())
    }

    /// Returns an object to the pool through `recycle`, into this thread's
    /// stash.
    #[inline(always)]
    pub(crate) fn return_node(&self, node: Box<Node<T>>, written: bool) {
        let (shared, stash) = self.local();
        match stash {
            Some(stash) => self.recycle_into_stash(&shared, stash, node, written),
            None => self.recycle_into_overflow(&shared, node, written),
        }
    }

    /// Recycles `node` into `stash`, this thread's.
    #[inline(always)]
    pub(super) fn recycle_into_stash(
        &self,
        shared: &Shared<T>,
        stash: &Stash<T>,
        node: Box<Node<T>>,
        written: bool,
    ) {
        if let Some(node) = self.recycle(&stash.counters, node, written) {
            shared.push(stash, node, Self::WEIGHED);
        }
    }

    /// Passes a returned object through `recycle` (`recycle_unwritten` if
    /// nobody could have written it): the node, if kept; else `None`, the
    /// object dropped and counted discarded (also if the recycler panics:
    /// the node then drops as the panic unwinds).
    #[inline(always)]
    fn recycle<const S: bool>(
        &self,
        counters: &Counters<S>,
        mut node: Box<Node<T>>,
        written: bool,
    ) -> Option<Box<Node<T>>> {
        let unwinding = DiscardOnUnwind(counters);
        let keep = if written {
            self.recycler.recycle(node.value_mut())
        } else {
            self.recycler.recycle_unwritten(node.value_mut())
        };
        if keep && Self::WEIGHED {
            node.bytes = self.recycler.footprint(node.value_mut());
        }
        mem::forget(unwinding);
        if keep {
            Some(node)
        } else {
            counters.discarded.bump();
            None
        }
    }

    /// Recycles `node` straight into the overflow (no stash on this thread).
    #[cold]
    pub(super) fn recycle_into_overflow(
        &self,
        shared: &Shared<T>,
        node: Box<Node<T>>,
        written: bool,
    ) {
        if let Some(node) = self.recycle(&shared.orphans, node, written) {
            shared.push_single(&shared.orphans, node);
        }
    }

    /// Drops a lent object whose guard is dropped while its thread panics
    /// (the panic may have left it half-modified), counting it discarded.
    /// On whatever thread the guard is, so in the shared counts.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    #[cold]
    pub(crate) unsafe fn discard_unwound(&self, node: NonNull<Node<T>>) {
        self.shared().orphans.discarded.bump();
        // SAFETY: the caller's word.
        unsafe { self.let_go(node) }
    }
}

// === impl Shared: into a stash, a book or the overflow ===

impl<T: Send> Shared<T> {
    /// Pools a returned (already recycled) object in `stash`, this
    /// thread's, spilling to the overflow in the same critical section.
    #[inline(always)]
    pub(crate) fn push(&self, stash: &Stash<T>, node: Box<Node<T>>, weighed: bool) {
        let bytes = node.bytes;
        let pushed = stash.with_owner(self.strategy, |local| local.push(node, &self.overflow));
        self.count_push(stash, pushed, weighed.then_some(bytes));
    }

    /// Pools an object (already recycled) that this thread gives back for
    /// several takers in `stash`, this thread's, where it gathers a batch
    /// (`Local::gather`). A stash without a slot (an exited thread's, which
    /// this thread inherited with its id, or one whose slot a sweep took
    /// back) asks for one first: a thread that only gives back passes
    /// objects on in batches, whichever id it has.
    #[cold]
    pub(crate) fn gather(&self, stash: &Stash<T>, node: Box<Node<T>>) {
        let bytes = node.bytes;
        let mut node = Some(node);
        let mut gather = |local: &mut Local<T>| {
            let node = node.take().expect("gathered once");
            local.gather(node, &self.overflow)
        };
        // `take_slot` runs `gather` only if it finds a slot; else the node
        // is still here, for a section without one.
        let slotted = if stash.returns.is_open() {
            None
        } else {
            self.take_slot(stash, &mut gather)
        };
        let pushed = slotted.unwrap_or_else(|| stash.with_owner(self.strategy, gather));
        self.count_push(stash, pushed, self.weigh(bytes));
    }

    /// Pools a node lent from `stash` and given back on its owner's
    /// thread, already recycled: out of the loan book, into the stash, in
    /// one critical section.
    ///
    /// # Safety
    ///
    /// `node` was lent from `stash`, which is this thread's, and this
    /// thread holds it.
    pub(crate) unsafe fn push_lent(&self, stash: &Stash<T>, node: NonNull<Node<T>>) {
        // SAFETY: the caller holds the node.
        let bytes = unsafe { Node::bytes(node.as_ptr()) };
        let pushed = stash.with_owner(self.strategy, |local| {
            // SAFETY: the caller's word.
            let node = unsafe { local.reclaim(node) };
            local.push(node, &self.overflow)
        });
        self.count_push(stash, pushed, self.weigh(bytes));
    }

    /// Takes a node lent from `stash` back on its owner's thread, out of
    /// the loan book, for a return that does not pool it.
    ///
    /// # Safety
    ///
    /// As `push_lent`.
    pub(crate) unsafe fn reclaim(&self, stash: &Stash<T>, node: NonNull<Node<T>>) -> Box<Node<T>> {
        // SAFETY: the caller's word.
        stash.with_owner(self.strategy, |local| unsafe { local.reclaim(node) })
    }

    /// Counts a push of an object of `bytes` (`None`: not weighed, see
    /// `Shared::take`); one that neither the stash nor the overflow had
    /// room for is dropped, out of the critical section.
    #[inline(always)]
    fn count_push(&self, stash: &Stash<T>, pushed: Result<(), Box<Node<T>>>, bytes: Option<usize>) {
        match pushed {
            Ok(()) => Self::count_returned(&stash.counters, bytes),
            Err(node) => {
                stash.counters.rejected.bump();
                drop(node);
            }
        }
    }

    /// Hands a lent node, already recycled on this thread, back to the loan
    /// book of `origin`, the stash that lent it, another thread's
    /// (`loans.rs`); advises that stash to keep no book if `stop`. If the book has closed (its
    /// thread exited or lost its slot), collects it.
    ///
    /// # Safety
    ///
    /// `node` is [`loan::LENT`] in `origin`'s book, and the caller held it
    /// until now: it is not touched again.
    pub(crate) unsafe fn give_back(&self, origin: &Stash<T>, node: NonNull<Node<T>>, stop: bool) {
        // Release: the recycling happens before the book takes the node (its
        // acquire in `Loans`). The node is the book's from here on.
        // SAFETY: the caller held it until now.
        unsafe { Node::loan(node.as_ptr()) }.store(loan::BACK, Ordering::Release);
        // Dekker's pattern with the exit flush's close and heavy barrier
        // (`flush`): either the flush saw the node back, or this sees the
        // book closed.
        barrier::light(self.strategy);
        if !origin.returns.is_open() {
            self.collect_closed(origin);
        }
        if stop {
            origin.returns.advise(Returns::STOP);
        }
    }

    /// Collects the loans given back to `origin`'s book after it closed, as
    /// an exit flush would have, into the overflow, where the next get finds
    /// them; unless a thread has opened it since (it inherited the stash
    /// with its slot, and takes them back itself).
    #[cold]
    fn collect_closed(&self, origin: &Stash<T>) {
        let sweeping = self.lock_sweep();
        if origin.returns.is_open() {
            return;
        }
        let mut found = Vec::new();
        self.with_claimed_stashes(&[origin], |stash| {
            stash.with_claimed(|local| local.loans.collect(&mut found));
        });
        if !found.is_empty() {
            // Pools keep books only without a bound: no room to reserve.
            self.overflow.push(Batch::new(found, sweeping.epoch));
        }
    }

    /// Pools an object returned by a thread without a stash, or whose
    /// stash holds no slot: straight to the overflow's singles, or dropped
    /// (rejected) if it is full. Takes no lock, and allocates nothing once
    /// the singles' stack and ring are made (`singles.rs`).
    #[cold]
    pub(crate) fn push_single<const S: bool>(&self, counters: &Counters<S>, node: Box<Node<T>>) {
        self.pool_one(counters, node, Overflow::push_one);
    }
}

/// Calls `f` out of line: keeps a rare path from growing an inlined caller.
#[cold]
#[inline(never)]
fn outlined<U>(f: impl FnOnce() -> U) -> U {
    f()
}
/// Counts an object discarded if `recycle`, or the closure it is lent to,
/// panics on it.
pub(super) struct DiscardOnUnwind<'a, const S: bool>(pub(super) &'a Counters<S>);

impl<const S: bool> Drop for DiscardOnUnwind<'_, S> {
    fn drop(&mut self) {
        self.0.discarded.bump();
    }
}

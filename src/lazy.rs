//! A value made on first use, published without a lock: boxed ([`Lazy`],
//! for the queues that many pools never reach, and the links of a list of
//! frame shapes) or shared ([`LazyArc`], a pool's shared state).
//!
//! The first users each make a value and race to publish theirs with one
//! compare-and-swap; the losers drop their own, unseen. No thread ever
//! waits for another to make the value, and a forked child finds it either
//! published or not, never half made. Where making is work that cannot be
//! undone (a pool's preloaded objects), a [`Claim`] lets one thread of a
//! process make at a time, and a forked child takes over a claim that its
//! parent left. Why not a `OnceLock`:
//! [`implementation`](crate::implementation), section 7a.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::ptr::{self, NonNull};

use crate::sync::{Arc, AtomicPtr, AtomicUsize, Ordering, loom_const_fn};

/// A `T` made by the first [`get_or_make`](Lazy::get_or_make).
pub(crate) struct Lazy<T> {
    /// Null until made; then a value from `Box::into_raw`, freed only once
    /// taken out (`take`, `Drop`).
    value: AtomicPtr<T>,
    /// Gives `Lazy<T>` the `Send` and `Sync` of a `OnceLock<Box<T>>`, as
    /// any thread may make the value and whichever owns the `Lazy` drops
    /// it (an `AtomicPtr` alone would be both for any `T`). The values
    /// kept here (queues, a multi-size pool's `LocalPool`s, frame shapes'
    /// pools) change only through atomic operations that leave them whole
    /// if a caller unwinds, hence `AssertUnwindSafe`: pools stay
    /// `UnwindSafe` and `RefUnwindSafe` as with the value held directly.
    _owns: PhantomData<AssertUnwindSafe<std::sync::OnceLock<Box<T>>>>,
}

impl<T> Lazy<T> {
    loom_const_fn! {
        /// `const`, so that a pool holding one can be made in a `static`.
        pub(crate) fn new() -> Self {
            Self {
                value: AtomicPtr::new(ptr::null_mut()),
                _owns: PhantomData,
            }
        }
    }

    /// The value, if made.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the publishing compare-and-swap, so the value
        // is seen whole.
        let value = self.value.load(Ordering::Acquire);
        // SAFETY: non-null means published by `get_or_make` from a live
        // box, freed only once taken out (with `&mut self`), and `&self`
        // outlives the borrow.
        unsafe { value.as_ref() }
    }

    /// The value, made with `make` if no thread has made it yet. `make` may
    /// run on several threads at once; one value is kept.
    #[inline]
    pub(crate) fn get_or_make(&self, make: impl FnOnce() -> T) -> &T {
        match self.get() {
            Some(value) => value,
            None => self.make(make),
        }
    }

    #[cold]
    fn make(&self, make: impl FnOnce() -> T) -> &T {
        let made = Box::into_raw(Box::new(make()));
        match self.value.compare_exchange(
            ptr::null_mut(),
            made,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: `made` is now published and freed only once taken out.
            Ok(_) => unsafe { &*made },
            Err(theirs) => {
                // SAFETY: `made` was never published: this thread alone has
                // it, from `Box::into_raw` above.
                drop(unsafe { Box::from_raw(made) });
                // SAFETY: `theirs` is non-null (the exchange failed), so as
                // in `get`.
                unsafe { &*theirs }
            }
        }
    }

    /// Takes the value out, if made, leaving none: a chain of `Lazy` links
    /// is unlinked one at a time, not dropped nested.
    pub(crate) fn take(&mut self) -> Option<Box<T>> {
        // `&mut self`: no other thread can reach the value any more, and
        // whatever gave this thread that access ordered it after the
        // exchange that published it.
        let value = self.value.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: published from `Box::into_raw`, and freed only once taken
        // out, which the swap just did.
        (!value.is_null()).then(|| unsafe { Box::from_raw(value) })
    }
}

impl<T> Drop for Lazy<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

// === impl LazyArc ===

/// An `Arc<T>` made by the first [`get_or_make`](LazyArc::get_or_make):
/// where a `LocalPool` keeps its shared state
/// ([`implementation`](crate::implementation), section 1, says why). It
/// holds the pointer from `Arc::into_raw`, so the hot path is one acquire
/// load and a dereference, as with a `OnceLock`; a [`LazyArcRef`] keeps
/// that pointer, whose provenance covers the whole `Arc` allocation, to
/// hand out strong references where a path needs one.
pub(crate) struct LazyArc<T> {
    /// Null until published; then from `Arc::into_raw`: a strong reference
    /// that the cell owns and gives up only in `Drop`.
    ptr: AtomicPtr<T>,
    /// Held by a thread that makes a value no racer may make beside it
    /// (`claim`).
    claim: Claim,
    /// The cell owns an `Arc<T>`: its auto traits (`Send`, `Sync`,
    /// unwind safety) are those of the `OnceLock<Arc<T>>` it
    /// replaces.
    _owns: PhantomData<Arc<T>>,
}

impl<T> LazyArc<T> {
    loom_const_fn! {
        pub(crate) fn new() -> Self {
            Self {
                ptr: AtomicPtr::new(ptr::null_mut()),
                claim: Claim::new(),
                _owns: PhantomData,
            }
        }
    }

    /// The value, if it has been published.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<LazyArcRef<'_, T>> {
        // Acquire: pairs with the publishing exchange, so the value is
        // seen whole.
        NonNull::new(self.ptr.load(Ordering::Acquire)).map(|ptr| LazyArcRef {
            ptr,
            _cell: PhantomData,
        })
    }

    /// The value, made with `make` if no thread has published one
    /// yet. `make` may run on several threads at once; the first to
    /// publish wins, and only the winner's value is passed to `published`
    /// (to register it with the sweeper). The others are dropped, never
    /// seen by anything else.
    #[cold]
    pub(crate) fn get_or_make(
        &self,
        make: impl FnOnce() -> Arc<T>,
        published: impl FnOnce(&Arc<T>),
    ) -> LazyArcRef<'_, T> {
        self.get()
            .unwrap_or_else(|| self.publish(ptr::null_mut(), make, published))
    }

    /// The claim for callers whose values must not be made by racers
    /// (`Claim`): held around `get_or_make` or `renew`, it leaves one
    /// maker at a time.
    pub(crate) fn claim(&self) -> &Claim {
        &self.claim
    }

    /// Replaces `stale`, the value published now, with one made by `make`,
    /// as `get_or_make` publishes a first one; `stale` is leaked, never
    /// dropped (a forked child's pool abandons its parent's state, which
    /// may be mid-operation: `pool::fork`). If another thread replaced it
    /// first, its value is kept.
    #[cold]
    pub(crate) fn renew(
        &self,
        stale: LazyArcRef<'_, T>,
        make: impl FnOnce() -> Arc<T>,
        published: impl FnOnce(&Arc<T>),
    ) -> LazyArcRef<'_, T> {
        self.publish(stale.ptr.as_ptr(), make, published)
    }

    /// Publishes a value made by `make` in place of `expected` (null: none
    /// yet), unless another thread published first; then the value now.
    fn publish(
        &self,
        expected: *mut T,
        make: impl FnOnce() -> Arc<T>,
        published: impl FnOnce(&Arc<T>),
    ) -> LazyArcRef<'_, T> {
        let made = make();
        let raw = Arc::into_raw(Arc::clone(&made)).cast_mut();
        // AcqRel: the release publishes the value whole; the acquire, on
        // failure, sees the winner's whole.
        match self
            .ptr
            .compare_exchange(expected, raw, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => published(&made),
            // SAFETY: `raw` came from `Arc::into_raw` above and was not
            // published, so this is the only use of its reference.
            Err(_) => drop(unsafe { Arc::from_raw(raw) }),
        }
        // `made`, if it lost, drops here: its last reference.
        drop(made);
        self.get().expect("published, by this thread or another")
    }
}

impl<T> Drop for LazyArc<T> {
    fn drop(&mut self) {
        // `&mut self`: no `LazyArcRef` borrowed from the cell is alive, and
        // whatever gave this thread that access ordered it after the
        // exchange that published the value.
        let ptr = self.ptr.load(Ordering::Acquire);
        if !ptr.is_null() {
            // SAFETY: published from `Arc::into_raw` and never given up
            // before: this is the cell's own strong reference.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }
}

// === impl Claim ===

/// Lets one thread of a process at a time make something that racing
/// makers cannot undo (a preloaded pool's objects, the fork handlers'
/// registration); the others wait, yielding their cores, until it is
/// made. The claim names the process whose thread holds it, so a forked
/// child, whose holder may not be in it, takes over a claim left by its
/// parent rather than wait for a thread it does not have.
pub(crate) struct Claim {
    /// The id of the process whose thread is making, or 0.
    process: AtomicUsize,
    /// The making thread (`this_thread`), while it holds the claim: tells
    /// a maker whose `make` re-entered, also through other claims taken
    /// meanwhile, from a thread that waits. Written only by the holder.
    thread: AtomicUsize,
}

#[cfg(not(stashpool_loom))]
std::thread_local! {
    /// A thread's mark: its address names the thread while it lives.
    static THREAD: u8 = const { 0 };
}

#[cfg(stashpool_loom)]
loom::thread_local! {
    static THREAD: u8 = 0;
}

/// This thread's name for `Claim::thread`: nonzero, unique among live
/// threads; 0 once its thread-locals are gone.
fn this_thread() -> usize {
    THREAD
        .try_with(|mark| ptr::from_ref(mark) as usize)
        .unwrap_or(0)
}

impl Claim {
    loom_const_fn! {
        pub(crate) fn new() -> Self {
            Self {
                process: AtomicUsize::new(0),
                thread: AtomicUsize::new(0),
            }
        }
    }

    /// What `made` finds; if it finds nothing, `make`'s, run under the
    /// claim, once no other thread of this process holds it. `made` is
    /// asked again under the claim: another thread may have made it just
    /// before.
    ///
    /// # Panics
    ///
    /// If this thread holds the claim already (its `make` re-entered), with
    /// `reentered` as the message; if `make` panics, after releasing the
    /// claim.
    pub(crate) fn run<V>(
        &self,
        made: impl Fn() -> Option<V>,
        make: impl FnOnce() -> V,
        reentered: &str,
    ) -> V {
        let me = std::process::id() as usize;
        loop {
            if let Some(value) = made() {
                return value;
            }
            // Acquire: a holder found here follows the last release (an
            // exchange continues its release sequence), so `thread` reads
            // no name older than that release cleared.
            match self.process.load(Ordering::Acquire) {
                holder if holder == me => {
                    // Relaxed: the holder's own name, or 0, or (read before
                    // the holder stored it) 0; this thread's name only if
                    // this thread stored it.
                    let thread = this_thread();
                    let mine = thread != 0 && self.thread.load(Ordering::Relaxed) == thread;
                    assert!(!mine, "{reentered}");
                    crate::sync::thread::yield_now();
                }
                // Nobody, or the process this one was forked from.
                other => {
                    // Acquire: pairs with the release of the last holder, so
                    // `made` sees what it made.
                    let claim = self.process.compare_exchange(
                        other,
                        me,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    );
                    if claim.is_ok() {
                        break;
                    }
                }
            }
        }
        /// Releases the claim, also if `make` panics.
        struct Held<'a>(&'a Claim);
        impl Drop for Held<'_> {
            fn drop(&mut self) {
                self.0.thread.store(0, Ordering::Relaxed);
                // Release: what the holder made is seen by the next.
                self.0.process.store(0, Ordering::Release);
            }
        }
        self.thread.store(this_thread(), Ordering::Relaxed);
        let _held = Held(self);
        made().unwrap_or_else(make)
    }

    /// Marks the claim held by `process` (tests: a claim a parent left).
    #[cfg(test)]
    pub(crate) fn held_by(&self, process: u32) {
        self.process.store(process as usize, Ordering::Relaxed);
    }
}

/// A borrow of a [`LazyArc`]'s published value, which can also make a
/// strong reference to it.
pub(crate) struct LazyArcRef<'a, T> {
    /// From the cell: `Arc::into_raw`'s pointer, alive for `'a`.
    ptr: NonNull<T>,
    _cell: PhantomData<&'a T>,
}

impl<T> Clone for LazyArcRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for LazyArcRef<'_, T> {}

impl<'a, T> LazyArcRef<'a, T> {
    /// The value, for as long as the cell lends it.
    #[inline(always)]
    pub(crate) fn get(self) -> &'a T {
        // SAFETY: the pointer came from `Arc::into_raw` and the cell, which
        // `'a` borrows, keeps that strong reference until it drops.
        unsafe { self.ptr.as_ref() }
    }

    /// A strong reference to the value, which can outlive the cell.
    pub(crate) fn to_arc(self) -> Arc<T> {
        let ptr = self.ptr.as_ptr().cast_const();
        // SAFETY: `ptr` came from `Arc::into_raw` (with the provenance of
        // the whole allocation), and the cell's reference keeps the count
        // above zero while `'a` lasts; the increment is the reference that
        // `from_raw` takes over.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }
}

impl<T> std::ops::Deref for LazyArcRef<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        self.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Queue;
    use std::sync::{Arc, Barrier};

    #[test]
    fn first_uses_that_race_share_one_value() {
        let lazy = Arc::new(Lazy::<Queue<u64>>::new());
        let start = Arc::new(Barrier::new(2));
        let pushers: Vec<_> = (0..2u64)
            .map(|i| {
                let (lazy, start) = (lazy.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    lazy.get_or_make(Queue::new).push(i);
                })
            })
            .collect();
        for pusher in pushers {
            pusher.join().unwrap();
        }
        let queue = lazy.get().expect("made");
        assert_eq!(queue.len(), 2, "both pushes landed in the one queue kept");
        let mut got = [queue.pop().unwrap(), queue.pop().unwrap()];
        got.sort();
        assert_eq!(got, [0, 1]);
        assert!(queue.pop().is_none());
    }

    #[test]
    fn dropping_drops_the_value() {
        let alive = Arc::new(());
        let lazy = Lazy::<Queue<Arc<()>>>::new();
        assert!(lazy.get().is_none());
        lazy.get_or_make(Queue::new).push(alive.clone());
        lazy.get_or_make(|| unreachable!("made once"))
            .push(alive.clone());
        assert_eq!(Arc::strong_count(&alive), 3);
        drop(lazy);
        assert_eq!(Arc::strong_count(&alive), 1);
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod arc_tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn the_first_to_publish_wins_and_only_it_is_announced() {
        let cell = LazyArc::<u32>::new();
        let announced = std::sync::atomic::AtomicUsize::new(0);
        let start = Barrier::new(4);
        let winners: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|n| {
                    let (cell, announced, start) = (&cell, &announced, &start);
                    s.spawn(move || {
                        start.wait();
                        let got = cell.get_or_make(
                            || Arc::new(n),
                            |_| {
                                announced.fetch_add(1, Ordering::Relaxed);
                            },
                        );
                        got.get() as *const u32 as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            winners.windows(2).all(|w| w[0] == w[1]),
            "one value for all"
        );
        assert_eq!(announced.load(Ordering::Relaxed), 1);
        let published = cell.get().unwrap();
        assert_eq!(published.get() as *const u32 as usize, winners[0]);
    }

    #[test]
    fn strong_references_outlive_the_cell() {
        let cell = LazyArc::<u32>::new();
        assert!(cell.get().is_none());
        let arc = cell.get_or_make(|| Arc::new(7), |_| {}).to_arc();
        assert_eq!(Arc::strong_count(&arc), 2, "the cell's and this one");
        drop(cell);
        assert_eq!(Arc::strong_count(&arc), 1);
    }
}

//! A value made on first use, published without a lock.
//!
//! Queues that many values never reach are made only when something is
//! first queued: an `Injector` allocates its first block of slots when it is
//! made, and a ring all of its slots. The pool's overflow (a pool whose
//! stashes never spill, most pools most of the time, or whose threads all
//! have stashes) and the worker pool's overflow behind its ring (a pool
//! whose tasks always fit the ring) would otherwise hold them for nothing,
//! for as long as they live.
//!
//! Made without a lock: the first users each make a value and race to
//! publish theirs with one compare-and-swap, and the losers drop their own.
//! A `OnceLock` would make the others wait for the first instead, and a
//! process forked while one thread was making the value would leave its
//! child waiting forever on a thread that does not exist there; here a
//! child finds the value either published or not, never half made.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::ptr;

use crate::sync::{AtomicPtr, Ordering, Queue};

/// A `T` made by the first [`get_or_make`](Lazy::get_or_make).
pub(crate) struct Lazy<T> {
    /// Null until made; then a value from `Box::into_raw`, freed only by
    /// `Drop`.
    value: AtomicPtr<T>,
    /// Gives `Lazy<T>` the `Send` and `Sync` of the box it owns (an
    /// `AtomicPtr` alone would be both for any `T`). The values kept here
    /// (queues) change only through atomic operations that leave them whole
    /// if a caller unwinds, hence `AssertUnwindSafe`: pools stay
    /// `UnwindSafe` and `RefUnwindSafe` as with the value held directly.
    _owns: PhantomData<AssertUnwindSafe<Box<T>>>,
}

impl<T> Lazy<T> {
    pub(crate) fn new() -> Self {
        Self {
            value: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// The value, if made.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the publishing compare-and-swap, so the value
        // is seen whole.
        let value = self.value.load(Ordering::Acquire);
        // SAFETY: non-null means published by `get_or_make` from a live
        // box, which only `Drop` frees, and `&self` outlives the borrow.
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
            // SAFETY: `made` is now published and freed only by `Drop`.
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
}

impl<T> Drop for Lazy<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread can reach the value any more, and
        // whatever gave this thread that access ordered it after the
        // exchange that published it.
        let value = self.value.load(Ordering::Acquire);
        if !value.is_null() {
            // SAFETY: published from `Box::into_raw` and never freed before;
            // nothing can use it after this.
            drop(unsafe { Box::from_raw(value) });
        }
    }
}

/// A queue made on its first push (see the module docs).
pub(crate) struct LazyQueue<T>(Lazy<Queue<T>>);

impl<T> LazyQueue<T> {
    pub(crate) fn new() -> Self {
        Self(Lazy::new())
    }

    /// Whether the queue has been made (for tests).
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.0.get().is_some()
    }

    pub(crate) fn push(&self, value: T) {
        self.0.get_or_make(Queue::new).push(value);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.get()?.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.get().map_or(0, Queue::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

//! Where a `LocalPool` keeps its shared state: made on first use and
//! published without a lock.
//!
//! A pool's `Shared` lives in an `Arc` (the background sweeper holds it
//! weakly, exiting threads' hooks strongly) and is made on the pool's first
//! use, so that `LocalPool::new` can be `const`. A `OnceLock` would make the
//! threads that race to make it wait for the first, and a process forked
//! while one thread was making it would leave its child waiting for ever on
//! a thread that does not exist there. Here the racing threads each make a
//! `Shared` and publish theirs with one compare-and-swap; the losers drop
//! theirs, which nothing else has seen. A forked child finds the state
//! either published or not, never half made (published and not yet
//! registered with the background sweeper, if the fork fell between the
//! two: the child then sweeps that pool only when asked).
//!
//! The cell holds the pointer from `Arc::into_raw`, so the hot path is one
//! acquire load and a dereference, as with a `OnceLock`; a [`SharedRef`]
//! keeps that pointer, whose provenance covers the whole `Arc` allocation,
//! to hand out strong references where a path needs one (registering an
//! exit hook).

use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use crate::pool::shared::Shared;
use crate::sync::{Arc, AtomicPtr, Ordering};

/// A pool's shared state, once made.
pub(crate) struct SharedCell<T: Send> {
    /// Null until published; then from `Arc::into_raw`: a strong reference
    /// that the cell owns and gives up only in `Drop`.
    ptr: AtomicPtr<Shared<T>>,
    /// The cell owns an `Arc<Shared<T>>`: its auto traits (`Send`, `Sync`,
    /// unwind safety) are those of the `OnceLock<Arc<Shared<T>>>` it
    /// replaces.
    _owns: PhantomData<Arc<Shared<T>>>,
}

impl<T: Send> SharedCell<T> {
    #[cfg(not(stashpool_loom))]
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Under loom, atomics cannot be made in a `const` context.
    #[cfg(stashpool_loom)]
    pub(crate) fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// The shared state, if it has been published.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<SharedRef<'_, T>> {
        // Acquire: pairs with the publishing exchange, so the state is
        // seen whole.
        NonNull::new(self.ptr.load(Ordering::Acquire)).map(|ptr| SharedRef {
            ptr,
            _cell: PhantomData,
        })
    }

    /// The shared state, made with `make` if no thread has published one
    /// yet. `make` may run on several threads at once; the first to
    /// publish wins, and only the winner's state is passed to `published`
    /// (to register it with the sweeper). The others are dropped, never
    /// seen by anything else.
    #[cold]
    pub(crate) fn get_or_make(
        &self,
        make: impl FnOnce() -> Arc<Shared<T>>,
        published: impl FnOnce(&Arc<Shared<T>>),
    ) -> SharedRef<'_, T> {
        if let Some(shared) = self.get() {
            return shared;
        }
        let made = make();
        let raw = Arc::into_raw(Arc::clone(&made)).cast_mut();
        // AcqRel: the release publishes the state whole; the acquire, on
        // failure, sees the winner's whole.
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => published(&made),
            Err(_) => {
                // SAFETY: `raw` came from `Arc::into_raw` above and was not
                // published, so this is the only use of its reference.
                drop(unsafe { Arc::from_raw(raw) });
            }
        }
        // `made`, if it lost, drops here: its last reference.
        drop(made);
        self.get()
            .expect("published above, by this thread or another")
    }
}

impl<T: Send> Drop for SharedCell<T> {
    fn drop(&mut self) {
        // `&mut self`: no `SharedRef` borrowed from the cell is alive, and
        // whatever gave this thread that access ordered it after the
        // exchange that published the state.
        let ptr = self.ptr.load(Ordering::Acquire);
        if !ptr.is_null() {
            // SAFETY: published from `Arc::into_raw` and never given up
            // before: this is the cell's own strong reference.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }
}

/// A borrow of a pool's published shared state, which can also make a
/// strong reference to it.
pub(crate) struct SharedRef<'a, T: Send> {
    /// From the cell: `Arc::into_raw`'s pointer, alive for `'a`.
    ptr: NonNull<Shared<T>>,
    _cell: PhantomData<&'a Shared<T>>,
}

impl<T: Send> Clone for SharedRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send> Copy for SharedRef<'_, T> {}

impl<'a, T: Send> SharedRef<'a, T> {
    /// The shared state, for as long as the cell lends it.
    #[inline(always)]
    pub(crate) fn get(self) -> &'a Shared<T> {
        // SAFETY: the pointer came from `Arc::into_raw` and the cell, which
        // `'a` borrows, keeps that strong reference until it drops.
        unsafe { self.ptr.as_ref() }
    }

    /// A strong reference to the shared state, which outlives the pool.
    pub(crate) fn to_arc(self) -> Arc<Shared<T>> {
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

impl<T: Send> std::ops::Deref for SharedRef<'_, T> {
    type Target = Shared<T>;

    #[inline(always)]
    fn deref(&self) -> &Shared<T> {
        self.get()
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn shared() -> Arc<Shared<u8>> {
        Arc::new(Shared::new(4, usize::MAX, 1, 0))
    }

    #[test]
    fn the_first_to_publish_wins_and_only_it_is_announced() {
        let cell = SharedCell::<u8>::new();
        let announced = std::sync::atomic::AtomicUsize::new(0);
        let start = Barrier::new(4);
        let winners: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let got = cell.get_or_make(shared, |_| {
                            announced.fetch_add(1, Ordering::Relaxed);
                        });
                        got.get() as *const Shared<u8> as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            winners.windows(2).all(|w| w[0] == w[1]),
            "one state for all"
        );
        assert_eq!(announced.load(Ordering::Relaxed), 1);
        let published = cell.get().unwrap();
        assert_eq!(published.get() as *const Shared<u8> as usize, winners[0]);
    }

    #[test]
    fn strong_references_outlive_the_cell() {
        let cell = SharedCell::<u8>::new();
        assert!(cell.get().is_none());
        let arc = cell.get_or_make(shared, |_| {}).to_arc();
        assert_eq!(Arc::strong_count(&arc), 2, "the cell's and this one");
        drop(cell);
        assert_eq!(Arc::strong_count(&arc), 1);
    }
}

//! A pool's byte budget (`max_idle_bytes`).
//!
//! It bounds the bytes the pool's idle objects hold, wherever they are
//! (stashes, loan books, the overflow), at every instant, not only at
//! quiescent points: a returned object's footprint is reserved before it
//! is pooled, and given back when a get or a sweep takes it. One counter
//! for the whole pool, so a budget costs each get and return that reuses
//! or pools an object one read-modify-write on a line all threads share;
//! a pool without a budget pays a test. Why one counter rather than shares
//! per stash: [`implementation`](crate::implementation), section 3d.

use crate::sync::{AtomicUsize, Ordering};

pub(crate) struct Budget {
    /// The most bytes `idle` may reach.
    max: usize,
    /// The footprints of the objects pooled now.
    idle: AtomicUsize,
}

impl Budget {
    /// The budget of a pool built with `max_idle_bytes(max)`; `None`
    /// without one (`usize::MAX`).
    pub(crate) fn new(max: usize) -> Option<Self> {
        (max != usize::MAX).then(|| Self {
            max,
            idle: AtomicUsize::new(0),
        })
    }

    /// Reserves `bytes` for an object about to be pooled: false if they
    /// would take the idle bytes past the budget.
    pub(crate) fn take(&self, bytes: usize) -> bool {
        // Relaxed: the count orders nothing; the object is published by the
        // path that pools it.
        self.idle
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |idle| {
                idle.checked_add(bytes).filter(|&sum| sum <= self.max)
            })
            .is_ok()
    }

    /// Gives back the bytes of an object that left the pool's idle ones
    /// (reused or trimmed), or that was refused after `take`.
    pub(crate) fn give(&self, bytes: usize) {
        self.idle.fetch_sub(bytes, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn takes_up_to_the_budget_and_no_further() {
        let budget = Budget::new(10).unwrap();
        assert!(budget.take(6));
        assert!(!budget.take(5), "6 + 5 > 10");
        assert!(budget.take(4));
        assert!(!budget.take(1));
        budget.give(6);
        assert!(budget.take(6));
        assert!(!budget.take(usize::MAX), "no overflow past the budget");
        assert!(Budget::new(usize::MAX).is_none());
    }
}

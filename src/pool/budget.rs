//! A pool's byte budget (`max_idle_bytes`).
//!
//! It bounds the bytes the pool's idle objects hold, all in the overflow
//! (a pool with a budget keeps no stashes, below), at every instant, not
//! only at quiescent points: a returned object's footprint is reserved before it
//! is pooled, and given back when a get or a sweep takes it. One counter
//! for the whole pool, so a budget costs each get and return that reuses
//! or pools an object one read-modify-write on a line all threads share,
//! and a pool with one keeps no stashes (`Shared::stash_capacity`): only
//! the stashless paths and sweeps read the budget, and a stash's get and
//! return never test for one. Why one counter rather than shares per
//! stash: [`implementation`](crate::implementation), section 3d.
//!
//! The pools of a multi-size pool share one (`Family`): their buffers of
//! every size count against one budget.

use std::ptr::NonNull;

use crate::lazy::LazyArc;
use crate::pool::fork;
use crate::sync::{Arc, AtomicUsize, Ordering};

pub(crate) struct Budget {
    /// The most bytes `idle` may reach.
    max: usize,
    /// The footprints of the objects pooled now.
    idle: AtomicUsize,
    /// The process generation it counts for (`fork.rs`).
    generation: usize,
}

impl Budget {
    /// A budget of `max` bytes, for a pool's state in this process.
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            idle: AtomicUsize::new(0),
            generation: fork::generation(),
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

/// One budget for several pools, the classes of a multi-size pool: each
/// pool's state takes this process's `Budget` when it is made, so a forked
/// child, whose pools make new states that hold none of the parent's
/// objects, counts from zero in a budget of its own.
pub(crate) struct Family {
    max: usize,
    current: LazyArc<Budget>,
}

impl Family {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            current: LazyArc::new(),
        }
    }

    /// This process's budget, made if need be.
    pub(crate) fn current(&self) -> Arc<Budget> {
        let make = || Budget::new(self.max);
        let current = match self.current.get() {
            Some(budget) if budget.generation == fork::generation() => budget,
            Some(stale) => self.current.renew(stale, make, |_| ()),
            None => self.current.get_or_make(make, |_| ()),
        };
        current.to_arc()
    }
}

/// A pool's reference to the `Family` it shares a budget with, in its
/// `Config`: an address, so that the configuration stays `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FamilyRef(NonNull<Family>);

// SAFETY: an address of a `Family`, which is `Sync`; dereferenced only
// under `get`'s contract.
unsafe impl Send for FamilyRef {}
// SAFETY: as above.
unsafe impl Sync for FamilyRef {}

impl FamilyRef {
    pub(crate) fn new(family: &Arc<Family>) -> Self {
        Self(NonNull::from(&**family))
    }

    /// The family.
    ///
    /// # Safety
    ///
    /// The `Arc` this was made from is alive: the multi-size pool that made
    /// it keeps it until the pools it configured with this have dropped,
    /// and only those pools call this, while borrowed.
    pub(crate) unsafe fn get(&self) -> &Family {
        // SAFETY: the caller's word.
        unsafe { self.0.as_ref() }
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn takes_up_to_the_budget_and_no_further() {
        let budget = Budget::new(10);
        assert!(budget.take(6));
        assert!(!budget.take(5), "6 + 5 > 10");
        assert!(budget.take(4));
        assert!(!budget.take(1));
        budget.give(6);
        assert!(budget.take(6));
        assert!(!budget.take(usize::MAX), "no overflow past the budget");
    }

    #[test]
    fn a_family_shares_one_budget_per_process() {
        let family = Family::new(10);
        assert!(family.current().take(7));
        assert!(!family.current().take(7), "the same budget");
        assert!(Arc::ptr_eq(&family.current(), &family.current()));
    }
}

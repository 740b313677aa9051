//! The overflow's queue of single objects: a bounded ring, and a queue
//! behind it for what does not fit.
//!
//! Threads without a stash (all the pool's slots taken, or in their
//! teardown) and stashes whose share of `max_idle` is zero return objects
//! one at a time, a [`Single`] per object, so this queue sees one push and
//! one pop per get and return of every such thread: in a server that runs
//! a thread per connection, most of its traffic.
//!
//! An `Injector` alone allocates a block of slots every few dozen pushes
//! and frees it once drained, so a steady stream of singles through it
//! costs an allocation and a free every few dozen objects, forever, and
//! leaves freed blocks in the allocator's bins. A ring allocates its slots
//! once and then none: a push is one compare-and-swap and a store. The ring
//! holds [`RING_SLOTS`] singles, or `max_idle` if less, since no more can
//! ever be queued then; what does not fit (a bound above the ring, all of
//! it idle at once) goes to an `Injector` behind it, made on first use.
//!
//! Order: a get tries the ring first, so singles that went to the spill
//! queue while the ring was full wait until the ring runs dry; a sweep
//! takes them first (`pop_for_sweep`), so it reaches them even while
//! returns keep arriving in the ring. Singles are interchangeable idle
//! objects; the order only decides which of them a sweep finds old.

use crate::lazy::{Lazy, LazyQueue};
use crate::pool::node::Node;
use crate::sync::Ring;

/// Slots in the ring, at most: enough for the singles in flight between
/// the stashless threads of a busy pool, few enough that the ring (three
/// words a slot) stays far below the objects it holds. Under loom, one,
/// so that every model that queues two singles also takes the spill path.
pub(crate) const RING_SLOTS: usize = if cfg!(stashpool_loom) { 1 } else { 64 };

/// One object and its stamp: a batch of one without the `Vec`.
pub(crate) struct Single<T> {
    pub(crate) node: Box<Node<T>>,
    pub(crate) stamp: u64,
}

/// A ring of singles made on first push, and a queue for those that do not
/// fit.
pub(crate) struct Singles<T> {
    ring: Lazy<Ring<Single<T>>>,
    spill: LazyQueue<Single<T>>,
    /// The ring's size: `RING_SLOTS`, or the pool's `max_idle` if less.
    slots: usize,
}

impl<T> Singles<T> {
    /// Singles for a pool that keeps at most `max_idle` idle objects.
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            ring: Lazy::new(),
            spill: LazyQueue::new(),
            slots: max_idle.clamp(1, RING_SLOTS),
        }
    }

    #[inline]
    pub(crate) fn push(&self, single: Single<T>) {
        let slots = self.slots;
        if let Err(single) = self.ring.get_or_make(|| Ring::new(slots)).push(single) {
            self.spill.push(single);
        }
    }

    /// Takes a single: the ring's oldest, else the spill queue's.
    #[inline]
    pub(crate) fn pop(&self) -> Option<Single<T>> {
        match self.ring.get()?.pop() {
            Some(single) => Some(single),
            None => self.spill.pop(),
        }
    }

    /// Takes a single for a sweep: the spill queue's oldest first, else the
    /// ring's. Singles wait in the spill queue while the ring keeps taking
    /// new ones, so a sweep that looks at a snapshot's worth of singles
    /// takes those first: returns arriving meanwhile in the ring cannot
    /// keep it from reaching them.
    pub(crate) fn pop_for_sweep(&self) -> Option<Single<T>> {
        let ring = self.ring.get()?;
        match self.spill.pop() {
            Some(single) => Some(single),
            None => ring.pop(),
        }
    }

    /// Singles queued (a snapshot).
    pub(crate) fn len(&self) -> usize {
        self.ring.get().map_or(0, Ring::len) + self.spill.len()
    }

    /// Whether the ring has been made (for tests).
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.ring.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(value: u64) -> Single<u64> {
        Single {
            node: Node::boxed(value),
            stamp: value,
        }
    }

    fn drain(singles: &Singles<u64>) -> Vec<u64> {
        std::iter::from_fn(|| singles.pop().map(|s| s.node.value)).collect()
    }

    #[test]
    fn the_ring_is_made_on_first_push_and_sized_by_max_idle() {
        let singles = Singles::<u64>::new(3);
        assert!(!singles.is_made() && singles.pop().is_none());
        assert!(!singles.is_made(), "a pop makes nothing");
        singles.push(single(1));
        assert!(singles.is_made());
        assert_eq!(singles.slots, 3);
        assert_eq!(Singles::<u64>::new(usize::MAX).slots, RING_SLOTS);
        assert_eq!(Singles::<u64>::new(0).slots, 1, "a ring needs a slot");
    }

    #[test]
    fn what_does_not_fit_the_ring_is_kept_behind_it() {
        let singles = Singles::<u64>::new(2);
        for value in 0..5 {
            singles.push(single(value));
        }
        assert_eq!(singles.len(), 5);
        assert!(singles.spill.len() == 3, "two in the ring, three spilled");
        assert_eq!(drain(&singles), [0, 1, 2, 3, 4]);
        assert_eq!(singles.len(), 0);
    }

    #[test]
    fn a_pop_prefers_the_ring() {
        let singles = Singles::<u64>::new(1);
        singles.push(single(0));
        singles.push(single(1)); // spilled
        assert_eq!(singles.pop().map(|s| s.node.value), Some(0));
        singles.push(single(2)); // the ring has room again
        assert_eq!(drain(&singles), [2, 1]);
    }

    #[test]
    fn a_sweep_takes_the_spilled_singles_first() {
        let singles = Singles::<u64>::new(1);
        singles.push(single(0));
        singles.push(single(1)); // spilled
        singles.push(single(2)); // spilled
        let order: Vec<_> =
            std::iter::from_fn(|| singles.pop_for_sweep().map(|s| s.node.value)).collect();
        assert_eq!(order, [1, 2, 0]);
    }

    #[test]
    fn dropping_drops_every_single() {
        let alive = std::sync::Arc::new(());
        let singles = Singles::new(1);
        for _ in 0..3 {
            singles.push(Single {
                node: Node::boxed(alive.clone()),
                stamp: 0,
            });
        }
        assert_eq!(std::sync::Arc::strong_count(&alive), 4);
        drop(singles);
        assert_eq!(std::sync::Arc::strong_count(&alive), 1);
    }
}

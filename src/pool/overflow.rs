//! The shared overflow: batches of idle objects that any thread can take.
//!
//! A stash at its limit spills a batch of its oldest objects here; an empty
//! one takes a batch back, keeps what its limit allows and queues the rest
//! again, so a queue operation serves several gets and puts (Go's
//! `poolChain` plays the same part for its per-P caches). Objects
//! moved one at a time (by threads without a slot, stashes that keep none or
//! spill one) go to the singles (`singles.rs`), and those that fit there no
//! more to the batch queue as batches of one; all under one bound:
//! `max_idle` objects, room for which is reserved before a push.
//!
//! Each batch and single carries a *stamp*: the pool's sweep count when its
//! objects were last returned (or, for victims, one less). A sweep that
//! brings the count to `epoch` drops those with `stamp + 2 <= epoch`, so an
//! object in the overflow survives exactly one sweep, as it would in a
//! stash: the age travels with it. Sections 3, 3a and 5 of
//! [`implementation`](crate::implementation) give the reasons.
//!
//! An overflow belongs to the process that made it: in a forked child,
//! whose parent's threads may have left its queues mid-operation, it takes
//! and gives nothing (section 7a).

use crate::lazy::Lazy;
use crate::pool::fork;
use crate::pool::node::Node;
pub(crate) use crate::pool::singles::Single;
use crate::pool::singles::Singles;
use crate::sync::{AtomicUsize, Ordering, Queue};

/// Objects of one age, moving between a stash and the overflow.
pub(crate) struct Batch<T> {
    pub(crate) items: Vec<Box<Node<T>>>,
    /// The sweep count at which these objects were last returned.
    pub(crate) stamp: u64,
}

impl<T> Batch<T> {
    pub(crate) fn new(items: Vec<Box<Node<T>>>, stamp: u64) -> Self {
        Self { items, stamp }
    }
}

/// A queue of batches (a `crossbeam_deque::Injector`, made on first push)
/// and the singles, with one bound on the objects in both.
pub(crate) struct Overflow<T> {
    queue: Lazy<Queue<Batch<T>>>,
    pub(super) singles: Singles<T>,
    /// Objects queued, plus objects reserved for batches on their way in;
    /// kept only if the pool has a `max_idle`.
    len: AtomicUsize,
    /// The most objects `len` may reach (`LocalPoolBuilder::max_idle`), if
    /// the pool has a bound: the one place the shared state keeps it.
    pub(crate) max_idle: Option<usize>,
    /// The process generation that made it (`fork::generation`).
    generation: usize,
}

impl<T> Overflow<T> {
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            queue: Lazy::new(),
            singles: Singles::new(max_idle),
            len: AtomicUsize::new(0),
            max_idle: (max_idle != usize::MAX).then_some(max_idle),
            generation: fork::generation(),
        }
    }

    /// Whether this process made this overflow: a forked child's pool may
    /// reach its parent's only through a `with` whose closure forked
    /// (module docs), and then takes nothing from it and leaks what it
    /// would put in it.
    #[inline]
    pub(crate) fn here(&self) -> bool {
        self.generation == fork::generation()
    }

    /// Takes `n` from `len`, if it is kept: only a bound needs the count
    /// (a pool without one would make every return and every get from here
    /// write a line that a producer and all its consumers share).
    #[inline]
    fn count_out(&self, n: usize) {
        if self.max_idle.is_some() && n > 0 {
            self.len.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Reserves room for up to `want` objects; returns how many fit. The
    /// caller must push exactly that many, in one batch.
    pub(crate) fn reserve(&self, want: usize) -> usize {
        let Some(max_idle) = self.max_idle else {
            return want;
        };
        if want == 0 {
            return 0;
        }
        // Relaxed: `len` is a budget, not a publication; the queue itself
        // orders the batches and their contents.
        let mut len = self.len.load(Ordering::Relaxed);
        loop {
            let granted = want.min(max_idle.saturating_sub(len));
            if granted == 0 {
                return 0;
            }
            match self.len.compare_exchange_weak(
                len,
                len + granted,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return granted,
                Err(now) => len = now,
            }
        }
    }

    /// Queues a batch whose room was reserved.
    pub(crate) fn push(&self, batch: Batch<T>) {
        debug_assert!(!batch.items.is_empty());
        if !self.here() {
            return std::mem::forget(batch);
        }
        self.queue.get_or_make(Queue::new).push(batch);
    }

    /// Queues one object whose room was reserved: a single, or a batch of
    /// one if the singles have no room.
    pub(crate) fn push_one(&self, node: Box<Node<T>>, stamp: u64) {
        if !self.here() {
            return std::mem::forget(node);
        }
        if let Err(single) = self.singles.push(Single { node, stamp }) {
            self.push(Batch::new(vec![single.node], single.stamp));
        }
    }

    /// Takes an object for a thread that takes one at a time: a single,
    /// else one of the oldest batch, whose rest is queued again.
    pub(crate) fn pop_one(&self) -> Option<Box<Node<T>>> {
        if !self.here() {
            return None;
        }
        if let Some(single) = self.singles.pop() {
            self.count_out(1);
            return Some(single.node);
        }
        let mut batch = self.pop()?;
        let node = batch.items.pop()?;
        if !batch.items.is_empty() {
            self.put_back(batch);
        }
        Some(node)
    }

    /// Queues again what is left of a batch that `pop` just took, or
    /// objects that were pooled a moment ago. They count as they did, even
    /// if a return took their room meanwhile (`len` may then exceed
    /// `max_idle` until the next get or sweep): an object already pooled is
    /// never dropped for want of room.
    pub(crate) fn put_back(&self, batch: Batch<T>) {
        if self.max_idle.is_some() {
            self.len.fetch_add(batch.items.len(), Ordering::Relaxed);
        }
        self.push(batch);
    }

    /// Takes the oldest batch, if any.
    pub(crate) fn pop(&self) -> Option<Batch<T>> {
        if !self.here() {
            return None;
        }
        let batch = self.queue.get()?.pop()?;
        self.count_out(batch.items.len());
        Some(batch)
    }

    /// Objects queued or on their way in, counted under a `max_idle`; for
    /// the sweep's bound.
    pub(crate) fn len(&self) -> usize {
        debug_assert!(
            self.max_idle.is_some(),
            "an unbounded overflow keeps no count"
        );
        self.len.load(Ordering::Relaxed)
    }

    /// Batches queued now (a snapshot).
    fn queued(&self) -> usize {
        self.queue.get().map_or(0, Queue::len)
    }
}

// === impl Overflow: sweeps ===

impl<T> Overflow<T> {
    /// Moves up to `excess` objects into `dead`, oldest batches first, then
    /// single objects (`max_idle` applied to the whole pool by a sweep).
    ///
    /// Looks at each batch queued when it starts at most once, as `trim`
    /// does, so returns racing the sweep cannot keep it going; a batch cut
    /// in part is queued again behind the others.
    pub(crate) fn cut(&self, mut excess: usize, dead: &mut Vec<Box<Node<T>>>) {
        for _ in 0..self.queued() {
            if excess == 0 {
                break;
            }
            let Some(mut batch) = self.pop() else { break };
            // The batch's oldest objects are at its front.
            let n = excess.min(batch.items.len());
            dead.extend(batch.items.drain(..n));
            excess -= n;
            if !batch.items.is_empty() {
                self.put_back(batch);
            }
        }
        let cut = self.singles.cut(excess, dead);
        self.count_out(cut);
    }

    /// One sweep to `epoch`: moves the objects of every batch and single
    /// stamped `epoch - 2` or earlier into `dead`, or all of them if `all`.
    ///
    /// Looks at each batch queued when it starts once (batches kept are
    /// queued again behind it), so concurrent spills cannot keep it going.
    /// Batches taken by gets meanwhile are simply not seen; batches pushed
    /// meanwhile were returned during the sweep and count as younger.
    pub(crate) fn trim(&self, epoch: u64, all: bool, dead: &mut Vec<Box<Node<T>>>) {
        let old = |stamp: u64| all || stamp + 2 <= epoch;
        let mut kept = Vec::new();
        for _ in 0..self.queued() {
            let Some(mut batch) = self.pop() else { break };
            if old(batch.stamp) {
                dead.append(&mut batch.items);
            } else {
                kept.push(batch);
            }
        }
        let mut unplaced = Vec::new();
        let trimmed = self
            .singles
            .trim(|single| !old(single.stamp), dead, &mut unplaced);
        self.count_out(trimmed);
        for batch in kept {
            self.put_back(batch);
        }
        // Still counted: they never left.
        for single in unplaced {
            self.push(Batch::new(vec![single.node], single.stamp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(value: u64, n: usize, stamp: u64) -> Batch<u64> {
        Batch::new((0..n).map(|_| Node::boxed(value)).collect(), stamp)
    }

    fn values(nodes: &[Box<Node<u64>>]) -> Vec<u64> {
        nodes.iter().map(|node| *node.value()).collect()
    }

    #[test]
    fn the_batch_queue_is_made_on_first_push() {
        let overflow = Overflow::<u8>::new(usize::MAX);
        assert!(overflow.pop().is_none() && overflow.pop_one().is_none());
        assert!(overflow.queue.get().is_none(), "a pop makes nothing");
        assert_eq!(overflow.reserve(1), 1);
        overflow.push_one(Node::boxed(1), 0);
        assert!(
            overflow.queue.get().is_none(),
            "a single goes to the singles"
        );
        overflow.push(Batch::new(vec![Node::boxed(2)], 0));
        assert!(overflow.queue.get().is_some());
    }

    #[test]
    fn an_unbounded_overflow_keeps_no_count() {
        let overflow = Overflow::new(usize::MAX);
        assert_eq!(overflow.reserve(3), 3);
        overflow.push(batch(1, 3, 0));
        assert_eq!(overflow.reserve(1), 1);
        overflow.push_one(Node::boxed(2), 0);
        assert_eq!(overflow.len.load(Ordering::Relaxed), 0);
        assert_eq!(overflow.pop().map(|b| b.items.len()), Some(3));
        assert_eq!(overflow.pop_one().map(|node| *node.value()), Some(2));
        assert_eq!(overflow.len.load(Ordering::Relaxed), 0, "nothing wrapped");
    }

    #[test]
    fn reserve_respects_max_idle() {
        let overflow = Overflow::<u8>::new(5);
        assert_eq!(overflow.reserve(3), 3);
        assert_eq!(overflow.reserve(3), 2);
        assert_eq!(overflow.reserve(1), 0);
        assert_eq!(overflow.reserve(0), 0);
    }

    #[test]
    fn singles_past_the_ring_queue_as_batches_of_one() {
        let overflow = Overflow::new(usize::MAX);
        let slots = crate::pool::singles::RING_SLOTS;
        for value in 0..2 * slots as u64 + 1 {
            overflow.push_one(Node::boxed(value), 0);
        }
        let batch = overflow.pop().expect("one single fits in neither");
        assert_eq!(values(&batch.items), [2 * slots as u64]);
        let first = overflow.pop_one().map(|node| *node.value());
        assert_eq!(first, Some(slots as u64 - 1), "the stack's top first");
    }

    #[test]
    fn pop_one_splits_a_batch_and_queues_the_rest() {
        let overflow = Overflow::new(10);
        let n = overflow.reserve(3);
        overflow.push(batch(4, n, 1));
        assert_eq!(overflow.pop_one().map(|node| *node.value()), Some(4));
        assert_eq!(overflow.len(), 2, "the rest still counts");
        assert_eq!(
            overflow.pop().map(|b| (b.items.len(), b.stamp)),
            Some((2, 1))
        );
    }

    #[test]
    fn trim_keeps_young_batches_in_the_queue() {
        let overflow = Overflow::new(100);
        for stamp in 0..3 {
            let n = overflow.reserve(2);
            overflow.push(batch(stamp, n, stamp));
        }
        let mut dead = Vec::new();
        overflow.trim(3, false, &mut dead); // drops stamps 0 and 1
        assert_eq!(values(&dead), [0, 0, 1, 1]);
        assert_eq!(overflow.len(), 2);
        let survivor = overflow.pop().expect("stamp 2 survives");
        assert_eq!((survivor.stamp, values(&survivor.items)), (2, vec![2, 2]));
        assert!(overflow.pop().is_none());
        assert_eq!(overflow.len(), 0);
    }

    #[test]
    fn trim_all_empties_the_queue() {
        let overflow = Overflow::new(100);
        let n = overflow.reserve(4);
        overflow.push(batch(7, n, 9));
        assert_eq!(overflow.reserve(1), 1);
        overflow.push_one(Node::boxed(8), 9);
        let mut dead = Vec::new();
        overflow.trim(0, true, &mut dead);
        assert_eq!(dead.len(), 5);
        assert_eq!(overflow.len(), 0);
        assert!(overflow.pop().is_none());
        assert!(overflow.pop_one().is_none());
    }

    #[test]
    fn singles_age_and_count_like_batches() {
        let overflow = Overflow::new(3);
        for stamp in 0..3 {
            assert_eq!(overflow.reserve(1), 1);
            overflow.push_one(Node::boxed(stamp), stamp);
        }
        assert_eq!(overflow.reserve(1), 0, "singles count against max_idle");
        let mut dead = Vec::new();
        overflow.trim(3, false, &mut dead); // drops stamps 0 and 1
        assert_eq!(values(&dead), [0, 1]);
        assert_eq!(overflow.len(), 1);
        assert_eq!(overflow.pop_one().map(|node| *node.value()), Some(2));
        assert_eq!(overflow.len(), 0);
    }

    #[test]
    fn cut_takes_batches_then_singles() {
        let overflow = Overflow::new(100);
        let n = overflow.reserve(2);
        overflow.push(batch(1, n, 0));
        for value in [2, 3] {
            assert_eq!(overflow.reserve(1), 1);
            overflow.push_one(Node::boxed(value), 0);
        }
        let mut dead = Vec::new();
        overflow.cut(3, &mut dead);
        assert_eq!(values(&dead), [1, 1, 2]);
        assert_eq!(overflow.len(), 1);
        assert_eq!(overflow.pop_one().map(|node| *node.value()), Some(3));
    }
}

//! The shared overflow: batches of idle objects that any thread can take.
//!
//! A full stash spills a batch of its oldest objects here; an empty one takes
//! a whole batch back. Moving objects in batches makes one queue operation
//! serve many gets and puts, which is what keeps the overflow off the hot
//! path (Go's `poolChain` plays the same part for its per-P caches).
//!
//! Each batch carries a *stamp*: the pool's sweep count when its objects were
//! last returned (or, for victims, one less). A sweep that brings the count to
//! `epoch` drops the batches with `stamp + 2 <= epoch`, so an object in the
//! overflow survives exactly one sweep, as it would in a stash, however long
//! it travelled between stashes and the queue: the age travels with it.
//!
//! Single objects have a queue of their own. A thread without a stash (past
//! the pool's bound on stashes, or in its teardown) and a stash whose share
//! of `max_idle` is zero move objects one at a time; a batch would cost
//! them a `Vec` allocation per object, where a `Single` is moved whole into
//! the queue, whose slots are allocated a block at a time.

use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::ptr;

use crate::pool::node::Node;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering, Queue};

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

/// A queue made on its first push.
///
/// An `Injector` allocates its first block of slots when it is made, and a
/// pool whose stashes never spill (most pools, most of the time) or whose
/// threads all have stashes would otherwise hold one or two such blocks for
/// nothing, for as long as it lives.
///
/// Made without a lock: the first pushers each make a queue and race to
/// publish theirs with one compare-and-swap, and the losers drop their own.
/// A `OnceLock` would make the others wait for the first instead, and a
/// process forked while one thread was making the queue would leave its
/// child waiting forever on a thread that does not exist there; here a
/// child finds the queue either published or not, never half made.
pub(crate) struct LazyQueue<T> {
    /// Null until the first push; then a queue from `Box::into_raw`, freed
    /// only by `Drop`.
    queue: AtomicPtr<Queue<T>>,
    /// Gives `LazyQueue<T>` the `Send` and `Sync` of the boxed queue it
    /// owns (an `AtomicPtr` alone would be both for any `T`). The queue
    /// changes only through atomic operations that leave it whole if a
    /// caller unwinds (none runs user code), hence `AssertUnwindSafe`: pools
    /// stay `UnwindSafe` and `RefUnwindSafe` as with the queue held
    /// directly.
    _owns: PhantomData<AssertUnwindSafe<Box<Queue<T>>>>,
}

impl<T> LazyQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            queue: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    fn get(&self) -> Option<&Queue<T>> {
        // Acquire: pairs with the publishing compare-and-swap, so the queue
        // is seen whole.
        let queue = self.queue.load(Ordering::Acquire);
        // SAFETY: non-null means published by `get_or_make` from a live box,
        // which only `Drop` frees, and `&self` outlives the borrow.
        unsafe { queue.as_ref() }
    }

    fn get_or_make(&self) -> &Queue<T> {
        if let Some(queue) = self.get() {
            return queue;
        }
        let made = Box::into_raw(Box::new(Queue::new()));
        match self.queue.compare_exchange(
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

    pub(crate) fn push(&self, value: T) {
        self.get_or_make().push(value);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.get()?.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.get().map_or(0, Queue::len)
    }
}

impl<T> Drop for LazyQueue<T> {
    fn drop(&mut self) {
        // `&mut self`: no other thread can reach the queue any more, and
        // whatever gave this thread that access ordered it after the push
        // that published it.
        let queue = self.queue.load(Ordering::Acquire);
        if !queue.is_null() {
            // SAFETY: published from `Box::into_raw` and never freed before;
            // nothing can use it after this.
            drop(unsafe { Box::from_raw(queue) });
        }
    }
}

/// One object and its stamp: a batch of one without the `Vec`.
pub(crate) struct Single<T> {
    pub(crate) node: Box<Node<T>>,
    pub(crate) stamp: u64,
}

/// Two `crossbeam_deque::Injector`s, of batches and of single objects, with
/// one bound on the objects in both.
pub(crate) struct Overflow<T> {
    pub(super) queue: LazyQueue<Batch<T>>,
    pub(super) singles: LazyQueue<Single<T>>,
    /// Objects queued, plus objects reserved for batches on their way in.
    pub(super) len: AtomicUsize,
    /// The most objects `len` may reach (`Builder::max_idle`).
    max_idle: usize,
}

impl<T> Overflow<T> {
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            queue: LazyQueue::new(),
            singles: LazyQueue::new(),
            len: AtomicUsize::new(0),
            max_idle,
        }
    }

    /// Reserves room for up to `want` objects; returns how many fit. The
    /// caller must push exactly that many, in one batch.
    pub(crate) fn reserve(&self, want: usize) -> usize {
        if want == 0 {
            return 0;
        }
        // Relaxed: `len` is a budget, not a publication; the queue itself
        // orders the batches and their contents.
        let mut len = self.len.load(Ordering::Relaxed);
        loop {
            let granted = want.min(self.max_idle.saturating_sub(len));
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
        self.queue.push(batch);
    }

    /// Queues one object whose room was reserved.
    pub(crate) fn push_one(&self, node: Box<Node<T>>, stamp: u64) {
        self.singles.push(Single { node, stamp });
    }

    /// Takes the oldest single object, if any.
    pub(crate) fn pop_one(&self) -> Option<Box<Node<T>>> {
        let single = self.singles.pop()?;
        self.len.fetch_sub(1, Ordering::Relaxed);
        Some(single.node)
    }

    /// Queues again what is left of a batch that `pop` just took. Its objects
    /// were idle here a moment ago and count as they did, even if a return
    /// took their room meanwhile (`len` may then exceed `max_idle` until the
    /// next get): an object already pooled is never dropped for want of room.
    pub(crate) fn put_back(&self, batch: Batch<T>) {
        self.len.fetch_add(batch.items.len(), Ordering::Relaxed);
        self.push(batch);
    }

    /// Takes the oldest batch, if any.
    pub(crate) fn pop(&self) -> Option<Batch<T>> {
        let batch = self.queue.pop()?;
        self.len.fetch_sub(batch.items.len(), Ordering::Relaxed);
        Some(batch)
    }

    /// Objects queued or on their way in.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(value: u64, n: usize, stamp: u64) -> Batch<u64> {
        Batch::new((0..n).map(|_| Node::boxed(value)).collect(), stamp)
    }

    fn values(nodes: &[Box<Node<u64>>]) -> Vec<u64> {
        nodes.iter().map(|node| node.value).collect()
    }

    #[test]
    fn first_pushes_that_race_share_one_queue() {
        let queue = std::sync::Arc::new(LazyQueue::new());
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let pushers: Vec<_> = (0..2u64)
            .map(|i| {
                let (queue, start) = (queue.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    queue.push(i);
                })
            })
            .collect();
        for pusher in pushers {
            pusher.join().unwrap();
        }
        assert_eq!(queue.len(), 2, "both pushes landed in the one queue kept");
        let mut got = [queue.pop().unwrap(), queue.pop().unwrap()];
        got.sort();
        assert_eq!(got, [0, 1]);
        assert!(queue.pop().is_none());
    }

    #[test]
    fn dropping_a_queue_drops_what_it_holds() {
        let alive = std::sync::Arc::new(());
        let queue = LazyQueue::new();
        queue.push(alive.clone());
        queue.push(alive.clone());
        assert_eq!(std::sync::Arc::strong_count(&alive), 3);
        drop(queue);
        assert_eq!(std::sync::Arc::strong_count(&alive), 1);
    }

    #[test]
    fn queues_are_made_on_first_push() {
        let overflow = Overflow::<u8>::new(usize::MAX);
        assert!(overflow.queue.get().is_none() && overflow.singles.get().is_none());
        assert!(overflow.pop().is_none() && overflow.pop_one().is_none());
        assert!(overflow.queue.get().is_none(), "a pop makes nothing");
        assert_eq!(overflow.reserve(1), 1);
        overflow.push_one(Node::boxed(1), 0);
        assert!(overflow.singles.get().is_some());
        assert!(overflow.queue.get().is_none(), "each queue on its own");
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
    fn trim_keeps_young_batches_in_the_queue() {
        let overflow = Overflow::new(usize::MAX);
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
        let overflow = Overflow::new(usize::MAX);
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
        assert_eq!(overflow.pop_one().map(|node| node.value), Some(2));
        assert_eq!(overflow.len(), 0);
    }

    #[test]
    fn cut_takes_batches_then_singles() {
        let overflow = Overflow::new(usize::MAX);
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
        assert_eq!(overflow.pop_one().map(|node| node.value), Some(3));
    }
}

//! The overflow's single objects: a stack of the most recent, and a
//! bounded ring behind it.
//!
//! Threads without a slot (or in their teardown) and stashes whose share of
//! `max_idle` is zero return objects one at a time, a [`Single`] per
//! object. This file keeps four rules, argued in
//! [`implementation`](crate::implementation), section 3a:
//!
//! * a get takes the newest single first: the stack's top, else the ring's
//!   oldest (what fits in neither waits in the overflow's batch queue, as
//!   a batch of one);
//! * no owner ever waits for the stack: owners only *try* its claim (a get
//!   that finds it held tries a few times, `STACK_TRIES`), and one that
//!   finds it held, or the stack full, uses the ring; only sweeps wait for
//!   the claim;
//! * the stack's buffer and the ring are allocated once, on first push,
//!   with [`RING_SLOTS`] singles each, or `max_idle` if less;
//! * a sweep's cut takes the longest idle first: the ring, then the
//!   stack's bottom.

use crate::lazy::Lazy;
use crate::pool::node::Node;
use crate::sync::{AtomicBool, Ordering, Ring, UnsafeCell, Unset, backoff};

/// Slots in the stack and in the ring, at most: enough for the singles in
/// flight between the stashless threads of a busy pool, few enough that
/// they (two words a slot) stay far below the objects they hold. Under
/// loom, one, so that every model that queues three singles also takes the
/// batch queue.
pub(crate) const RING_SLOTS: usize = if cfg!(stashpool_loom) { 1 } else { 64 };

/// How many times a get tries the stack while another thread holds it
/// (`Singles::pop`). Under loom, once: the model checks the one attempt, and
/// more would only multiply its branches.
const STACK_TRIES: u32 = if cfg!(stashpool_loom) { 1 } else { 6 };

/// One object and its stamp: a batch of one without the `Vec`.
pub(crate) struct Single<T> {
    pub(crate) node: Box<Node<T>>,
    pub(crate) stamp: u64,
}

/// The singles: the most recent on a stack, the rest in a ring made on
/// first push.
pub(crate) struct Singles<T> {
    stack: Stack<T>,
    ring: Lazy<Ring<Single<T>>>,
    /// The stack's and the ring's size: `RING_SLOTS`, or the pool's
    /// `max_idle` if less.
    slots: usize,
}

impl<T> Singles<T> {
    /// Singles for a pool that keeps at most `max_idle` idle objects.
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            stack: Stack::new(),
            ring: Lazy::new(),
            slots: max_idle.clamp(1, RING_SLOTS),
        }
    }

    /// Keeps `single` on the stack or in the ring; gives it back if
    /// neither has room.
    #[inline]
    pub(crate) fn push(&self, single: Single<T>) -> Result<(), Single<T>> {
        let slots = self.slots;
        let mut single = Some(single);
        self.stack.try_with(|items| {
            if items.len() < slots {
                if items.capacity() == 0 {
                    items.reserve_exact(slots);
                }
                items.extend(single.take());
            }
        });
        match single {
            None => Ok(()),
            Some(single) => self.ring.get_or_make(|| Ring::new(slots)).push(single),
        }
    }

    /// Takes a single: the newest on the stack, else the ring's oldest.
    ///
    /// A get that finds the stack held (by another thread's push or pop, a
    /// few instructions long) and the ring empty tries the stack again, a
    /// bounded number of times: giving up at once would make a new object
    /// while idle ones wait on the stack, which in a flow of returns on one
    /// thread and gets on another happens on every push that a get meets.
    /// Bounded, so a get still never waits for a holder that does not let
    /// go (a thread preempted there).
    #[inline]
    pub(crate) fn pop(&self) -> Option<Single<T>> {
        for attempt in 0..STACK_TRIES {
            if attempt > 0 {
                for _ in 0..1u32 << attempt {
                    std::hint::spin_loop();
                }
            }
            match self.stack.try_with(Vec::pop) {
                Some(Some(single)) => return Some(single),
                Some(None) => return self.ring.get()?.pop(),
                None => {
                    if let Some(single) = self.ring.get().and_then(Ring::pop) {
                        return Some(single);
                    }
                }
            }
        }
        None
    }

    /// Moves the singles that `keep` refuses into `dead`, looking at each
    /// single there when it starts once; returns how many it moved. Kept
    /// singles that no longer fit (returns took their places meanwhile)
    /// go to `unplaced`.
    pub(crate) fn trim(
        &self,
        mut keep: impl FnMut(&Single<T>) -> bool,
        dead: &mut Vec<Box<Node<T>>>,
        unplaced: &mut Vec<Single<T>>,
    ) -> usize {
        let before = dead.len();
        self.stack.wait_with(|items| {
            for single in items.extract_if(.., |single| !keep(single)) {
                dead.push(single.node);
            }
        });
        if let Some(ring) = self.ring.get() {
            let mut kept = Vec::new();
            for _ in 0..ring.len() {
                let Some(single) = ring.pop() else { break };
                if keep(&single) {
                    kept.push(single);
                } else {
                    dead.push(single.node);
                }
            }
            for single in kept {
                if let Err(single) = ring.push(single) {
                    unplaced.push(single);
                }
            }
        }
        dead.len() - before
    }

    /// Moves up to `n` singles into `dead`, the longest idle first: the
    /// ring's, then the bottom of the stack; returns how many it moved.
    pub(crate) fn cut(&self, n: usize, dead: &mut Vec<Box<Node<T>>>) -> usize {
        let before = dead.len();
        if let Some(ring) = self.ring.get() {
            while dead.len() - before < n {
                let Some(single) = ring.pop() else { break };
                dead.push(single.node);
            }
        }
        let rest = n - (dead.len() - before);
        self.stack.wait_with(|items| {
            let taken = rest.min(items.len());
            dead.extend(items.drain(..taken).map(|single| single.node));
        });
        dead.len() - before
    }
}

// === impl Stack ===

/// The most recently returned singles, newest on top, behind a claim that
/// owners only ever try (module docs).
struct Stack<T> {
    claimed: AtomicBool,
    items: UnsafeCell<Vec<Single<T>>>,
}

// SAFETY: `items` is only reached by the thread that holds the claim, which
// `claimed` gives to one thread at a time, with acquire and release
// ordering; the singles move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Stack<T> {}

impl<T> Stack<T> {
    fn new() -> Self {
        Self {
            claimed: AtomicBool::new(false),
            items: UnsafeCell::new(Vec::new()),
        }
    }

    /// Runs `f` on the items if the stack is free now; `None` if another
    /// thread holds it. Never waits: the caller goes to the ring instead.
    #[inline]
    fn try_with<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> Option<R> {
        // A load first, so that threads that find it held do not take its
        // line.
        if self.claimed.load(Ordering::Relaxed) || !self.claim() {
            return None;
        }
        Some(self.holding(f))
    }

    /// Takes the claim, if it is free.
    #[inline]
    fn claim(&self) -> bool {
        // Acquire: pairs with the release in `Unset`, so this thread
        // sees what the last holder did to the items.
        self.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Runs `f` on the items, waiting for a holder (an owner between two
    /// instructions of a push or a pop) to let go.
    fn wait_with<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> R {
        let mut step = 0;
        while self.claimed.load(Ordering::Relaxed) || !self.claim() {
            backoff(&mut step);
        }
        self.holding(f)
    }

    /// `f` on the items, then the claim released.
    ///
    /// The caller must hold the claim.
    #[inline]
    fn holding<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> R {
        // Released even if `f` unwinds (it runs only the pool's own code),
        // so that no sweeper waits for ever.
        let _release = Unset(&self.claimed);
        // SAFETY: the caller holds the claim: no other thread reaches the
        // items until `_release` clears it.
        self.items.with_mut(|items| f(unsafe { &mut *items }))
    }
}

// The stack's only interior mutability is `items`, behind the claim, which
// an unwinding holder releases with the `Vec` in a valid state: a pool that
// holds one stays unwind-safe, as its other parts are.
impl<T> std::panic::RefUnwindSafe for Stack<T> {}

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
        std::iter::from_fn(|| singles.pop().map(|s| *s.node.value())).collect()
    }

    #[test]
    fn the_stack_comes_first_and_the_ring_is_made_when_it_is_full() {
        let singles = Singles::<u64>::new(3);
        assert!(singles.pop().is_none() && singles.ring.get().is_none());
        for value in 0..3 {
            assert!(singles.push(single(value)).is_ok());
        }
        assert!(singles.ring.get().is_none(), "three fit the stack");
        assert!(singles.push(single(3)).is_ok());
        assert!(singles.ring.get().is_some());
        assert_eq!(Singles::<u64>::new(usize::MAX).slots, RING_SLOTS);
        assert_eq!(Singles::<u64>::new(0).slots, 1, "a ring needs a slot");
    }

    #[test]
    fn newest_first_then_the_ring_then_refused() {
        let singles = Singles::<u64>::new(2);
        for value in 0..4 {
            assert!(singles.push(single(value)).is_ok());
        }
        let refused = singles.push(single(4)).map_err(|s| *s.node.value());
        assert_eq!(refused, Err(4), "two on the stack, two in the ring");
        assert_eq!(drain(&singles), [1, 0, 2, 3]);
    }

    #[test]
    fn a_push_to_a_held_stack_goes_to_the_ring() {
        let singles = Singles::<u64>::new(4);
        assert!(singles.push(single(0)).is_ok());
        singles.stack.try_with(|items| {
            // Another thread's push and pop while this one holds the stack.
            assert!(singles.push(single(1)).is_ok());
            assert_eq!(items.len(), 1);
            let popped = singles.pop().map(|s| *s.node.value());
            assert_eq!(popped, Some(1), "from the ring");
        });
        assert_eq!(drain(&singles), [0]);
    }

    #[test]
    fn a_cut_takes_the_longest_idle_first() {
        let singles = Singles::<u64>::new(1);
        for value in 0..2 {
            assert!(singles.push(single(value)).is_ok()); // 0 on the stack, 1 in the ring
        }
        let mut dead = Vec::new();
        assert_eq!(singles.cut(1, &mut dead), 1);
        assert_eq!(singles.cut(5, &mut dead), 1, "then the stack");
        let cut: Vec<_> = dead.iter().map(|node| *node.value()).collect();
        assert_eq!(cut, [1, 0]);
        assert!(singles.pop().is_none());
    }

    #[test]
    fn a_trim_keeps_the_order_of_what_it_keeps() {
        let singles = Singles::<u64>::new(3);
        for value in 0..6 {
            assert!(singles.push(single(value)).is_ok()); // 0..3 on the stack, 3..6 in the ring
        }
        let (mut dead, mut unplaced) = (Vec::new(), Vec::new());
        let trimmed = singles.trim(|single| single.stamp % 2 == 0, &mut dead, &mut unplaced);
        assert_eq!(trimmed, 3);
        let trimmed: Vec<_> = dead.iter().map(|node| *node.value()).collect();
        assert_eq!(trimmed, [1, 3, 5]);
        assert!(unplaced.is_empty());
        assert_eq!(drain(&singles), [2, 0, 4]);
    }
}

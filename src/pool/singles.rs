//! The overflow's single objects: a stack of the most recent, a bounded
//! ring, and a queue behind them for what fits in neither.
//!
//! Threads without a slot (or in their teardown) and stashes whose share of
//! `max_idle` is zero return objects one at a time, a [`Single`] per
//! object. This file keeps five rules, argued in
//! [`implementation`](crate::implementation), section 3a:
//!
//! * a get takes the newest single first: the stack's top, else the ring's
//!   oldest, else the spill queue's;
//! * no owner ever waits for the stack: owners only *try* its claim (a get
//!   that finds it held tries a few times, `STACK_TRIES`), and one that
//!   finds it held, or the stack full, uses the ring; sweeps wait for the
//!   claim, except in a forked child for a claim that a thread left behind
//!   holds (the claim word names its holder);
//! * a forked child never uses its parent's ring or spill queue, which the
//!   parent's threads may have left mid-push or mid-pop: it abandons them
//!   and counts what they held (`lazy::PerProcess`);
//! * the stack's buffer and the ring are allocated once, on first push,
//!   with [`RING_SLOTS`] singles each, or `max_idle` if less; only what
//!   fits in neither reaches the `Injector` behind them;
//! * a sweep's cut takes the longest idle first: the spill queue, the ring,
//!   the stack's bottom.

use crate::lazy::PerProcess;
use crate::pool::node::Node;
use crate::pool::owner;
use crate::sync::{backoff, AtomicWord, Ordering, Queue, Ring, UnsafeCell};

/// Slots in the stack and in the ring, at most: enough for the singles in
/// flight between the stashless threads of a busy pool, few enough that
/// they (three words a slot) stay far below the objects they hold. Under
/// loom, one, so that every model that queues three singles also takes the
/// spill path.
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
/// first push, and a queue for what fits in neither.
pub(crate) struct Singles<T> {
    stack: Stack<T>,
    ring: PerProcess<Ring<Single<T>>>,
    spill: PerProcess<Queue<Single<T>>>,
    /// The stack's and the ring's size: `RING_SLOTS`, or the pool's
    /// `max_idle` if less.
    slots: usize,
    /// Singles in the parent's ring and spill queue that this forked child
    /// abandoned, not yet reported by a `trim` or `cut`. Plain std even
    /// under loom: only a forked child adds to it, and loom models none.
    abandoned: std::sync::atomic::AtomicUsize,
}

impl<T> Singles<T> {
    /// Singles for a pool that keeps at most `max_idle` idle objects.
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            stack: Stack::new(),
            ring: PerProcess::new(),
            spill: PerProcess::new(),
            slots: max_idle.clamp(1, RING_SLOTS),
            abandoned: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// This process's ring, if made (a parent's is abandoned and counted).
    #[inline]
    fn ring(&self) -> Option<&Ring<Single<T>>> {
        self.ring.get(|ring| self.abandon(ring.len()))
    }

    /// This process's ring, made now if need be.
    #[inline]
    fn ring_or_make(&self) -> &Ring<Single<T>> {
        let slots = self.slots;
        self.ring
            .get_or_make(|| Ring::new(slots), |ring| self.abandon(ring.len()))
    }

    /// This process's spill queue, if made (as `ring`).
    fn spill(&self) -> Option<&Queue<Single<T>>> {
        self.spill.get(|spill| self.abandon(spill.len()))
    }

    fn push_spill(&self, single: Single<T>) {
        self.spill
            .get_or_make(Queue::new, |spill| self.abandon(spill.len()))
            .push(single);
    }

    /// Counts singles left in a queue that a forked child abandoned.
    #[cold]
    fn abandon(&self, n: usize) {
        self.abandoned
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The abandoned singles not yet reported (see `trim`).
    fn take_abandoned(&self) -> usize {
        self.abandoned.swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn push(&self, single: Single<T>) {
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
        let Some(single) = single else { return };
        if let Err(single) = self.ring_or_make().push(single) {
            self.push_spill(single);
        }
    }

    /// Takes a single: the newest on the stack, else the ring's oldest,
    /// else the spill queue's.
    ///
    /// A get that finds the stack held (by another thread's push or pop, a
    /// few instructions long) and the queues empty tries the stack again,
    /// a bounded number of times: giving up at once would make a new
    /// object while idle ones wait on the stack, which in a flow of
    /// returns on one thread and gets on another happens on every push
    /// that a get meets. Bounded, so a get still never waits for a holder
    /// that does not let go (a thread preempted there, or one a fork left
    /// behind).
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
                Some(None) => return self.pop_queue(),
                None => {
                    if let Some(single) = self.pop_queue() {
                        return Some(single);
                    }
                }
            }
        }
        None
    }

    /// The ring's oldest single, else the spill queue's.
    fn pop_queue(&self) -> Option<Single<T>> {
        match self.ring()?.pop() {
            Some(single) => Some(single),
            None => self.spill()?.pop(),
        }
    }

    /// Moves the singles that `keep` refuses into `dead`, looking at each
    /// single queued when it starts once; returns how many it moved, plus
    /// those a forked child abandoned since the last `trim` or `cut`: the
    /// singles gone, for the overflow's count.
    pub(crate) fn trim(
        &self,
        mut keep: impl FnMut(&Single<T>) -> bool,
        dead: &mut Vec<Box<Node<T>>>,
    ) -> usize {
        let before = dead.len();
        self.stack.wait_with(|items| {
            for single in items.extract_if(.., |single| !keep(single)) {
                dead.push(single.node);
            }
        });
        let mut kept = Vec::new();
        for _ in 0..self.queued() {
            let Some(single) = self.pop_queued() else {
                break;
            };
            if keep(&single) {
                kept.push(single);
            } else {
                dead.push(single.node);
            }
        }
        for single in kept {
            self.push_queued(single);
        }
        dead.len() - before + self.take_abandoned()
    }

    /// Moves up to `n` singles into `dead`, the longest idle first: the
    /// spill queue's, the ring's, then the bottom of the stack; returns how
    /// many it moved, plus those abandoned (as `trim`).
    pub(crate) fn cut(&self, n: usize, dead: &mut Vec<Box<Node<T>>>) -> usize {
        let before = dead.len();
        for _ in 0..self.queued() {
            if dead.len() - before == n {
                break;
            }
            let Some(single) = self.pop_queued() else {
                break;
            };
            dead.push(single.node);
        }
        let rest = n - (dead.len() - before);
        self.stack.wait_with(|items| {
            let taken = rest.min(items.len());
            dead.extend(items.drain(..taken).map(|single| single.node));
        });
        dead.len() - before + self.take_abandoned()
    }

    /// Singles in the ring and the spill queue (a snapshot).
    fn queued(&self) -> usize {
        self.ring().map_or(0, Ring::len) + self.spill().map_or(0, Queue::len)
    }

    /// Takes a queued single for a sweep: the spill queue's oldest first,
    /// else the ring's. Singles wait in the spill queue while the ring
    /// keeps taking new ones, so a sweep that looks at a snapshot's worth
    /// of singles takes those first: returns arriving meanwhile in the
    /// ring cannot keep it from reaching them.
    fn pop_queued(&self) -> Option<Single<T>> {
        let ring = self.ring()?;
        match self.spill().and_then(Queue::pop) {
            Some(single) => Some(single),
            None => ring.pop(),
        }
    }

    /// Queues a single that a sweep keeps, behind the others.
    fn push_queued(&self, single: Single<T>) {
        if let Err(single) = self.ring_or_make().push(single) {
            self.push_spill(single);
        }
    }

    /// Whether anything has been allocated for singles (for tests).
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        let stack = self.stack.try_with(|items| items.capacity() > 0);
        stack.unwrap_or(true) || self.ring().is_some()
    }
}

// === impl Stack ===

/// The most recently returned singles, newest on top, behind a claim that
/// owners only ever try (module docs).
struct Stack<T> {
    /// 0 while no thread uses `items`; else its holder's [`holder`] value,
    /// taken and named in one compare-and-swap, so that a sweep in a forked
    /// child can tell a claim that a thread left behind by the fork holds
    /// (`fork::died_in_fork`): no moment leaves the stack held by nobody.
    claim: AtomicWord,
    items: UnsafeCell<Vec<Single<T>>>,
}

// SAFETY: `items` is only reached by the thread that holds the claim, which
// `claim` gives to one thread at a time, with acquire and release
// ordering; the singles move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Stack<T> {}

/// This thread's value in a stack's claim word: its serial number plus one,
/// 0 being a free stack (a thread past its thread-locals has serial 0).
/// `None` for the one serial in 2^32 that a pointer-sized word (a target
/// without 64-bit atomics) would keep as 0: that thread goes without the
/// stack.
#[inline]
fn holder() -> Option<u64> {
    let word = AtomicWord::keeps(owner::serial().wrapping_add(1));
    (word != 0).then_some(word)
}

impl<T> Stack<T> {
    fn new() -> Self {
        Self {
            claim: AtomicWord::new(0),
            items: UnsafeCell::new(Vec::new()),
        }
    }

    /// Runs `f` on the items if the stack is free now; `None` if another
    /// thread holds it. Never waits: the caller goes to the ring instead.
    #[inline]
    fn try_with<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> Option<R> {
        // A load first, so that threads that find it held do not take its
        // line.
        if self.claim.load(Ordering::Relaxed) != 0 || !self.claim(holder()?) {
            return None;
        }
        Some(self.holding(f))
    }

    /// Takes the claim, for `me`, if it is free.
    #[inline]
    fn claim(&self, me: u64) -> bool {
        // Acquire: pairs with the release in `Release`, so this thread
        // sees what the last holder did to the items.
        self.claim
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Runs `f` on the items, waiting for a holder to let go; `None` only
    /// in a forked child whose parent's thread held the stack at the fork
    /// (or for a thread that `holder` leaves without the stack).
    fn wait_with<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> Option<R> {
        let me = holder()?;
        let mut step = 0;
        loop {
            match self.claim.load(Ordering::Relaxed) {
                0 if self.claim(me) => break,
                0 => {}
                held if crate::pool::fork::died_in_fork(held - 1) => return None,
                _ => {}
            }
            backoff(&mut step);
        }
        Some(self.holding(f))
    }

    /// `f` on the items, then the claim released.
    ///
    /// The caller must hold the claim.
    #[inline]
    fn holding<R>(&self, f: impl FnOnce(&mut Vec<Single<T>>) -> R) -> R {
        // Released even if `f` unwinds (it runs only the pool's own code),
        // so that no sweeper waits for ever.
        let _release = Release(&self.claim);
        // SAFETY: the caller holds the claim: no other thread reaches the
        // items until `_release` clears it.
        self.items.with_mut(|items| f(unsafe { &mut *items }))
    }
}

// The stack's only interior mutability is `items`, behind the claim, which
// an unwinding holder releases with the `Vec` in a valid state: a pool that
// holds one stays unwind-safe, as its other parts are.
impl<T> std::panic::RefUnwindSafe for Stack<T> {}

/// Releases the stack's claim when dropped.
struct Release<'a>(&'a AtomicWord);

impl Drop for Release<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: publishes the change to the next holder's acquire.
        self.0.store(0, Ordering::Release);
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
        std::iter::from_fn(|| singles.pop().map(|s| *s.node.value())).collect()
    }

    #[test]
    fn the_stack_comes_first_and_the_ring_is_made_when_it_is_full() {
        let singles = Singles::<u64>::new(3);
        assert!(
            singles.pop().is_none() && !singles.is_made(),
            "a pop makes nothing"
        );
        for value in 0..3 {
            singles.push(single(value));
        }
        assert!(singles.ring().is_none(), "three fit the stack");
        singles.push(single(3));
        assert!(singles.ring().is_some());
        assert_eq!(singles.slots, 3);
        assert_eq!(Singles::<u64>::new(usize::MAX).slots, RING_SLOTS);
        assert_eq!(Singles::<u64>::new(0).slots, 1, "a ring needs a slot");
    }

    #[test]
    fn newest_first_then_the_ring_then_what_fits_in_neither() {
        let singles = Singles::<u64>::new(2);
        for value in 0..5 {
            singles.push(single(value));
        }
        assert_eq!(
            singles.spill().map_or(0, Queue::len),
            1,
            "two on the stack, two in the ring"
        );
        assert_eq!(drain(&singles), [1, 0, 2, 3, 4]);
        assert!(singles.pop().is_none());
    }

    #[test]
    fn a_push_to_a_held_stack_goes_to_the_ring() {
        let singles = Singles::<u64>::new(4);
        singles.push(single(0));
        singles.stack.try_with(|items| {
            // Another thread's push and pop while this one holds the stack.
            singles.push(single(1));
            assert_eq!(items.len(), 1);
            assert_eq!(
                singles.pop().map(|s| *s.node.value()),
                Some(1),
                "from the ring"
            );
        });
        assert_eq!(drain(&singles), [0]);
    }

    #[test]
    fn a_held_claim_names_its_holder() {
        let singles = Singles::<u64>::new(4);
        let claim = || singles.stack.claim.load(Ordering::Relaxed);
        let named = singles.stack.try_with(|_| claim());
        assert_eq!(named, holder());
        assert_eq!(claim(), 0, "released");
    }

    /// A child forked while another thread holds the stack steps over that
    /// claim (the thread is not in the child), and abandons the ring, which
    /// it counts.
    #[cfg(all(target_os = "linux", not(miri)))]
    #[test]
    fn a_forked_child_steps_over_a_claim_held_by_a_thread_left_behind() {
        use std::sync::Barrier;
        use std::time::{Duration, Instant};

        crate::pool::fork::guard();
        let singles = Singles::<u64>::new(4);
        for value in 0..6 {
            singles.push(single(value)); // 4 on the stack, 2 in the ring
        }
        let (held, release) = (Barrier::new(2), Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                owner::begin(); // a holder with a serial number
                singles.stack.try_with(|_| {
                    held.wait();
                    release.wait();
                })
            });
            held.wait();
            // SAFETY: `fork` has no preconditions; the child only cuts and
            // `_exit`s.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let mut dead = Vec::new();
                let gone = singles.cut(10, &mut dead);
                let ok = gone == 2 && dead.is_empty() && singles.pop().is_none();
                // SAFETY: ends the child at once.
                unsafe { libc::_exit(i32::from(!ok)) };
            }
            assert!(pid > 0, "fork failed");
            let give_up = Instant::now() + Duration::from_secs(20);
            let mut status = 0;
            // SAFETY: `pid` is this process's child, `status` an out-pointer.
            while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
                if Instant::now() > give_up {
                    // SAFETY: as above.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    panic!("the child waits for a thread it does not have");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            release.wait();
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        });
        assert_eq!(
            drain(&singles),
            [3, 2, 1, 0, 4, 5],
            "the parent's are whole"
        );
    }

    #[test]
    fn a_cut_takes_the_longest_idle_first() {
        let singles = Singles::<u64>::new(1);
        for value in 0..4 {
            singles.push(single(value)); // 0 on the stack, 1 in the ring, 2 and 3 spilled
        }
        let mut dead = Vec::new();
        assert_eq!(singles.cut(3, &mut dead), 3);
        let cut: Vec<_> = dead.iter().map(|node| *node.value()).collect();
        assert_eq!(cut, [2, 3, 1]);
        assert_eq!(singles.cut(5, &mut dead), 1, "then the stack");
        assert!(singles.pop().is_none());
    }

    #[test]
    fn a_trim_keeps_the_order_of_what_it_keeps() {
        let singles = Singles::<u64>::new(3);
        for value in 0..6 {
            singles.push(single(value)); // 0..3 on the stack, 3..6 in the ring
        }
        let mut dead = Vec::new();
        assert_eq!(singles.trim(|single| single.stamp % 2 == 0, &mut dead), 3);
        let trimmed: Vec<_> = dead.iter().map(|node| *node.value()).collect();
        assert_eq!(trimmed, [1, 3, 5]);
        assert_eq!(drain(&singles), [2, 0, 4]);
    }
}

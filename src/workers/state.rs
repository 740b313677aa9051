//! The pool's state word: every count that a decision about a task depends
//! on, in one atomic `u64`.
//!
//! ```text
//!  63   62         50 49         37 36         24 23                    0
//! +----+-------------+-------------+-------------+-----------------------+
//! | W  |  sleeping   |  spinning   |   running   |        queued         |
//! +----+-------------+-------------+-------------+-----------------------+
//! ```
//!
//! * `queued`: tasks in the queue (or about to be pushed) that no worker has
//!   claimed yet, up to `QUEUED_LIMIT`; past it, the pool counts them under
//!   its lock (`Shared::count_uncounted`).
//! * `running`: workers alive, including one being started.
//! * `spinning`: workers awake and looking for a task (free, no wake needed).
//! * `sleeping`: workers parked on the idle stack (free, need a wake).
//! * `W`: at least one submitter is blocked until there is room.
//!
//! Keeping them in one word is what makes the pool's races simple: a
//! submitter that queues a task and a worker that goes to sleep both
//! read-modify-write this word, so one of them comes first in its
//! modification order and sees the other (no store-buffering, no fences).
//! The module docs of `workers` give the rules and why they are correct.

use std::fmt;

use super::word::AtomicWord;
use crate::sync::Ordering;

const QUEUED_BITS: u32 = 24;
const WORKER_BITS: u32 = 13;

const RUNNING_SHIFT: u32 = QUEUED_BITS;
const SPINNING_SHIFT: u32 = RUNNING_SHIFT + WORKER_BITS;
const SLEEPING_SHIFT: u32 = SPINNING_SHIFT + WORKER_BITS;
const WAITING_BIT: u64 = 1 << 63;

const QUEUED_MASK: u64 = (1 << QUEUED_BITS) - 1;
const WORKER_MASK: u64 = (1 << WORKER_BITS) - 1;

const ONE_QUEUED: u64 = 1;
const ONE_RUNNING: u64 = 1 << RUNNING_SHIFT;
const ONE_SPINNING: u64 = 1 << SPINNING_SHIFT;
const ONE_SLEEPING: u64 = 1 << SLEEPING_SHIFT;

/// Asserts a property of the protocol in debug builds and in loom models
/// (which run optimised, and are where a broken one would show).
macro_rules! invariant {
    ($cond:expr) => {
        if cfg!(any(debug_assertions, stashpool_loom)) {
            assert!($cond, "WorkerPool invariant broken: {}", stringify!($cond));
        }
    };
}
pub(crate) use invariant;

/// The most workers a pool can have (the width of the worker fields).
pub(crate) const MAX_WORKERS: usize = WORKER_MASK as usize;

/// The most tasks `queued` can count (its width). Tasks queued past it are
/// counted under the pool's lock instead (`Shared::count_uncounted`).
pub(crate) const MAX_QUEUED: usize = QUEUED_MASK as usize;

/// The most tasks `queued` counts: `MAX_QUEUED`, or, in the crate's unit
/// tests and the loom models, two or three, so that they reach it (the
/// fewer, the fewer steps a loom model takes to get there).
pub(crate) const QUEUED_LIMIT: usize = if cfg!(stashpool_loom) {
    2
} else if cfg!(test) {
    3
} else {
    MAX_QUEUED
};

/// A snapshot of the state word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(u64);

impl State {
    pub(crate) fn queued(self) -> usize {
        (self.0 & QUEUED_MASK) as usize
    }

    pub(crate) fn running(self) -> usize {
        ((self.0 >> RUNNING_SHIFT) & WORKER_MASK) as usize
    }

    pub(crate) fn spinning(self) -> usize {
        ((self.0 >> SPINNING_SHIFT) & WORKER_MASK) as usize
    }

    pub(crate) fn sleeping(self) -> usize {
        ((self.0 >> SLEEPING_SHIFT) & WORKER_MASK) as usize
    }

    /// Workers that are not running a task.
    pub(crate) fn free(self) -> usize {
        self.spinning() + self.sleeping()
    }

    /// Whether a submitter is blocked waiting for room.
    pub(crate) fn waiting(self) -> bool {
        self.0 & WAITING_BIT != 0
    }

    // The steps below are the only ways the word changes. Each keeps every
    // field in range: callers check the field they decrement is non-zero and
    // the field they increment is below its maximum (`invariant!` checks it).

    /// A task was queued.
    pub(crate) fn queue(self) -> Self {
        invariant!(self.queued() < QUEUED_LIMIT);
        Self(self.0 + ONE_QUEUED)
    }

    /// A worker is being started.
    pub(crate) fn start(self) -> Self {
        invariant!(self.running() < MAX_WORKERS);
        Self(self.0 + ONE_RUNNING)
    }

    /// A worker could not be started after all.
    pub(crate) fn unstart(self) -> Self {
        invariant!(self.running() > 0);
        Self(self.0 - ONE_RUNNING)
    }

    /// A worker that ran a task exits instead of taking another (the pool
    /// has more workers than its bound allows now).
    pub(crate) fn exit_busy(self) -> Self {
        invariant!(self.running() > 0);
        Self(self.0 - ONE_RUNNING)
    }

    /// A worker that claimed a task gives the claim back and exits: the
    /// bound, lowered since its claim, does not let it run the task.
    pub(crate) fn give_back(self) -> Self {
        invariant!(self.running() > 0 && self.queued() < QUEUED_LIMIT);
        Self(self.0 + ONE_QUEUED - ONE_RUNNING)
    }

    /// A worker is started for a queued task (the bound was raised).
    pub(crate) fn start_claimed(self) -> Self {
        invariant!(self.queued() > 0 && self.running() < MAX_WORKERS);
        Self(self.0 - ONE_QUEUED + ONE_RUNNING)
    }

    /// A worker that ran a task claims a queued one.
    pub(crate) fn claim_busy(self) -> Self {
        invariant!(self.queued() > 0);
        Self(self.0 - ONE_QUEUED)
    }

    /// A worker that ran a task found none queued and starts looking.
    pub(crate) fn spin(self) -> Self {
        invariant!(self.spinning() < MAX_WORKERS);
        Self(self.0 + ONE_SPINNING)
    }

    /// A spinning worker claims a queued task.
    pub(crate) fn claim_spinning(self) -> Self {
        invariant!(self.queued() > 0 && self.spinning() > 0);
        Self(self.0 - ONE_QUEUED - ONE_SPINNING)
    }

    /// A spinning worker parks on the idle stack.
    pub(crate) fn sleep(self) -> Self {
        invariant!(self.spinning() > 0);
        Self(self.0 - ONE_SPINNING + ONE_SLEEPING)
    }

    /// A parked worker was woken (by a submitter or by its timer) and looks
    /// for a task again.
    pub(crate) fn wake(self) -> Self {
        invariant!(self.sleeping() > 0);
        Self(self.0 - ONE_SLEEPING + ONE_SPINNING)
    }

    /// `n` parked workers were woken at once (the pool is closing).
    pub(crate) fn wake_all(self, n: usize) -> Self {
        invariant!(self.sleeping() >= n);
        Self(self.0 - n as u64 * (ONE_SLEEPING - ONE_SPINNING))
    }

    /// A spinning worker exits (the pool is closing, or has more workers
    /// than its bound allows now).
    pub(crate) fn exit_spinning(self) -> Self {
        invariant!(self.spinning() > 0 && self.running() > 0);
        Self(self.0 - ONE_SPINNING - ONE_RUNNING)
    }

    /// A parked worker exits (its idle timeout passed).
    pub(crate) fn exit_sleeping(self) -> Self {
        invariant!(self.sleeping() > 0 && self.running() > 0);
        Self(self.0 - ONE_SLEEPING - ONE_RUNNING)
    }

    /// Marks a submitter as blocked.
    pub(crate) fn with_waiting(self) -> Self {
        Self(self.0 | WAITING_BIT)
    }

    /// Clears the blocked-submitter mark (whoever clears it wakes one
    /// blocked submitter, which passes the mark on if others remain).
    pub(crate) fn without_waiting(self) -> Self {
        Self(self.0 & !WAITING_BIT)
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("queued", &self.queued())
            .field("running", &self.running())
            .field("spinning", &self.spinning())
            .field("sleeping", &self.sleeping())
            .field("waiting", &self.waiting())
            .finish()
    }
}

/// The atomic state word.
pub(crate) struct AtomicState(AtomicWord);

impl AtomicState {
    pub(crate) fn new() -> Self {
        Self(AtomicWord::new(0))
    }

    /// The current state. Acquire: pairs with the release half of `update`,
    /// though no decision needs more than the word's own coherence.
    #[inline]
    pub(crate) fn load(&self) -> State {
        State(self.0.load(Ordering::Acquire))
    }

    /// Applies `step` atomically: `step` maps the current state to the next
    /// one, or to `None` to leave it as it is. Returns the state `step` saw
    /// last, and whether it was replaced.
    ///
    /// AcqRel: every decision is made on this one word, whose modification
    /// order is total, so of two racing steps the later one sees the earlier.
    /// Acquire and release on top make the word a synchronisation point for
    /// readers of the counts (`stats`, tests), at no cost on x86 and little
    /// elsewhere next to the compare-and-swap itself.
    #[inline]
    pub(crate) fn update(&self, mut step: impl FnMut(State) -> Option<State>) -> (State, bool) {
        let mut current = self.load();
        loop {
            let Some(next) = step(current) else {
                return (current, false);
            };
            match self.0.compare_exchange_weak(
                current.0,
                next.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return (current, true),
                Err(seen) => current = State(seen),
            }
        }
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn fields_are_independent() {
        let s = State(0).start().start().queue().spin();
        assert_eq!(
            (s.running(), s.queued(), s.spinning(), s.sleeping()),
            (2, 1, 1, 0)
        );
        let s = s.sleep().with_waiting();
        assert_eq!((s.spinning(), s.sleeping(), s.free()), (0, 1, 1));
        assert!(s.waiting());
        let s = s.wake().claim_spinning().without_waiting();
        assert_eq!((s.running(), s.queued(), s.free()), (2, 0, 0));
        assert!(!s.waiting());
    }

    #[test]
    fn full_fields_do_not_spill() {
        let mut s = State(0);
        for _ in 0..MAX_WORKERS {
            s = s.start().spin();
        }
        for _ in 0..MAX_WORKERS {
            s = s.sleep();
        }
        assert_eq!(
            (s.running(), s.spinning(), s.sleeping()),
            (MAX_WORKERS, 0, MAX_WORKERS)
        );
        assert!(!s.waiting());
        let s = s.wake_all(MAX_WORKERS);
        assert_eq!((s.spinning(), s.sleeping()), (MAX_WORKERS, 0));
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn update_reports_the_state_it_replaced() {
        let word = AtomicState::new();
        let (seen, done) = word.update(|s| Some(s.start()));
        assert!(done);
        assert_eq!(seen.running(), 0);
        let (seen, done) = word.update(|s| (s.queued() > 0).then(|| s.claim_busy()));
        assert!(!done);
        assert_eq!(seen.running(), 1);
        assert_eq!(word.load().running(), 1);
    }
}

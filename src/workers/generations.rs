//! Unfinished tasks, counted by wait generation, so that `wait` waits for
//! the tasks submitted before it and for no others.
//!
//! Tasks finish out of order, so a single "finished" count cannot say that
//! every task submitted before some moment has finished: a later task that
//! finished early would stand in for an earlier one still running. And
//! waiting until *nothing* is in flight never ends while another thread
//! keeps submitting. Instead, each task is counted in one of two
//! generations, the current one when it was submitted (the generation
//! travels with the task, and its finish is counted off the same one). A
//! `wait` flips the current generation, so tasks submitted from then on are
//! counted in the other, and sleeps until the generation it flipped away
//! from has no unfinished task: exactly the tasks submitted before the flip.
//! Waits take turns (`wait_turn` in `shared.rs`), so by the time one flips,
//! the previous one has drained the generation it flips to: the two never
//! mix. (The scheme is the two-counter one of sleepable RCU.)
//!
//! One word holds both counts, the current generation and a flag telling
//! finishing workers that someone sleeps until a count reaches zero:
//!
//! ```text
//!  63   62   61             31 30              0
//! +----+----+-----------------+-----------------+
//! | G  | W  |  unfinished, 1  |  unfinished, 0  |
//! +----+----+-----------------+-----------------+
//! ```
//!
//! A submitter reads the generation and counts its task in one
//! compare-and-swap, so a task can never be counted in a generation that a
//! wait has already flipped away from and seen drained. A waiter raising
//! the flag and a worker counting a finish are two read-modify-writes of the
//! same word: of the two, the later sees the earlier, so either the worker
//! sees the flag (and wakes the waiter, under the lock the waiter holds
//! until it sleeps) or the waiter sees the count.
//!
//! A submitter writes the word for every task; workers count finishes in
//! batches (`Finished` in `worker.rs`). So the word has a cache line of its
//! own, away from the state word that workers write for every task they
//! claim: the submitter's count then finds the line still in its own cache
//! most of the time.

use crate::sync::Ordering;

use super::word::AtomicWord;

const COUNT_BITS: u32 = 31;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const WAITING: u64 = 1 << 62;
const CURRENT: u64 = 1 << 63;

/// The most unfinished tasks one generation can count: far above what a pool
/// admits (queued tasks, `shared.rs` bounds them, plus the ones workers run,
/// nested ones included).
pub(crate) const MAX_UNFINISHED: usize = COUNT_MASK as usize;

/// Which of the two generations a task was counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Generation(u8);

impl Generation {
    fn shift(self) -> u32 {
        u32::from(self.0) * COUNT_BITS
    }

    fn one(self) -> u64 {
        1 << self.shift()
    }

    fn other(self) -> Self {
        Self(self.0 ^ 1)
    }
}

/// A snapshot of the word.
#[derive(Clone, Copy)]
struct Counts(u64);

impl Counts {
    fn current(self) -> Generation {
        Generation(u8::from(self.0 & CURRENT != 0))
    }

    fn unfinished(self, generation: Generation) -> usize {
        ((self.0 >> generation.shift()) & COUNT_MASK) as usize
    }

    fn waiting(self) -> bool {
        self.0 & WAITING != 0
    }
}

pub(crate) struct Generations(AtomicWord);

impl Generations {
    pub(crate) fn new() -> Self {
        Self(AtomicWord::new(0))
    }

    /// Counts a task submitted now, in the current generation, and returns
    /// that generation; its finish must be counted off the same one.
    ///
    /// Release: pairs with the acquire of `flip`, though the decision needs
    /// only the word's own modification order.
    #[inline]
    pub(crate) fn enter(&self) -> Generation {
        let mut word = self.0.load(Ordering::Relaxed);
        loop {
            let generation = Counts(word).current();
            // The admission bounds the tasks in flight far below a count's
            // width (`MAX_UNFINISHED`), so the field cannot overflow.
            match self.0.compare_exchange_weak(
                word,
                word + generation.one(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return generation,
                Err(seen) => word = seen,
            }
        }
    }

    /// Counts a task of `generation` as finished. Returns true if a waiter
    /// sleeps until that generation drains and this was its last task: the
    /// caller wakes the waiters.
    ///
    /// AcqRel: releases the task's effects to the waiter that sees the count
    /// reach zero.
    #[inline]
    pub(crate) fn exit(&self, generation: Generation, n: usize) -> bool {
        let before = Counts(
            self.0
                .fetch_sub(n as u64 * generation.one(), Ordering::AcqRel),
        );
        before.waiting() && before.unfinished(generation) == n && before.current() != generation
    }

    /// Makes the other generation current and returns the one it replaced:
    /// the tasks submitted before this call are the ones counted in it.
    /// Call only in a wait's turn (see the module docs).
    ///
    /// AcqRel: the flip is ordered after every submit counted before it.
    pub(crate) fn flip(&self) -> Generation {
        let before = Counts(self.0.fetch_xor(CURRENT, Ordering::AcqRel));
        let old = before.current();
        // The previous wait drained the generation we switch to.
        super::state::invariant!(before.unfinished(old.other()) == 0);
        old
    }

    /// Whether every task of `generation` has finished. Acquire: pairs with
    /// `exit`, so the tasks' effects are visible to the caller.
    pub(crate) fn drained(&self, generation: Generation) -> bool {
        Counts(self.0.load(Ordering::Acquire)).unfinished(generation) == 0
    }

    /// Raises the waiting flag; returns whether `generation` had drained by
    /// then. Call with the pool's lock held.
    pub(crate) fn mark_waiting(&self, generation: Generation) -> bool {
        Counts(self.0.fetch_or(WAITING, Ordering::AcqRel)).unfinished(generation) == 0
    }

    /// Lowers the waiting flag. Call with the pool's lock held, when the
    /// waiter leaves.
    pub(crate) fn clear_waiting(&self) {
        self.0.fetch_and(!WAITING, Ordering::Relaxed);
    }

    /// Tasks submitted and not finished, in both generations.
    pub(crate) fn unfinished(&self) -> usize {
        let counts = Counts(self.0.load(Ordering::Acquire));
        counts.unfinished(Generation(0)) + counts.unfinished(Generation(1))
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_flip_separates_earlier_tasks_from_later_ones() {
        let g = Generations::new();
        let early = g.enter();
        let old = g.flip();
        assert_eq!(old, early);
        let late = g.enter();
        assert_ne!(late, early);
        assert!(!g.drained(old));
        // The later task finishing does not drain the earlier generation.
        assert!(!g.exit(late, 1));
        assert!(!g.drained(old));
        assert_eq!(g.unfinished(), 1);
        assert!(!g.mark_waiting(old));
        // The waiter is told when the last early task finishes.
        assert!(g.exit(early, 1));
        assert!(g.drained(old));
        g.clear_waiting();
        assert_eq!(g.unfinished(), 0);
    }

    #[test]
    fn finishing_in_the_current_generation_wakes_nobody() {
        let g = Generations::new();
        let old = g.flip();
        assert!(g.mark_waiting(old));
        let task = g.enter();
        assert!(!g.exit(task, 1), "nobody waits for the current generation");
    }

    #[test]
    fn counts_do_not_spill_into_each_other() {
        let g = Generations::new();
        for _ in 0..1000 {
            g.enter();
        }
        let old = g.flip();
        let late = g.enter();
        assert_eq!(g.unfinished(), 1001);
        for _ in 0..1000 {
            g.exit(old, 1);
        }
        assert!(g.drained(old) && !g.drained(late));
    }
}

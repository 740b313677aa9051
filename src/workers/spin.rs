//! Spinning while waiting for another thread, and the two places where the
//! pool yields its core instead.
//!
//! The pool's waits are short when the thread waited for is running (a
//! worker finishing a small task, a submitter between counting a task and
//! pushing it), so each wait spins first. What it does when the spin runs
//! out differs: a worker looking for work, and a submitter looking for room,
//! park (a wake from the thread that makes progress ends the wait at the
//! right moment); only a claimer waiting for a submitter's push, which has
//! no one to wake it, yields the core, in case that submitter was preempted
//! on the same core (`submit` pushes before it counts, so this is only ever
//! a wait for `try_submit`, a pool's own task's submit or a task sent
//! back). A push follows its count within a few hundred
//! nanoseconds when the submitter runs, so a claimer still waiting after a
//! few microseconds waits for a submitter that is off its core, which more
//! spinning cannot bring back. A loop of `sched_yield` calls in place of
//! parking would cost a system call per round on an idle core, and on a
//! busy machine it hands the core to any runnable thread, not the one
//! being waited for.
//!
//! The other yield is a parked worker's, once, when it is woken
//! (`worker.rs`).

/// The longest round, in `spin_loop` hints: past it, rounds stop doubling.
#[cfg_attr(stashpool_loom, allow(dead_code))]
const MAX_SHIFT: u32 = 6;
/// Rounds of `spin_or_yield` before it starts yielding: a few microseconds
/// (the rounds double up to `2^MAX_SHIFT` hints, a few nanoseconds to tens
/// each).
const YIELD_AFTER: u32 = 10;

/// An exponential spin: each round spins twice as long as the last, up to
/// `2^MAX_SHIFT` hints.
#[derive(Debug)]
pub(crate) struct Spin {
    rounds: u32,
}

impl Spin {
    pub(crate) fn new() -> Self {
        Self { rounds: 0 }
    }

    /// Rounds spun so far.
    pub(crate) fn rounds(&self) -> u32 {
        self.rounds
    }

    /// Spins one round.
    #[inline]
    pub(crate) fn spin(&mut self) {
        #[cfg(not(stashpool_loom))]
        for _ in 0..1u32 << self.rounds.min(MAX_SHIFT) {
            std::hint::spin_loop();
        }
        // loom must be told that this thread waits for another, or it
        // explores this loop forever.
        #[cfg(stashpool_loom)]
        loom::thread::yield_now();
        self.rounds = self.rounds.saturating_add(1);
    }

    /// Spins one round, or, after many, yields the core: for a wait with
    /// nobody to wake the waiter.
    #[inline]
    pub(crate) fn spin_or_yield(&mut self) {
        if self.rounds < YIELD_AFTER {
            self.spin();
        } else {
            #[cfg(not(stashpool_loom))]
            std::thread::yield_now();
            #[cfg(stashpool_loom)]
            loom::thread::yield_now();
        }
    }
}

/// Hands the core to another runnable thread, if any, once: for a worker
/// just woken (`worker.rs`). Not a wait, so under loom, where a yield tells
/// the model that the thread waits for another, nothing.
#[inline]
pub(crate) fn yield_core() {
    #[cfg(not(stashpool_loom))]
    std::thread::yield_now();
}

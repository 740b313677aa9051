//! The idle stack: parked workers, the most recently parked on top.
//!
//! A submitter that needs a parked worker wakes the top one. Reusing the
//! most recent sleeper (LIFO, as Go's `ants` and `itogami` do) keeps the
//! workers in use warm in cache and lets the ones at the bottom go unused
//! long enough to reach their idle timeout, so a pool that got busier than
//! it is now shrinks back to what it needs.
//!
//! # Why a locked deque and not a lock-free stack
//!
//! `itogami` keeps idle workers on a lock-free (Treiber) stack, and in Rust
//! such a stack would reclaim its nodes with `crossbeam-epoch`. Here the
//! stack is a `VecDeque` under the pool's lock instead, because:
//!
//! * The stack is touched only when a worker parks or is woken, never while
//!   tasks flow to busy or spinning workers. Each of those transitions costs
//!   a futex wake and a context switch, which cost far more than a push
//!   and pop under an uncontended lock; a Treiber stack reclaimed by
//!   `crossbeam-epoch` pays a node allocation per push and an epoch pin per
//!   operation, so it is no cheaper than the lock either. The `idle_stack`
//!   group of `benches/workers.rs` measures all three side by side. A
//!   lock-free stack would not make the transition measurably faster.
//! * A worker's idle timeout must be decided atomically with respect to a
//!   submitter choosing that worker: either the submitter takes the sleeper
//!   off the stack and the sleeper runs, or the sleeper leaves the stack and
//!   exits, never both. Under the lock the sleeper just removes itself; a
//!   lock-free stack cannot remove from the middle, so it needs a per-sleeper
//!   state machine and leaves stale nodes behind for the next pop to skip.
//! * The condition variable a sleeper parks on needs a lock anyway.

use std::collections::VecDeque;

use super::state::invariant;
use crate::sync::{Arc, AtomicBool, Condvar, Ordering};

/// One worker's parking place.
pub(crate) struct Sleeper {
    /// Where the worker parks; it waits with the pool's lock.
    pub(crate) wakeup: Condvar,
    /// Set, under the pool's lock, by whoever takes the sleeper off the
    /// stack to wake it; cleared by the sleeper when it sees it. Relaxed:
    /// the lock orders every access.
    notified: AtomicBool,
}

impl Sleeper {
    pub(crate) fn new() -> Self {
        Self {
            wakeup: Condvar::new(),
            notified: AtomicBool::new(false),
        }
    }

    /// Whether the sleeper was taken off the stack to be woken; clears the
    /// mark. Call with the pool's lock held.
    pub(crate) fn take_notified(&self) -> bool {
        self.notified.swap(false, Ordering::Relaxed)
    }
}

/// The parked workers, most recently parked at the back. Lives under the
/// pool's lock.
#[derive(Default)]
pub(crate) struct IdleStack(VecDeque<Arc<Sleeper>>);

impl IdleStack {
    pub(crate) fn push(&mut self, sleeper: &Arc<Sleeper>) {
        self.0.push_back(Arc::clone(sleeper));
    }

    /// Takes the most recently parked worker off the stack and marks it
    /// notified; the caller wakes it after releasing the lock.
    pub(crate) fn pop(&mut self) -> Option<Arc<Sleeper>> {
        let sleeper = self.0.pop_back()?;
        sleeper.notified.store(true, Ordering::Relaxed);
        Some(sleeper)
    }

    /// Takes every parked worker off the stack, marked notified.
    pub(crate) fn pop_all(&mut self) -> Vec<Arc<Sleeper>> {
        let all: Vec<_> = self.0.drain(..).collect();
        for sleeper in &all {
            sleeper.notified.store(true, Ordering::Relaxed);
        }
        all
    }

    /// Takes `sleeper` off the stack (its timeout passed before anyone woke
    /// it). The oldest sleepers, near the front, are the ones that time out,
    /// so the search starts there.
    pub(crate) fn remove(&mut self, sleeper: &Arc<Sleeper>) {
        if let Some(at) = self.0.iter().position(|s| Arc::ptr_eq(s, sleeper)) {
            self.0.remove(at);
        } else {
            invariant!(false);
        }
    }
}

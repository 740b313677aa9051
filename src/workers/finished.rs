//! The count of finished tasks, and the flag that tells workers someone is
//! waiting for it to reach a number.
//!
//! `wait` needs to sleep until the count reaches its target and be woken
//! then, while a worker should pay nothing extra per task when nobody waits.
//! Count and flag share one word, so a waiter setting the flag and a worker
//! counting a task are two read-modify-writes of the same location: of the
//! two, the later sees the earlier. Either the worker sees the flag (and
//! wakes the waiter, under the lock the waiter holds until it sleeps), or the
//! waiter sees the worker's count. With the two in separate words, each side
//! would need a `SeqCst` fence between its write and its read.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// Set while some `wait` caller sleeps.
const WAITING: u64 = 1 << 63;

pub(crate) struct Finished(CachePadded<AtomicU64>);

impl Finished {
    pub(crate) fn new() -> Self {
        Self(CachePadded::new(AtomicU64::new(0)))
    }

    /// Tasks finished so far. Acquire: pairs with `add_one`, so whatever a
    /// counted task did is visible to whoever sees it counted.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Acquire) & !WAITING
    }

    /// Counts a finished task; returns the new count if someone is waiting.
    /// AcqRel: releases the task's effects to `count` and `mark_waiting`.
    #[inline]
    pub(crate) fn add_one(&self) -> Option<u64> {
        let before = self.0.fetch_add(1, Ordering::AcqRel);
        (before & WAITING != 0).then_some((before & !WAITING) + 1)
    }

    /// Raises the flag; returns the count as of that moment. Call with the
    /// pool's lock held.
    pub(crate) fn mark_waiting(&self) -> u64 {
        self.0.fetch_or(WAITING, Ordering::AcqRel) & !WAITING
    }

    /// Lowers the flag, when the last waiter leaves. Call with the pool's
    /// lock held.
    pub(crate) fn clear_waiting(&self) {
        self.0.fetch_and(!WAITING, Ordering::Relaxed);
    }
}

//! The queue tasks wait in: a bounded ring, with an unbounded overflow
//! behind it for the tasks that do not fit.
//!
//! The submitter feeds every worker alone, so what it pays per task bounds
//! the pool's rate on small tasks. An `Injector` push is a compare-and-swap
//! on the tail and a `fetch_or` on the slot's state (and a worker's pop the
//! same on the head); a push to Vyukov's bounded ring
//! (`crossbeam_queue::ArrayQueue`) is one compare-and-swap on the tail and a
//! plain release store of the slot's stamp. So tasks go to the ring, sized
//! for what admission lets queue (`max_queued` plus a task for each free
//! worker, up to `FREE_WORKER_SLOTS` of those, and a few for submitters:
//! `SUBMITTER_SLOTS`), and only those that find it
//! full go to the `Injector`, made on the first of them: tasks that workers
//! submit past the capacity, tasks admitted after `set_max_workers` raised
//! the bound, a burst for more free workers than the ring keeps slots for,
//! or a backlog deeper than the ring's cap on its size (`MAX_RING_SLOTS`,
//! above the default capacity).
//!
//! Order: while the overflow holds a task, every push goes there too, and
//! pops take from the ring first. So once tasks overflow, the ring drains
//! and then the overflow does, oldest first, and a task in the overflow
//! cannot be passed over for ever by a stream of newer tasks through the
//! ring. Across the two the order is approximate, even with one submitter
//! and one worker: a worker that found the ring empty just before a push to
//! it goes on to the overflow, and may take a newer task there first (the
//! loom model `tasks_overflow_the_ring_while_a_worker_claims` finds this).
//! Tasks that fit the ring, the usual case, are taken in the order
//! submitted.
//!
//! The queue keeps no count of its own that the protocol relies on:
//! admission counts queued tasks on the state word (`state.rs`), and a
//! claimer, owed a task by its claim, polls both parts until it finds one
//! (`Shared::take_claimed`).

use crossbeam_utils::CachePadded;

use super::job::Job;
use crate::lazy::Lazy;
use crate::sync::{AtomicUsize, Ordering, Queue, Ring};

/// The most slots a ring gets. The ring must hold all that admission lets
/// queue: a smaller one overflows whenever the submitter runs ahead of the
/// workers, and from then on every push and pop pays for both parts until
/// the overflow drains. But its slots (a task's words and a stamp each) are
/// allocated when the pool is made, so a pool configured with a huge
/// `max_queued` gets this many, and the overflow past them. Under loom,
/// one slot, so that the models send tasks through the overflow too.
const MAX_RING_SLOTS: usize = if cfg!(stashpool_loom) { 1 } else { 1 << 13 };

/// The most ring slots kept for tasks on their way to free workers, or
/// claimed by busy ones and not yet popped (a worker is one or the other,
/// never both). Such a task waits only until the worker it was admitted for
/// (one that is spinning, parked or just starting) takes it, a matter of
/// microseconds, so a full set, a task for every free worker at once, needs
/// a burst of submits as large as the pool while every worker is idle; a
/// pool of many workers would pay a slot for each of them, all of its
/// life, for that. Past this many, such a burst overflows, and costs the
/// overflow's allocations (a block per few dozen tasks) until it drains.
const FREE_WORKER_SLOTS: usize = 16;

/// Ring slots for the tasks that submitters hold past the capacity: `submit`
/// pushes a task before it counts it, and, if the count finds the pool
/// full, waits with it queued (`submit.rs`), so each submitter may hold two
/// in the ring past what `queued` lets wait. A full queue's submitter does
/// so at every task, so without these its pushes would overflow, over and
/// over; these cover a few submitters at once.
const SUBMITTER_SLOTS: usize = 8;

/// Admitted tasks that no worker has taken yet.
pub(crate) struct TaskQueue {
    ring: Ring<Job>,
    /// Tasks that found the ring full (or found tasks here already); made
    /// on the first such task, so a pool whose tasks always fit the ring
    /// holds no block of it.
    overflow: Lazy<Queue<Job>>,
    /// Tasks pushed to `overflow` and not yet popped from it: counted
    /// before the push and after the pop, so never below the tasks there.
    /// Read by every push; written only while tasks overflow, so its line
    /// otherwise stays in every reader's cache.
    overflowed: CachePadded<AtomicUsize>,
}

impl TaskQueue {
    /// A queue for a pool that lets `capacity` tasks wait for a busy worker
    /// and runs at most `max_workers`: its ring holds the capacity, a task
    /// for each free worker up to `FREE_WORKER_SLOTS`, and the submitters'
    /// (`SUBMITTER_SLOTS`), at most `MAX_RING_SLOTS` in all.
    pub(crate) fn new(capacity: usize, max_workers: usize) -> Self {
        let slots = capacity
            .saturating_add(max_workers.min(FREE_WORKER_SLOTS))
            .saturating_add(SUBMITTER_SLOTS);
        Self::with_slots(slots)
    }

    /// A queue whose ring holds `slots` tasks (at least one, at most
    /// `MAX_RING_SLOTS`).
    fn with_slots(slots: usize) -> Self {
        Self {
            ring: Ring::new(slots.clamp(1, MAX_RING_SLOTS)),
            overflow: Lazy::new(),
            overflowed: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Appends a task: to the ring, unless it is full or tasks wait in the
    /// overflow (which the newer task must not pass).
    #[inline]
    pub(crate) fn push(&self, job: Job) {
        // Relaxed: the count only steers tasks between the two parts; no
        // task depends on it to be found (see the module docs).
        let job = if self.overflowed.load(Ordering::Relaxed) == 0 {
            match self.ring.push(job) {
                Ok(()) => return,
                Err(job) => job,
            }
        } else {
            job
        };
        self.push_overflow(job);
    }

    #[cold]
    fn push_overflow(&self, job: Job) {
        self.overflowed.fetch_add(1, Ordering::Relaxed);
        self.overflow.get_or_make(Queue::new).push(job);
    }

    /// Takes a task, the ring's first, if either part holds one.
    #[inline]
    pub(crate) fn pop(&self) -> Option<Job> {
        if let Some(job) = self.ring.pop() {
            return Some(job);
        }
        self.pop_overflow()
    }

    fn pop_overflow(&self) -> Option<Job> {
        let job = self.overflow.get()?.pop()?;
        self.overflowed.fetch_sub(1, Ordering::Relaxed);
        Some(job)
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::workers::generations::Generations;
    use crate::workers::task::{Outcome, Task};

    /// A job that records `i` in `ran` when run.
    fn job(ran: &Arc<Mutex<Vec<usize>>>, generations: &Generations, i: usize) -> Job {
        let ran = Arc::clone(ran);
        Job {
            task: Task::new(move || {
                ran.lock().unwrap().push(i);
                Outcome::Returned
            }),
            generation: generations.enter(),
        }
    }

    fn run_all(queue: &TaskQueue) {
        while let Some(job) = queue.pop() {
            job.task.run();
        }
    }

    #[test]
    fn tasks_past_the_ring_overflow_and_keep_their_order() {
        let (ran, generations) = (Arc::new(Mutex::new(Vec::new())), Generations::new());
        let queue = TaskQueue::with_slots(2);
        for i in 0..5 {
            queue.push(job(&ran, &generations, i));
        }
        // Room in the ring again, but tasks wait in the overflow: a new
        // task must queue behind them, not pass them through the ring.
        queue.pop().unwrap().task.run();
        queue.push(job(&ran, &generations, 5));
        run_all(&queue);
        assert_eq!(*ran.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
        // Drained: the ring takes tasks again.
        assert_eq!(queue.overflowed.load(Ordering::Relaxed), 0);
        queue.push(job(&ran, &generations, 6));
        assert!(queue.ring.pop().is_some());
    }

    #[test]
    fn the_ring_holds_the_capacity_and_a_few_free_workers_tasks() {
        assert_eq!(
            TaskQueue::new(4096, 2).ring.capacity(),
            4098 + SUBMITTER_SLOTS
        );
        assert_eq!(
            TaskQueue::new(0, 256).ring.capacity(),
            FREE_WORKER_SLOTS + SUBMITTER_SLOTS
        );
        assert_eq!(
            TaskQueue::new(10, 256).ring.capacity(),
            10 + FREE_WORKER_SLOTS + SUBMITTER_SLOTS
        );
        assert_eq!(
            TaskQueue::new(usize::MAX, 1).ring.capacity(),
            MAX_RING_SLOTS
        );
    }

    #[test]
    fn the_overflow_is_made_by_the_first_task_that_needs_it() {
        let (ran, generations) = (Arc::new(Mutex::new(Vec::new())), Generations::new());
        let queue = TaskQueue::with_slots(1);
        queue.push(job(&ran, &generations, 0));
        assert!(queue.overflow.get().is_none(), "the task fit the ring");
        queue.push(job(&ran, &generations, 1));
        assert!(queue.overflow.get().is_some());
        run_all(&queue);
        assert_eq!(*ran.lock().unwrap(), [0, 1]);
    }

    #[test]
    fn a_zero_sized_ring_still_holds_a_task() {
        let (ran, generations) = (Arc::new(Mutex::new(Vec::new())), Generations::new());
        let queue = TaskQueue::with_slots(0);
        queue.push(job(&ran, &generations, 0));
        assert!(queue.ring.pop().is_some());
        assert!(queue.pop().is_none());
    }
}

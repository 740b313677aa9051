//! A pool's configuration, its defaults and its limits.

use std::time::Duration;

use super::state;

/// The most workers a pool can have:
/// [`WorkerPool::new`](super::WorkerPool::new) and
/// [`WorkerPool::builder`](super::WorkerPool::builder) panic above it. Far
/// more threads than a machine runs well; the limit comes from the width of
/// the pool's state word.
pub const MAX_WORKERS: usize = state::MAX_WORKERS;

/// The largest [`max_queued`](super::WorkerPoolBuilder::max_queued).
pub const MAX_QUEUE_CAPACITY: usize = 1 << 23;

/// How long an idle worker waits for a task before it exits, by default:
/// 10 seconds.
///
/// Long enough that a program submitting work every few seconds keeps its
/// threads; short enough that a burst's threads are gone soon after it ends.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many tasks may wait for busy workers, by default, before `submit`
/// waits too: the queue holds the larger of `DEFAULT_QUEUE_CAPACITY` and
/// [`DEFAULT_QUEUE_PER_WORKER`] per worker, unless
/// [`max_queued`](super::WorkerPoolBuilder::max_queued) says otherwise.
///
/// Why this many: a submitter that outruns the workers fills the queue and
/// then sleeps until it has drained to half, while it shares the cores with
/// the workers it waits for; a submitter that is off the cores (asleep, or
/// preempted on a busy machine) leaves the workers only what is queued.
/// A few hundred tasks of runway run out within the time a wake or a
/// preemption takes, and small tasks then pay for the waiting on both sides.
/// A few thousand cover it, and the `max_queued` group of
/// `benches/workers.rs` shows the gain flattening out past this size, while
/// `benches/workers_rss.rs` shows the cost: a full queue holds each task's
/// few words (and its box, for a closure too large to store inline), far
/// less than the unbounded queues of `rayon` and `threadpool` reach. The
/// queue's ring, a slot of six words per task it can hold, is allocated
/// when the pool is made (about 200 KiB at this size).
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;

/// The default queue's size per worker, for pools large enough that it
/// exceeds [`DEFAULT_QUEUE_CAPACITY`]: a few tasks for each worker, so a
/// large pool keeps every worker supplied while its submitters wake. The
/// queue follows [`set_max_workers`](super::WorkerPool::set_max_workers).
pub const DEFAULT_QUEUE_PER_WORKER: usize = 4;

/// A user's hook, shared by the workers. A std `Arc` even under loom, whose
/// `Arc` cannot hold a `dyn` value; hooks take no part in the protocol.
pub(crate) type Hook<F> = Option<std::sync::Arc<F>>;

/// A pool's settings, checked by the builder.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) max_workers: usize,
    /// `None`: the default, which follows `max_workers`.
    pub(crate) max_queued: Option<usize>,
    /// `None`: idle workers never exit.
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) thread_name: Hook<dyn Fn(usize) -> String + Send + Sync>,
    pub(crate) on_start: Hook<dyn Fn() + Send + Sync>,
    pub(crate) on_exit: Hook<dyn Fn() + Send + Sync>,
}

impl Config {
    /// How many tasks may wait for busy workers in a pool so configured
    /// when the bound is `max`.
    #[inline]
    pub(crate) fn capacity(&self, max: usize) -> usize {
        self.max_queued
            .unwrap_or_else(|| DEFAULT_QUEUE_CAPACITY.max(max * DEFAULT_QUEUE_PER_WORKER))
    }
}

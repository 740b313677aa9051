//! Counters a worker pool keeps about itself.

/// A snapshot of a [`WorkerPool`](super::WorkerPool)'s counters and of its
/// workers now.
///
/// The counts since the pool was made grow over time. While tasks are
/// being submitted or run, the fields are read one after another, not all
/// at one instant, and a busy worker counts the tasks it finished in
/// batches, so `completed` may trail by a few tasks per busy worker, and
/// `submitted` (the tasks finished plus the tasks not yet finished: the
/// submitting side keeps no count of its own, to stay cheap) may be off by
/// as many, either way; each field is exact once the pool is quiet (for
/// example after [`wait`](super::WorkerPool::wait)).
///
/// # Examples
///
/// ```standalone_crate
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::new(2);
/// pool.submit(|| {});
/// pool.submit(|| panic!("a task that fails"));
/// pool.wait();
/// let stats = pool.stats();
/// assert_eq!(stats.submitted, 2);
/// assert_eq!((stats.completed, stats.panicked), (1, 1));
/// assert!(stats.spawned >= 1 && stats.running <= 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Tasks accepted by `submit` and `try_submit`.
    pub submitted: u64,
    /// Tasks that ran to completion.
    pub completed: u64,
    /// Tasks that panicked. The panic was caught (and, for a `spawn`ed
    /// task, handed to its `JoinHandle`); the worker went on.
    pub panicked: u64,
    /// Tasks dropped without running: still queued when
    /// [`shutdown_timeout`](super::WorkerPool::shutdown_timeout) reached its
    /// deadline, or left with no thread to run them because the operating
    /// system refused one (their `submit` panicked).
    pub dropped: u64,
    /// Worker threads started since the pool was made. Far below
    /// `submitted` when threads are being reused.
    pub spawned: u64,
    /// Tasks waiting for a worker now.
    pub queued: usize,
    /// Workers alive now (as [`running`](super::WorkerPool::running)).
    pub running: usize,
    /// Workers alive and waiting for a task now.
    pub idle: usize,
}

impl WorkerStats {
    /// Tasks accepted and not finished yet (queued or running): neither
    /// completed, panicked nor dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(1);
    /// pool.submit(|| {});
    /// pool.wait();
    /// assert_eq!(pool.stats().unfinished(), 0);
    /// ```
    pub fn unfinished(&self) -> u64 {
        self.submitted
            .saturating_sub(self.completed)
            .saturating_sub(self.panicked)
            .saturating_sub(self.dropped)
    }
}

//! `JoinHandle`: the result of one `spawn`ed task, or the panic it raised,
//! waited for on the task's packet (`packet.rs`).

use std::fmt;
use std::thread::Result;

use super::packet::Packet;
use crate::sync::Arc;

/// A handle to a task started with [`WorkerPool::spawn`](super::WorkerPool::spawn):
/// [`join`](Self::join) waits for it and returns its result, or the panic
/// it raised, as `std::thread::JoinHandle` does for a thread.
///
/// Dropping the handle detaches the task: it still runs, and its result is
/// dropped.
///
/// # Examples
///
/// ```
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::new(2);
/// let sum = pool.spawn(|| (1..=10).sum::<u32>());
/// let fails = pool.spawn(|| -> u32 { panic!("no result") });
/// assert_eq!(sum.join().unwrap(), 55);
/// assert!(fails.join().is_err());
/// ```
pub struct JoinHandle<T> {
    packet: Arc<Packet<T>>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(packet: Arc<Packet<T>>) -> Self {
        Self { packet }
    }

    /// Waits for the task to finish and returns its result, or, if it
    /// panicked, the panic's payload (`Err`), as
    /// [`std::thread::JoinHandle::join`] does. A task dropped without
    /// running gives `Err` with a [`TaskDropped`](super::TaskDropped) payload.
    ///
    /// Called from a task of the same pool, `join` does not just block: while
    /// the task waited for has not finished, it runs tasks from the pool's
    /// queue on the calling worker, so tasks that join each other cannot
    /// starve the pool of workers. (A task that joins itself, directly or
    /// through others, waits forever, as a thread joining itself would.)
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(1);
    /// let handle = pool.spawn(|| "done");
    /// assert_eq!(handle.join().unwrap(), "done");
    /// ```
    pub fn join(self) -> Result<T> {
        self.packet.join()
    }

    /// Whether the task has finished (returned, panicked or been dropped),
    /// so that [`join`](Self::join) would not wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(1);
    /// let handle = pool.spawn(|| 1 + 1);
    /// pool.wait();
    /// assert!(handle.is_finished());
    /// assert_eq!(handle.join().unwrap(), 2);
    /// ```
    pub fn is_finished(&self) -> bool {
        self.packet.is_finished()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

//! `WorkerPool`, its builder and its limits.

use std::fmt;
use std::time::Duration;

use super::shared::{Config, Shared};
use super::state;
use super::WorkerStats;
use crate::sync::{thread, Arc, NEVER};

/// The most workers a pool can have: [`WorkerPool::new`] and
/// [`WorkerPool::builder`] panic above it. Far more threads than a machine
/// runs well; the limit comes from the width of the pool's state word.
pub const MAX_WORKERS: usize = state::MAX_WORKERS;

/// The largest [`queue_capacity`](Builder::queue_capacity).
pub const MAX_QUEUE_CAPACITY: usize = 1 << 23;

/// How long an idle worker waits for a task before it exits, by default.
///
/// Long enough that a program submitting work every few seconds keeps its
/// threads; short enough that a burst's threads are gone soon after it ends.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How many tasks may wait for a busy worker, by default, before `submit`
/// waits too: none, so `submit` waits for a free worker when `max_workers`
/// are busy. See [`Builder::queue_capacity`] for the throughput a queue buys.
pub const DEFAULT_QUEUE_CAPACITY: usize = 0;

/// A bounded pool of worker threads that recycles them: Go's goroutine pools
/// (`ants`, `itogami`) for Rust threads.
///
/// [`submit`](Self::submit) runs a task on a free worker if there is one,
/// else on a new worker while fewer than `max_workers` run, else queues it
/// for the next busy worker to finish (up to
/// [`queue_capacity`](Builder::queue_capacity) tasks), else waits until
/// there is room. So at most `max_workers` tasks run at once, and threads
/// are started only when every worker is busy: the pool grows with the load.
/// A worker that finds nothing to do spins for a few microseconds, then
/// parks, using no CPU; after [`idle_timeout`](Builder::idle_timeout) parked
/// it exits, so an idle pool shrinks to no threads at all.
///
/// A task that panics is caught and counted in [`stats`](Self::stats); its
/// worker goes on, so a panic never lowers the pool's capacity (with
/// `panic = "abort"` a panic ends the process, as anywhere). Dropping the
/// pool runs every queued task, then joins every worker.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::new(4);
/// let sum = Arc::new(AtomicU64::new(0));
/// for i in 1..=100 {
///     let sum = Arc::clone(&sum);
///     pool.submit(move || {
///         sum.fetch_add(i, Ordering::Relaxed);
///     });
/// }
/// pool.wait();
/// assert_eq!(sum.load(Ordering::Relaxed), 5050);
/// assert!(pool.stats().spawned <= 4); // threads were reused
/// ```
pub struct WorkerPool {
    shared: Arc<Shared>,
}

impl WorkerPool {
    /// A pool of at most `max_workers` threads, with the default idle timeout
    /// and queue capacity. No thread starts until the first task.
    ///
    /// # Panics
    ///
    /// If `max_workers` is 0 (the pool could never run a task) or above
    /// [`MAX_WORKERS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(8);
    /// assert_eq!(pool.running(), 0);
    /// ```
    pub fn new(max_workers: usize) -> Self {
        Self::builder(max_workers).build()
    }

    /// A builder to configure the pool before making it.
    ///
    /// # Panics
    ///
    /// If `max_workers` is 0 or above [`MAX_WORKERS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(16)
    ///     .idle_timeout(Duration::from_secs(1))
    ///     .queue_capacity(256)
    ///     .build();
    /// pool.submit(|| println!("hello from a worker"));
    /// ```
    pub fn builder(max_workers: usize) -> Builder {
        assert!(
            max_workers > 0,
            "stashpool: a WorkerPool needs max_workers >= 1 (got 0)"
        );
        assert!(
            max_workers <= MAX_WORKERS,
            "stashpool: a WorkerPool can have at most {MAX_WORKERS} workers (got {max_workers})"
        );
        Builder {
            config: Config {
                max_workers,
                queue_capacity: DEFAULT_QUEUE_CAPACITY,
                idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
                stack_size: None,
            },
        }
    }

    /// Runs `task` on a worker: a free one, else a new one while fewer than
    /// `max_workers` run, else the next busy one to finish, once the queue
    /// has room; until then, waits.
    ///
    /// A task submitted from one of this pool's own tasks never waits (if
    /// every worker waited for room, none would be left to make it): it is
    /// queued beyond the capacity instead.
    ///
    /// # Panics
    ///
    /// If the pool has no worker and the operating system refuses to start
    /// a thread (the task is dropped). With workers alive, a refused thread
    /// only means the task waits for one of them.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(2);
    /// let (tx, rx) = mpsc::channel();
    /// for i in 0..10 {
    ///     let tx = tx.clone();
    ///     pool.submit(move || tx.send(i * i).unwrap());
    /// }
    /// drop(tx);
    /// let mut squares: Vec<i32> = rx.iter().collect();
    /// squares.sort();
    /// assert_eq!(squares, [0, 1, 4, 9, 16, 25, 36, 49, 64, 81]);
    /// ```
    pub fn submit<F>(&self, task: F)
    where
        F: FnOnce() + Send + 'static,
    {
        if Shared::offer(&self.shared, task, true).is_err() {
            unreachable!("a blocking submit always admits its task");
        }
    }

    /// Like [`submit`](Self::submit), but never waits: if every worker is
    /// busy, no new one may start and the queue is full, gives the task back.
    ///
    /// # Panics
    ///
    /// As [`submit`](Self::submit).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(1).queue_capacity(0).build();
    /// let (release, blocked) = mpsc::channel::<()>();
    /// let (started, running) = mpsc::channel();
    /// pool.submit(move || {
    ///     started.send(()).unwrap();
    ///     blocked.recv().unwrap();
    /// });
    /// running.recv().unwrap(); // the only worker is busy now
    /// let task = || println!("later");
    /// assert!(pool.try_submit(task).is_err()); // full: the task comes back
    /// release.send(()).unwrap();
    /// pool.wait();
    /// assert!(pool.try_submit(task).is_ok()); // the worker is free again
    /// ```
    pub fn try_submit<F>(&self, task: F) -> Result<(), F>
    where
        F: FnOnce() + Send + 'static,
    {
        Shared::offer(&self.shared, task, false)
    }

    /// Blocks until every task submitted before this call has finished
    /// (returned or panicked). Tasks submitted meanwhile, by other threads,
    /// are not waited for.
    ///
    /// # Panics
    ///
    /// If called from one of this pool's own tasks: that task would wait for
    /// itself forever.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(3);
    /// let done = Arc::new(AtomicUsize::new(0));
    /// for _ in 0..20 {
    ///     let done = Arc::clone(&done);
    ///     pool.submit(move || {
    ///         done.fetch_add(1, Ordering::Relaxed);
    ///     });
    /// }
    /// pool.wait();
    /// assert_eq!(done.load(Ordering::Relaxed), 20);
    /// ```
    pub fn wait(&self) {
        self.shared.wait_all();
    }

    /// Workers alive now: running a task, looking for one, or parked. At
    /// most `max_workers`; 0 before the first task and after every worker
    /// has been idle for the idle timeout.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(4);
    /// assert_eq!(pool.running(), 0);
    /// pool.submit(|| {});
    /// pool.wait();
    /// assert!((1..=4).contains(&pool.running()));
    /// ```
    pub fn running(&self) -> usize {
        self.shared.running()
    }

    /// The most workers this pool runs at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// assert_eq!(WorkerPool::new(6).max_workers(), 6);
    /// ```
    pub fn max_workers(&self) -> usize {
        self.shared.config.max_workers
    }

    /// The pool's counters and a snapshot of its workers.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(2);
    /// for _ in 0..5 {
    ///     pool.submit(|| {});
    /// }
    /// pool.wait();
    /// let stats = pool.stats();
    /// assert_eq!((stats.submitted, stats.completed, stats.queued), (5, 5, 0));
    /// ```
    pub fn stats(&self) -> WorkerStats {
        self.shared.stats()
    }
}

impl Drop for WorkerPool {
    /// Runs every queued task, then joins every worker.
    fn drop(&mut self) {
        let me = thread::current().id();
        let mut on_own_worker = false;
        for handle in self.shared.close() {
            // The pool is dropped by one of its own tasks (the last `Arc`
            // of it went away there): that worker exits on its own after
            // the task returns, and joining it here would wait for itself.
            if handle.thread().id() == me {
                on_own_worker = true;
                continue;
            }
            // Workers catch every task's panic, so a worker thread never
            // ends in one; there is nothing to report.
            let _ = handle.join();
        }
        if !on_own_worker {
            self.shared.check_closed();
        }
    }
}

impl fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPool")
            .field("max_workers", &self.max_workers())
            .field("stats", &self.stats())
            .finish()
    }
}

/// Configures a [`WorkerPool`]; made by [`WorkerPool::builder`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::builder(4)
///     .idle_timeout(Duration::from_millis(500))
///     .queue_capacity(0) // submit waits for a free worker
///     .stack_size(256 * 1024)
///     .build();
/// assert_eq!(pool.max_workers(), 4);
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// How long a worker waits for a task before it exits (default
    /// [`DEFAULT_IDLE_TIMEOUT`]). `Duration::ZERO` lets workers exit as soon
    /// as they find nothing to do; `Duration::MAX` keeps them forever.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stashpool::workers::WorkerPool;
    ///
    /// // Threads exit a tenth of a second after the last task they ran.
    /// let pool = WorkerPool::builder(4)
    ///     .idle_timeout(Duration::from_millis(100))
    ///     .build();
    /// pool.submit(|| {});
    /// ```
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.config.idle_timeout = (timeout < NEVER).then_some(timeout);
        self
    }

    /// How many tasks may wait in the queue for a busy worker (default
    /// [`DEFAULT_QUEUE_CAPACITY`]). When every worker is busy and no new one
    /// may start, `submit` queues its task if there is room and waits
    /// otherwise; `try_submit` gives the task back. With 0 (the default),
    /// `submit` waits until a worker is free, as Go's `itogami` does; a queue
    /// lets a submitter run ahead of the workers without handing off every
    /// task, which pays off for many tiny tasks (the `tiny` group of
    /// `benches/workers.rs` measures both).
    ///
    /// # Panics
    ///
    /// If `capacity` is above [`MAX_QUEUE_CAPACITY`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(2).queue_capacity(1000).build();
    /// for _ in 0..1000 {
    ///     pool.submit(|| {});
    /// }
    /// pool.wait();
    /// ```
    pub fn queue_capacity(mut self, capacity: usize) -> Self {
        assert!(
            capacity <= MAX_QUEUE_CAPACITY,
            "stashpool: a WorkerPool queue holds at most {MAX_QUEUE_CAPACITY} tasks (got {capacity})"
        );
        self.config.queue_capacity = capacity;
        self
    }

    /// The stack size of each worker thread, in bytes (default: the
    /// standard library's, 2 MiB unless `RUST_MIN_STACK` says otherwise).
    /// Only the pages a thread touches use memory, so this bounds how deep
    /// tasks may recurse more than what a worker costs. A size the
    /// operating system refuses makes [`WorkerPool::submit`] panic when it
    /// needs a first worker.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(64).stack_size(128 * 1024).build();
    /// pool.submit(|| {});
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.config.stack_size = Some(bytes);
        self
    }

    /// Makes the pool. No thread starts until the first task.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(2).build();
    /// assert_eq!(pool.running(), 0);
    /// ```
    pub fn build(self) -> WorkerPool {
        WorkerPool {
            shared: Arc::new(Shared::new(self.config)),
        }
    }
}

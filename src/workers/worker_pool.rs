//! `WorkerPool` and its builder.

use std::fmt;
use std::mem::ManuallyDrop;
use std::time::{Duration, Instant};

use super::config::{Config, DEFAULT_IDLE_TIMEOUT, MAX_QUEUE_CAPACITY, MAX_WORKERS};
use super::handle::JoinHandle;
use super::packet::{Completion, Packet};
use super::scope::{self, Scope};
use super::shared::Shared;
use super::task::{Outcome, Task};
use super::worker_stats::WorkerStats;
use crate::sync::{Arc, NEVER, thread};

/// A bounded pool of worker threads that recycles them: Go's goroutine pools
/// (`ants`, `itogami`) for Rust threads.
///
/// [`submit`](Self::submit) runs a task on a free worker if there is one,
/// else on a new worker while fewer than `max_workers` run, else queues it
/// for the next busy worker to finish (up to
/// [`max_queued`](WorkerPoolBuilder::max_queued) tasks), else waits
/// until there is room. So at most `max_workers` tasks run at once, and threads
/// are started only when every worker is busy: the pool grows with the load.
/// A worker that finds nothing to do spins for a few microseconds, then
/// parks, using no CPU; after [`idle_timeout`](WorkerPoolBuilder::idle_timeout)
/// parked it exits, so an idle pool shrinks to no threads at all. A parked
/// worker that is woken yields its core once before it looks for work, so
/// that the thread that woke it, usually the one submitting, is not
/// preempted by it (on a busy core, its first task may wait for the rest
/// of that thread's time slice).
///
/// [`spawn`](Self::spawn) returns a [`JoinHandle`] for the task's result;
/// [`scope`](Self::scope) runs tasks that borrow from the caller.
///
/// A task that panics is caught and counted in [`stats`](Self::stats); its
/// worker goes on, so a panic never lowers the pool's capacity (with
/// `panic = "abort"` a panic ends the process, as anywhere).
///
/// # Dropping
///
/// Dropping the pool stops it taking work, runs every queued task, then
/// joins every worker, so it waits for tasks that are running. To bound
/// that wait, use [`shutdown_timeout`](Self::shutdown_timeout). A pool
/// whose last handle drops inside one of its own tasks (an `Arc` of it
/// moved into a task) cannot join the worker it runs on: that worker exits
/// when the task returns.
///
/// # Tasks that use their own pool
///
/// A task may `submit`, `spawn` and `scope` on its own pool: its
/// submissions never wait for room (they are queued beyond the capacity),
/// since a pool whose workers all waited would never make any. A task may
/// `join` a handle and end a `scope` of its own pool: while the tasks waited
/// for have not finished, the worker runs queued tasks itself. Only
/// [`wait`](Self::wait), which would wait for the calling task itself,
/// panics when called from a task.
///
/// # `fork()`
///
/// A forked child has none of its parent's workers: a child must not use a
/// pool made before the fork (its tasks could wait for ever), and should
/// make a new one if it needs one. It may drop one: the parent's workers,
/// queued tasks and locks are then left as the fork found them, and no
/// task the parent queued is dropped or run in the child.
///
/// # Examples
///
/// ```standalone_crate
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
    /// The process generation that made the pool (`pool::fork`): a forked
    /// child has none of its workers.
    generation: usize,
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
    ///     .max_queued(256)
    ///     .build();
    /// pool.submit(|| println!("hello from a worker"));
    /// ```
    pub fn builder(max_workers: usize) -> WorkerPoolBuilder {
        check_max_workers(max_workers);
        WorkerPoolBuilder {
            config: Config {
                max_workers,
                max_queued: None,
                idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
                stack_size: None,
                thread_name: None,
                on_start: None,
                on_exit: None,
            },
        }
    }

    /// Runs `task` on a worker: a free one, else a new one while fewer than
    /// `max_workers` run, else the next busy one to finish. When the queue
    /// is full, the task is queued all the same, and `submit` waits before
    /// it returns until the pool is back within its bound (so the queue
    /// holds at most one task per waiting submitter past its capacity).
    /// A submitter that sleeps for it is woken once the queue has drained
    /// to half its capacity, so that one that outruns the workers sleeps
    /// and wakes once per half a queue of tasks, not once per task; or, if
    /// the workers stop short of that (in tasks that wait for what this
    /// submitter's caller does next, say), within about a millisecond of
    /// the pool being back within its bound.
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
    /// If a submit from one of the pool's own tasks finds 553 648 127 tasks
    /// queued (beyond the capacity, only such submits queue tasks, and
    /// that many hold tens of GiB of queue): the task is dropped.
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
        Shared::submit(&self.shared, Task::new(returns(task)));
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
    /// let pool = WorkerPool::builder(1).max_queued(0).build();
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
        match self.shared.reserve(false) {
            Some(how) => {
                Shared::dispatch(&self.shared, how, Task::new(returns(task)));
                Ok(())
            }
            None => Err(task),
        }
    }

    /// Runs `f` on a worker, as [`submit`](Self::submit) does, and returns a
    /// handle to its result: [`JoinHandle::join`] gives the value `f`
    /// returned, or the payload of the panic it raised, as
    /// `std::thread::spawn` does for a thread. A panic is still counted in
    /// [`stats`](Self::stats).
    ///
    /// The handle costs one allocation; a closure of up to two words still
    /// travels without one, in the task itself.
    ///
    /// # Panics
    ///
    /// As [`submit`](Self::submit).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(4);
    /// let handles: Vec<_> = (0..8u64).map(|i| pool.spawn(move || i * i)).collect();
    /// let squares: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    /// assert_eq!(squares, [0, 1, 4, 9, 16, 25, 36, 49]);
    ///
    /// let failed = pool.spawn(|| -> u64 { panic!("out of range") });
    /// let payload = failed.join().unwrap_err();
    /// assert_eq!(payload.downcast_ref::<&str>(), Some(&"out of range"));
    /// ```
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        let packet = Packet::new(None);
        let done = Completion::new(&packet);
        Shared::submit(&self.shared, Task::new(move || done.run(f)));
        JoinHandle::new(packet)
    }

    /// Runs `f` with a [`Scope`] whose tasks may borrow from the caller's
    /// stack, and returns what `f` returns once every task spawned in the
    /// scope has finished, as `std::thread::scope` does with threads, but
    /// on the pool's workers.
    ///
    /// Tasks not joined by hand are joined before `scope` returns. If `f`
    /// panics, `scope` waits for the tasks, then resumes that panic; if a
    /// task panicked and its handle was not joined, `scope` panics after
    /// waiting for the others.
    ///
    /// Called inside one of this pool's own tasks, `scope` runs queued
    /// tasks on that worker while it waits, so it cannot starve the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(4);
    /// let data: Vec<u64> = (1..=1000).collect();
    /// let total: u64 = pool.scope(|s| {
    ///     let parts: Vec<_> = data.chunks(250).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect();
    ///     parts.into_iter().map(|p| p.join().unwrap()).sum()
    /// });
    /// assert_eq!(total, 500_500);
    /// ```
    pub fn scope<'env, T>(
        &self,
        f: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
    ) -> T {
        scope::scope(&self.shared, f)
    }

    /// Blocks until every task submitted before this call has finished
    /// (returned, panicked, or been dropped). Tasks submitted meanwhile, by
    /// other threads or by the tasks themselves, are not waited for, so a
    /// steady stream of them cannot keep `wait` waiting. Concurrent calls
    /// take turns.
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
        self.shared.max_workers()
    }

    /// Changes the most workers this pool runs at once, at run time (Go's
    /// `ants` calls it `Tune`). The new bound holds as soon as this
    /// returns:
    ///
    /// * Lowered to `n`: from then on, no worker starts a task while `n` or
    ///   more tasks are running. A worker that finishes a task while the
    ///   pool has more than `n` workers exits without taking another, even
    ///   with tasks queued, and idle workers above the bound are woken to
    ///   exit. Running tasks are not interrupted, so more than `n` can
    ///   still be running until enough of them finish (none starts
    ///   meanwhile), and a task that a worker had already taken from the
    ///   queue when the call was made still runs.
    /// * Raised: workers are started at once for the queued tasks that no
    ///   idle worker will take, up to the new bound, and submitters waiting
    ///   for room are woken.
    ///
    /// One exception, which adds no thread: a task that waits in
    /// [`JoinHandle::join`] or at the end of a [`scope`](Self::scope) of
    /// this pool runs queued tasks on its own worker meanwhile, whatever
    /// the bound, since it could otherwise wait for ever. With the default
    /// queue capacity, the queue follows the new bound.
    ///
    /// # Panics
    ///
    /// If `n` is 0 (the pool could never run a task) or above
    /// [`MAX_WORKERS`].
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(8);
    /// pool.set_max_workers(2);
    /// assert_eq!(pool.max_workers(), 2);
    /// for _ in 0..10 {
    ///     pool.submit(|| {});
    /// }
    /// pool.wait();
    /// assert!(pool.stats().spawned <= 2);
    /// ```
    pub fn set_max_workers(&self, n: usize) {
        // The builder's limits keep any bound plus the queue within the
        // state word's fields, so only the bound itself needs checking.
        check_max_workers(n);
        Shared::set_max_workers(&self.shared, n);
    }

    /// Shuts the pool down within `timeout`: it takes no more work, its
    /// workers run queued tasks until the queue is empty or `timeout` has
    /// passed, and the tasks still queued then are dropped unrun (a
    /// `spawn`ed one's handle reports [`TaskDropped`](super::TaskDropped)).
    /// Returns how many were dropped.
    ///
    /// Workers that finish by the deadline are joined; a task still running
    /// then is not interrupted (Rust cannot stop a thread): its worker exits
    /// when it returns, without this call waiting for it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(2);
    /// for _ in 0..4 {
    ///     pool.submit(|| {});
    /// }
    /// // Plenty of time for four tiny tasks: nothing is dropped.
    /// assert_eq!(pool.shutdown_timeout(Duration::from_secs(60)), 0);
    /// ```
    pub fn shutdown_timeout(self, timeout: Duration) -> usize {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used again nor dropped, so the `Arc` is
        // moved out exactly once.
        let shared = unsafe { std::ptr::read(&this.shared) };
        let deadline = Instant::now().checked_add(timeout.min(NEVER));
        let handles = shared.close();
        let me = thread::current().id();
        let on_own_worker = handles.iter().any(|h| h.thread().id() == me);
        shared.wait_for_exits(usize::from(on_own_worker), deadline);
        let dropped = shared.drop_queued();
        for handle in handles {
            if handle.thread().id() != me && thread::is_finished(&handle) {
                // Workers catch every task's panic: nothing to report.
                let _ = handle.join();
            }
        }
        dropped
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
        // In a forked child, the workers to join are not in this process,
        // and the queued tasks and the locks are the parent's, perhaps
        // mid-operation: the state is left as the fork found it, never
        // dropped (a reference leaked for good).
        if self.generation != crate::pool::fork::generation() {
            return std::mem::forget(Arc::clone(&self.shared));
        }
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
///     .max_queued(0) // submit waits for a free worker
///     .stack_size(256 * 1024)
///     .build();
/// assert_eq!(pool.max_workers(), 4);
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct WorkerPoolBuilder {
    config: Config,
}

impl fmt::Debug for WorkerPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("WorkerPoolBuilder")
            .field("max_workers", &c.max_workers)
            .field("max_queued", &c.max_queued)
            .field("idle_timeout", &c.idle_timeout)
            .field("stack_size", &c.stack_size)
            .field("thread_name", &c.thread_name.is_some())
            .field("on_thread_start", &c.on_start.is_some())
            .field("on_thread_exit", &c.on_exit.is_some())
            .finish()
    }
}

impl WorkerPoolBuilder {
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
    /// [`DEFAULT_QUEUE_CAPACITY`](super::DEFAULT_QUEUE_CAPACITY), or
    /// [`DEFAULT_QUEUE_PER_WORKER`](super::DEFAULT_QUEUE_PER_WORKER) per
    /// worker in pools large enough for that to be more). When every worker is busy
    /// and no new one may start, `submit` queues its task, and waits if
    /// that took the queue past this (see [`submit`](WorkerPool::submit));
    /// `try_submit` gives the task back. With 0, `submit` waits until a
    /// worker takes its task, as Go's `itogami` waits for a free worker,
    /// and every task is a hand-off; a queue lets a submitter run ahead of the
    /// workers (the `max_queued` group of `benches/workers.rs`
    /// measures what that buys). Room for the queue (six words a task, up
    /// to 8192 tasks; tasks past that go to a queue that grows as needed)
    /// is allocated when the pool is built.
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
    /// let pool = WorkerPool::builder(2).max_queued(1000).build();
    /// for _ in 0..1000 {
    ///     pool.submit(|| {});
    /// }
    /// pool.wait();
    /// ```
    pub fn max_queued(mut self, capacity: usize) -> Self {
        assert!(
            capacity <= MAX_QUEUE_CAPACITY,
            "stashpool: a WorkerPool queue holds at most {MAX_QUEUE_CAPACITY} tasks (got {capacity})"
        );
        self.config.max_queued = Some(capacity);
        self
    }

    /// The stack size of each worker thread, in bytes (default: the
    /// standard library's, 2 MiB unless `RUST_MIN_STACK` says otherwise).
    /// Only the pages a thread touches use memory, so this bounds how deep
    /// tasks may recurse more than what a worker costs. A size the
    /// operating system refuses makes [`WorkerPool::submit`] panic when it
    /// needs a first worker.
    ///
    /// # Panics
    ///
    /// If `bytes` is 0: no thread runs without a stack (the operating
    /// system rounds small sizes up to its minimum, so any other size is
    /// left to it).
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
        assert!(
            bytes > 0,
            "stashpool: a WorkerPool's stack_size must be at least 1 byte (got 0)"
        );
        self.config.stack_size = Some(bytes);
        self
    }

    /// Names worker threads: `name(i)` for the `i`th worker started
    /// (default: `stashpool-worker` for all). Names show in debuggers,
    /// panic messages and `top -H`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::builder(2)
    ///     .thread_name(|i| format!("decoder-{i}"))
    ///     .build();
    /// let name = pool.spawn(|| std::thread::current().name().map(String::from));
    /// assert_eq!(name.join().unwrap().as_deref(), Some("decoder-0"));
    /// ```
    pub fn thread_name(mut self, name: impl Fn(usize) -> String + Send + Sync + 'static) -> Self {
        self.config.thread_name = Some(std::sync::Arc::new(name));
        self
    }

    /// Runs `hook` on each worker thread when it starts, before its first
    /// task (to set up thread-locals, pin to a core, register with a
    /// profiler). A panic in it is caught and ignored.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&started);
    /// let pool = WorkerPool::builder(2)
    ///     .on_thread_start(move || {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build();
    /// pool.spawn(|| {}).join().unwrap();
    /// assert_eq!(started.load(Ordering::Relaxed), 1);
    /// ```
    pub fn on_thread_start(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.config.on_start = Some(std::sync::Arc::new(hook));
        self
    }

    /// Runs `hook` on each worker thread as it exits (idle timeout, a lower
    /// bound, the pool's drop or shutdown), after its last task. A panic in
    /// it is caught and ignored.
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use stashpool::workers::WorkerPool;
    ///
    /// let exited = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&exited);
    /// let pool = WorkerPool::builder(2)
    ///     .on_thread_exit(move || {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build();
    /// pool.submit(|| {});
    /// let spawned = pool.stats().spawned;
    /// drop(pool); // joins every worker
    /// assert_eq!(exited.load(Ordering::Relaxed) as u64, spawned);
    /// ```
    pub fn on_thread_exit(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.config.on_exit = Some(std::sync::Arc::new(hook));
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
        // Forks are counted from now on, so that a child can tell the pool
        // is its parent's.
        crate::pool::fork::guard();
        WorkerPool {
            shared: Arc::new(Shared::new(self.config)),
            generation: crate::pool::fork::generation(),
        }
    }
}

/// The documented panics of a bound on workers.
fn check_max_workers(n: usize) {
    assert!(
        n > 0,
        "stashpool: a WorkerPool needs max_workers >= 1 (got 0)"
    );
    assert!(
        n <= MAX_WORKERS,
        "stashpool: a WorkerPool can have at most {MAX_WORKERS} workers (got {n})"
    );
}

/// A `submit`ted closure as a task: it returns, or panics (caught by the
/// worker).
fn returns(f: impl FnOnce() + Send + 'static) -> impl FnOnce() -> Outcome + Send + 'static {
    move || {
        f();
        Outcome::Returned
    }
}

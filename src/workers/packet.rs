//! A task's result on its way to its handle: the packet a `JoinHandle` or a
//! `ScopedJoinHandle` waits on, the task's end of it (`Completion`), and
//! what the tasks of a scope share with it (`ScopeData`).
//!
//! A spawned task, in a scope or not, is an ordinary task whose closure
//! also holds a [`Completion`]: an `Arc` of the packet its handle waits on.
//! The closure is the user's one word bigger, so small closures still
//! travel inline in the queue (`task.rs`); the packet is the one allocation
//! a spawn adds. The closure catches the user's panic itself and stores the
//! payload for `join`, and tells the worker it panicked so `stats` counts
//! it. A task dropped unrun (a `shutdown_timeout` past its deadline, a
//! thread that could not be started) completes its packet from
//! `Completion`'s `Drop` with an error, [`TaskDropped`], so `join` never
//! waits for a task that will not run. A scoped task's packet also counts
//! the task off its scope once the result is stored (`scope.rs` says why
//! then).

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::thread::Result;

use super::task::Outcome;
use super::worker;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, lock, wait};

/// Where a task's result waits for its handle.
pub(crate) struct Packet<T> {
    slot: Mutex<Slot<T>>,
    /// Notified when the result is stored; waited on with `slot`.
    ready: Condvar,
    /// Set once the result is stored. Acquire/Release: a reader that sees it
    /// set finds the result in `slot` (read under the lock anyway).
    finished: AtomicBool,
}

struct Slot<T> {
    result: Option<Result<T>>,
    /// Whether `join` sleeps on `ready`: a notification is a system call
    /// even with nobody to wake, so the task makes one only then.
    joiner_waits: bool,
    /// The scope the task belongs to, counted off once the result is stored
    /// (`scope.rs`).
    scope: Option<Arc<ScopeData>>,
}

impl<T> Packet<T> {
    pub(crate) fn new(scope: Option<Arc<ScopeData>>) -> Arc<Self> {
        Arc::new(Self {
            slot: Mutex::new(Slot {
                result: None,
                joiner_waits: false,
                scope,
            }),
            ready: Condvar::new(),
            finished: AtomicBool::new(false),
        })
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Waits for the result and takes it. On one of a pool's workers, runs
    /// the pool's queued tasks while the result is not there: the task
    /// waited for may be one of them, and with every worker waiting, no one
    /// else would run it.
    pub(crate) fn join(&self) -> Result<T> {
        worker::help_while(|| !self.is_finished());
        let mut slot = lock(&self.slot);
        loop {
            if let Some(result) = slot.result.take() {
                return result;
            }
            // Set under the lock the task takes to store the result, so it
            // sees the flag, or we see the result.
            slot.joiner_waits = true;
            slot = wait(&self.ready, slot);
        }
    }
}

/// The task's end of a packet: stores the result, or, if dropped first, an
/// error saying the task never ran.
pub(crate) struct Completion<T>(Option<Arc<Packet<T>>>);

impl<T> Completion<T> {
    pub(crate) fn new(packet: &Arc<Packet<T>>) -> Self {
        Self(Some(Arc::clone(packet)))
    }

    /// Runs `f`, catching its panic, and stores what it gave.
    pub(crate) fn run(mut self, f: impl FnOnce() -> T) -> Outcome {
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        let outcome = match result {
            Ok(_) => Outcome::Returned,
            Err(_) => Outcome::Panicked,
        };
        self.complete(result);
        outcome
    }

    fn complete(&mut self, result: Result<T>) {
        let Some(packet) = self.0.take() else {
            return;
        };
        let scope = {
            let mut slot = lock(&packet.slot);
            if let (Err(_), Some(scope)) = (&result, &slot.scope) {
                // Counted before the result can be joined, which uncounts it.
                scope.unhandled_panics.fetch_add(1, Ordering::Relaxed);
            }
            slot.result = Some(result);
            packet.finished.store(true, Ordering::Release);
            if slot.joiner_waits {
                packet.ready.notify_one();
            }
            slot.scope.take()
        };
        // Our reference goes first: if the handle is gone, the result drops
        // here, while the scope still waits for it (it may borrow from the
        // scope's caller).
        drop(packet);
        if let Some(scope) = scope {
            scope.task_done();
        }
    }
}

impl<T> Drop for Completion<T> {
    fn drop(&mut self) {
        if self.0.is_some() {
            self.complete(Err(Box::new(TaskDropped)));
        }
    }
}

/// What a scope's tasks share with the scope.
pub(crate) struct ScopeData {
    /// Tasks spawned in the scope and not finished.
    pub(super) running: AtomicUsize,
    /// Tasks that panicked (or were dropped unrun) and whose handle has not
    /// taken the panic with `join`: `scope` panics if any is left at its end.
    pub(crate) unhandled_panics: AtomicUsize,
    lock: Mutex<()>,
    /// Notified when `running` reaches zero; waited on with `lock`.
    all_done: Condvar,
}

impl ScopeData {
    pub(super) fn new() -> Self {
        Self {
            running: AtomicUsize::new(0),
            unhandled_panics: AtomicUsize::new(0),
            lock: Mutex::new(()),
            all_done: Condvar::new(),
        }
    }

    /// Counts one task of the scope finished. Release: the task's effects,
    /// its result's included, happen before `scope` returns.
    pub(crate) fn task_done(&self) {
        if self.running.fetch_sub(1, Ordering::Release) == 1 {
            let _lock = lock(&self.lock);
            self.all_done.notify_all();
        }
    }

    fn finished(&self) -> bool {
        self.running.load(Ordering::Acquire) == 0
    }

    /// Waits until every task of the scope has finished, running the pool's
    /// queued tasks meanwhile if the caller is one of its workers.
    pub(super) fn wait_all(&self) {
        worker::help_while(|| !self.finished());
        let mut guard = lock(&self.lock);
        while !self.finished() {
            guard = wait(&self.all_done, guard);
        }
    }
}

/// The error `join` returns for a task that was dropped without running:
/// by [`shutdown_timeout`](super::WorkerPool::shutdown_timeout) at its
/// deadline, or because no thread could be started for it. Found by
/// downcasting the `join` error.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stashpool::workers::{TaskDropped, WorkerPool};
///
/// let pool = WorkerPool::new(1);
/// let (release, blocked) = std::sync::mpsc::channel::<()>();
/// let (started, running) = std::sync::mpsc::channel();
/// let busy = pool.spawn(move || {
///     started.send(()).unwrap();
///     blocked.recv().unwrap();
/// });
/// running.recv().unwrap(); // the only worker is busy
/// let queued = pool.spawn(|| 42);
/// // Too short a deadline for the queued task: it is dropped unrun.
/// let watcher = std::thread::spawn(move || {
///     let dropped = pool.shutdown_timeout(Duration::ZERO);
///     assert_eq!(dropped, 1);
/// });
/// let error = queued.join().unwrap_err();
/// assert!(error.downcast_ref::<TaskDropped>().is_some());
/// release.send(()).unwrap();
/// busy.join().unwrap();
/// watcher.join().unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskDropped;

impl fmt::Display for TaskDropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stashpool: the task was dropped before it ran")
    }
}

impl std::error::Error for TaskDropped {}

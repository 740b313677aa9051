//! Scoped tasks: tasks that borrow from the caller's stack, all finished
//! before `WorkerPool::scope` returns, as `std::thread::scope` does with
//! threads.
//!
//! A scoped task's closure may borrow anything that outlives the scope
//! (`'env`), so it is not `'static`, while the queue and the workers only
//! take `'static` tasks. The closure is boxed and its lifetime erased; what
//! makes that sound is that `scope` does not return, nor unwind, before
//! every task spawned in it has finished and dropped what it borrowed. Each
//! spawn counts one task in the scope's [`ScopeData`] before it is queued;
//! the task counts itself off as the very last thing it does with anything
//! borrowed (`Completion::complete` in `packet.rs`, after the result, which
//! may borrow too, has been stored or dropped), and `scope` waits for the
//! count to reach zero.

use std::fmt;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::thread::Result;

use super::packet::{Completion, Packet, ScopeData};
use super::shared::Shared;
use super::task::{Outcome, Task};
use crate::sync::{Arc, Ordering};

/// A scope to spawn tasks that borrow from the caller, made by
/// [`WorkerPool::scope`](super::WorkerPool::scope).
///
/// # Examples
///
/// ```
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::new(2);
/// let words = ["pool", "of", "threads"];
/// let mut lengths = Vec::new();
/// pool.scope(|s| {
///     let handles: Vec<_> = words.iter().map(|w| s.spawn(move || w.len())).collect();
///     lengths = handles.into_iter().map(|h| h.join().unwrap()).collect();
/// });
/// assert_eq!(lengths, [4, 2, 7]);
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    shared: Arc<Shared>,
    data: Arc<ScopeData>,
    /// Invariant in `'scope` and `'env`, as `std::thread::Scope` is, so
    /// neither can be shortened or lengthened to let a borrow escape.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Runs `f` on one of the pool's workers, as
    /// [`WorkerPool::spawn`](super::WorkerPool::spawn) does, but `f` may
    /// borrow anything that outlives the scope. Waits for room as
    /// [`submit`](super::WorkerPool::submit) does.
    ///
    /// The task is joined when the scope ends if it was not joined before;
    /// if it panicked and was not joined, `scope` then panics.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(4);
    /// let mut halves = [vec![1, 2, 3], vec![4, 5, 6]];
    /// pool.scope(|s| {
    ///     for half in halves.iter_mut() {
    ///         s.spawn(move || half.iter_mut().for_each(|x| *x *= 10));
    ///     }
    /// });
    /// assert_eq!(halves, [[10, 20, 30], [40, 50, 60]]);
    /// ```
    pub fn spawn<T: Send + 'scope>(
        &'scope self,
        f: impl FnOnce() -> T + Send + 'scope,
    ) -> ScopedJoinHandle<'scope, T> {
        // Counted before the task exists, so the scope cannot end first.
        self.data.running.fetch_add(1, Ordering::Relaxed);
        let packet = Packet::new(Some(Arc::clone(&self.data)));
        let job = ScopedJob {
            f,
            done: Completion::new(&packet),
        };
        let task: Box<dyn FnOnce() -> Outcome + Send + 'scope> = Box::new(move || job.run());
        // SAFETY: only the lifetime changes (same layout, same vtable). The
        // closure and what it borrows outlive every use the pool makes of
        // it: `WorkerPool::scope` returns, or unwinds, only once `running`
        // is zero, and this task counts itself off only after the closure
        // has run, or been dropped, along with everything it captured
        // (`ScopedJob`'s fields drop in order: `f` first, then `done`, whose
        // completion counts the task off).
        let task: Box<dyn FnOnce() -> Outcome + Send + 'static> =
            unsafe { std::mem::transmute(task) };
        Shared::submit(&self.shared, Task::new(task));
        ScopedJoinHandle {
            packet,
            scope: Arc::clone(&self.data),
            lifetime: PhantomData,
        }
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("running", &self.data.running.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A scoped task's closure and its completion, in the order they must drop
/// if the task is dropped unrun: the closure and its borrows first, then the
/// completion, which counts the task off.
struct ScopedJob<F, T> {
    f: F,
    done: Completion<T>,
}

impl<F: FnOnce() -> T, T> ScopedJob<F, T> {
    fn run(self) -> Outcome {
        let Self { f, done } = self;
        done.run(f)
    }
}

/// A handle to a task spawned in a [`Scope`]: [`join`](Self::join) waits
/// for it and returns its result, or the panic it raised.
///
/// # Examples
///
/// ```
/// use stashpool::workers::WorkerPool;
///
/// let pool = WorkerPool::new(2);
/// let text = String::from("borrowed");
/// let len = pool.scope(|s| s.spawn(|| text.len()).join().unwrap());
/// assert_eq!(len, 8);
/// ```
pub struct ScopedJoinHandle<'scope, T> {
    packet: Arc<Packet<T>>,
    scope: Arc<ScopeData>,
    lifetime: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the task to finish and returns its result, or its panic's
    /// payload, as [`JoinHandle::join`](super::JoinHandle::join) does
    /// (running queued tasks meanwhile if called on one of the pool's
    /// workers). A panic taken here no longer makes the scope panic.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(2);
    /// pool.scope(|s| {
    ///     let fails = s.spawn(|| panic!("handled"));
    ///     assert!(fails.join().is_err()); // so `scope` does not panic
    /// });
    /// ```
    pub fn join(self) -> Result<T> {
        let result = self.packet.join();
        if result.is_err() {
            // Handled: only panics nobody joined make the scope panic.
            self.scope.unhandled_panics.fetch_sub(1, Ordering::Relaxed);
        }
        result
    }

    /// Whether the task has finished, so that [`join`](Self::join) would
    /// not wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::workers::WorkerPool;
    ///
    /// let pool = WorkerPool::new(1);
    /// pool.scope(|s| {
    ///     let handle = s.spawn(|| 7);
    ///     let seven = handle.join().unwrap();
    ///     assert_eq!(seven, 7);
    /// });
    /// ```
    pub fn is_finished(&self) -> bool {
        self.packet.is_finished()
    }
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

/// Runs `f` with a new scope of `shared`'s: see `WorkerPool::scope`.
pub(crate) fn scope<'env, T>(
    shared: &Arc<Shared>,
    f: impl for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
) -> T {
    let scope = Scope {
        shared: Arc::clone(shared),
        data: Arc::new(ScopeData::new()),
        scope: PhantomData,
        env: PhantomData,
    };
    let result = panic::catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Whatever `f` did, no task may outlive what it borrows.
    scope.data.wait_all();
    let unhandled = scope.data.unhandled_panics.load(Ordering::Acquire);
    match result {
        Err(payload) => panic::resume_unwind(payload),
        Ok(_) if unhandled > 0 => panic!(
            "stashpool: {unhandled} task(s) spawned in a WorkerPool scope panicked \
             and were not joined"
        ),
        Ok(value) => value,
    }
}

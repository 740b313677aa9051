//! A worker thread: run a task, claim the next, spin a little when there is
//! none, then park on the idle stack until woken or until the idle timeout
//! lets it exit.
//!
//! The rules it shares with submitters, and why no task is ever left
//! behind, are in the module docs of `workers`.

use std::cell::Cell;
use std::mem;
use std::panic::{self, AssertUnwindSafe};

use super::idle::Sleeper;
use super::shared::Shared;
use super::task::Task;
use crate::sync::{backoff, lock, thread_local, wait, wait_timeout, Arc, Mutex, Ordering};

/// How long a worker that found the queue empty keeps looking before it
/// parks, in `backoff` steps: six rounds of spinning, then yields, some
/// microseconds in all. Long enough to catch the next of a stream of small
/// tasks without a sleep and a wake; short enough that an idle pool is idle.
const SPIN_STEPS: u32 = if cfg!(stashpool_loom) { 1 } else { 16 };

// The pool this thread works for (its shared state's address), or 0.
#[cfg(not(stashpool_loom))]
thread_local! {
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}
// loom's `thread_local!` takes no `const` initialiser.
#[cfg(stashpool_loom)]
thread_local! {
    static WORKER_OF: Cell<usize> = Cell::new(0);
}

/// Whether the current thread is one of `shared`'s workers.
pub(crate) fn is_worker_of(shared: &Shared) -> bool {
    WORKER_OF.with(|of| of.get() == shared as *const Shared as usize)
}

/// A worker's life: `first`, then whatever the queue holds, until it exits.
pub(crate) fn run(shared: Arc<Shared>, first: Arc<Mutex<Option<Task>>>, sleeper: Arc<Sleeper>) {
    WORKER_OF.with(|of| of.set(Arc::as_ptr(&shared) as usize));
    let task = lock(&first).take();
    drop(first);
    // The thread that started us put a task there, and takes it back only
    // if the thread could not be made.
    let mut task = task.expect("a new worker has a first task");
    loop {
        shared.execute(task);
        match shared.next_task(&sleeper) {
            Some(next) => task = next,
            None => return,
        }
    }
}

/// What parking ended in.
enum Parked {
    /// A task was claimed on the way.
    Claimed,
    /// The worker was woken (it is spinning again): look for a task.
    Woken,
    /// The worker has left the pool's counts and must exit.
    Exit,
}

impl Shared {
    /// Runs one task, catching a panic so that the worker survives it.
    #[inline]
    fn execute(&self, task: Task) {
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| task.run())) {
            self.panicked.fetch_add(1, Ordering::Relaxed);
            // A payload whose drop panics must not take the worker down.
            // That drop's own payload is dropped too; one whose drop panics
            // yet again is leaked rather than chased forever.
            let mut payload = Some(payload);
            for _ in 0..2 {
                let Some(next) = payload.take() else { break };
                payload = panic::catch_unwind(AssertUnwindSafe(|| drop(next))).err();
            }
            mem::forget(payload);
        }
    }

    /// Counts the task just run as finished and finds the next one to run,
    /// or `None` when the worker must exit.
    fn next_task(&self, sleeper: &Arc<Sleeper>) -> Option<Task> {
        // Claim a queued task, or become free. Either step makes room (one
        // queued task fewer, or one free worker more), so it also wakes
        // blocked submitters.
        let (before, _) = self.state.update(|s| {
            let next = if s.queued() > 0 {
                s.claim_busy()
            } else {
                s.spin()
            };
            Some(next.without_waiting())
        });
        if before.waiting() {
            self.notify_room();
        }
        // Only now, so that when `wait` returns, the workers that ran the
        // tasks it waited for already count as free.
        self.finish_one();
        if before.queued() > 0 {
            return Some(self.take_claimed());
        }
        loop {
            // Spinning: free, and counted so that submitters neither wake
            // nor start a worker for a task we will take. The loop only
            // reads the word until a task is queued.
            let mut step = 0;
            for _ in 0..SPIN_STEPS {
                let (_, claimed) = self
                    .state
                    .update(|s| (s.queued() > 0).then(|| s.claim_spinning()));
                if claimed {
                    return Some(self.take_claimed());
                }
                backoff(&mut step);
            }
            match self.park(sleeper) {
                Parked::Claimed => return Some(self.take_claimed()),
                Parked::Woken => continue,
                Parked::Exit => return None,
            }
        }
    }

    /// Pops the task this worker claimed. The claim guarantees one is there
    /// or about to be: every claim takes one unit of `queued`, and each unit
    /// is a task its submitter pushes right after counting it.
    fn take_claimed(&self) -> Task {
        let mut step = 0;
        loop {
            if let Some(task) = self.queue.pop() {
                return task;
            }
            backoff(&mut step);
        }
    }

    /// Parks a spinning worker on the idle stack until a submitter wakes it
    /// or its idle timeout passes, unless a task is queued (claim it) or the
    /// pool is closing (exit).
    #[cold]
    fn park(&self, sleeper: &Arc<Sleeper>) -> Parked {
        let mut inner = lock(&self.inner);
        let closing = inner.closing;
        // One step decides, against every submitter: a task queued before it
        // is claimed here; one queued after it sees us sleeping and wakes us.
        let (before, _) = self.state.update(|s| {
            Some(if s.queued() > 0 {
                s.claim_spinning()
            } else if closing {
                s.exit_spinning().without_waiting()
            } else {
                s.sleep()
            })
        });
        if before.queued() > 0 {
            return Parked::Claimed;
        }
        if closing {
            if before.waiting() {
                self.room.notify_all();
            }
            return Parked::Exit;
        }
        inner.idle.push(sleeper);
        loop {
            let timed_out;
            (inner, timed_out) = match self.config.idle_timeout {
                None => (wait(&sleeper.wakeup, inner), false),
                Some(timeout) => wait_timeout(&sleeper.wakeup, &self.inner, inner, timeout),
            };
            // Whoever took us off the stack already counted us awake.
            if sleeper.take_notified() {
                return Parked::Woken;
            }
            if !timed_out {
                // Spurious wakeup: park again (for a whole timeout, so an
                // idle worker lives at least `idle_timeout`).
                continue;
            }
            // Nobody took us off the stack, and nobody can while we hold the
            // lock: we leave it, and exit unless a task is queued. A
            // submitter that queued one counted on a free worker, maybe us.
            inner.idle.remove(sleeper);
            let (before, _) = self.state.update(|s| {
                Some(if s.queued() > 0 {
                    s.wake()
                } else {
                    s.exit_sleeping().without_waiting()
                })
            });
            if before.queued() > 0 {
                return Parked::Woken;
            }
            // One worker fewer: a blocked submitter may start a new one.
            if before.waiting() {
                self.room.notify_all();
            }
            return Parked::Exit;
        }
    }
}

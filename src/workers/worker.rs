//! A worker thread: run a task, claim the next, spin a little when there is
//! none, then park on the idle stack until woken or until the idle timeout
//! lets it exit.
//!
//! The rules it shares with submitters, and why no task is ever left
//! behind, are in the module docs of `workers`.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};

use super::generations::Generation;
use super::idle::Sleeper;
use super::job::Job;
use super::shared::Shared;
use super::spin::{self, Spin};
use super::state::State;
use super::task::Outcome;
use crate::sync::{Arc, Mutex, Ordering, lock, thread_local, wait, wait_timeout};

/// How long a worker that found the queue empty keeps looking before it
/// parks, in `Spin` rounds (the later rounds the longest): long enough to
/// catch the next of a stream of small tasks without a park and a wake,
/// short enough that a worker with nothing to do gives its core back to the
/// threads that have something, the submitter first.
const SPIN_ROUNDS: u32 = if cfg!(stashpool_loom) { 1 } else { 16 };

/// The most finished tasks a worker counts in one step (see `Finished`).
const FINISH_BATCH: usize = if cfg!(stashpool_loom) { 2 } else { 32 };

/// Tasks a worker has finished and not yet counted off their generation.
///
/// Counting a finish is a read-modify-write of the generations word, which
/// the submitter writes for every task: counted one by one, the word's
/// cache line would move from the submitter to a worker and back for every
/// task, and the submitter, which feeds every worker alone, would wait for
/// it each time. So a worker running a stream of tasks counts their finishes
/// in batches.
///
/// Holding finishes back never delays a `wait` that would not wait anyway:
/// a batch holds tasks of one generation, and is counted before the worker
/// runs a task of another generation, once it holds `FINISH_BATCH`, and
/// before the worker becomes free or exits. So a batch is held only while
/// its worker runs another task of the same generation, which every `wait`
/// that waits for the batch waits for too (and which keeps the generation
/// from draining, so no later `wait` can flip back to it meanwhile).
struct Finished {
    generation: Option<Generation>,
    count: usize,
}

impl Finished {
    fn new() -> Self {
        Self {
            generation: None,
            count: 0,
        }
    }

    /// Counts the finished tasks held back so far.
    fn flush(&mut self, shared: &Shared) {
        if let Some(generation) = self.generation.take() {
            shared.finish_many(generation, std::mem::take(&mut self.count));
        }
    }

    /// Holds back one finished task of `generation`, counting the ones
    /// held back before if they were of another generation.
    fn add(&mut self, shared: &Shared, generation: Generation) {
        if self.generation != Some(generation) {
            self.flush(shared);
            self.generation = Some(generation);
        }
        self.count += 1;
    }
}

// The pool this thread works for, while it does.
#[cfg(not(stashpool_loom))]
thread_local! {
    static WORKER_OF: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}
// loom's `thread_local!` takes no `const` initialiser.
#[cfg(stashpool_loom)]
thread_local! {
    static WORKER_OF: RefCell<Option<Arc<Shared>>> = RefCell::new(None);
}

/// Whether the current thread is one of `shared`'s workers.
pub(crate) fn is_worker_of(shared: &Shared) -> bool {
    WORKER_OF.with(|of| {
        of.borrow()
            .as_ref()
            .is_some_and(|mine| std::ptr::eq(&**mine, shared))
    })
}

/// While `pending()` holds, runs tasks queued in the pool the current
/// thread works for, if it is a worker; returns when `pending()` is false or
/// nothing is queued. A task that waits for other tasks of its own pool
/// (`JoinHandle::join`, the end of a `scope`) calls this first: if every
/// worker blocked on tasks still in the queue, none would be left to run
/// them.
pub(crate) fn help_while(pending: impl Fn() -> bool) {
    let Some(shared) = WORKER_OF.with(|of| of.borrow().clone()) else {
        return;
    };
    while pending() {
        match shared.claim_queued() {
            Some(job) => {
                let generation = shared.execute(job);
                shared.finish(generation);
            }
            None => return,
        }
    }
}

/// A worker's life: `first`, then whatever the queue holds, until it exits.
pub(crate) fn run(shared: Arc<Shared>, first: Arc<Mutex<Option<Job>>>, sleeper: Arc<Sleeper>) {
    WORKER_OF.with(|of| *of.borrow_mut() = Some(Arc::clone(&shared)));
    let job = lock(&first).take();
    drop(first);
    // The thread that started us put a task there, and takes it back only
    // if the thread could not be made.
    let mut job = job.expect("a new worker has a first task");
    if let Some(on_start) = &shared.config.on_start {
        run_hook(&**on_start);
    }
    let mut finished = Finished::new();
    loop {
        let generation = shared.execute(job);
        match shared.next_task(&sleeper, generation, &mut finished) {
            Some(next) => job = next,
            None => break,
        }
    }
    // This worker no longer counts in the pool: the hook runs after a
    // `shutdown_timeout` or a drop may have returned.
    if let Some(on_exit) = &shared.config.on_exit {
        run_hook(&**on_exit);
    }
    WORKER_OF.with(|of| of.borrow_mut().take());
}

/// Runs a start or exit hook. A panicking hook is the user's bug; the worker
/// goes on (and the pool's counts stay right).
fn run_hook(hook: &(dyn Fn() + Send + Sync)) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(hook)) {
        drop_payload(payload);
    }
}

/// Drops a panic payload without letting a payload whose own drop panics
/// take the worker down. That drop's own payload is dropped too; one whose
/// drop panics yet again is leaked rather than chased forever.
fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    let mut payload = Some(payload);
    for _ in 0..2 {
        let Some(next) = payload.take() else { break };
        payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(next))).err();
    }
    std::mem::forget(payload);
}

/// What parking ended in.
enum Parked {
    /// A task was claimed on the way, in a step that saw this state.
    Claimed(State),
    /// The worker was woken (it is spinning again): look for a task.
    Woken,
    /// The worker has left the pool's counts and must exit.
    Exit,
}

impl Shared {
    /// Runs one task, catching a panic so that the worker survives it.
    /// Returns the task's generation: the caller counts it finished (a
    /// worker does so only once it counts as free again, so that when
    /// `wait` returns, the workers that ran the tasks it waited for are
    /// free).
    #[inline]
    fn execute(&self, job: Job) -> Generation {
        let Job { task, generation } = job;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run())) {
            Ok(Outcome::Returned) => {}
            Ok(Outcome::Panicked) => {
                self.panicked.fetch_add(1, Ordering::Relaxed);
            }
            Err(payload) => {
                self.panicked.fetch_add(1, Ordering::Relaxed);
                drop_payload(payload);
            }
        }
        generation
    }

    /// Counts the task just run, of `generation`, finished (in `finished`,
    /// counted in a batch: see `Finished`), and finds the next task to run,
    /// or `None` when the worker must exit.
    fn next_task(
        &self,
        sleeper: &Arc<Sleeper>,
        generation: Generation,
        finished: &mut Finished,
    ) -> Option<Job> {
        // Exit if the pool has more workers than its bound allows now,
        // whatever is queued; else claim a queued task, or, with none
        // queued, become free. Each step makes room (one queued task fewer,
        // one free worker more or one worker fewer), so it also wakes a
        // blocked submitter: at once when the worker becomes free or
        // leaves, and for a claim only at the queue's low-water mark
        // (`Shared::claim_busy`).
        let max = self.max_workers();
        let mut after = None;
        let (before, _) = self.state().update(|s| {
            after = Some(if s.running() > max {
                s.exit_busy().without_waiting()
            } else if s.queued() > 0 {
                self.claim_busy(s)
            } else {
                s.spin().without_waiting()
            });
            after
        });
        self.grant_if_cleared(before, after);
        finished.add(self, generation);
        if before.running() <= max
            && before.queued() > 0
            && let Some(next) = self.take_claimed_within_bound(before)
        {
            if next.generation != generation || finished.count >= FINISH_BATCH {
                finished.flush(self);
            }
            return Some(next);
        }
        // None, or it gave the task back and left: count its finishes, then
        // exit.
        // Only now, so that when `wait` returns, the workers that ran the
        // tasks it waited for already count as free (or gone).
        finished.flush(self);
        if before.running() > max || before.queued() > 0 {
            self.exited();
            return None;
        }
        let claimed = loop {
            // Spinning: free, and counted so that submitters neither wake
            // nor start a worker for a task we will take. The loop only
            // reads the word until a task is queued or there are more
            // workers than the bound allows.
            let mut spin = Spin::new();
            while spin.rounds() < SPIN_ROUNDS {
                let max = self.max_workers();
                let (before, stepped) = self.state().update(|s| {
                    if s.running() > max {
                        Some(s.exit_spinning().without_waiting())
                    } else {
                        (s.queued() > 0).then(|| s.claim_spinning())
                    }
                });
                if !stepped {
                    spin.spin();
                } else if before.running() <= max {
                    return self.claimed_or_leave(before);
                } else {
                    if before.waiting() {
                        self.grant_room();
                    }
                    self.exited();
                    return None;
                }
            }
            match self.park(sleeper) {
                Parked::Claimed(before) => break before,
                Parked::Woken => continue,
                Parked::Exit => return None,
            }
        };
        self.claimed_or_leave(claimed)
    }

    /// Takes the task this worker claimed in a step that saw `before`,
    /// unless the bound, read again now, no longer lets it run one and the
    /// pool is still above it: then it gives the claim back, leaves the
    /// pool's counts (`max_workers` says why a second read) and returns
    /// `None`.
    #[inline]
    fn take_claimed_within_bound(&self, before: State) -> Option<Job> {
        self.refill_if_full(before);
        let max = self.max_workers();
        if before.running() > max && self.give_back(max) {
            return None;
        }
        Some(self.take_claimed())
    }

    /// `take_claimed_within_bound` for a worker with no finished tasks to
    /// count: one that gives its claim back exits at once.
    fn claimed_or_leave(&self, before: State) -> Option<Job> {
        let job = self.take_claimed_within_bound(before);
        if job.is_none() {
            self.exited();
        }
        job
    }

    /// Parks a spinning worker on the idle stack until a submitter wakes it
    /// or its idle timeout passes, unless a task is queued (claim it) or the
    /// pool is closing or above its bound (exit).
    #[cold]
    fn park(&self, sleeper: &Arc<Sleeper>) -> Parked {
        let mut inner = lock(&self.inner);
        let closing = inner.closing;
        let max = self.max_workers();
        // One step decides, against every submitter: a task queued before it
        // is claimed here; one queued after it sees us sleeping and wakes us.
        // Above the bound, the worker exits instead (`next_task`).
        let over = |s: State| s.running() > max;
        let (before, _) = self.state().update(|s| {
            Some(if over(s) || (closing && s.queued() == 0) {
                s.exit_spinning().without_waiting()
            } else if s.queued() > 0 {
                s.claim_spinning()
            } else {
                s.sleep()
            })
        });
        if !over(before) && before.queued() > 0 {
            return Parked::Claimed(before);
        }
        if over(before) || closing {
            drop(inner);
            // One worker fewer: a blocked submitter may start a new one.
            if before.waiting() {
                self.grant_room();
            }
            self.exited();
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
                drop(inner);
                // Let the waker keep its core. It is most often the
                // submitter, which feeds every worker alone, and the
                // scheduler tends to wake us on its core, preempting it: we
                // would find its task taken by a busy worker (tasks arrive
                // no faster than it runs), spin while it waits for us, park,
                // and be woken again by its next task, round after round,
                // at a fraction of its speed. Yielding hands the core back
                // until the waker's turn is over; on an idle core it
                // returns at once. We count as spinning meanwhile, so
                // nobody wakes another worker for the tasks we will take.
                spin::yield_core();
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
            let (before, _) = self.state().update(|s| {
                Some(if s.queued() > 0 {
                    s.wake()
                } else {
                    s.exit_sleeping().without_waiting()
                })
            });
            if before.queued() > 0 {
                return Parked::Woken;
            }
            drop(inner);
            if before.waiting() {
                self.grant_room();
            }
            self.exited();
            return Parked::Exit;
        }
    }

    /// Tells a `shutdown_timeout` waiting for workers to exit that one did.
    #[cold]
    fn exited(&self) {
        let inner = lock(&self.inner);
        if inner.closing {
            self.done.notify_all();
        }
    }
}

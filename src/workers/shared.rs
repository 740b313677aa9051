//! What a pool's handle and its workers share, and the submitting side of the
//! protocol: admission, waking a parked worker, starting a new one, waiting
//! for room and waiting for tasks to finish.
//!
//! The worker side is in `worker.rs`; the rules both follow, and why they
//! never lose a task, are in the module docs of `workers`.

use std::io;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::finished::Finished;
use super::idle::{IdleStack, Sleeper};
use super::state::{invariant, AtomicState, State, MAX_QUEUED};
use super::task::Task;
use super::worker;
use super::WorkerStats;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{backoff, lock, wait, Arc, AtomicU64, Condvar, Mutex, Ordering, Queue};

/// How often a blocked submitter retries before it parks (see `backoff`):
/// a few spins and a few yields, a few microseconds in all, which is about
/// how long a busy worker takes to free a slot when tasks are small.
const SUBMIT_SPINS: u32 = if cfg!(stashpool_loom) { 1 } else { 10 };
/// Attempts to start the last worker when tasks wait for it.
const START_RETRIES: u32 = 10;

/// A pool's settings, checked by the builder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) max_workers: usize,
    pub(crate) queue_capacity: usize,
    /// `None`: idle workers never exit.
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) stack_size: Option<usize>,
}

/// Where admission sent a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admission {
    /// Queued for a spinning worker, or for a busy one when it finishes.
    Queued,
    /// Queued, and a parked worker must be woken for it.
    Wake,
    /// To a new worker, as its first task.
    Start,
}

/// What an admission may do besides the usual.
#[derive(Clone, Copy)]
struct Mode {
    /// Start a new worker if none is free (off after starting one failed).
    may_start: bool,
    /// Respect the queue's capacity (off for tasks that must not wait: ones
    /// submitted by the pool's own workers, ones a failed start sends back).
    bounded: bool,
}

/// Everything the workers and the handle share.
pub(crate) struct Shared {
    /// The counts every decision is made on (see `state.rs`).
    pub(super) state: CachePadded<AtomicState>,
    /// Admitted tasks that no worker has taken yet, oldest first.
    pub(super) queue: Queue<Task>,
    /// Tasks finished (returned or panicked). Written by every worker.
    finished: Finished,
    /// Tasks admitted; counted before a task can run. Written by submitters.
    submitted: CachePadded<AtomicU64>,
    pub(super) panicked: AtomicU64,
    spawned: AtomicU64,
    pub(super) inner: Mutex<Inner>,
    /// Submitters blocked for room wait here (on `inner`).
    pub(super) room: Condvar,
    /// `wait` callers wait here (on `inner`).
    pub(super) done: Condvar,
    pub(super) config: Config,
}

/// The state that changes only under the lock.
pub(crate) struct Inner {
    pub(super) idle: IdleStack,
    /// Every worker's thread not yet known to have finished.
    handles: Vec<JoinHandle<()>>,
    /// `wait` callers blocked until no task is in flight.
    waiters: usize,
    /// Set when the pool drops: workers exit once the queue is empty.
    pub(super) closing: bool,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            state: CachePadded::new(AtomicState::new()),
            queue: Queue::new(),
            finished: Finished::new(),
            submitted: CachePadded::new(AtomicU64::new(0)),
            panicked: AtomicU64::new(0),
            spawned: AtomicU64::new(0),
            inner: Mutex::new(Inner {
                idle: IdleStack::default(),
                handles: Vec::new(),
                waiters: 0,
                closing: false,
            }),
            room: Condvar::new(),
            done: Condvar::new(),
            config,
        }
    }

    // === admission ===

    /// Where a task submitted in state `s` goes, and the state after, or
    /// `None` when the pool is full. The rules, in order of preference:
    ///
    /// 1. a free worker not yet spoken for (`queued < free`) takes it: queue
    ///    it, and wake a parked worker unless a spinning one will take it
    ///    (`queued < spinning`);
    /// 2. else, while fewer than `max_workers` run, a new worker starts
    ///    with it;
    /// 3. else it waits in the queue for a busy worker, if the queue has
    ///    room beyond the tasks free workers will take;
    /// 4. else the pool is full.
    fn plan(&self, s: State, mode: Mode) -> Option<(State, Admission)> {
        if s.queued() < s.free() {
            let how = if s.queued() < s.spinning() {
                Admission::Queued
            } else {
                Admission::Wake
            };
            return Some((s.queue(), how));
        }
        // With no worker at all, nobody would ever take a queued task.
        if (mode.may_start || s.running() == 0) && s.running() < self.config.max_workers {
            return Some((s.start(), Admission::Start));
        }
        if !mode.bounded || s.queued() < s.free() + self.config.queue_capacity {
            // Only unbounded admissions can get here with a full field:
            // the builder keeps `max_workers + queue_capacity` below it.
            assert!(
                s.queued() < MAX_QUEUED,
                "stashpool: more than {MAX_QUEUED} tasks queued in a WorkerPool"
            );
            return Some((s.queue(), Admission::Queued));
        }
        None
    }

    fn admit(&self, mode: Mode) -> Option<Admission> {
        let mut how = None;
        let (_, admitted) = self.state.update(|s| {
            // Every retry plans afresh; only the plan whose swap succeeded
            // counts.
            let (next, planned) = self.plan(s, mode)?;
            how = Some(planned);
            Some(next)
        });
        how.filter(|_| admitted)
    }

    /// Hands `task` to the pool: see `WorkerPool::submit`. With `block`
    /// false, gives the task back instead of waiting when the pool is full.
    pub(crate) fn offer<F>(this: &Arc<Self>, task: F, block: bool) -> Result<(), F>
    where
        F: FnOnce() + Send + 'static,
    {
        // A task submitted by one of this pool's own tasks must not wait:
        // if every worker did, none would be left to make room.
        let mode = Mode {
            may_start: true,
            bounded: !(block && worker::is_worker_of(this)),
        };
        let (mut step, mut tries) = (0, 0);
        let how = loop {
            if let Some(how) = this.admit(mode) {
                break how;
            }
            if !block {
                return Err(task);
            }
            if tries < SUBMIT_SPINS {
                tries += 1;
                backoff(&mut step);
            } else {
                this.wait_for_room(mode);
            }
        };
        // Counted before the task can run: a task is never finished before
        // it is counted submitted, so a `wait` never waits for too few.
        this.submitted.fetch_add(1, Ordering::Release);
        Self::dispatch(this, how, Task::new(task));
        Ok(())
    }

    fn dispatch(this: &Arc<Self>, how: Admission, task: Task) {
        match how {
            Admission::Queued => this.queue.push(task),
            Admission::Wake => {
                this.queue.push(task);
                this.wake_one();
            }
            Admission::Start => {
                if let Err((task, error)) = Self::start(this, task) {
                    Self::start_failed(this, task, error);
                }
            }
        }
    }

    /// Wakes the most recently parked worker.
    ///
    /// The stack can be empty: admission counted a parked worker that, by
    /// now, another submitter has woken or that found work on its own when
    /// its timer fired. The task is then still covered: a parked worker
    /// cannot exit while a task is queued, and a woken one runs tasks until
    /// the queue is empty (module docs).
    fn wake_one(&self) {
        let mut inner = lock(&self.inner);
        let Some(sleeper) = inner.idle.pop() else {
            return;
        };
        self.state.update(|s| Some(s.wake()));
        drop(inner);
        // Outside the lock, so the sleeper does not wake into a held lock.
        // Its `notified` mark, set under the lock, is what it acts on; a
        // notification that arrives after it stopped waiting is lost
        // harmlessly.
        sleeper.wakeup.notify_one();
    }

    /// Starts a worker whose first task is `task`; gives the task back if the
    /// thread cannot be made.
    fn start(this: &Arc<Self>, task: Task) -> Result<(), (Task, io::Error)> {
        // Made here, not on the new thread: a worker that never allocates
        // never gets a malloc arena of its own.
        let seed = Arc::new(Mutex::new(Some(task)));
        let sleeper = Arc::new(Sleeper::new());
        let shared = Arc::clone(this);
        let first = Arc::clone(&seed);
        let mut builder = thread::Builder::new().name("stashpool-worker".into());
        if let Some(size) = this.config.stack_size {
            builder = builder.stack_size(size);
        }
        match builder.spawn(move || worker::run(shared, first, sleeper)) {
            Ok(handle) => {
                this.spawned.fetch_add(1, Ordering::Relaxed);
                let mut inner = lock(&this.inner);
                // Release the handles of workers that have exited (on their
                // idle timeout), so they do not pile up in a long-lived pool.
                inner.handles.retain(|h| !thread::is_finished(h));
                inner.handles.push(handle);
                Ok(())
            }
            Err(error) => {
                let task = lock(&seed).take();
                Err((
                    task.expect("a thread that never started took its task"),
                    error,
                ))
            }
        }
    }

    /// The OS refused a thread: take back the worker slot and queue the task
    /// for the workers there are. If this was the last slot and tasks are
    /// queued (other submitters counted on this worker), keep the slot and
    /// try again a few times; if no thread can be had, drop the queued tasks
    /// and this one (counted as panicked) and give up loudly, so nothing is
    /// left queued with no worker to run it and `wait` cannot hang.
    #[cold]
    fn start_failed(this: &Arc<Self>, mut task: Task, mut error: io::Error) {
        let mode = Mode {
            may_start: false,
            bounded: false,
        };
        let (mut retries, mut step) = (0, 0);
        loop {
            // Give the slot back, unless it is the last one and a task is
            // queued: in one step, so a task queued meanwhile is seen.
            let (before, released) = this
                .state
                .update(|s| (s.running() > 1 || s.queued() == 0).then(|| s.unstart()));
            if !released {
                if retries < START_RETRIES {
                    retries += 1;
                    backoff(&mut step);
                    match Self::start(this, task) {
                        Ok(()) => return,
                        Err((back, again)) => (task, error) = (back, again),
                    }
                } else {
                    this.drop_queued();
                }
                continue;
            }
            if before.running() == 1 {
                // No worker left and nothing queued: this task will never
                // run. Count it finished, so `wait` does not wait for it.
                this.abandon(task);
                panic!("stashpool: could not start a worker thread: {error}");
            }
            let how = this
                .admit(mode)
                .expect("an unbounded admission always succeeds");
            if how != Admission::Start {
                return Self::dispatch(this, how, task);
            }
            // Every worker exited meanwhile: try once more for a new one.
            match Self::start(this, task) {
                Ok(()) => return,
                Err((back, again)) => (task, error) = (back, again),
            }
        }
    }

    /// Claims and drops every queued task (no thread can be started to run
    /// them), counting each as panicked and finished.
    #[cold]
    fn drop_queued(&self) {
        while self
            .state
            .update(|s| (s.queued() > 0).then(|| s.claim_busy()))
            .1
        {
            // The claim guarantees a task to pop, at worst once its
            // submitter's push lands.
            let mut step = 0;
            let task = loop {
                match self.queue.pop() {
                    Some(task) => break task,
                    None => backoff(&mut step),
                }
            };
            self.abandon(task);
        }
    }

    /// Drops a task that will never run, counting it as panicked and
    /// finished.
    fn abandon(&self, task: Task) {
        self.panicked.fetch_add(1, Ordering::Relaxed);
        self.finish_one();
        drop(task);
    }

    /// Blocks until an admission in `mode` could succeed (or might: the
    /// caller retries).
    #[cold]
    fn wait_for_room(&self, mode: Mode) {
        let inner = lock(&self.inner);
        // Mark ourselves waiting only if the pool is still full, in one step
        // on the state word: a worker that makes room afterwards sees the
        // mark and wakes us; one that made room before, we see here.
        let (_, marked) = self.state.update(|s| match self.plan(s, mode) {
            Some(_) => None,
            None => Some(s.with_waiting()),
        });
        if marked {
            // The lock is held from the mark until the wait releases it, so
            // the waking worker, which takes the lock to notify, cannot
            // notify in between.
            drop(wait(&self.room, inner));
        }
    }

    /// Wakes every blocked submitter. Called by a worker whose step on the
    /// state word made room and cleared the waiting mark.
    #[cold]
    pub(super) fn notify_room(&self) {
        let _inner = lock(&self.inner);
        self.room.notify_all();
    }

    // === waiting for tasks ===

    /// Counts one finished task and wakes the `wait` callers if it was the
    /// last one in flight.
    #[inline]
    pub(super) fn finish_one(&self) {
        if let Some(finished) = self.finished.add_one() {
            self.notify_done(finished);
        }
    }

    #[cold]
    fn notify_done(&self, finished: u64) {
        let _inner = lock(&self.inner);
        // Submitted after finished: a task counted submitted since is still
        // in flight, and its own finish will wake the waiters.
        if finished == self.submitted.load(Ordering::Acquire) {
            self.done.notify_all();
        }
    }

    /// Whether every task admitted so far has finished. `finished` is read
    /// before `submitted` and never exceeds it (a task is counted submitted
    /// before it can run), so if the two are equal, every task admitted
    /// before the first read had finished by then; tasks may finish out of
    /// order, so comparing `finished` with a count taken earlier would not
    /// say that.
    fn all_finished(&self) -> bool {
        let finished = self.finished.count();
        finished == self.submitted.load(Ordering::Acquire)
    }

    /// Blocks until every task admitted before the call has finished. (It
    /// returns when no task is in flight at all, so tasks submitted
    /// meanwhile, by the pool's tasks or other threads, are waited for too.)
    pub(crate) fn wait_all(&self) {
        assert!(
            !worker::is_worker_of(self),
            "stashpool: WorkerPool::wait called from one of the pool's own tasks \
             (it would wait for itself)"
        );
        if self.all_finished() {
            return;
        }
        let mut inner = lock(&self.inner);
        inner.waiters += 1;
        // From here until the wait releases the lock, a worker that counts a
        // task sees the flag and queues on the lock to wake us; one that
        // counted before, the check below sees.
        self.finished.mark_waiting();
        while !self.all_finished() {
            inner = wait(&self.done, inner);
        }
        inner.waiters -= 1;
        if inner.waiters == 0 {
            self.finished.clear_waiting();
        }
    }

    // === the rest ===

    pub(crate) fn stats(&self) -> WorkerStats {
        // `finished` first: what it counts was submitted before and, if it
        // panicked, counted in `panicked` before.
        let finished = self.finished.count();
        let panicked = self.panicked.load(Ordering::Relaxed);
        let submitted = self.submitted.load(Ordering::Relaxed);
        let state = self.state.load();
        WorkerStats {
            submitted,
            completed: finished.saturating_sub(panicked),
            panicked,
            spawned: self.spawned.load(Ordering::Relaxed),
            queued: state.queued(),
            running: state.running(),
            idle: state.free(),
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.state.load().running()
    }

    /// Starts closing the pool: parked workers are woken and every worker
    /// exits once the queue is empty. Returns the handles to join.
    pub(crate) fn close(&self) -> Vec<JoinHandle<()>> {
        let mut inner = lock(&self.inner);
        inner.closing = true;
        let sleepers = inner.idle.pop_all();
        if !sleepers.is_empty() {
            self.state.update(|s| Some(s.wake_all(sleepers.len())));
        }
        let handles = std::mem::take(&mut inner.handles);
        drop(inner);
        for sleeper in sleepers {
            sleeper.wakeup.notify_one();
        }
        handles
    }

    /// Checks, once every worker has been joined, that nothing was left.
    pub(crate) fn check_closed(&self) {
        let state = self.state.load();
        invariant!(state.running() == 0 && state.queued() == 0 && state.free() == 0);
        invariant!(self.queue.pop().is_none());
    }
}

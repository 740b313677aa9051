//! The submitting side of the protocol: admission, waking a parked worker,
//! starting a new one, waiting for room and waiting for tasks to finish;
//! changing the bound, and closing.
//!
//! What it shares with the workers, and the steps both sides take, are in
//! `shared.rs`; the worker side is in `worker.rs`; the rules both follow,
//! and why they never lose a task, are in the module docs of `workers`.

use std::io;
use std::time::Instant;

use super::idle::Sleeper;
use super::job::Job;
use super::shared::{MAX_UNCOUNTED, Shared};
use super::spin::Spin;
use super::state::{QUEUED_LIMIT, State, invariant};
use super::task::Task;
use super::worker;
use crate::sync::thread::{self, JoinHandle};
use crate::sync::{Arc, Mutex, NEVER, Ordering, lock, wait, wait_timeout};

/// How long a submitter that finds the pool full spins, re-trying, before it
/// parks (in `Spin` rounds). A busy worker frees a slot within one task, so
/// with small tasks room comes back sooner than a park and a wake take.
const SUBMIT_SPINS: u32 = if cfg!(stashpool_loom) { 1 } else { 12 };
/// The longest a blocked submitter sleeps once the pool is within its
/// bound but short of the queue's low-water mark. A claim wakes a blocked
/// submitter only once the queue has drained to that mark
/// (`Shared::claim_busy`), or a worker becomes free or leaves; but the
/// workers may stop claiming short of it, each in a task that waits for
/// something the submitter does after its submit returns (a task that
/// waits on a channel the submitter sends on next), and only this timer
/// then ends the wait. So such a program is slowed, never stopped: its
/// submitter returns, at worst, a task per `ROOM_BACKSTOP`.
#[cfg(not(stashpool_loom))]
const ROOM_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(1);
/// Attempts to start the last worker when tasks wait for it.
const START_RETRIES: u32 = 10;

/// Where admission sent a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Queued for a spinning worker, or for a busy one when it finishes.
    Queued,
    /// Queued, and a parked worker must be woken for it.
    Wake,
    /// To a new worker, as its first task.
    Start,
    /// Nowhere: queued past the count of `queued` by `MAX_UNCOUNTED`
    /// tasks already. The task is dropped and the submit panics.
    Refused,
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

impl Shared {
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
        // With `queued` at its limit, a task is queued only uncounted
        // (`count_uncounted`); only a pool with a tiny test limit gets there
        // with free workers.
        let countable = s.queued() < QUEUED_LIMIT;
        if countable && s.queued() < s.free() {
            let how = if s.queued() < s.spinning() {
                Admission::Queued
            } else {
                Admission::Wake
            };
            return Some((s.queue(), how));
        }
        let max = self.max_workers();
        // With no worker at all, nobody would ever take a queued task.
        if (mode.may_start || s.running() == 0) && s.running() < max {
            return Some((s.start(), Admission::Start));
        }
        // Bounded admissions never find `queued` at its limit: the builder
        // keeps `max_workers + max_queued` below it.
        if countable && (!mode.bounded || s.queued() < s.free() + self.config.capacity(max)) {
            return Some((s.queue(), Admission::Queued));
        }
        None
    }

    /// `plan` applied to the state word in one step: the state it found and
    /// where the task goes, or `None` if the pool is full.
    fn plan_step(&self, mode: Mode) -> Option<(State, Admission)> {
        let mut how = None;
        let (before, admitted) = self.state().update(|s| {
            // Every retry plans afresh; only the plan whose swap succeeded
            // counts.
            let (next, planned) = self.plan(s, mode)?;
            how = Some(planned);
            Some(next)
        });
        how.filter(|_| admitted).map(|how| (before, how))
    }

    fn admit(&self, mode: Mode) -> Option<Admission> {
        loop {
            let (before, how) = self.plan_step(mode)?;
            // A start planned with a bound that has been lowered since is
            // taken back, unless the pool is back within the new bound, and
            // the task planned again (`max_workers`). Never the pool's only
            // worker: the bound is at least 1.
            if how == Admission::Start {
                let max = self.max_workers();
                if before.running() >= max
                    && self
                        .state()
                        .update(|s| (s.running() > max).then(|| s.unstart()))
                        .1
                {
                    continue;
                }
            }
            return Some(how);
        }
    }

    /// Finds room for one task, admitted before it is pushed: for
    /// `try_submit`, which gets `None` when the pool is full, and, with
    /// `unbounded`, for a task that one of the pool's own tasks submits,
    /// which must not wait (if every worker did, none would be left to make
    /// room): it is queued past the capacity, and past the count of
    /// `queued` if need be. The caller must `dispatch` a task with the
    /// admission it gets.
    pub(crate) fn reserve(&self, unbounded: bool) -> Option<Admission> {
        let mode = Mode {
            may_start: true,
            bounded: !unbounded,
        };
        loop {
            if let Some(how) = self.admit(mode) {
                return Some(how);
            }
            if !unbounded {
                return None;
            }
            // Unbounded, it failed only because `queued` is at its limit.
            if let Some(how) = self.count_uncounted(true) {
                return Some(how);
            }
        }
    }

    /// Counts `task` submitted and sends it where admission said. Counted
    /// before it can run: a task never finishes before it is counted.
    pub(crate) fn dispatch(this: &Arc<Self>, how: Admission, task: Task) {
        let generation = this.counts.generations.enter();
        Self::send(this, how, Job { task, generation });
    }

    /// Submits `task`, waiting while the pool is full: see
    /// `WorkerPool::submit`.
    ///
    /// The task is pushed first, then counted in `queued`, and only then
    /// does its submitter act on what the count saw, as admission would
    /// have: wake a parked worker, start one, or wait for room. Counted
    /// first, a task would be claimable before it is findable, and a
    /// claimer would wait for the push (`take_claimed`) for as long as the
    /// submitter is off its core, if it was preempted in between. Pushed
    /// first, a claim always finds a task: every unit of `queued` counted
    /// this way is a task in the queue already, and claims are anonymous
    /// (module docs); until its count, the task is covered by the
    /// submitter, which is about to make it.
    ///
    /// So a submitter that finds the pool full has queued its task already:
    /// it waits, before it returns, until its task is within the capacity
    /// (`over_bound`), and the queue holds at most a task per blocked
    /// submitter past it. A task submitted by one of the pool's own tasks
    /// is admitted first (`reserve`), since it may be refused.
    pub(crate) fn submit(this: &Arc<Self>, task: Task) {
        let job = Job {
            task,
            generation: this.counts.generations.enter(),
        };
        if worker::is_worker_of(this) {
            let how = this
                .reserve(true)
                .expect("an unbounded admission never fails");
            return Self::send(this, how, job);
        }
        this.queue.push(job);
        // The count, by admission's rules (`plan`), with the pushed task in
        // hand: a worker started for it claims it, a queued one is counted
        // in `queued`.
        let unbounded = Mode {
            may_start: true,
            bounded: false,
        };
        let (before, how) = loop {
            if let Some(step) = this.plan_step(unbounded) {
                break step;
            }
            // `queued` is at its limit and no worker can start (only a tiny
            // test limit gets there from outside the pool): counted apart,
            // and never refused, since the task is in the queue already.
            if this.count_uncounted(false).is_some() {
                return;
            }
        };
        match how {
            Admission::Start => {
                Self::start_for_claim(this, before);
            }
            Admission::Wake => this.wake_one(),
            // For a spinning worker, or for a busy one: past the bound, the
            // submitter waits for room before it returns.
            Admission::Queued if this.over_bound(before.queue()) => this.wait_within_bound(),
            Admission::Queued => {}
            Admission::Refused => unreachable!("`plan` never refuses"),
        }
    }

    fn send(this: &Arc<Self>, how: Admission, job: Job) {
        match how {
            Admission::Queued => this.queue.push(job),
            Admission::Wake => {
                this.queue.push(job);
                this.wake_one();
            }
            Admission::Start => {
                if let Err((job, error)) = Self::start(this, job) {
                    Self::start_failed(this, job, error);
                }
            }
            Admission::Refused => this.refuse(job),
        }
    }

    /// Drops a task that admission refused, and panics (see `submit`).
    #[cold]
    fn refuse(&self, job: Job) -> ! {
        self.abandon(job);
        panic!(
            "stashpool: more than {} tasks queued in a WorkerPool",
            MAX_UNCOUNTED + QUEUED_LIMIT
        );
    }

    /// Starts a worker whose first task is `job`; gives the job back if the
    /// thread cannot be made.
    fn start(this: &Arc<Self>, job: Job) -> Result<(), (Job, io::Error)> {
        // Made here, not on the new thread: a worker that never allocates
        // never gets a malloc arena of its own.
        let seed = Arc::new(Mutex::new(Some(job)));
        let sleeper = Arc::new(Sleeper::new());
        let shared = Arc::clone(this);
        let first = Arc::clone(&seed);
        let name = match &this.config.thread_name {
            Some(name) => {
                let index = lock(&this.inner).started;
                name(index)
            }
            None => "stashpool-worker".into(),
        };
        let mut builder = thread::Builder::new().name(name);
        if let Some(size) = this.config.stack_size {
            builder = builder.stack_size(size);
        }
        match builder.spawn(move || worker::run(shared, first, sleeper)) {
            Ok(handle) => {
                this.spawned.fetch_add(1, Ordering::Relaxed);
                let mut inner = lock(&this.inner);
                inner.started += 1;
                // Release the handles of workers that have exited (on their
                // idle timeout), so they do not pile up in a long-lived pool.
                inner.handles.retain(|h| !thread::is_finished(h));
                inner.handles.push(handle);
                Ok(())
            }
            Err(error) => {
                let job = lock(&seed).take();
                Err((
                    job.expect("a thread that never started took its task"),
                    error,
                ))
            }
        }
    }

    /// The OS refused a thread: take back the worker slot (waking a blocked
    /// submitter, which may start one after all) and queue the task for the
    /// workers there are. If this was the last slot and tasks are queued
    /// (other submitters counted on this worker), keep the slot and try
    /// again a few times; if no thread can be had, drop the queued tasks and
    /// this one (counted as dropped) and give up loudly, so nothing is left
    /// queued with no worker to run it and `wait` cannot hang.
    #[cold]
    fn start_failed(this: &Arc<Self>, mut job: Job, mut error: io::Error) {
        let mode = Mode {
            may_start: false,
            bounded: false,
        };
        let mut retries = 0;
        let mut spin = Spin::new();
        loop {
            // Give the slot back, unless it is the last one and a task is
            // queued: in one step, so a task queued meanwhile is seen.
            let (before, released) = this.state().update(|s| {
                (s.running() > 1 || s.queued() == 0).then(|| s.unstart().without_waiting())
            });
            if !released {
                if retries < START_RETRIES {
                    retries += 1;
                    spin.spin();
                    match Self::start(this, job) {
                        Ok(()) => return,
                        Err((back, again)) => (job, error) = (back, again),
                    }
                } else {
                    this.drop_queued();
                }
                continue;
            }
            // The slot we give back is room for a blocked submitter.
            if before.waiting() {
                this.grant_room();
            }
            if before.running() == 1 {
                // No worker left and nothing queued: this task will never
                // run. Count it finished, so `wait` does not wait for it.
                this.abandon(job);
                panic!("stashpool: could not start a worker thread: {error}");
            }
            let how = loop {
                if let Some(how) = this.admit(mode).or_else(|| this.count_uncounted(true)) {
                    break how;
                }
            };
            if how != Admission::Start {
                return Self::send(this, how, job);
            }
            // Every worker exited meanwhile: try once more for a new one.
            match Self::start(this, job) {
                Ok(()) => return,
                Err((back, again)) => (job, error) = (back, again),
            }
        }
    }

    /// Claims and drops every queued task (no worker will run them),
    /// counting each as dropped and finished. Returns how many it dropped.
    #[cold]
    pub(crate) fn drop_queued(&self) -> usize {
        let mut dropped = 0;
        while let Some(job) = self.claim_queued() {
            self.abandon(job);
            dropped += 1;
        }
        dropped
    }

    /// Drops a task that will never run, counting it as dropped and
    /// finished. A `spawn`ed task's `JoinHandle` then reports it.
    fn abandon(&self, job: Job) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        let Job { task, generation } = job;
        drop(task);
        self.finish(generation);
    }

    // === tasks past the limit of `queued` (`shared.rs`) ===

    /// Counts a task whose unbounded admission found `queued` at its limit
    /// in `Inner::uncounted`, if `queued` is still at its limit, and
    /// returns `Queued`; returns `None`, counting nothing, if a claim has
    /// made room there since (the caller admits the task again), and
    /// `Refused` past `MAX_UNCOUNTED`, unless `may_refuse` is false (for a
    /// task that `submit` has pushed already). A claim that takes `queued`
    /// down from the limit after this check takes the lock after it too,
    /// and moves the task into `queued` (`refill`); one that did before has
    /// released the lock before this check, which therefore sees it.
    #[cold]
    fn count_uncounted(&self, may_refuse: bool) -> Option<Admission> {
        let mut inner = lock(&self.inner);
        if self.state().load().queued() < QUEUED_LIMIT {
            return None;
        }
        if may_refuse && inner.uncounted >= MAX_UNCOUNTED {
            return Some(Admission::Refused);
        }
        inner.uncounted += 1;
        Some(Admission::Queued)
    }

    // === room for blocked submitters ===

    /// Whether a pool in state `s` holds more tasks than it admits: more
    /// queued than its free workers and its capacity take, and no worker
    /// left to start. A submitter whose task made it so waits until it is
    /// not (`wait_within_bound`).
    #[inline]
    pub(super) fn over_bound(&self, s: State) -> bool {
        let max = self.max_workers();
        s.running() >= max && s.queued() > s.free() + self.config.capacity(max)
    }

    /// Waits until the pool is within its bound (`submit`): spins, re-reading
    /// the state, for a few microseconds, then sleeps until a worker grants
    /// a wake.
    #[cold]
    fn wait_within_bound(&self) {
        let (mut spin, mut woken) = (Spin::new(), false);
        while self.over_bound(self.state().load()) {
            if spin.rounds() < SUBMIT_SPINS {
                spin.spin();
            } else {
                woken |= self.wait_for_room();
            }
        }
        if woken {
            // Other submitters may still be asleep: hand the next one the
            // room there is, or raise the mark again for the next step
            // that makes room.
            self.pass_room();
        }
    }

    /// Blocks until there may be room: returns false at once if the pool is
    /// within its bound already, true after sleeping until a wake was
    /// granted to this submitter, or until `ROOM_BACKSTOP` found the pool
    /// within its bound (the caller checks again either way).
    #[cold]
    fn wait_for_room(&self) -> bool {
        let mut inner = lock(&self.inner);
        // Mark ourselves waiting only if the pool is still over its bound,
        // in one step on the state word: a worker that makes room
        // afterwards sees the mark; one that made room before, we see here.
        let (_, marked) = self
            .state()
            .update(|s| self.over_bound(s).then(|| s.with_waiting()));
        if !marked {
            return false;
        }
        inner.blocked += 1;
        // The lock is held from the mark until the wait releases it, so a
        // worker granting a wake, which takes the lock, cannot do it in
        // between.
        while inner.grants == 0 {
            // loom has no clock, and its timed waits time out at once: the
            // models check the wakes alone, with tasks that finish.
            #[cfg(stashpool_loom)]
            {
                inner = wait(&self.room, inner);
            }
            #[cfg(not(stashpool_loom))]
            {
                let timed_out;
                (inner, timed_out) = wait_timeout(&self.room, &self.inner, inner, ROOM_BACKSTOP);
                if timed_out && !self.over_bound(self.state().load()) {
                    // Within the bound, short of the low-water mark, and
                    // maybe no claim to come (`ROOM_BACKSTOP`). The mark
                    // stays up for any other sleeper (`pass_room`).
                    inner.blocked -= 1;
                    return true;
                }
            }
        }
        inner.grants -= 1;
        inner.blocked -= 1;
        true
    }

    /// Called by a submitter that was woken, once the pool is within its
    /// bound: if other submitters are still asleep, grant one of them a
    /// wake if the pool is within its bound still, or raise the waiting
    /// mark again so that the next step that makes room does. Together
    /// with `grant_room`, this keeps the rule that while a submitter
    /// sleeps, either the mark is up or a wake is on its way.
    #[cold]
    fn pass_room(&self) {
        let mut inner = lock(&self.inner);
        if inner.blocked <= inner.grants {
            return;
        }
        let (_, marked) = self
            .state()
            .update(|s| self.over_bound(s).then(|| s.with_waiting()));
        if !marked {
            inner.grants += 1;
            self.room.notify_one();
        }
    }

    // === waiting for tasks ===

    /// Blocks until every task admitted before the call has finished; tasks
    /// submitted meanwhile are not waited for (`generations.rs`).
    pub(crate) fn wait_all(&self) {
        assert!(
            !worker::is_worker_of(self),
            "stashpool: WorkerPool::wait called from one of the pool's own tasks \
             (it would wait for itself)"
        );
        let _turn = lock(&self.wait_turn);
        let generations = &self.counts.generations;
        let old = generations.flip();
        if generations.drained(old) {
            return;
        }
        let mut inner = lock(&self.inner);
        // From here until the wait releases the lock, a worker that counts
        // the last task of `old` sees the flag and queues on the lock to
        // wake us; one that counted it before, the mark sees.
        if !generations.mark_waiting(old) {
            while !generations.drained(old) {
                inner = wait(&self.done, inner);
            }
        }
        // One wait at a time holds the turn, so the flag is ours to lower.
        generations.clear_waiting();
    }

    // === resizing and closing ===

    /// Changes the bound on workers. From the step on the state word made
    /// here, every step that lets a task start is checked against the new
    /// bound (`max_workers`): workers above it exit instead of taking a
    /// task. Lowered, parked workers are woken so that the extra ones exit;
    /// raised, workers are started for queued tasks that no free worker
    /// will take, and a blocked submitter is woken to use the room.
    pub(crate) fn set_max_workers(this: &Arc<Self>, n: usize) {
        let old = this.max_workers.swap(n, Ordering::Relaxed);
        if n < old {
            // Only a step on the word: any later step's check reads `n`.
            let (state, _) = this.state().update(Some);
            // More workers than `n`: wake the parked ones, which exit in
            // the step that would have parked them (`worker.rs`). With no
            // more than `n`, none will ever be above the bound (every start
            // from now on is checked against it) and none need waking.
            if state.running() > n {
                this.wake_all();
            }
        } else if n > old {
            // Room to start workers: a blocked submitter may use it. The
            // step is the same as a worker's that makes room.
            let (state, _) = this.state().update(|s| Some(s.without_waiting()));
            if state.waiting() {
                this.grant_room();
            }
            Self::start_for_queued(this);
        }
    }

    /// Starts workers for queued tasks that no free worker will take, while
    /// the bound lets more run: each takes one of them as its first task.
    fn start_for_queued(this: &Arc<Self>) {
        loop {
            let max = this.max_workers();
            let (before, started) = this.state().update(|s| {
                (s.queued() > s.free() && s.running() < max).then(|| s.start_claimed())
            });
            if !started {
                return;
            }
            this.refill_if_full(before);
            if !Self::start_for_claim(this, before) {
                return;
            }
        }
    }

    /// Starts a worker for a task claimed for it in the step, which saw
    /// `before`, that counted the worker started, unless the bound was
    /// lowered meanwhile (`max_workers`, read again) and the pool is still
    /// above it: then the claim goes back to the queue (`give_back`) and
    /// this returns false.
    fn start_for_claim(this: &Arc<Self>, before: State) -> bool {
        let max = this.max_workers();
        if before.running() >= max && this.give_back(max) {
            return false;
        }
        let job = this.take_claimed();
        if let Err((job, error)) = Self::start(this, job) {
            Self::start_failed(this, job, error);
        }
        true
    }

    /// Takes every parked worker off the idle stack and wakes it.
    fn wake_all(&self) {
        let mut inner = lock(&self.inner);
        let sleepers = inner.idle.pop_all();
        if !sleepers.is_empty() {
            self.state().update(|s| Some(s.wake_all(sleepers.len())));
        }
        drop(inner);
        for sleeper in sleepers {
            sleeper.wakeup.notify_one();
        }
    }

    /// Starts closing the pool: parked workers are woken and every worker
    /// exits once the queue is empty. Returns the handles to join.
    pub(crate) fn close(&self) -> Vec<JoinHandle<()>> {
        let handles = {
            let mut inner = lock(&self.inner);
            inner.closing = true;
            std::mem::take(&mut inner.handles)
        };
        self.wake_all();
        handles
    }

    /// Waits until at most `keep` workers are alive or `deadline` passes;
    /// returns whether they had exited by then.
    pub(crate) fn wait_for_exits(&self, keep: usize, deadline: Option<Instant>) -> bool {
        let mut inner = lock(&self.inner);
        loop {
            if self.state().load().running() <= keep {
                return true;
            }
            let left = match deadline {
                None => NEVER,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return false,
                },
            };
            let timed_out;
            (inner, timed_out) = wait_timeout(&self.done, &self.inner, inner, left);
            if timed_out && deadline.is_some() && cfg!(stashpool_loom) {
                // loom has no clock: its timed waits time out at once, so
                // treat the first as the deadline.
                return self.state().load().running() <= keep;
            }
        }
    }

    /// Checks, once every worker has been joined, that nothing was left.
    pub(crate) fn check_closed(&self) {
        let state = self.state().load();
        invariant!(state.running() == 0 && state.queued() == 0 && state.free() == 0);
        invariant!(lock(&self.inner).uncounted == 0);
        invariant!(self.queue.pop().is_none());
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    //! Tasks past the limit of `queued`, which unit tests set at
    //! `QUEUED_LIMIT` (3) so that they reach it cheaply; and a blocked
    //! submitter's wake at the low-water mark, and without it.

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::*;
    use crate::workers::WorkerPool;
    use crate::workers::config::Config;

    const DEADLINE: Duration = Duration::from_secs(60);

    fn shared(max_workers: usize) -> Shared {
        shared_with_queue(max_workers, None)
    }

    fn shared_with_queue(max_workers: usize, max_queued: Option<usize>) -> Shared {
        Shared::new(Config {
            max_workers,
            max_queued,
            idle_timeout: None,
            stack_size: None,
            thread_name: None,
            on_start: None,
            on_exit: None,
        })
    }

    fn uncounted(shared: &Shared) -> usize {
        lock(&shared.inner).uncounted
    }

    #[test]
    fn a_claim_short_of_the_low_water_mark_leaves_a_blocked_submitter_to_its_timer() {
        // One worker, busy; a queue of two, and a third task past it, whose
        // submitter waits for room.
        let shared = Arc::new(shared_with_queue(1, Some(2)));
        shared
            .state()
            .update(|s| Some(s.start().queue().queue().queue()));
        for _ in 0..3 {
            let generation = shared.counts.generations.enter();
            let task = Task::new(|| crate::workers::task::Outcome::Returned);
            shared.queue.push(Job { task, generation });
        }
        let (returned_tx, returned) = mpsc::channel();
        let submitter = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                shared.wait_within_bound();
                returned_tx.send(()).unwrap();
            })
        };
        // The mark goes up only once its spin is over, on its way to sleep.
        while !shared.state().load().waiting() {
            std::thread::yield_now();
        }
        // A claim: within the bound, but above the low-water mark (one
        // queued, for a queue of two), so no wake is granted.
        drop(shared.claim_queued());
        assert!(shared.state().load().waiting());
        assert_eq!(lock(&shared.inner).grants, 0);
        // Nothing else will claim (as if the worker waited for the
        // submitter): its timer ends the wait.
        assert!(
            returned.recv_timeout(DEADLINE).is_ok(),
            "a blocked submitter slept on with room"
        );
        submitter.join().unwrap();
        // The next claim reaches the mark, and clears it.
        drop(shared.claim_queued());
        assert!(!shared.state().load().waiting());
    }

    #[test]
    fn a_task_counted_past_the_limit_is_moved_in_by_the_claim_that_makes_room() {
        let shared = shared(1);
        shared.state().update(|s| {
            let mut s = s.start();
            for _ in 0..QUEUED_LIMIT {
                s = s.queue();
            }
            Some(s)
        });
        // A worker's own submit: no room in `queued`, none for a new worker.
        let unbounded = Mode {
            may_start: true,
            bounded: false,
        };
        assert_eq!(shared.admit(unbounded), None);
        assert_eq!(shared.count_uncounted(true), Some(Admission::Queued));
        assert_eq!(
            (uncounted(&shared), shared.stats().queued),
            (1, QUEUED_LIMIT + 1)
        );
        // A claim that takes `queued` down from its limit moves it in.
        let (before, _) = shared.state().update(|s| Some(s.claim_busy()));
        shared.refill_if_full(before);
        assert_eq!(uncounted(&shared), 0);
        assert_eq!(shared.state().load().queued(), QUEUED_LIMIT);
        // With room in `queued`, nothing is counted past it.
        shared.state().update(|s| Some(s.claim_busy()));
        assert_eq!(shared.count_uncounted(true), None);
        assert_eq!(uncounted(&shared), 0);
    }

    #[test]
    fn a_claim_given_back_past_the_limit_is_counted_uncounted() {
        let shared = shared(2);
        shared.state().update(|s| {
            let mut s = s.start().start();
            for _ in 0..QUEUED_LIMIT {
                s = s.queue();
            }
            Some(s)
        });
        // A worker claimed a task, and another submit filled `queued` again.
        shared.state().update(|s| Some(s.claim_busy().queue()));
        // The bound was lowered to 1 after the claim: it goes back.
        assert!(shared.give_back(1));
        let state = shared.state().load();
        assert_eq!((state.running(), state.queued()), (1, QUEUED_LIMIT));
        assert_eq!(uncounted(&shared), 1);
        // Within the bound, a claim stands.
        assert!(!shared.give_back(1));
        assert_eq!(shared.state().load().running(), 1);
    }

    #[test]
    fn a_task_may_queue_past_the_limit_on_its_own_pool() {
        const INNER: usize = 4 * QUEUED_LIMIT;
        let pool = Arc::new(WorkerPool::builder(1).build());
        let ran = Arc::new(AtomicUsize::new(0));
        let (queued_tx, queued) = mpsc::channel();
        let (inner_pool, inner_ran) = (Arc::clone(&pool), Arc::clone(&ran));
        pool.submit(move || {
            // The only worker runs this task: nothing is claimed meanwhile.
            for _ in 0..INNER {
                let ran = Arc::clone(&inner_ran);
                inner_pool.submit(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                });
            }
            queued_tx.send(inner_pool.stats().queued).unwrap();
        });
        assert_eq!(queued.recv_timeout(DEADLINE), Ok(INNER));
        pool.wait();
        assert_eq!(ran.load(Ordering::Relaxed), INNER);
        // Dropping the pool checks that nothing is left uncounted.
    }

    #[test]
    fn tasks_past_the_limit_race_claims_and_all_run() {
        // Both submitters' tasks fit past the count even if no claim came.
        const INNER: usize = (QUEUED_LIMIT + MAX_UNCOUNTED) / 2;
        let pool = Arc::new(WorkerPool::builder(3).build());
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let (inner_pool, inner_ran) = (Arc::clone(&pool), Arc::clone(&ran));
            pool.submit(move || {
                for _ in 0..INNER {
                    let ran = Arc::clone(&inner_ran);
                    inner_pool.submit(move || {
                        ran.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        }
        pool.wait();
        // Tasks submitted by tasks are not all waited for by the same wait.
        pool.wait();
        assert_eq!(ran.load(Ordering::Relaxed), 2 * INNER);
        assert_eq!(pool.stats().queued, 0);
    }

    #[test]
    fn a_submit_past_every_limit_panics_and_drops_only_its_task() {
        const FITS: usize = QUEUED_LIMIT + MAX_UNCOUNTED;
        let pool = Arc::new(WorkerPool::builder(1).build());
        let ran = Arc::new(AtomicUsize::new(0));
        let (inner_pool, inner_ran) = (Arc::clone(&pool), Arc::clone(&ran));
        let outcome = pool.spawn(move || {
            let submit = || {
                let ran = Arc::clone(&inner_ran);
                inner_pool.submit(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                });
            };
            for _ in 0..FITS {
                submit();
            }
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(submit))
        });
        let payload = outcome.join().unwrap().unwrap_err();
        let message = payload.downcast_ref::<String>().unwrap();
        assert_eq!(
            *message,
            format!("stashpool: more than {FITS} tasks queued in a WorkerPool")
        );
        // The refused task is counted dropped, so `wait` returns.
        let (waited_tx, waited) = mpsc::channel();
        let waiter = Arc::clone(&pool);
        std::thread::spawn(move || {
            waiter.wait();
            waited_tx.send(()).unwrap();
        });
        assert!(
            waited.recv_timeout(DEADLINE).is_ok(),
            "wait hung on the refused task"
        );
        assert_eq!(ran.load(Ordering::Relaxed), FITS);
        let stats = pool.stats();
        assert_eq!((stats.dropped, stats.completed), (1, FITS as u64 + 1));
    }

    #[test]
    fn a_shutdown_drops_tasks_past_the_limit_too() {
        const INNER: usize = 4 * QUEUED_LIMIT;
        let pool = Arc::new(WorkerPool::builder(1).build());
        let (queued_tx, queued) = mpsc::channel();
        let (release_tx, release) = mpsc::channel::<()>();
        let inner_pool = Arc::clone(&pool);
        pool.submit(move || {
            for _ in 0..INNER {
                inner_pool.submit(|| {});
            }
            drop(inner_pool);
            queued_tx.send(()).unwrap();
            let _ = release.recv();
        });
        queued.recv_timeout(DEADLINE).unwrap();
        let pool = Arc::into_inner(pool).expect("the task dropped its handle");
        assert_eq!(pool.shutdown_timeout(Duration::ZERO), INNER);
        drop(release_tx);
    }
}

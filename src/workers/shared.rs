//! What a pool's handle and its workers share (`Shared`), and the steps on
//! it that both sides take: claiming a queued task and taking it from the
//! queue, giving a claim back, waking a parked worker, granting a blocked
//! submitter room, moving tasks past the limit of `queued` into it, and
//! counting tasks finished.
//!
//! The submitting side is in `submit.rs`, the worker side in `worker.rs`;
//! the rules both follow, and why they never lose a task, are in the
//! module docs of `workers`.

use crossbeam_utils::CachePadded;

use super::config::Config;
use super::generations::{Generation, Generations};
use super::idle::IdleStack;
use super::job::Job;
use super::queue::TaskQueue;
use super::spin::Spin;
use super::state::{AtomicState, MAX_QUEUED, QUEUED_LIMIT, State};
use super::word::AtomicWord;
use super::worker_stats::WorkerStats;
use crate::sync::thread::JoinHandle;
use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering, lock};

/// The most tasks counted in `Inner::uncounted`, past the `queued` field:
/// so many that their queue alone takes tens of GiB (a few dozen in unit
/// tests). Only tasks that the pool's own tasks submit get there; past it,
/// such a submit is refused, and panics, rather than overflow the
/// unfinished counts of a wait generation, which must also hold the tasks
/// that workers have taken (`generations.rs`).
pub(super) const MAX_UNCOUNTED: usize = if cfg!(test) { 64 } else { 1 << 29 };
const _: () = assert!(MAX_QUEUED + MAX_UNCOUNTED < super::generations::MAX_UNFINISHED / 2);

/// The two words that a submitter writes for every task.
pub(crate) struct Counts {
    /// What every decision is made on (see `state.rs`). Workers write it
    /// for every task they claim.
    state: AtomicState,
    /// Unfinished tasks per wait generation (see `generations.rs`). On a
    /// line of its own: workers write it once per batch of finished tasks,
    /// so the submitter mostly finds it in its own cache.
    pub(super) generations: CachePadded<Generations>,
}

/// Everything the workers and the handle share.
pub(crate) struct Shared {
    pub(super) counts: CachePadded<Counts>,
    /// Admitted tasks that no worker has taken yet, about oldest first.
    pub(super) queue: TaskQueue,
    /// Tasks finished (run, panicked or dropped), counted by workers in
    /// batches. With the unfinished counts it gives the tasks submitted,
    /// which submitters then need not count: one read-modify-write fewer
    /// per task on the side that feeds every worker alone.
    finished: CachePadded<AtomicWord>,
    pub(super) panicked: AtomicWord,
    pub(super) dropped: AtomicWord,
    pub(super) spawned: AtomicWord,
    /// The bound on workers, changed by `set_max_workers`.
    pub(super) max_workers: AtomicUsize,
    pub(super) inner: Mutex<Inner>,
    /// Submitters blocked for room wait here (on `inner`).
    pub(super) room: Condvar,
    /// `wait` callers and `shutdown_timeout` wait here (on `inner`).
    pub(super) done: Condvar,
    /// Held by the one `wait` whose turn it is (see `generations.rs`).
    pub(super) wait_turn: Mutex<()>,
    pub(super) config: Config,
}

/// The state that changes only under the lock.
pub(crate) struct Inner {
    pub(super) idle: IdleStack,
    /// Every worker's thread not yet known to have finished.
    pub(super) handles: Vec<JoinHandle<()>>,
    /// Submitters asleep until there is room.
    pub(super) blocked: usize,
    /// Wakes handed to blocked submitters and not yet taken: one per step
    /// that clears the waiting mark, so such a step wakes one submitter,
    /// not all of them.
    pub(super) grants: usize,
    /// Workers started so far, to number their threads.
    pub(super) started: usize,
    /// Tasks in the queue that `queued` does not count: admitted while it
    /// was at its limit (`count_uncounted`).
    pub(super) uncounted: usize,
    /// Set when the pool closes: workers exit once the queue is empty.
    pub(super) closing: bool,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            counts: CachePadded::new(Counts {
                state: AtomicState::new(),
                generations: CachePadded::new(Generations::new()),
            }),
            // Room for what admission lets queue under the bound it starts
            // with (`queue.rs`).
            queue: TaskQueue::new(config.capacity(config.max_workers), config.max_workers),
            finished: CachePadded::new(AtomicWord::new(0)),
            panicked: AtomicWord::new(0),
            dropped: AtomicWord::new(0),
            spawned: AtomicWord::new(0),
            max_workers: AtomicUsize::new(config.max_workers),
            inner: Mutex::new(Inner {
                idle: IdleStack::default(),
                handles: Vec::new(),
                blocked: 0,
                grants: 0,
                started: 0,
                uncounted: 0,
                closing: false,
            }),
            room: Condvar::new(),
            done: Condvar::new(),
            wait_turn: Mutex::new(()),
            config,
        }
    }

    #[inline]
    pub(super) fn state(&self) -> &AtomicState {
        &self.counts.state
    }

    /// The bound on workers now.
    ///
    /// Relaxed: a decision made with a bound read before the step that
    /// makes it may use a bound just replaced, so every step that lets a
    /// task start (a claim, a start) reads the bound again after it and
    /// undoes itself if the bound no longer allows it. That second read
    /// sees the bound stored by any `set_max_workers` whose own step on the
    /// word came before: the store precedes that step, which the decision's
    /// step, an acquire read-modify-write of the same word, reads from
    /// (`set_max_workers`).
    #[inline]
    pub(crate) fn max_workers(&self) -> usize {
        self.max_workers.load(Ordering::Relaxed)
    }

    // === claims ===

    /// Claims a queued task, if any, for the calling thread to run or drop:
    /// a worker helping while it waits for a task it joined, or a shutdown.
    pub(crate) fn claim_queued(&self) -> Option<Job> {
        let mut after = None;
        let (before, claimed) = self.state().update(|s| {
            after = (s.queued() > 0).then(|| self.claim_busy(s));
            after
        });
        if !claimed {
            return None;
        }
        self.grant_if_cleared(before, after);
        self.refill_if_full(before);
        Some(self.take_claimed())
    }

    /// A claim, from `s`, by a worker not counted free (one that ran a
    /// task, or helps while it waits for one). It frees a slot of the
    /// queue, but it ends a blocked submitter's wait (clears the mark, and
    /// the caller grants the wake) only once the queue has drained to its
    /// low-water mark (`drained`): woken for each slot, a submitter that
    /// outruns the workers would sleep and wake once per task.
    #[inline]
    pub(super) fn claim_busy(&self, s: State) -> State {
        let next = s.claim_busy();
        if next.waiting() && self.drained(next) {
            next.without_waiting()
        } else {
            next
        }
    }

    /// Whether a pool in state `s` has drained to the queue's low-water
    /// mark, where a claim wakes a blocked submitter (`claim_busy`): half
    /// the capacity, rounded up, free past every blocked submitter's task
    /// (which is queued already: `submit`). A pool with no queue wakes at
    /// the claim that brings it within its bound (`over_bound`), one with a
    /// queue of one once it is empty. A submitter woken there queues half
    /// a queue's tasks before it finds the pool full again, while the other
    /// half keeps the workers busy.
    #[inline]
    fn drained(&self, s: State) -> bool {
        let capacity = self.config.capacity(self.max_workers());
        s.queued() + capacity.div_ceil(2) <= s.free() + capacity
    }

    /// Pops the task this thread claimed. The claim guarantees one is in
    /// the queue (in its ring or its overflow: `queue.rs`), or about to be:
    /// every claim takes one unit of `queued`, and each unit is a task its
    /// submitter pushed before counting it (`submit`) or pushes right after
    /// (`try_submit`, a pool's own task's submit, a task sent back). A wait
    /// here is one of the latter between its count and its push: short,
    /// unless it was preempted right there, which is what the yield in
    /// `Spin` is for.
    pub(super) fn take_claimed(&self) -> Job {
        let mut spin = Spin::new();
        loop {
            if let Some(job) = self.queue.pop() {
                return job;
            }
            spin.spin_or_yield();
        }
    }

    /// Gives back a claimed task, unless the pool has no more than `max`
    /// workers now, and counts the claimer's worker gone
    /// (`State::give_back`): for a claim made above a bound that was
    /// lowered, and read again, after the claim's step. Returns whether it
    /// gave the task back; if not, the claim stands (the pool is within the
    /// bound now, so starting the task starts no task too many). The task,
    /// still in the queue, is queued again as a submitter would queue it:
    /// for a free worker (waking a parked one if every spinning one is
    /// spoken for), or for a busy one; more than `max` workers were alive,
    /// so at least `max` are left.
    #[cold]
    pub(super) fn give_back(&self, max: usize) -> bool {
        loop {
            let (before, gave) = self.state().update(|s| {
                (s.running() > max && s.queued() < QUEUED_LIMIT)
                    .then(|| s.give_back().without_waiting())
            });
            if gave {
                if before.waiting() {
                    self.grant_room();
                }
                if before.queued() < before.free() && before.queued() >= before.spinning() {
                    self.wake_one();
                }
                return true;
            }
            if before.running() <= max {
                return false;
            }
            // `queued` is at its limit: leave, and count the task among the
            // uncounted ones, under the lock (see `count_uncounted`).
            let mut inner = lock(&self.inner);
            let (before, left) = self.state().update(|s| {
                (s.running() > max && s.queued() == QUEUED_LIMIT)
                    .then(|| s.exit_busy().without_waiting())
            });
            if left {
                inner.uncounted += 1;
                drop(inner);
                if before.waiting() {
                    self.grant_room();
                }
                return true;
            }
        }
    }

    // === tasks past the limit of `queued` ===
    //
    // `queued` counts at most `QUEUED_LIMIT` tasks; only unbounded
    // admissions (tasks submitted by the pool's own workers, tasks a failed
    // start sends back, claims given back) can find it there, and they
    // count their task in `Inner::uncounted` instead, under the lock
    // (`count_uncounted`, in `submit.rs`). The
    // rule that keeps them from being left behind: while any task is
    // uncounted, `queued` is at its limit, or a claim has just taken it
    // down from there and is about to take the lock and move uncounted
    // tasks into it (`refill`). So `queued` cannot drain to 0, and no
    // worker parks or exits, while a task is uncounted. Uncounted tasks sit
    // in the queue like the others: claims are anonymous, so a claimer pops
    // whatever task is oldest, counted or not.

    /// Called by every claim, with the state it saw: one that took `queued`
    /// down from its limit moves uncounted tasks into it (`refill`).
    #[inline]
    pub(super) fn refill_if_full(&self, before: State) {
        if before.queued() == QUEUED_LIMIT {
            self.refill();
        }
    }

    /// Moves uncounted tasks into `queued` while it has room, as a
    /// submitter queues them (waking a parked worker if the rules say so:
    /// only a tiny test limit is below the free workers).
    #[cold]
    fn refill(&self) {
        let mut inner = lock(&self.inner);
        let mut wakes = 0;
        while inner.uncounted > 0 {
            let (before, counted) = self
                .state()
                .update(|s| (s.queued() < QUEUED_LIMIT).then(|| s.queue()));
            if !counted {
                break;
            }
            inner.uncounted -= 1;
            if before.queued() < before.free() && before.queued() >= before.spinning() {
                wakes += 1;
            }
        }
        drop(inner);
        for _ in 0..wakes {
            self.wake_one();
        }
    }

    // === wakes ===

    /// Wakes the most recently parked worker.
    ///
    /// The stack can be empty: admission counted a parked worker that, by
    /// now, another submitter has woken or that found work on its own when
    /// its timer fired. The task is then still covered: a parked worker
    /// cannot exit while a task is queued, and a woken one runs tasks until
    /// the queue is empty (module docs).
    pub(super) fn wake_one(&self) {
        let mut inner = lock(&self.inner);
        let Some(sleeper) = inner.idle.pop() else {
            return;
        };
        self.state().update(|s| Some(s.wake()));
        drop(inner);
        // Outside the lock, so the sleeper does not wake into a held lock.
        // Its `notified` mark, set under the lock, is what it acts on; a
        // notification that arrives after it stopped waiting is lost
        // harmlessly.
        sleeper.wakeup.notify_one();
    }

    /// Grants the wake if the step from `before` to `after` (the state the
    /// update stored, `None` if it stored none) cleared the waiting mark,
    /// for a step that clears it only sometimes (a claim: `claim_busy`).
    #[inline]
    pub(super) fn grant_if_cleared(&self, before: State, after: Option<State>) {
        if before.waiting() && after.is_some_and(|after| !after.waiting()) {
            self.grant_room();
        }
    }

    /// Grants one blocked submitter a wake. Called by whoever cleared the
    /// waiting mark in a step that made room (a claim that drained the
    /// queue to its low-water mark, a worker free or gone, the bound
    /// raised): one step, one wake. The submitter woken passes the mark on
    /// if others are still asleep (`pass_room`).
    #[cold]
    pub(super) fn grant_room(&self) {
        let mut inner = lock(&self.inner);
        if inner.blocked > inner.grants {
            inner.grants += 1;
            self.room.notify_one();
        }
    }

    // === finishing tasks ===

    /// Counts one task of `generation` finished, and wakes the `wait`
    /// caller if it was the last one it waits for.
    #[inline]
    pub(super) fn finish(&self, generation: Generation) {
        self.finish_many(generation, 1);
    }

    /// Counts `n` tasks of `generation` finished at once: as `finish`.
    #[inline]
    pub(super) fn finish_many(&self, generation: Generation, n: usize) {
        // Counted finished before they leave the unfinished counts, so that
        // whoever sees them gone from those (`wait`, `stats`) sees them here.
        // Relaxed: the release of `exit` orders it.
        self.finished.fetch_add(n as u64, Ordering::Relaxed);
        if self.counts.generations.exit(generation, n) {
            self.notify_done();
        }
    }

    #[cold]
    fn notify_done(&self) {
        let _inner = lock(&self.inner);
        self.done.notify_all();
    }

    // === the rest ===

    pub(crate) fn stats(&self) -> WorkerStats {
        // Unfinished first: a task gone from it was counted finished before
        // (`finish_many`), so no task is missed from `submitted`; one being
        // counted off between the two reads may be counted in both.
        let unfinished = self.counts.generations.unfinished() as u64;
        let finished = self.finished.load(Ordering::Relaxed);
        let panicked = self.panicked.load(Ordering::Relaxed);
        let dropped = self.dropped.load(Ordering::Relaxed);
        let state = self.state().load();
        let mut queued = state.queued();
        if queued == QUEUED_LIMIT {
            queued += lock(&self.inner).uncounted;
        }
        WorkerStats {
            submitted: finished + unfinished,
            completed: finished.saturating_sub(panicked).saturating_sub(dropped),
            panicked,
            dropped,
            spawned: self.spawned.load(Ordering::Relaxed),
            queued,
            running: state.running(),
            idle: state.free(),
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.state().load().running()
    }
}

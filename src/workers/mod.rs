//! A bounded pool of worker threads that recycles them: it grows when busy,
//! shrinks when idle, and runs at most `max_workers` tasks at once.
//!
//! Go programs pool goroutines (`ants`, `itogami`) to bound concurrency and
//! reuse workers instead of starting one per task; [`WorkerPool`] does the
//! same with threads, where starting one costs tens of microseconds and a
//! stack.
//!
//! ```
//! use stashpool::workers::WorkerPool;
//!
//! let pool = WorkerPool::new(4);
//! for i in 0..8 {
//!     pool.submit(move || println!("task {i}"));
//! }
//! pool.wait();
//! ```
//!
//! # How it works
//!
//! Tasks travel through one lock-free FIFO queue (`crossbeam_deque::Injector`).
//! Every decision about a task is made on one atomic word (`state.rs`) that
//! holds:
//!
//! * `queued`: tasks admitted to the queue that no worker has claimed;
//! * `running`: workers alive;
//! * `spinning` and `sleeping`: workers with nothing to do, awake (looking
//!   at the queue) or parked on the idle stack (needing a wake). Together
//!   they are the *free* workers;
//! * a flag for submitters blocked until there is room.
//!
//! A submitter admits its task with one compare-and-swap on the word, and
//! the new value says what to do next:
//!
//! 1. `queued < free`: a free worker is not yet spoken for. Queue the task;
//!    if every spinning worker is spoken for (`queued >= spinning`), pop the
//!    most recently parked worker off the idle stack and wake it.
//! 2. else, `running < max_workers`: count a new worker and start a thread
//!    with the task as its first.
//! 3. else, `queued < free + queue_capacity`: queue the task for the next
//!    busy worker to finish.
//! 4. else the pool is full: `try_submit` gives the task back; `submit`
//!    spins briefly, then marks the word and waits on a condition variable
//!    until a worker makes room.
//!
//! A worker that finishes a task claims a queued one (`queued -= 1`, then
//! pops; the claim guarantees the pop will find a task, at worst after the
//! submitter's push lands) or, if none is queued, becomes *spinning*. A
//! spinning worker watches the word for a few microseconds, claiming a task
//! if one is queued, then takes the pool's lock and, in one step on the
//! word, claims a task if one is queued, or else becomes *sleeping* and
//! parks on its own condition variable, on top of the idle stack. A submitter
//! that pops it marks it notified and counts it spinning again. A sleeper
//! whose idle timeout passes, unwoken, leaves the stack and, in one step,
//! exits (`running -= 1`) if no task is queued, or else becomes spinning.
//!
//! # Why no task is left behind
//!
//! The invariant: *while a task is queued, some worker is awake* (running a
//! task, spinning, or woken and about to spin), and every awake worker
//! claims queued tasks until there are none. It holds because:
//!
//! * A worker can park or exit only in a step on the word that sees
//!   `queued == 0`. A submitter counts its task in `queued` in a step on the
//!   same word, so of the two, the later sees the earlier: either the worker
//!   sees the task (and claims it) or the submitter sees the worker parked
//!   (and counts it among the free workers). No fences are needed beyond the
//!   word's own modification order.
//! * When `queued` goes from 0 to 1, the submitter either finds a spinning
//!   worker (which cannot park while a task is queued), wakes a parked one,
//!   starts a new one, or found `free == 0`, in which case every worker is
//!   busy and `running >= 1` (`running == 0` always allows a start).
//! * Waking pops the stack under the lock, and a timed-out sleeper removes
//!   itself under the lock, so each sleeper is either woken or gone, never
//!   both. If a submitter finds the stack empty, the worker it counted on
//!   was woken by another submitter or by its own timer with tasks queued;
//!   either way it is awake, so the invariant covers the task.
//! * Claims are anonymous: each is one unit of `queued`, and each unit is a
//!   task its submitter pushes right after counting it, so a claimer's pop
//!   always finds a task, though maybe another submitter's.
//!
//! The `loom-tests/workers.rs` models check these races (hand-off to a
//! parked worker, a timeout racing a submit, blocked submitters, closing)
//! on the real code.
//!
//! # Growing, shrinking, bounding
//!
//! A thread starts only when no free worker is left for the task, so a pool
//! fed slower than it works keeps one or two threads. Sleepers are reused
//! newest first, so when the load drops the oldest stay parked until their
//! idle timeout and exit: an idle pool holds no threads. Admission bounds
//! `running` by `max_workers` and the queue by `queue_capacity` (tasks that
//! free workers have not taken yet do not count against it).
//!
//! # Waiting, panics, dropping
//!
//! `wait` takes the number of tasks submitted so far and sleeps until that
//! many have finished; a worker that brings the finished count to the
//! smallest number a waiter needs wakes the waiters. A task's panic is caught
//! on its worker, counted, and the worker goes on: capacity never drops.
//! Dropping the pool sets a closing flag and wakes every sleeper; workers
//! then exit the first time they find the queue empty, and the drop joins
//! them all.
//!
//! # Why not a lock-free idle stack
//!
//! `itogami` keeps idle workers on a lock-free Treiber stack, which in Rust
//! would reclaim its nodes with `crossbeam-epoch`. Here parked workers sit in
//! a deque under the pool's lock: the stack is touched only when a worker
//! parks or is woken, each of which costs a futex call and a context switch,
//! a hundred times what the lock costs, and the lock makes a sleeper's
//! timeout exit atomic with respect to a submitter's wake. The `idle_stack`
//! group of `benches/workers.rs` measures both stacks beside a wake. The
//! tasks themselves never wait for this lock.

mod finished;
mod idle;
mod pool;
mod shared;
mod state;
mod stats;
mod task;
mod worker;

pub use pool::{
    Builder, WorkerPool, DEFAULT_IDLE_TIMEOUT, DEFAULT_QUEUE_CAPACITY, MAX_QUEUE_CAPACITY,
    MAX_WORKERS,
};
pub use stats::WorkerStats;

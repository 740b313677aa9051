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
//!
//! // Results and panics per task, and tasks that borrow.
//! let answer = pool.spawn(|| 6 * 7);
//! let mut counts = [0u32; 4];
//! pool.scope(|s| {
//!     for (i, count) in counts.iter_mut().enumerate() {
//!         s.spawn(move || *count = i as u32 * 10);
//!     }
//! });
//! assert_eq!(answer.join().unwrap(), 42);
//! assert_eq!(counts, [0, 10, 20, 30]);
//! ```
//!
//! # How it works
//!
//! Tasks travel through one lock-free queue, each as four words and the
//! generation `wait` counts it in: closures of up to three words are stored
//! inline, so most tasks cost no allocation (`task.rs`). The queue is a
//! bounded ring (`crossbeam_queue::ArrayQueue`) sized for what admission
//! lets queue (the queue capacity, and tasks for a few free workers), with
//! an unbounded `crossbeam_deque::Injector` behind it, made on first use,
//! for tasks that do not fit (`queue.rs`): a push to the ring is
//! one compare-and-swap and a store, cheaper for the submitter, which feeds
//! every worker alone. The order is first in, first out, approximately
//! across the two parts. Every decision about a task is made on one atomic word
//! (`state.rs`) that holds:
//!
//! * `queued`: tasks admitted to the queue that no worker has claimed (up
//!   to the field's width; tasks past it, which only the pool's own tasks
//!   can submit, are counted under the lock: `shared.rs`);
//! * `running`: workers alive;
//! * `spinning` and `sleeping`: workers with nothing to do, awake (watching
//!   the queue) or parked on the idle stack (needing a wake). Together they
//!   are the *free* workers;
//! * a flag for submitters blocked until there is room.
//!
//! `try_submit` admits its task with one compare-and-swap on the word, and
//! the state it replaced says what to do next:
//!
//! 1. `queued < free`: a free worker is not yet spoken for. Queue the task;
//!    if every spinning worker is spoken for (`queued >= spinning`), pop the
//!    most recently parked worker off the idle stack and wake it.
//! 2. else, `running < max_workers`: count a new worker and start a thread
//!    with the task as its first.
//! 3. else, `queued < free + max_queued`: queue the task for the next
//!    busy worker to finish.
//! 4. else the pool is full, and `try_submit` gives the task back.
//!
//! `submit` works the other way round: it pushes its task, then counts it
//! with one compare-and-swap by the same rules (a worker it starts is
//! counted with the task claimed for it), and acts on what the count saw.
//! A task pushed before it is counted is findable before it is claimable,
//! so no claimer waits for a submitter preempted between the two; until
//! the count, the task is its submitter's to cover. A task the count finds
//! no room for (rule 4) is queued already: its submitter spins for a few
//! microseconds until the pool is within its bound again, then marks the
//! word and sleeps on a condition variable. A step that finds the mark and
//! makes room clears it and grants one sleeper a wake: a worker that
//! becomes free or leaves, at once; a claim, only once the queue has
//! drained to its low-water mark (half the capacity, rounded up, free), so
//! that a submitter that outruns the workers sleeps and wakes once per
//! half a queue, not once per task. The sleeper woken grants the next one
//! a wake if the pool is still within its bound, or raises the mark again;
//! a sleeper that finds the pool within its bound when its timer
//! (`ROOM_BACKSTOP`) fires returns without a wake (`submit.rs`).
//!
//! A worker that finishes a task exits if the pool has more workers than its
//! bound (lowered by `set_max_workers`), whatever is queued; else it claims
//! a queued one (`queued -= 1`, then pops; the claim guarantees the pop will
//! find a task, at once for `submit`'s, at worst after the submitter's push
//! lands for the others) or, if none is queued, becomes *spinning*. A
//! spinning worker watches the word for a few
//! microseconds, claiming a task if one is queued (or exiting, above the
//! bound), then takes the pool's lock and, in one step on the word, does the
//! same, or else becomes *sleeping* and parks on its own condition variable,
//! on top of the idle stack. Neither side calls `sched_yield` while it
//! waits: spinning ends in a park, and a wake from the thread that makes
//! progress (`spin.rs`). A submitter that pops it marks it notified and
//! counts it spinning again; the worker, woken, yields its core once before
//! it looks for work, so that it does not preempt the submitter that woke it
//! (`worker.rs`). A sleeper whose idle timeout passes unwoken leaves the
//! stack and, in one step, exits (`running -= 1`) if no task is queued, or
//! else becomes spinning.
//!
//! # Why no task is left behind
//!
//! The invariant: *while a task is queued, some worker is awake* (running a
//! task, spinning, or woken and about to spin), and every awake worker
//! claims queued tasks until there are none. It holds because:
//!
//! * A worker can park or exit only in a step on the word that sees
//!   `queued == 0`, unless the pool is above its bound (below). A
//!   submitter counts its task in `queued` in a step on the
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
//!   both. A submitter that finds the stack empty counted on a sleeper that
//!   has since been woken by another submitter, or by its timer while a
//!   task was queued (so it stayed): either way it is awake.
//! * A task that `submit` has pushed and not yet counted may find every
//!   worker parked: its count, which comes next, is a submitter's step on
//!   the word like any other, and sees them.
//! * Claims are anonymous: each is one unit of `queued`, and each unit is a
//!   task its submitter pushed before counting it (`submit`) or pushes
//!   right after (`try_submit`, the pool's own tasks' submits, tasks sent
//!   back), so a claimer's pop always finds a task, though maybe another
//!   submitter's. The task may be
//!   in the ring or in the overflow; a claimer polls both until it finds
//!   one, so which part a push chose never matters to the proof.
//! * A worker exits above the bound even with tasks queued, but only in a
//!   step that sees more workers than `max_workers` (at least 1), so the
//!   workers left number at least the bound. Of those, the busy ones claim
//!   when they finish, and the free ones are awake: a worker parks only
//!   within the bound, and lowering it below the workers alive wakes every
//!   parked one. Exits stop once the pool is within its bound.
//! * A worker blocked in `join` or at the end of a `scope` first runs
//!   queued tasks itself (`worker::help_while`).
//!
//! And no submitter sleeps for ever while its task is admitted: it sleeps
//! only after a step that saw the pool over its bound, and the steps that
//! bring the pool back within it see its mark. A claim leaves the mark up
//! only above the low-water mark, where the pool is full enough that
//! workers that finish tasks claim again; as the queue drains, one of
//! them reaches the mark or becomes free, and clears it. Workers that
//! stop short of the mark, each in a task that waits for what the
//! submitter does next, make no step that could wake it: its timer does.
//!
//! The `loom-tests/workers.rs` models check these races on the real code:
//! a submit racing a worker on its way to park, a parked worker woken, an
//! idle timeout firing as a submit arrives, two submitters racing idle
//! exits, blocked submitters woken by a worker and at the queue's
//! low-water mark, tasks overflowing the ring
//! while a worker claims, a task queueing past the count of `queued` while
//! a worker claims, two workers draining the queue while timing out,
//! closing, a `JoinHandle` completing as it is joined, a lowered bound
//! racing a submit and a worker finishing a task, a raised bound starting a
//! worker for a queued task, and a shutdown racing submits.
//!
//! # Growing, shrinking, bounding
//!
//! A thread starts only when no free worker is left for the task, so a pool
//! fed slower than it works keeps one or two threads. Sleepers are reused
//! newest first, so when the load drops the oldest stay parked until their
//! idle timeout and exit: an idle pool holds no threads. Admission bounds
//! `running` by `max_workers` and the queue by `max_queued` (tasks that
//! free workers have not taken yet do not count against it). The default
//! capacity (`DEFAULT_QUEUE_CAPACITY`, or a few tasks per worker in large
//! pools) is runway: a submitter that finds the queue full sleeps, and the
//! workers must not run dry while it wakes, or a submitter of small tasks
//! pays a sleep and a wake every few tasks. A queued task costs only its
//! few words.
//!
//! `set_max_workers` changes the bound at run time, with effect when it
//! returns. A worker's step reads the bound before it, and may read one
//! just replaced; so every step that lets a task start (a claim, a start)
//! reads the bound again after it, and undoes itself if the pool is above
//! the new bound: the claim goes back to the queue and the worker exits, or
//! the start is taken back. `set_max_workers` stores the bound, then makes
//! a step on the word: a later step reads from it, so its second read sees
//! the new bound; an earlier one was made before the call returned.
//!
//! # Waiting, panics, dropping
//!
//! Each task is counted unfinished in one of two generations, the current
//! one when it is submitted; `wait` flips the current generation and sleeps
//! until the old one has no unfinished task, so it waits for exactly the
//! tasks submitted before it (`generations.rs`). The counts and a "someone
//! waits" flag share one word, on a cache line of its own, so a worker pays
//! one atomic decrement per batch of finished tasks (of one generation,
//! counted before it runs a task of another, becomes free or exits:
//! `worker.rs`) and takes the lock only while someone waits.
//! A task's panic is caught on its worker, counted, and the worker goes on:
//! capacity never drops. `spawn` and `scope` wrap the task so that it
//! stores its result, or its panic, for its handle (`packet.rs`,
//! `scope.rs`). Dropping the pool sets a closing flag and wakes every
//! sleeper; workers exit the first time they find the queue empty, and the
//! drop joins them all; `shutdown_timeout` does the same until a deadline,
//! then drops what is still queued.
//!
//! # Why not a lock-free idle stack
//!
//! `itogami` keeps idle workers on a lock-free Treiber stack, which in Rust
//! would reclaim its nodes with `crossbeam-epoch`. Here parked workers sit in
//! a deque under the pool's lock (`idle.rs` gives the reasons in full). The
//! stack is touched only when a worker parks or is woken, and the
//! `idle_stack` group of `benches/workers.rs` puts the costs side by side: a
//! push and a pop under the lock, the same on the epoch-reclaimed stack
//! (which allocates a node per push and pins the epoch twice), and a
//! park/unpark round trip between two threads, which dwarfs both. The lock
//! is the simpler structure and measurably no slower; the tasks themselves
//! never wait for it.
//!
//! # The files
//!
//! One type, or one side of the protocol, per file, each using only the
//! files above it in this table:
//!
//! | file | what it holds |
//! | --- | --- |
//! | `word.rs` | `AtomicWord`: the 64-bit atomic the counts live in, behind a lock on targets without one |
//! | `spin.rs` | `Spin`, a bounded busy wait, and the pool's two yields |
//! | `state.rs` | `State`: the word every decision is made on; `invariant!` |
//! | `generations.rs` | `Generations`: unfinished tasks per wait generation |
//! | `task.rs` | `Task`: a closure in four words, inline when small; `Outcome` |
//! | `job.rs` | `Job`: a task with the generation it is counted in |
//! | `worker_stats.rs` | `WorkerStats` |
//! | `config.rs` | `Config`: a pool's settings, their defaults and limits, the queue's capacity |
//! | `queue.rs` | `TaskQueue`: the ring and the overflow behind it |
//! | `idle.rs` | `IdleStack`, `Sleeper`: parked workers |
//! | `shared.rs` | `Shared`: what the handle and the workers share; the steps both sides take (claims, wakes, room granted, tasks past the limit of `queued`, finishes) |
//! | `worker.rs` | a worker's life: running, claiming, spinning, parking; `help_while` |
//! | `submit.rs` | admission and the submit paths, starting workers, waiting for room and for tasks, resizing and closing |
//! | `packet.rs` | `Packet`, `Completion`, `ScopeData`, `TaskDropped`: a task's result on its way to its handle, for `spawn` and `scope` alike |
//! | `handle.rs` | `JoinHandle` |
//! | `scope.rs` | `Scope`, `ScopedJoinHandle` |
//! | `worker_pool.rs` | `WorkerPool` and `WorkerPoolBuilder` |

mod config;
mod generations;
mod handle;
mod idle;
mod job;
mod packet;
mod queue;
mod scope;
mod shared;
mod spin;
mod state;
mod submit;
mod task;
mod word;
mod worker;
mod worker_pool;
mod worker_stats;

pub use config::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_QUEUE_CAPACITY, DEFAULT_QUEUE_PER_WORKER, MAX_QUEUE_CAPACITY,
    MAX_WORKERS,
};
pub use handle::JoinHandle;
pub use packet::TaskDropped;
pub use scope::{Scope, ScopedJoinHandle};
pub use worker_pool::{WorkerPool, WorkerPoolBuilder};
pub use worker_stats::WorkerStats;

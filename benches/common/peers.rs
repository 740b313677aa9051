//! The ways to run many small tasks that `WorkerPool` is measured against,
//! and the two workloads. Shared by `benches/workers.rs` (time, in one
//! process) and `benches/workers_rss.rs` (time, peak memory and system
//! calls, one process per run).
#![allow(dead_code)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crossbeam_utils::sync::WaitGroup;
use stashpool::workers::WorkerPool;

/// Tiny tasks: a multiply each, so dispatch is all there is to measure.
pub const TINY_TASKS: u64 = 100_000;
/// Sleeping tasks: 1 ms each, so concurrency and memory per worker matter.
pub const SLEEPY_TASKS: u64 = 10_000;
/// The bound every pool gets for sleeping tasks.
pub const SLEEPY_WORKERS: usize = 64;

pub fn tiny_task(i: u64) -> impl FnOnce() + Send + 'static {
    move || {
        black_box(black_box(i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
}

pub fn sleepy_task(_: u64) -> impl FnOnce() + Send + 'static {
    || thread::sleep(Duration::from_millis(1))
}

/// The workers for tiny tasks: one per core.
pub fn cores() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// One way to run a batch of tasks; pools are made once and reused.
pub enum Peer {
    /// `stashpool::workers::WorkerPool`.
    Stashpool(WorkerPool),
    /// A `rayon` pool; the batch is spawned in a `scope`.
    Rayon(rayon::ThreadPool),
    /// The `threadpool` crate: `execute` each, then `join`.
    ThreadPool(threadpool::ThreadPool),
    /// A new thread per task, joined with a wait group: Go's "unlimited
    /// goroutines".
    ThreadPerTask,
    /// `std::thread::scope` with one thread per worker, each running its
    /// share of the tasks in place: no dispatch at all, the floor.
    ScopeFanOut(usize),
    /// One scoped thread per worker, taking turns: task `i` runs on thread
    /// `i % workers`, which then hands the turn on through one shared
    /// atomic. No pool and no queue, a cross-core handoff per task (with
    /// more than one worker); the threads spin for their turns, so a thread
    /// off its core stalls the others for as long, and the excess of a
    /// run over the median is the stalls the schedule added to it. The
    /// control of `workers_rss -- tail`. A task that panics leaves the
    /// others spinning: for the benches' own tasks only.
    Turns(usize),
}

pub const NAMES: [&str; 6] = [
    "stashpool",
    "stashpool_hand_off",
    "rayon",
    "threadpool",
    "thread_per_task",
    "scope_fan_out",
];

/// The peers for tiny tasks in one process: `thread_per_task` is left out
/// there (seconds per batch); `benches/workers_rss.rs` runs it.
pub const TINY_NAMES: [&str; 5] = [
    "stashpool",
    "stashpool_hand_off",
    "rayon",
    "threadpool",
    "scope_fan_out",
];

/// A `WorkerPool` with the default settings but a queue of `n` tasks:
/// `stashpool_queue_N`.
pub fn queue(n: usize) -> String {
    format!("stashpool_queue_{n}")
}

impl Peer {
    pub fn new(name: &str, workers: usize) -> Self {
        match name {
            // The default settings.
            "stashpool" => Self::Stashpool(WorkerPool::new(workers)),
            // No queue: `submit` waits for a free worker, every task is a
            // hand-off (stashpool 0.1's default).
            "stashpool_hand_off" => {
                Self::Stashpool(WorkerPool::builder(workers).max_queued(0).build())
            }
            _ if name.starts_with("stashpool_queue_") => {
                let n: usize = name["stashpool_queue_".len()..]
                    .parse()
                    .expect("stashpool_queue_N");
                Self::Stashpool(WorkerPool::builder(workers).max_queued(n).build())
            }
            "rayon" => Self::Rayon(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(workers)
                    .build()
                    .unwrap(),
            ),
            "threadpool" => Self::ThreadPool(threadpool::ThreadPool::new(workers)),
            "thread_per_task" => Self::ThreadPerTask,
            "scope_fan_out" => Self::ScopeFanOut(workers),
            "turns" => Self::Turns(workers),
            _ => panic!("unknown peer {name:?}; one of {NAMES:?}, or \"turns\""),
        }
    }

    /// Runs `make(0)` .. `make(n - 1)` and returns when all have finished.
    pub fn run<T: FnOnce() + Send + 'static>(&self, n: u64, make: impl Fn(u64) -> T + Sync) {
        match self {
            Self::Stashpool(pool) => {
                for i in 0..n {
                    pool.submit(make(i));
                }
                pool.wait();
            }
            Self::Rayon(pool) => pool.scope(|s| {
                for i in 0..n {
                    let task = make(i);
                    s.spawn(move |_| task());
                }
            }),
            Self::ThreadPool(pool) => {
                for i in 0..n {
                    pool.execute(make(i));
                }
                pool.join();
            }
            Self::ThreadPerTask => {
                let all_done = WaitGroup::new();
                for i in 0..n {
                    let (task, done) = (make(i), all_done.clone());
                    thread::spawn(move || {
                        task();
                        drop(done);
                    });
                }
                all_done.wait();
            }
            Self::ScopeFanOut(workers) => {
                let (make, workers) = (&make, *workers as u64);
                thread::scope(|s| {
                    for w in 0..workers {
                        s.spawn(move || {
                            for i in (w..n).step_by(workers as usize) {
                                make(i)();
                            }
                        });
                    }
                });
            }
            Self::Turns(workers) => {
                let (make, workers) = (&make, *workers as u64);
                let turn = AtomicU64::new(0);
                let turn = &turn;
                thread::scope(|s| {
                    for w in 0..workers {
                        s.spawn(move || {
                            for i in (w..n).step_by(workers as usize) {
                                while turn.load(Ordering::Acquire) != i {
                                    std::hint::spin_loop();
                                }
                                make(i)();
                                turn.store(i + 1, Ordering::Release);
                            }
                        });
                    }
                });
            }
        }
    }
}

//! Honest wall-clock timing for work that runs on several threads at once.
//!
//! Include it with `#[path = "common/parallel.rs"] mod parallel;` and call
//! it from criterion's `iter_custom`.
//!
//! Two mistakes make a parallel benchmark look faster than it is, and both
//! are easy to make on a small, shared machine:
//!
//! * **Starting the threads with a futex `Barrier`.** The barrier puts the
//!   early threads to sleep, and the kernel wakes them one at a time, up to
//!   milliseconds apart on a VM: the threads do not run together, so they
//!   contend less than the workload says they should.
//! * **Stamping the start on the main thread.** A main thread that waits on
//!   that barrier is woken last when the workers fill every core, so its
//!   clock starts after the work has begun and misses part of it.
//!
//! So the threads here wait by spinning on one counter (the last to arrive
//! releases every other within a cache-line transfer), each thread stamps
//! its own start and end, and the wall time runs from the earliest start to
//! the latest end. Any skew left in the start can only add time.
//!
//! One run can still be slowed by a neighbour (another process, a page
//! fault storm, a timer interrupt); interference only ever adds time, so
//! [`best_interleaved`] takes the best of several runs, alternated with a
//! partner workload (usually the baseline), and returns both bests: they
//! saw the same machine at the same moments, so their ratio stays fair.
//!
//! Threads that pass work to each other wait the same way: [`SpinChannel`]
//! is a bounded channel whose ends spin where a blocking channel would put
//! them to sleep.
#![allow(dead_code)]

use crossbeam_queue::ArrayQueue;
use std::hint;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How many times the subject and its partner each run per criterion
/// sample; the best of the subject's runs is the sample.
pub const REPS: usize = 3;

/// The shortest rep worth timing. A rep much shorter than this is
/// dominated by the threads' start (a thread that is not on a core when the
/// others are released starts late, and that skew counts), so reps are
/// never shorter, whatever iteration count criterion asks for.
pub const MIN_REP: Duration = Duration::from_millis(2);

/// Spins between yields while waiting for the other threads. Yielding now
/// and then lets a thread that has not started yet get a core when there
/// are more threads than cores; between yields a waiting thread checks the
/// counter on every spin, so the release reaches it at once.
const SPINS_PER_YIELD: u32 = 256;

/// A task for [`together`]: runs once, on a thread of its own.
pub type Task<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Runs `work` on `threads` threads at once and returns the wall time from
/// the first thread's start to the last thread's end.
///
/// With one thread, `work` runs on the calling thread: there is no start to
/// synchronise, and a new thread would only bring a cold cache.
pub fn parallel(threads: usize, work: impl Fn() + Sync) -> Duration {
    assert!(threads > 0, "parallel: at least one thread");
    if threads == 1 {
        let start = Instant::now();
        work();
        return start.elapsed();
    }
    let work = &work;
    together((0..threads).map(|_| Box::new(work) as Task<'_>).collect())
}

/// Runs every task on a thread of its own, all released together by a
/// spinning start, and returns the wall time from the earliest start to
/// the latest end.
///
/// Spawning and joining the threads is not timed: each thread stamps its
/// own start after the release and its own end when its task returns.
pub fn together(tasks: Vec<Task<'_>>) -> Duration {
    let count = tasks.len();
    assert!(count > 0, "together: at least one task");
    let arrived = AtomicUsize::new(0);
    let arrived = &arrived;
    let stamps: Vec<(Instant, Instant)> = thread::scope(|s| {
        let handles: Vec<_> = tasks
            .into_iter()
            .map(|task| {
                s.spawn(move || {
                    // AcqRel: the last arrival's increment is what releases
                    // the others, and each waiter's load must see it.
                    arrived.fetch_add(1, Ordering::AcqRel);
                    let mut spins = 0u32;
                    while arrived.load(Ordering::Acquire) < count {
                        spin(&mut spins);
                    }
                    let start = Instant::now();
                    task();
                    (start, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a timed task panicked"))
            .collect()
    });
    let first_start = stamps.iter().map(|&(start, _)| start).min().unwrap();
    let last_end = stamps.iter().map(|&(_, end)| end).max().unwrap();
    last_end - first_start
}

/// One turn of a spinning wait: a spin, and a yield every
/// [`SPINS_PER_YIELD`] turns.
fn spin(spins: &mut u32) {
    hint::spin_loop();
    *spins += 1;
    if spins.is_multiple_of(SPINS_PER_YIELD) {
        thread::yield_now();
    }
}

/// A bounded channel whose ends wait by spinning: a send that finds it
/// full and a receive that finds it empty spin (yielding now and then, as
/// the start does) until the other end moves.
///
/// A blocking channel (`mpsc::sync_channel`) puts such an end to sleep.
/// Where an idle CPU takes long to wake (a VM), a producer and a consumer
/// on a blocking channel then fall into one of two regimes: neither
/// sleeps, or the producer fills the channel and both sleep once per
/// channel-load, each load paying two wake-ups. Which one a run lands in
/// depends on whether one end's burst outlasts the other's wake-up, not on
/// what the work costs (a slower producer can read faster), so the time
/// would be the scheduler's. With spinning ends both threads stay on their
/// cores and the time is the work's.
pub struct SpinChannel<T> {
    queue: ArrayQueue<T>,
}

impl<T> SpinChannel<T> {
    /// A channel that holds at most `capacity` values.
    pub fn new(capacity: usize) -> Self {
        Self {
            queue: ArrayQueue::new(capacity),
        }
    }

    /// Sends `value`, spinning while the channel is full.
    pub fn send(&self, mut value: T) {
        let mut spins = 0u32;
        while let Err(back) = self.queue.push(value) {
            value = back;
            spin(&mut spins);
        }
    }

    /// Receives the oldest value, spinning while the channel is empty.
    pub fn recv(&self) -> T {
        let mut spins = 0u32;
        loop {
            if let Some(value) = self.queue.pop() {
                return value;
            }
            spin(&mut spins);
        }
    }
}

/// Runs `subject` and `partner` [`REPS`] times each, alternating, and
/// returns the best (shortest) time of each: `(subject, partner)`.
///
/// Both bests come from the same stretch of the machine's life, so their
/// ratio is fair even when the machine is busy: a neighbour that slows one
/// rep of the subject is as likely to slow a rep of the partner.
pub fn best_interleaved(
    mut subject: impl FnMut() -> Duration,
    mut partner: impl FnMut() -> Duration,
) -> (Duration, Duration) {
    let (mut best_subject, mut best_partner) = (Duration::MAX, Duration::MAX);
    for _ in 0..REPS {
        best_subject = best_subject.min(subject());
        best_partner = best_partner.min(partner());
    }
    (best_subject, best_partner)
}

/// The fewest iterations (a power of two) whose best rep lasts [`MIN_REP`].
///
/// `run(n)` times `n` iterations and returns the subject's best rep first,
/// as [`best_interleaved`] does. Calibrating on the best of several reps
/// keeps one stalled rep from making the count too small.
pub fn calibrate(mut run: impl FnMut(u64) -> (Duration, Duration)) -> u64 {
    let mut iters = 1;
    while iters < 1 << 40 && run(iters).0 < MIN_REP {
        iters *= 2;
    }
    iters
}

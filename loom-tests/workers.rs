//! loom models of the `WorkerPool` protocol, run on the pool's own code
//! through the `sync` shim:
//!
//! ```text
//! RUSTFLAGS="--cfg stashpool_loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test --release --test loom_workers --target-dir target/loom
//! ```
//!
//! or `./loom.sh`, which runs every loom model.
//!
//! Under loom, the task queue is a locked `VecDeque` with the injector's
//! interface, and a timed wait times out at once (loom has no clock): the
//! earliest an idle timeout can fire, which races hardest with a submit.
//! Each model keeps to at most four threads (the model's own and the
//! workers the pool starts).
#![cfg(stashpool_loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use stashpool::workers::WorkerPool;

/// Runs `f` under `loom::model` and reports (with `--nocapture`) how many
/// interleavings were explored.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let explored = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&explored);
    loom::model(move || {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "{name}: {} interleavings",
        explored.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// A task that counts itself.
fn count(counter: &Arc<AtomicUsize>) -> impl FnOnce() + Send + 'static {
    let counter = Arc::clone(counter);
    move || {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Runs one task, waits, runs another while the worker heads for parking
/// (and, with a zero idle timeout, for exiting), and waits again.
fn two_tasks_with_a_wait_between(pool: &WorkerPool) {
    let counter = Arc::new(AtomicUsize::new(0));
    pool.submit(count(&counter));
    pool.wait();
    pool.submit(count(&counter));
    assert!(pool.running() <= 1);
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 2);
    assert_eq!(pool.stats().completed, 2);
}

/// Submits a task from another thread and one from this one at the same
/// time, then waits for both; returns the pool.
fn submit_from_two_threads(pool: WorkerPool) -> Arc<WorkerPool> {
    let pool = Arc::new(pool);
    let counter = Arc::new(AtomicUsize::new(0));
    let other = {
        let (pool, counter) = (Arc::clone(&pool), Arc::clone(&counter));
        thread::spawn(move || {
            pool.submit(count(&counter));
            assert!(pool.running() <= 1);
        })
    };
    pool.submit(count(&counter));
    other.join().unwrap();
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 2);
    assert_eq!(pool.stats().completed, 2);
    pool
}

/// The second task races the only worker on its way from its first task to
/// parking: it must be handed over, by the queue to a spinning worker or by
/// a wake to a parked one, and `wait` must see both tasks finish.
#[test]
fn a_submit_reaches_a_worker_on_its_way_to_park() {
    model("a_submit_reaches_a_worker_on_its_way_to_park", || {
        let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
        let counter = Arc::new(AtomicUsize::new(0));
        pool.submit(count(&counter));
        pool.submit(count(&counter));
        pool.wait();
        assert_eq!(counter.load(Ordering::Relaxed), 2);
        assert_eq!((pool.running(), pool.stats().spawned), (1, 1));
        drop(pool);
    });
}

/// `wait` between the submits lets the worker go all the way to parking;
/// with no idle timeout the second submit must wake it, not start another.
#[test]
fn a_parked_worker_is_woken_and_reused() {
    model("a_parked_worker_is_woken_and_reused", || {
        let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
        two_tasks_with_a_wait_between(&pool);
        assert_eq!(pool.stats().spawned, 1);
    });
}

/// The worker's idle timeout fires as soon as it parks, racing the second
/// submit: either the submit wakes it (it stays), or it exits and the
/// submit starts a new worker, or it sees the task and stays to run it. Never
/// both exit and be counted on, never two workers at once.
#[test]
fn an_idle_exit_races_a_submit() {
    model("an_idle_exit_races_a_submit", || {
        let pool = WorkerPool::builder(1).idle_timeout(Duration::ZERO).build();
        two_tasks_with_a_wait_between(&pool);
        let stats = pool.stats();
        assert!((1..=2).contains(&stats.spawned), "{stats:?}");
        drop(pool);
    });
}

/// Two submitters and one worker with no queue: whoever finds the pool full
/// blocks until the worker makes room, and must be woken.
#[test]
fn a_blocked_submitter_is_woken_when_a_worker_frees() {
    model("a_blocked_submitter_is_woken_when_a_worker_frees", || {
        let pool = WorkerPool::builder(1)
            .queue_capacity(0)
            .idle_timeout(Duration::MAX)
            .build();
        let pool = submit_from_two_threads(pool);
        assert_eq!(pool.stats().spawned, 1);
    });
}

/// Dropping the pool right after submitting runs the queued task and joins
/// the worker, wherever it was (running, spinning or parked).
#[test]
fn dropping_runs_queued_tasks_and_joins_the_worker() {
    model("dropping_runs_queued_tasks_and_joins_the_worker", || {
        let pool = WorkerPool::builder(1)
            .queue_capacity(1)
            .idle_timeout(Duration::MAX)
            .build();
        let counter = Arc::new(AtomicUsize::new(0));
        pool.submit(count(&counter));
        pool.submit(count(&counter));
        drop(pool);
        assert_eq!(counter.load(Ordering::Relaxed), 2);
    });
}

/// Two workers share the queue: the third task goes to whichever frees
/// first, or waits in the queue; a worker that times out must not leave it
/// there.
#[test]
fn two_workers_drain_the_queue_while_timing_out() {
    model("two_workers_drain_the_queue_while_timing_out", || {
        let pool = WorkerPool::builder(2)
            .queue_capacity(1)
            .idle_timeout(Duration::ZERO)
            .build();
        let counter = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            pool.submit(count(&counter));
        }
        pool.wait();
        assert_eq!(counter.load(Ordering::Relaxed), 3);
        assert!(pool.running() <= 2);
        drop(pool);
    });
}

/// Two submitters race a worker whose idle timeout fires at once: every
/// exit, wake and start must leave exactly the tasks submitted run, with
/// never more than one worker alive.
#[test]
fn concurrent_submits_race_idle_exits() {
    model("concurrent_submits_race_idle_exits", || {
        let pool = WorkerPool::builder(1)
            .queue_capacity(1)
            .idle_timeout(Duration::ZERO)
            .build();
        drop(submit_from_two_threads(pool));
    });
}

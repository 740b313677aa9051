//! loom models of the `WorkerPool` protocol, run on the pool's own code
//! through the `sync` shim:
//!
//! ```text
//! RUSTFLAGS="--cfg stashpool_loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test --release -p stashpool-loom-tests --test loom_workers \
//!     --target-dir target/loom
//! ```
//!
//! or `./loom.sh`, which runs every loom model.
//!
//! Under loom, the task queue's ring and its overflow are locked
//! `VecDeque`s with the interfaces of `ArrayQueue` and `Injector`, the
//! ring of one slot (so the second queued task overflows), the state
//! word's count of queued tasks holds two (so a task the pool's own task
//! submits past them is counted apart), and a timed wait times out at once
//! (loom has no clock): the earliest an idle timeout can fire, which races
//! hardest with a submit.
//! Each model keeps to at most four threads (the model's own and the
//! workers the pool starts).
#![cfg(stashpool_loom)]

use std::time::Duration;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use stashpool::workers::{TaskDropped, WorkerPool};

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

/// Submits `n` tasks that count themselves, one after another, waits, and
/// checks that every one ran.
fn submit_and_wait(pool: &WorkerPool, n: usize) {
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..n {
        pool.submit(count(&counter));
    }
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), n);
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
        submit_and_wait(&pool, 2);
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

/// A worker counts the finishes of tasks of one generation in a batch:
/// a `wait` in another thread, racing a third submit (counted in either
/// generation), must still return once the first two tasks have finished,
/// not before, and every finish must be counted exactly once.
#[test]
fn batched_finishes_race_a_wait() {
    model("batched_finishes_race_a_wait", || {
        let pool = Arc::new(WorkerPool::builder(1).idle_timeout(Duration::MAX).build());
        let counter = Arc::new(AtomicUsize::new(0));
        pool.submit(count(&counter));
        pool.submit(count(&counter));
        let waiter = {
            let (pool, counter) = (Arc::clone(&pool), Arc::clone(&counter));
            thread::spawn(move || {
                pool.wait();
                assert!(counter.load(Ordering::Relaxed) >= 2);
            })
        };
        pool.submit(count(&counter));
        waiter.join().unwrap();
        pool.wait();
        assert_eq!(counter.load(Ordering::Relaxed), 3);
        assert_eq!(pool.stats().completed, 3);
    });
}

/// Tasks overflow the ring (one slot under loom) while the worker claims
/// and pops: each claim must find a task in whichever part it went to, and
/// every task runs exactly once. Not in order: a worker that found the ring
/// empty just before a push to it can take a newer task from the overflow
/// (the order across the two parts is approximate, `queue.rs`).
#[test]
fn tasks_overflow_the_ring_while_a_worker_claims() {
    model("tasks_overflow_the_ring_while_a_worker_claims", || {
        let pool = WorkerPool::builder(1)
            .max_queued(3)
            .idle_timeout(Duration::MAX)
            .build();
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..4 {
            let order = Arc::clone(&order);
            pool.submit(move || order.lock().unwrap().push(i));
        }
        pool.wait();
        let mut ran = order.lock().unwrap().clone();
        // The first task went to the new worker directly.
        assert_eq!(ran[0], 0);
        ran.sort_unstable();
        assert_eq!(ran, [0, 1, 2, 3]);
        assert_eq!(pool.stats().completed, 4);
    });
}

/// Two submitters and one worker with no queue: whoever finds the pool full
/// blocks until the worker makes room, and must be woken.
#[test]
fn a_blocked_submitter_is_woken_when_a_worker_frees() {
    model("a_blocked_submitter_is_woken_when_a_worker_frees", || {
        let pool = WorkerPool::builder(1)
            .max_queued(0)
            .idle_timeout(Duration::MAX)
            .build();
        let pool = submit_from_two_threads(pool);
        assert_eq!(pool.stats().spawned, 1);
    });
}

/// One worker, a queue of one, and three tasks submitted at once: the last
/// submitter may find the pool full, with its task queued already, and
/// sleep; the worker's first claim then leaves the queue above its
/// low-water mark (empty, for a queue of one) and does not wake it, the
/// second does (or the worker, free at last). Every interleaving ends with
/// all three run and nobody asleep: a wake deferred to the low-water mark
/// is never lost.
#[test]
fn a_blocked_submitter_is_woken_at_the_low_water_mark() {
    model("a_blocked_submitter_is_woken_at_the_low_water_mark", || {
        let pool = WorkerPool::builder(1)
            .max_queued(1)
            .idle_timeout(Duration::MAX)
            .build();
        submit_and_wait(&pool, 3);
        assert_eq!(pool.stats().spawned, 1);
    });
}

/// Dropping the pool right after submitting runs the queued task and joins
/// the worker, wherever it was (running, spinning or parked).
#[test]
fn dropping_runs_queued_tasks_and_joins_the_worker() {
    model("dropping_runs_queued_tasks_and_joins_the_worker", || {
        let pool = WorkerPool::builder(1)
            .max_queued(1)
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
            .max_queued(1)
            .idle_timeout(Duration::ZERO)
            .build();
        submit_and_wait(&pool, 3);
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
            .max_queued(1)
            .idle_timeout(Duration::ZERO)
            .build();
        drop(submit_from_two_threads(pool));
    });
}

/// A spawned task completes its packet while the caller joins it (and,
/// when it gets there first, while the task's own worker still holds the
/// packet): `join` must return the value exactly once, whoever wins.
#[test]
fn a_join_races_the_task_completing() {
    model("a_join_races_the_task_completing", || {
        let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
        let handle = pool.spawn(|| 7u8);
        let finished_early = handle.is_finished();
        assert_eq!(handle.join().unwrap(), 7);
        pool.wait();
        let stats = pool.stats();
        assert_eq!((stats.completed, stats.panicked), (1, 0));
        // Seen finished before the join means the join could not wait.
        let _ = finished_early;
        drop(pool);
    });
}

/// A task that panics: its payload reaches `join`, and the panic is
/// counted, whichever of the worker and the joiner comes first.
#[test]
fn a_join_gets_the_panic_of_a_task() {
    model("a_join_gets_the_panic_of_a_task", || {
        let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
        let handle = pool.spawn(|| -> u8 { std::panic::panic_any(3u8) });
        let payload = handle.join().unwrap_err();
        assert_eq!(payload.downcast_ref::<u8>(), Some(&3));
        pool.wait();
        assert_eq!(pool.stats().panicked, 1);
    });
}

/// The bound is lowered while another thread submits: the worker running
/// the first task may exit as soon as it is above the bound, and the
/// second task must still run (on it, or on a new worker), with no worker
/// left above the bound once the pool is quiet. A submit that comes after
/// the lowering has returned must not start a second worker (the first is
/// alive, the bound is 1): its task runs alone.
#[test]
fn lowering_the_bound_races_a_submit() {
    model("lowering_the_bound_races_a_submit", || {
        let pool = Arc::new(
            WorkerPool::builder(2)
                .max_queued(0)
                .idle_timeout(Duration::MAX)
                .build(),
        );
        let running = Arc::new(AtomicUsize::new(0));
        let lowered = Arc::new(AtomicBool::new(false));
        let task = |running: &Arc<AtomicUsize>, alone: bool| {
            let running = Arc::clone(running);
            move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(!alone || now == 1, "{now} tasks ran under a bound of 1");
                running.fetch_sub(1, Ordering::SeqCst);
            }
        };
        pool.submit(task(&running, false));
        let other = {
            let (pool, running, lowered) = (
                Arc::clone(&pool),
                Arc::clone(&running),
                Arc::clone(&lowered),
            );
            thread::spawn(move || {
                let after = lowered.load(Ordering::SeqCst);
                pool.submit(task(&running, after));
            })
        };
        pool.set_max_workers(1);
        lowered.store(true, Ordering::SeqCst);
        other.join().unwrap();
        pool.wait();
        assert_eq!(pool.stats().completed, 2);
        assert!(pool.stats().unfinished() == 0);
    });
}

/// The pool's count of queued tasks is full (two under loom) when a task
/// submits to its own pool, as the other worker finishes its task and
/// claims: the new task is counted apart, under the lock, and must be moved
/// into the count by the claim that makes room, whichever comes first, and
/// run. The submitting task holds its worker until the other has run all
/// three, which keeps the model small.
#[test]
fn a_task_queues_past_the_count_as_a_worker_claims() {
    model("a_task_queues_past_the_count_as_a_worker_claims", || {
        let pool = Arc::new(WorkerPool::builder(2).idle_timeout(Duration::MAX).build());
        let (go, release, drained, hold) = (Flag::new(), Flag::new(), Flag::new(), Flag::new());
        let counter = Arc::new(AtomicUsize::new(0));
        let task = || {
            let (counter, drained) = (Arc::clone(&counter), Arc::clone(&drained));
            move || {
                if counter.fetch_add(1, Ordering::SeqCst) == 2 {
                    drained.set();
                }
            }
        };
        pool.submit({
            let (pool, task, go, hold) = (
                Arc::clone(&pool),
                task(),
                Arc::clone(&go),
                Arc::clone(&hold),
            );
            move || {
                go.wait();
                pool.submit(task);
                hold.wait();
            }
        });
        // The first worker is busy: this task starts the second.
        pool.submit({
            let release = Arc::clone(&release);
            move || release.wait()
        });
        for _ in 0..2 {
            pool.submit(task());
        }
        go.set();
        release.set();
        drained.wait();
        hold.set();
        pool.wait();
        assert_eq!(pool.stats().completed, 5);
    });
}

/// A flag one thread waits for and another sets. A lock and a condition
/// variable, which loom never wakes spuriously, rather than a spin on an
/// atomic, whose rounds loom would explore one by one.
struct Flag {
    set: Mutex<bool>,
    changed: Condvar,
}

impl Flag {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            set: Mutex::new(false),
            changed: Condvar::new(),
        })
    }

    fn set(&self) {
        *self.set.lock().unwrap() = true;
        self.changed.notify_all();
    }

    fn wait(&self) {
        let mut set = self.set.lock().unwrap();
        while !*set {
            set = self.changed.wait(set).unwrap();
        }
    }
}

/// Both workers of a pool bounded at 2 are busy; one finishes its task as
/// the bound is lowered to 1, while the other's task submits a task. A
/// worker that claimed that task with the old bound, read before the
/// lowering's step, must read the new one and give it back; a task
/// submitted once the lowering has returned must run alone (the other
/// worker still runs its task until released, so the bound lets no second
/// task start).
#[test]
fn lowering_the_bound_races_a_finishing_worker_and_a_submit() {
    model(
        "lowering_the_bound_races_a_finishing_worker_and_a_submit",
        || {
            let pool = Arc::new(WorkerPool::builder(2).idle_timeout(Duration::MAX).build());
            let running = Arc::new(AtomicUsize::new(0));
            let lowered = Arc::new(AtomicBool::new(false));
            let (started, release, release_b) = (Flag::new(), Flag::new(), Flag::new());
            pool.submit({
                let (started, release) = (Arc::clone(&started), Arc::clone(&release));
                move || {
                    started.set();
                    release.wait();
                }
            });
            started.wait();
            // The first worker is busy: this task starts the second.
            pool.submit({
                let (pool, running, lowered, release_b) = (
                    Arc::clone(&pool),
                    Arc::clone(&running),
                    Arc::clone(&lowered),
                    Arc::clone(&release_b),
                );
                move || {
                    running.fetch_add(1, Ordering::SeqCst);
                    let after = lowered.load(Ordering::SeqCst);
                    let alone = Arc::clone(&running);
                    pool.submit(move || {
                        let now = alone.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(!after || now == 1, "{now} tasks ran under a bound of 1");
                        alone.fetch_sub(1, Ordering::SeqCst);
                    });
                    release_b.wait();
                    running.fetch_sub(1, Ordering::SeqCst);
                }
            });
            release.set();
            pool.set_max_workers(1);
            lowered.store(true, Ordering::SeqCst);
            release_b.set();
            // The first wait may return before the inner task is submitted.
            pool.wait();
            pool.wait();
            let stats = pool.stats();
            assert_eq!((stats.completed, stats.spawned), (3, 2), "{stats:?}");
        },
    );
}

/// One worker is busy and a task waits in the queue when the bound is
/// raised: the queued task must get a worker of its own at once (the first
/// task is released only after it has run), whether the busy worker's
/// first task has started or not.
#[test]
fn raising_the_bound_starts_a_worker_for_a_queued_task() {
    model(
        "raising_the_bound_starts_a_worker_for_a_queued_task",
        || {
            let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
            let (release, ran) = (Flag::new(), Flag::new());
            pool.submit({
                let release = Arc::clone(&release);
                move || release.wait()
            });
            pool.submit({
                let ran = Arc::clone(&ran);
                move || ran.set()
            });
            pool.set_max_workers(2);
            ran.wait();
            release.set();
            pool.wait();
            assert_eq!(pool.stats().completed, 2);
        },
    );
}

/// A task spawned and then shut down with no time to spare races its
/// worker: it runs, or it is dropped and its handle says so; never both,
/// never neither, and the count returned matches.
#[test]
fn shutdown_races_a_queued_task() {
    model("shutdown_races_a_queued_task", || {
        let pool = WorkerPool::builder(1)
            .max_queued(1)
            .idle_timeout(Duration::MAX)
            .build();
        let counter = Arc::new(AtomicUsize::new(0));
        let first = {
            let counter = Arc::clone(&counter);
            pool.spawn(move || counter.fetch_add(1, Ordering::Relaxed))
        };
        let second = {
            let counter = Arc::clone(&counter);
            pool.spawn(move || counter.fetch_add(1, Ordering::Relaxed))
        };
        let dropped = pool.shutdown_timeout(Duration::ZERO);
        let outcomes = [first.join(), second.join()];
        let ran = outcomes.iter().filter(|r| r.is_ok()).count();
        for outcome in &outcomes {
            if let Err(payload) = outcome {
                assert!(payload.is::<TaskDropped>());
            }
        }
        assert_eq!(ran, counter.load(Ordering::Relaxed));
        assert_eq!(ran + dropped, 2);
    });
}

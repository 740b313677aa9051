//! `WorkerPool`: the bound on workers, thread reuse, growing and shrinking,
//! panics, `wait`, `spawn` and `JoinHandle`, `scope`, tasks that use their
//! own pool, `set_max_workers`, `shutdown_timeout`, dropping, hooks, bad
//! input, and a stress run where submits race idle workers that exit.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

mod common;

use common::eventually;
use stashpool::workers::{MAX_QUEUE_CAPACITY, MAX_WORKERS, TaskDropped, WorkerPool};

/// How long a test waits for something that must happen before it calls it
/// a failure (instead of hanging). Never an expectation of speed: under
/// Miri, which interprets every step and is slowed further by a busy
/// machine, it is longer still.
const DEADLINE: Duration = Duration::from_secs(if cfg!(miri) { 1800 } else { 60 });

/// Runs `f` on another thread and returns its result, failing the test if
/// it takes past `DEADLINE` (a hang is a bug: it must fail, not stall CI).
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(DEADLINE)
        .expect("did not finish before the deadline: a hang")
}

/// Tasks that block until released, and tell when they start.
struct Gate {
    started_tx: mpsc::Sender<()>,
    started: mpsc::Receiver<()>,
    release_tx: Vec<mpsc::Sender<()>>,
}

impl Gate {
    fn new() -> Self {
        let (started_tx, started) = mpsc::channel();
        Self {
            started_tx,
            started,
            release_tx: Vec::new(),
        }
    }

    /// A task that reports its start, then blocks until `release_all`.
    fn task(&mut self) -> impl FnOnce() + Send + 'static + use<> {
        let started = self.started_tx.clone();
        let (release_tx, release) = mpsc::channel::<()>();
        self.release_tx.push(release_tx);
        move || {
            started.send(()).unwrap();
            // An error means the test is over (the sender dropped): return.
            let _ = release.recv();
        }
    }

    /// Waits until `n` gated tasks have started (all at once, as they block).
    fn started(&self, n: usize) {
        for i in 0..n {
            assert!(
                self.started.recv_timeout(DEADLINE).is_ok(),
                "only {i} of {n} gated tasks started"
            );
        }
    }

    /// Releases the gated task made first of those not yet released.
    fn release_one(&mut self) {
        let _ = self.release_tx.remove(0).send(());
    }

    fn release_all(&mut self) {
        for tx in self.release_tx.drain(..) {
            let _ = tx.send(());
        }
    }
}

fn counter_task(counter: &Arc<AtomicUsize>) -> impl FnOnce() + Send + 'static + use<> {
    let counter = Arc::clone(counter);
    move || {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn runs_every_task_on_reused_threads() {
    // Fewer under Miri, which interprets every spin of the idle workers.
    let tasks: u64 = if cfg!(miri) { 60 } else { 2000 };
    let pool = WorkerPool::new(4);
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..tasks {
        pool.submit(counter_task(&counter));
    }
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed) as u64, tasks);
    let stats = pool.stats();
    assert_eq!(
        (stats.submitted, stats.completed, stats.panicked),
        (tasks, tasks, 0)
    );
    assert_eq!((stats.queued, stats.unfinished()), (0, 0));
    assert!(stats.spawned <= 4, "{stats:?}");
    assert!(
        stats.running <= 4 && stats.idle == stats.running,
        "{stats:?}"
    );
}

#[test]
fn grows_to_max_workers_when_busy_and_no_further() {
    let pool = WorkerPool::builder(3).max_queued(0).build();
    let mut gate = Gate::new();
    for _ in 0..3 {
        pool.submit(gate.task());
    }
    // Three tasks block at once: the pool started a worker for each.
    gate.started(3);
    assert_eq!(pool.running(), 3);
    // Full: no free worker, no new one allowed, no room in the queue.
    let extra = counter_task(&Arc::new(AtomicUsize::new(0)));
    let extra = pool
        .try_submit(extra)
        .expect_err("a full pool gives the task back");
    gate.release_all();
    pool.wait();
    assert!(pool.try_submit(extra).is_ok());
    pool.wait();
    let stats = pool.stats();
    assert_eq!(stats.spawned, 3, "{stats:?}");
    assert_eq!(stats.completed, 4);
}

#[test]
fn never_runs_more_tasks_at_once_than_max_workers() {
    let pool = WorkerPool::builder(3).max_queued(2).build();
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    for _ in 0..500 {
        let (now, peak) = (Arc::clone(&now), Arc::clone(&peak));
        pool.submit(move || {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            for _ in 0..50 {
                thread::yield_now();
            }
            now.fetch_sub(1, Ordering::SeqCst);
        });
        let stats = pool.stats();
        assert!(stats.running <= 3, "{stats:?}");
    }
    pool.wait();
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "peak concurrency {peak}");
}

#[test]
fn queued_tasks_wait_for_a_busy_worker_up_to_the_capacity() {
    let pool = WorkerPool::builder(1).max_queued(2).build();
    let mut gate = Gate::new();
    pool.submit(gate.task());
    gate.started(1);
    let counter = Arc::new(AtomicUsize::new(0));
    assert!(pool.try_submit(counter_task(&counter)).is_ok());
    assert!(pool.try_submit(counter_task(&counter)).is_ok());
    assert!(pool.try_submit(counter_task(&counter)).is_err());
    assert_eq!(pool.stats().queued, 2);
    gate.release_all();
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 2);
}

#[test]
fn submit_waits_until_a_worker_is_free() {
    let pool = Arc::new(WorkerPool::builder(1).max_queued(0).build());
    let mut gate = Gate::new();
    let first_done = Arc::new(AtomicBool::new(false));
    {
        let task = gate.task();
        let first_done = Arc::clone(&first_done);
        pool.submit(move || {
            task();
            first_done.store(true, Ordering::SeqCst);
        });
    }
    gate.started(1);
    let returned = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (pool, returned, first_done) = (pool.clone(), returned.clone(), first_done.clone());
        thread::spawn(move || {
            pool.submit(|| {});
            returned.store(true, Ordering::SeqCst);
            // Admitted only once the one worker finished the first task.
            first_done.load(Ordering::SeqCst)
        })
    };
    // While the only worker is busy, the submit does not return.
    assert!(!eventually(Duration::from_millis(100), || returned
        .load(Ordering::SeqCst)));
    gate.release_all();
    assert!(
        submitter.join().unwrap(),
        "submit returned while the pool was full"
    );
    pool.wait();
    assert_eq!(pool.stats().completed, 2);
}

/// A panic payload whose own drop panics.
struct PanickyPayload;

impl Drop for PanickyPayload {
    fn drop(&mut self) {
        panic!("dropping the payload panics too");
    }
}

#[test]
fn panics_are_counted_and_never_lower_capacity() {
    let pool = WorkerPool::new(2);
    for i in 0..20 {
        pool.submit(move || {
            if i % 2 == 0 {
                panic!("task {i} fails");
            } else {
                panic::panic_any(PanickyPayload);
            }
        });
    }
    pool.wait();
    let stats = pool.stats();
    assert_eq!((stats.panicked, stats.completed), (20, 0), "{stats:?}");
    // Both workers survived: two tasks still run at once, on the same threads.
    let mut gate = Gate::new();
    pool.submit(gate.task());
    pool.submit(gate.task());
    gate.started(2);
    gate.release_all();
    pool.wait();
    let stats = pool.stats();
    assert_eq!((stats.completed, stats.spawned), (2, 2), "{stats:?}");
}

#[test]
fn wait_waits_for_every_task_submitted_before_it() {
    let pool = WorkerPool::new(3);
    let done: Arc<Vec<AtomicBool>> = Arc::new((0..200).map(|_| AtomicBool::new(false)).collect());
    for i in 0..200 {
        let done = Arc::clone(&done);
        pool.submit(move || {
            for _ in 0..(i % 7) * 20 {
                thread::yield_now();
            }
            done[i].store(true, Ordering::SeqCst);
        });
    }
    pool.wait();
    let unfinished = done.iter().filter(|d| !d.load(Ordering::SeqCst)).count();
    assert_eq!(unfinished, 0);
    // And with nothing to wait for, it returns at once.
    pool.wait();
    WorkerPool::new(1).wait();
}

#[test]
fn wait_is_not_fooled_by_later_tasks_finishing_first() {
    // A task that submits a short sub-task and then blocks: the sub-task
    // finishing brings the finished count up to what was submitted before
    // `wait` was called, but the first task is still running.
    let pool = Arc::new(WorkerPool::new(2));
    let (sub_done_tx, sub_done) = mpsc::channel();
    let (release_tx, release) = mpsc::channel::<()>();
    let p = Arc::clone(&pool);
    pool.submit(move || {
        p.submit(move || sub_done_tx.send(()).unwrap());
        release.recv().unwrap();
    });
    let (returned_tx, returned) = mpsc::channel();
    let waiter = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            pool.wait();
            returned_tx.send(()).unwrap();
        })
    };
    sub_done.recv().unwrap();
    // The first task is still blocked: `wait` must not have returned. (A
    // correct pool never returns here; a wrong one would within a moment.)
    assert_eq!(
        returned.recv_timeout(Duration::from_millis(300)),
        Err(mpsc::RecvTimeoutError::Timeout),
        "wait returned while a task submitted before it was running"
    );
    release_tx.send(()).unwrap();
    returned.recv_timeout(DEADLINE).unwrap();
    waiter.join().unwrap();
}

#[test]
fn several_threads_can_wait_at_once() {
    let pool = Arc::new(WorkerPool::new(2));
    let mut gate = Gate::new();
    pool.submit(gate.task());
    gate.started(1);
    let finished = Arc::new(AtomicBool::new(false));
    {
        let finished = Arc::clone(&finished);
        pool.submit(move || finished.store(true, Ordering::SeqCst));
    }
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let (pool, finished) = (Arc::clone(&pool), Arc::clone(&finished));
            thread::spawn(move || {
                pool.wait();
                finished.load(Ordering::SeqCst)
            })
        })
        .collect();
    gate.release_all();
    for waiter in waiters {
        assert!(waiter.join().unwrap());
    }
}

thread_local! {
    static ON_EXIT: ExitCounter = const { ExitCounter(Cell::new(None)) };
}

/// Counts, when a worker thread's thread-locals are destroyed, that it exited.
struct ExitCounter(Cell<Option<Arc<AtomicUsize>>>);

impl Drop for ExitCounter {
    fn drop(&mut self) {
        if let Some(exited) = self.0.take() {
            exited.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn dropping_runs_queued_tasks_and_joins_every_worker() {
    let pool = WorkerPool::builder(2).max_queued(100).build();
    let exited = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let mut gate = Gate::new();
    for _ in 0..2 {
        // Each of the two workers runs one of these first.
        let (task, exited) = (gate.task(), Arc::clone(&exited));
        pool.submit(move || {
            ON_EXIT.with(|on_exit| on_exit.0.set(Some(exited)));
            task();
        });
    }
    gate.started(2);
    for _ in 0..50 {
        let (exited, counter) = (Arc::clone(&exited), Arc::clone(&counter));
        pool.submit(move || {
            ON_EXIT.with(|on_exit| on_exit.0.set(Some(exited)));
            counter.fetch_add(1, Ordering::SeqCst);
        });
    }
    assert_eq!(pool.stats().queued, 50);
    gate.release_all();
    let spawned = pool.stats().spawned;
    drop(pool);
    // Every queued task ran, and every worker's thread has ended.
    assert_eq!(counter.load(Ordering::SeqCst), 50);
    assert_eq!(exited.load(Ordering::SeqCst) as u64, spawned);
}

#[test]
fn idle_workers_exit_and_the_pool_grows_again() {
    let pool = WorkerPool::builder(4)
        .idle_timeout(Duration::from_millis(20))
        .build();
    let mut gate = Gate::new();
    for _ in 0..4 {
        pool.submit(gate.task());
    }
    gate.started(4);
    gate.release_all();
    pool.wait();
    assert!(
        eventually(DEADLINE, || pool.running() == 0),
        "idle workers did not exit: {:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().idle, 0);
    // Busy again: it starts threads again, up to the bound.
    for _ in 0..4 {
        pool.submit(gate.task());
    }
    gate.started(4);
    assert_eq!(pool.running(), 4);
    gate.release_all();
    pool.wait();
    assert_eq!(pool.stats().spawned, 8);
}

#[test]
fn a_zero_idle_timeout_keeps_no_idle_worker() {
    let pool = WorkerPool::builder(2).idle_timeout(Duration::ZERO).build();
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        pool.submit(counter_task(&counter));
    }
    pool.wait();
    assert!(eventually(DEADLINE, || pool.running() == 0));
    assert_eq!(counter.load(Ordering::Relaxed), 100);
}

#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(miri, ignore = "reads /proc, which Miri's isolation hides")]
fn parked_workers_use_no_cpu() {
    /// User plus system CPU time of one thread of this process, in clock
    /// ticks (fields 14 and 15 of `/proc/self/task/<tid>/stat`).
    fn cpu_ticks(tid: i32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // The command name, in parentheses, may hold spaces: split after it.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // Fields 14 and 15 overall are the 12th and 13th after the name.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    let pool = WorkerPool::new(2);
    let (tid_tx, tids) = mpsc::channel();
    let mut gate = Gate::new();
    for _ in 0..2 {
        let (task, tid_tx) = (gate.task(), tid_tx.clone());
        pool.submit(move || {
            // SAFETY: `gettid` takes no arguments and cannot fail.
            tid_tx.send(unsafe { libc::gettid() }).unwrap();
            task();
        });
    }
    gate.started(2);
    let tids: Vec<i32> = tids.iter().take(2).collect();
    gate.release_all();
    pool.wait();
    assert_eq!(pool.running(), 2);
    let before: u64 = tids.iter().map(|&tid| cpu_ticks(tid)).sum();
    // A window to measure over, not a synchronisation: the workers are
    // parked whatever its length; spinning ones would burn most of it.
    thread::sleep(Duration::from_millis(500));
    let used: u64 = tids.iter().map(|&tid| cpu_ticks(tid)).sum::<u64>() - before;
    assert_eq!(pool.running(), 2, "the workers are still alive");
    // Clock ticks are 10 ms here; two spinning workers would use 50 or more.
    assert!(used <= 5, "idle workers used {used} ticks of CPU in 500 ms");
}

#[test]
fn a_task_can_submit_to_its_own_full_pool() {
    let pool = Arc::new(WorkerPool::builder(1).max_queued(0).build());
    let (tx, rx) = mpsc::channel();
    let inner_pool = Arc::clone(&pool);
    pool.submit(move || {
        // The only worker is this one, and the queue has no room: a submit
        // that waited for room would wait forever.
        for i in 0..3 {
            let tx = tx.clone();
            inner_pool.submit(move || tx.send(i).unwrap());
        }
    });
    let mut got: Vec<i32> = (0..3).map(|_| rx.recv_timeout(DEADLINE).unwrap()).collect();
    got.sort();
    assert_eq!(got, [0, 1, 2]);
}

#[test]
fn wait_inside_a_task_panics_instead_of_hanging() {
    let pool = Arc::new(WorkerPool::new(2));
    let (tx, rx) = mpsc::channel();
    let inner_pool = Arc::clone(&pool);
    pool.submit(move || {
        let result = panic::catch_unwind(AssertUnwindSafe(|| inner_pool.wait()));
        tx.send(result.is_err()).unwrap();
    });
    assert!(rx.recv_timeout(DEADLINE).unwrap());
    pool.wait();
}

#[test]
fn the_last_handle_can_drop_inside_a_task() {
    let pool = Arc::new(WorkerPool::new(2));
    let (dropped_tx, dropped) = mpsc::channel::<()>();
    let (done_tx, done) = mpsc::channel();
    let task_pool = Arc::clone(&pool);
    pool.submit(move || {
        dropped.recv().unwrap();
        // Ours is the last handle now: the pool drops on its own worker.
        drop(task_pool);
        done_tx.send(()).unwrap();
    });
    drop(pool);
    dropped_tx.send(()).unwrap();
    assert!(done.recv_timeout(DEADLINE).is_ok());
}

#[test]
#[cfg_attr(miri, ignore = "Miri's threads ignore the stack size and start")]
fn a_thread_that_cannot_start_is_a_clear_panic_and_leaves_the_pool_sound() {
    // No operating system gives a thread a stack of `usize::MAX` bytes.
    let pool = WorkerPool::builder(2).stack_size(usize::MAX).build();
    for _ in 0..2 {
        let refused = panic::catch_unwind(AssertUnwindSafe(|| pool.submit(|| {})));
        let message = *refused
            .expect_err("no worker could start")
            .downcast::<String>()
            .unwrap();
        assert!(
            message.contains("could not start a worker thread"),
            "{message}"
        );
    }
    // The refused tasks are not waited for, and nothing is left counted.
    pool.wait();
    let stats = pool.stats();
    assert_eq!(
        (stats.submitted, stats.dropped, stats.panicked),
        (2, 2, 0),
        "{stats:?}"
    );
    assert_eq!((stats.running, stats.queued, stats.spawned), (0, 0, 0));
}

#[test]
fn a_pool_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<WorkerPool>();
    shareable::<stashpool::workers::WorkerStats>();
}

#[test]
#[should_panic(expected = "max_workers >= 1")]
fn zero_workers_is_refused() {
    let _ = WorkerPool::new(0);
}

#[test]
#[should_panic(expected = "at most 8191 workers")]
fn too_many_workers_is_refused() {
    let _ = WorkerPool::builder(MAX_WORKERS + 1);
}

#[test]
#[should_panic(expected = "queue holds at most")]
fn too_large_a_queue_is_refused() {
    let _ = WorkerPool::builder(1).max_queued(MAX_QUEUE_CAPACITY + 1);
}

#[test]
fn limits_are_accepted_and_cost_nothing_until_used() {
    let pool = WorkerPool::builder(MAX_WORKERS)
        .max_queued(MAX_QUEUE_CAPACITY)
        .idle_timeout(Duration::MAX)
        .build();
    assert_eq!(pool.running(), 0);
    let counter = Arc::new(AtomicUsize::new(0));
    pool.submit(counter_task(&counter));
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 1);
    assert!(format!("{pool:?}").contains("max_workers: 8191"));
}

#[test]
#[cfg_attr(miri, ignore = "8000 tasks take minutes under Miri")]
fn submitters_race_workers_that_exit_when_idle() {
    // A zero idle timeout makes workers exit whenever they find nothing to
    // do, so submits keep racing exits, wakes and starts.
    let pool = Arc::new(
        WorkerPool::builder(3)
            .idle_timeout(Duration::ZERO)
            .max_queued(1)
            .build(),
    );
    let counter = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..4)
        .map(|t| {
            let (pool, counter) = (Arc::clone(&pool), Arc::clone(&counter));
            thread::spawn(move || {
                for i in 0..2000 {
                    if (i + t) % 3 == 0 {
                        let mut task = counter_task(&counter);
                        while let Err(back) = pool.try_submit(task) {
                            task = back;
                            thread::yield_now();
                        }
                    } else {
                        pool.submit(counter_task(&counter));
                    }
                }
            })
        })
        .collect();
    for submitter in submitters {
        submitter.join().unwrap();
    }
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 8000);
    let stats = pool.stats();
    assert_eq!(
        (stats.submitted, stats.completed, stats.queued),
        (8000, 8000, 0)
    );
    assert!(
        eventually(DEADLINE, || pool.running() == 0),
        "{:?}",
        pool.stats()
    );
}

#[test]
fn wait_is_not_held_up_by_a_stream_of_later_tasks() {
    // Another thread keeps a task in flight at every moment: each of its
    // tasks blocks until the next one is submitted. The pool is never idle,
    // so a `wait` for global quiescence would never return.
    let pool = Arc::new(WorkerPool::builder(3).max_queued(0).build());
    let stop = Arc::new(AtomicBool::new(false));
    let streamer = {
        let (pool, stop) = (Arc::clone(&pool), Arc::clone(&stop));
        thread::spawn(move || {
            let mut release_previous: Option<mpsc::Sender<()>> = None;
            while !stop.load(Ordering::SeqCst) {
                let (release, released) = mpsc::channel::<()>();
                pool.submit(move || {
                    let _ = released.recv();
                });
                if let Some(previous) = release_previous.replace(release) {
                    let _ = previous.send(());
                }
            }
        })
    };
    let done = Arc::new(AtomicBool::new(false));
    {
        let done = Arc::clone(&done);
        pool.submit(move || done.store(true, Ordering::SeqCst));
    }
    let waiter = Arc::clone(&pool);
    within_deadline(move || waiter.wait());
    assert!(
        done.load(Ordering::SeqCst),
        "wait returned before its task ran"
    );
    stop.store(true, Ordering::SeqCst);
    streamer.join().unwrap();
    let waiter = Arc::clone(&pool);
    within_deadline(move || waiter.wait());
}

#[test]
fn blocked_submitters_are_all_woken_one_freed_slot_at_a_time() {
    let pool = Arc::new(WorkerPool::builder(1).max_queued(0).build());
    let mut gate = Gate::new();
    pool.submit(gate.task());
    gate.started(1);
    let counter = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..3)
        .map(|_| {
            let (pool, counter) = (Arc::clone(&pool), Arc::clone(&counter));
            thread::spawn(move || {
                for _ in 0..20 {
                    pool.submit(counter_task(&counter));
                }
            })
        })
        .collect();
    gate.release_all();
    within_deadline(move || {
        for submitter in submitters {
            submitter.join().unwrap();
        }
    });
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), 60);
}

#[test]
fn spawn_returns_results_and_panics() {
    let pool = WorkerPool::new(2);
    let handles: Vec<_> = (0..50u64).map(|i| pool.spawn(move || i * 2)).collect();
    let values: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(values, (0..50).map(|i| i * 2).collect::<Vec<_>>());
    // A big closure (boxed in the task) returns a big value.
    let big = [7u64; 32];
    assert_eq!(pool.spawn(move || big).join().unwrap(), [7; 32]);
    let failed = pool.spawn(|| -> u8 { panic::panic_any(41u32) });
    assert_eq!(*failed.join().unwrap_err().downcast::<u32>().unwrap(), 41);
    // A panic whose payload panics when dropped does not hurt the worker.
    let nasty = pool.spawn(|| panic::panic_any(PanickyPayload));
    let payload = nasty.join().unwrap_err();
    assert!(payload.is::<PanickyPayload>());
    std::mem::forget(payload);
    pool.wait();
    let stats = pool.stats();
    assert_eq!((stats.completed, stats.panicked), (51, 2), "{stats:?}");
}

#[test]
fn is_finished_tells_when_join_would_not_wait() {
    let pool = WorkerPool::new(1);
    let (release, blocked) = mpsc::channel::<()>();
    let handle = pool.spawn(move || blocked.recv().unwrap());
    assert!(!handle.is_finished());
    release.send(()).unwrap();
    pool.wait();
    assert!(handle.is_finished());
    handle.join().unwrap();
    // A handle dropped unjoined detaches its task, which still runs.
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    drop(pool.spawn(move || flag.store(true, Ordering::SeqCst)));
    pool.wait();
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn a_task_can_join_tasks_of_its_own_one_worker_pool() {
    // One worker, running the outer task: the inner ones can only run if
    // the join runs them itself.
    let pool = Arc::new(WorkerPool::builder(1).max_queued(0).build());
    let inner = Arc::clone(&pool);
    let outer = pool.spawn(move || {
        let handles: Vec<_> = (0..5u32).map(|i| inner.spawn(move || i + 1)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
    });
    assert_eq!(within_deadline(move || outer.join().unwrap()), 15);
}

#[test]
fn a_scope_inside_a_task_of_a_one_worker_pool_does_not_deadlock() {
    let pool = Arc::new(WorkerPool::new(1));
    let inner = Arc::clone(&pool);
    let outer = pool.spawn(move || {
        let mut parts = [0u32; 4];
        inner.scope(|s| {
            for (i, part) in parts.iter_mut().enumerate() {
                s.spawn(move || *part = i as u32 * 3);
            }
        });
        parts
    });
    assert_eq!(within_deadline(move || outer.join().unwrap()), [0, 3, 6, 9]);
}

#[test]
fn scoped_tasks_borrow_and_are_all_finished_when_scope_returns() {
    let pool = WorkerPool::new(3);
    let mut slots = vec![0usize; 40];
    let total = AtomicUsize::new(0);
    let returned = pool.scope(|s| {
        for (i, slot) in slots.iter_mut().enumerate() {
            let total = &total;
            s.spawn(move || {
                for _ in 0..i % 5 {
                    thread::yield_now();
                }
                *slot = i;
                total.fetch_add(i, Ordering::Relaxed);
            });
        }
        "done"
    });
    assert_eq!(returned, "done");
    assert_eq!(slots, (0..40).collect::<Vec<_>>());
    assert_eq!(total.load(Ordering::Relaxed), (0..40).sum());
    // Scoped tasks may spawn more scoped tasks.
    let count = AtomicUsize::new(0);
    pool.scope(|s| {
        s.spawn(|| {
            for _ in 0..3 {
                s.spawn(|| count.fetch_add(1, Ordering::Relaxed));
            }
        });
    });
    assert_eq!(count.load(Ordering::Relaxed), 3);
}

#[test]
fn a_scope_resumes_the_closures_panic_after_its_tasks_finish() {
    let pool = WorkerPool::new(2);
    let finished = AtomicUsize::new(0);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        thread::yield_now();
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                });
            }
            panic!("the scope's closure fails");
        })
    }));
    let payload = result.expect_err("the closure's panic comes out of scope");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the scope's closure fails")
    );
    assert_eq!(finished.load(Ordering::SeqCst), 4);
}

#[test]
fn a_scope_panics_for_a_task_panic_nobody_joined() {
    let pool = WorkerPool::new(2);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            s.spawn(|| panic!("unjoined"));
            s.spawn(|| 1);
        })
    }));
    let payload = result.expect_err("an unjoined panic makes the scope panic");
    let message = payload.downcast_ref::<String>().unwrap();
    assert!(message.starts_with("stashpool: "), "{message}");
    // Joined, the panic is the caller's to handle: the scope returns.
    let value = pool.scope(|s| {
        let fails = s.spawn(|| panic!("joined"));
        assert!(fails.join().is_err());
        5
    });
    assert_eq!(value, 5);
}

#[test]
fn lowering_max_workers_lets_extra_workers_exit_and_bounds_new_work() {
    let pool = WorkerPool::builder(4)
        .idle_timeout(Duration::MAX)
        .max_queued(0)
        .build();
    let mut gate = Gate::new();
    for _ in 0..4 {
        pool.submit(gate.task());
    }
    gate.started(4);
    gate.release_all();
    pool.wait();
    assert_eq!(pool.running(), 4);
    pool.set_max_workers(1);
    assert_eq!(pool.max_workers(), 1);
    assert!(
        eventually(DEADLINE, || pool.running() == 1),
        "idle workers above the bound did not exit: {:?}",
        pool.stats()
    );
    pool.submit(gate.task());
    gate.started(1);
    let extra = counter_task(&Arc::new(AtomicUsize::new(0)));
    let extra = pool
        .try_submit(extra)
        .expect_err("one busy worker is the bound now");
    gate.release_all();
    pool.wait();
    assert!(pool.try_submit(extra).is_ok());
    pool.wait();
}

#[test]
fn raising_max_workers_wakes_a_blocked_submitter() {
    let pool = Arc::new(
        WorkerPool::builder(1)
            .idle_timeout(Duration::MAX)
            .max_queued(0)
            .build(),
    );
    let mut gate = Gate::new();
    pool.submit(gate.task());
    gate.started(1);
    // This submit blocks: one worker, busy, no queue.
    let blocked = {
        let (pool, task) = (Arc::clone(&pool), gate.task());
        thread::spawn(move || pool.submit(task))
    };
    // Raised, the pool may start a second worker for it, while the first
    // is still blocked.
    pool.set_max_workers(2);
    gate.started(1);
    assert_eq!(pool.running(), 2);
    gate.release_all();
    blocked.join().unwrap();
    pool.wait();
}

#[test]
fn busy_workers_above_a_lowered_bound_finish_their_task_then_exit() {
    let pool = WorkerPool::builder(3).idle_timeout(Duration::MAX).build();
    let mut gate = Gate::new();
    for _ in 0..3 {
        pool.submit(gate.task());
    }
    gate.started(3);
    pool.set_max_workers(1);
    // Nothing is interrupted: all three still run.
    assert_eq!(pool.running(), 3);
    gate.release_all();
    pool.wait();
    assert!(
        eventually(DEADLINE, || pool.running() == 1),
        "{:?}",
        pool.stats()
    );
    assert_eq!(pool.stats().completed, 3);
}

/// What a pool whose bound was lowered reports to the test.
enum Seen {
    /// A worker exited.
    Exit,
    /// A queued task started while this many tasks ran (itself included),
    /// more than the bound allows.
    OverBound(usize),
}

/// Lowers the bound of a pool of four busy workers to `bound` while tasks
/// are queued behind them (and while `submitters` threads keep submitting
/// more), then lets the busy tasks finish one at a time. The first
/// `4 - bound` workers to finish must exit without taking a queued task,
/// and no task may start while `bound` or more are running.
fn lower_the_bound_under_a_backlog(bound: usize, submitters: usize) {
    // Fewer under Miri, which interprets every step of every thread.
    const PER_SUBMITTER: usize = if cfg!(miri) { 20 } else { 200 };
    let (seen_tx, seen) = mpsc::channel();
    let exits = seen_tx.clone();
    let pool = Arc::new(
        WorkerPool::builder(4)
            .idle_timeout(Duration::MAX)
            .on_thread_exit(move || {
                let _ = exits.send(Seen::Exit);
            })
            .build(),
    );
    // Tasks running now, gated ones included.
    let now = Arc::new(AtomicUsize::new(0));
    // A queued task: it reports starting while too many tasks run.
    let queued_task = {
        let now = Arc::clone(&now);
        move || {
            let (now, seen) = (Arc::clone(&now), seen_tx.clone());
            move || {
                let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                if running > bound {
                    let _ = seen.send(Seen::OverBound(running));
                }
                now.fetch_sub(1, Ordering::SeqCst);
            }
        }
    };
    let mut gate = Gate::new();
    for _ in 0..4 {
        let (task, now) = (gate.task(), Arc::clone(&now));
        pool.submit(move || {
            now.fetch_add(1, Ordering::SeqCst);
            task();
            now.fetch_sub(1, Ordering::SeqCst);
        });
    }
    gate.started(4);
    for _ in 0..20 {
        pool.submit(queued_task());
    }
    // Submitters halfway through their tasks when the bound is lowered.
    let halfway = Arc::new(std::sync::Barrier::new(submitters + 1));
    let threads: Vec<_> = (0..submitters)
        .map(|_| {
            let (pool, halfway, task) =
                (Arc::clone(&pool), Arc::clone(&halfway), queued_task.clone());
            thread::spawn(move || {
                for i in 0..PER_SUBMITTER {
                    if i == PER_SUBMITTER / 2 {
                        halfway.wait();
                    }
                    pool.submit(task());
                }
            })
        })
        .collect();
    halfway.wait();
    pool.set_max_workers(bound);
    for i in 0..4 {
        gate.release_one();
        if i < 4 - bound {
            match seen.recv_timeout(DEADLINE) {
                Ok(Seen::Exit) => {}
                Ok(Seen::OverBound(n)) => panic!(
                    "a queued task started with {n} tasks running, above the lowered bound {bound}"
                ),
                Err(_) => panic!("a worker above the lowered bound did not exit"),
            }
        }
    }
    for thread in threads {
        thread.join().unwrap();
    }
    pool.wait();
    for event in seen.try_iter() {
        if let Seen::OverBound(n) = event {
            panic!("a queued task started with {n} tasks running, above the lowered bound {bound}");
        }
    }
    let stats = pool.stats();
    assert_eq!(
        stats.completed as usize,
        4 + 20 + submitters * PER_SUBMITTER
    );
    assert_eq!((pool.running(), stats.spawned), (bound, 4), "{stats:?}");
}

#[test]
fn a_lowered_bound_holds_at_once_under_a_queued_backlog() {
    lower_the_bound_under_a_backlog(1, 0);
}

#[test]
fn a_lowered_bound_holds_while_tasks_are_submitted() {
    lower_the_bound_under_a_backlog(2, 2);
}

#[test]
fn raising_max_workers_starts_workers_for_queued_tasks() {
    let pool = WorkerPool::builder(1).idle_timeout(Duration::MAX).build();
    let mut gate = Gate::new();
    for _ in 0..4 {
        pool.submit(gate.task());
    }
    // One runs; three wait in the queue for it.
    gate.started(1);
    pool.set_max_workers(4);
    // They get workers of their own at once, while the first still runs.
    gate.started(3);
    assert_eq!(pool.running(), 4);
    gate.release_all();
    pool.wait();
}

#[test]
#[should_panic(expected = "stashpool: a WorkerPool needs max_workers >= 1")]
fn setting_zero_max_workers_is_refused() {
    WorkerPool::new(2).set_max_workers(0);
}

#[test]
#[should_panic(expected = "stashpool: a WorkerPool's stack_size must be at least 1 byte")]
fn a_zero_stack_size_is_refused() {
    let _ = WorkerPool::builder(1).stack_size(0);
}

#[test]
fn shutdown_timeout_runs_what_it_can_and_drops_the_rest() {
    // Plenty of time: everything runs, nothing is dropped.
    let pool = WorkerPool::new(2);
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..20 {
        pool.submit(counter_task(&counter));
    }
    assert_eq!(pool.shutdown_timeout(DEADLINE), 0);
    assert_eq!(counter.load(Ordering::Relaxed), 20);

    // One worker, blocked past the deadline: the queued tasks are dropped.
    let exited = Arc::new(AtomicUsize::new(0));
    let on_exit = Arc::clone(&exited);
    let pool = WorkerPool::builder(1)
        .max_queued(3)
        .on_thread_exit(move || {
            on_exit.fetch_add(1, Ordering::SeqCst);
        })
        .build();
    let mut gate = Gate::new();
    let busy = pool.spawn(gate.task());
    gate.started(1);
    let queued: Vec<_> = (0..3).map(|i| pool.spawn(move || i)).collect();
    assert_eq!(pool.shutdown_timeout(Duration::ZERO), 3);
    for handle in queued {
        let error = handle.join().unwrap_err();
        assert!(error.is::<TaskDropped>());
    }
    // The running task was not interrupted; its worker exits after it.
    assert!(!busy.is_finished());
    gate.release_all();
    busy.join().unwrap();
    assert!(eventually(DEADLINE, || exited.load(Ordering::SeqCst) == 1));
}

#[test]
fn worker_threads_are_named_and_hooked() {
    let started = Arc::new(AtomicUsize::new(0));
    let exited = Arc::new(AtomicUsize::new(0));
    let (s, e) = (Arc::clone(&started), Arc::clone(&exited));
    let pool = WorkerPool::builder(2)
        .thread_name(|i| format!("hooked-{i}"))
        .on_thread_start(move || {
            s.fetch_add(1, Ordering::SeqCst);
            panic!("a panicking hook is ignored");
        })
        .on_thread_exit(move || {
            e.fetch_add(1, Ordering::SeqCst);
        })
        .build();
    let name = pool.spawn(|| thread::current().name().map(String::from));
    assert_eq!(name.join().unwrap().as_deref(), Some("hooked-0"));
    let mut gate = Gate::new();
    pool.submit(gate.task());
    pool.submit(gate.task());
    gate.started(2);
    gate.release_all();
    let spawned = pool.stats().spawned as usize;
    assert_eq!(started.load(Ordering::SeqCst), spawned);
    drop(pool);
    assert_eq!(exited.load(Ordering::SeqCst), spawned);
}

#[test]
#[cfg_attr(miri, ignore = "thousands of tasks take minutes under Miri")]
fn the_default_queue_holds_default_capacity_tasks_for_busy_workers() {
    use stashpool::workers::DEFAULT_QUEUE_CAPACITY;
    let pool = WorkerPool::new(1);
    let mut gate = Gate::new();
    pool.submit(gate.task());
    gate.started(1);
    let counter = Arc::new(AtomicUsize::new(0));
    for _ in 0..DEFAULT_QUEUE_CAPACITY {
        assert!(pool.try_submit(counter_task(&counter)).is_ok());
    }
    assert!(pool.try_submit(counter_task(&counter)).is_err());
    assert_eq!(pool.stats().queued, DEFAULT_QUEUE_CAPACITY);
    gate.release_all();
    pool.wait();
    assert_eq!(counter.load(Ordering::Relaxed), DEFAULT_QUEUE_CAPACITY);
}

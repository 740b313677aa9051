//! `WorkerPool` against the other ways to run many tasks: a thread per task
//! (Go's "unlimited goroutines"), `rayon` (a scope), the `threadpool` crate,
//! and a plain `std::thread::scope` fan-out.
//!
//! * `tiny`: 100 000 tasks of one multiply each, one worker per core, every
//!   pool with its default settings (and `WorkerPool` with no queue, every
//!   task a hand-off).
//! * `max_queued`: the same with queues of 0 to 32 768 tasks: what the
//!   default, `DEFAULT_QUEUE_CAPACITY`, is chosen from.
//! * `spawn`: 10 000 tiny tasks whose results come back through a handle:
//!   `WorkerPool::spawn` and `scope` beside `rayon`'s scope and
//!   `std::thread::scope` with a channel.
//! * `sleepy`: 10 000 tasks that each sleep 1 ms, 64 workers.
//! * `idle_stack`: the structure parked workers wait on: a locked deque (what
//!   `WorkerPool` uses) against a lock-free Treiber stack reclaimed with
//!   `crossbeam-epoch`, beside what parking and waking a thread costs.
//!
//! Every pool here is made once and reused across iterations, so these are
//! warm times: a long-lived program's steady state. `benches/workers_rss.rs`
//! gives, one process per run, both these and the cold times of a fresh
//! process (the pool's thread starts and first touches of memory
//! included), with each peer's peak memory and system calls (`sched_yield`,
//! `futex`).
//!
//! `cargo bench --bench workers -- --warm-up-time 1 --measurement-time 3`

#[path = "common/peers.rs"]
mod peers;

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use peers::{NAMES, Peer, TINY_NAMES};
use stashpool::workers::WorkerPool;

fn tiny(c: &mut Criterion) {
    let mut group = c.benchmark_group("tiny");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for name in TINY_NAMES {
        let peer = Peer::new(name, peers::cores());
        group.bench_function(name, |b| {
            b.iter(|| peer.run(peers::TINY_TASKS, peers::tiny_task))
        });
    }
    group.finish();
}

fn max_queued(c: &mut Criterion) {
    let mut group = c.benchmark_group("max_queued");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for n in [0, 32, 512, 2048, 4096, 8192, 32768] {
        let name = peers::queue(n);
        let peer = Peer::new(&name, peers::cores());
        group.bench_function(&name, |b| {
            b.iter(|| peer.run(peers::TINY_TASKS, peers::tiny_task))
        });
    }
    group.finish();
}

/// Tasks whose results come back to the caller.
const SPAWN_TASKS: u64 = 10_000;

fn spawn(c: &mut Criterion) {
    let mut group = c.benchmark_group("spawn");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let workers = peers::cores();
    let pool = WorkerPool::new(workers);
    group.bench_function("stashpool_spawn_join", |b| {
        b.iter(|| {
            let handles: Vec<_> = (0..SPAWN_TASKS)
                .map(|i| pool.spawn(move || black_box(i).wrapping_mul(3)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        })
    });
    group.bench_function("stashpool_scope", |b| {
        let mut out = vec![0u64; SPAWN_TASKS as usize];
        b.iter(|| {
            pool.scope(|s| {
                for (i, slot) in out.iter_mut().enumerate() {
                    s.spawn(move || *slot = black_box(i as u64).wrapping_mul(3));
                }
            });
            black_box(&out);
        })
    });
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .unwrap();
    group.bench_function("rayon_scope", |b| {
        let mut out = vec![0u64; SPAWN_TASKS as usize];
        b.iter(|| {
            rayon.scope(|s| {
                for (i, slot) in out.iter_mut().enumerate() {
                    s.spawn(move |_| *slot = black_box(i as u64).wrapping_mul(3));
                }
            });
            black_box(&out);
        })
    });
    group.bench_function("threadpool_channel", |b| {
        let pool = threadpool::ThreadPool::new(workers);
        b.iter(|| {
            let (tx, rx) = mpsc::channel();
            for i in 0..SPAWN_TASKS {
                let tx = tx.clone();
                pool.execute(move || tx.send(black_box(i).wrapping_mul(3)).unwrap());
            }
            drop(tx);
            rx.iter().sum::<u64>()
        })
    });
    group.finish();
}

fn sleepy(c: &mut Criterion) {
    let mut group = c.benchmark_group("sleepy");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for name in NAMES {
        let peer = Peer::new(name, peers::SLEEPY_WORKERS);
        group.bench_function(name, |b| {
            b.iter(|| peer.run(peers::SLEEPY_TASKS, peers::sleepy_task))
        });
    }
    group.finish();
}

/// A lock-free (Treiber) stack whose nodes `crossbeam-epoch` reclaims: the
/// structure `itogami` keeps idle workers on, for comparison.
mod treiber {
    use std::mem::ManuallyDrop;
    use std::ptr;
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

    use crossbeam_epoch::{self as epoch, Atomic, Owned};

    pub struct Stack<T> {
        head: Atomic<Node<T>>,
    }

    struct Node<T> {
        value: ManuallyDrop<T>,
        next: Atomic<Node<T>>,
    }

    impl<T> Stack<T> {
        pub fn new() -> Self {
            Self {
                head: Atomic::null(),
            }
        }

        pub fn push(&self, value: T) {
            let mut node = Owned::new(Node {
                value: ManuallyDrop::new(value),
                next: Atomic::null(),
            });
            let guard = epoch::pin();
            loop {
                let head = self.head.load(Relaxed, &guard);
                node.next.store(head, Relaxed);
                match self
                    .head
                    .compare_exchange(head, node, Release, Relaxed, &guard)
                {
                    Ok(_) => return,
                    Err(failed) => node = failed.new,
                }
            }
        }

        pub fn pop(&self) -> Option<T> {
            let guard = epoch::pin();
            loop {
                let head = self.head.load(Acquire, &guard);
                // SAFETY: `head` was loaded under `guard`, so the node it
                // points to is not freed before the guard drops.
                let node = unsafe { head.as_ref() }?;
                let next = node.next.load(Relaxed, &guard);
                if self
                    .head
                    .compare_exchange(head, next, Relaxed, Relaxed, &guard)
                    .is_ok()
                {
                    // SAFETY: the swap unlinked the node, so this thread alone
                    // takes its value; readers still holding it only read
                    // `next`, and the epoch frees it once they are gone.
                    unsafe {
                        guard.defer_destroy(head);
                        return Some(ManuallyDrop::into_inner(ptr::read(&node.value)));
                    }
                }
            }
        }
    }

    impl<T> Drop for Stack<T> {
        fn drop(&mut self) {
            while self.pop().is_some() {}
        }
    }
}

fn idle_stack(c: &mut Criterion) {
    let mut group = c.benchmark_group("idle_stack");
    // What a sleeper's entry costs to push and pop: `WorkerPool` keeps an
    // `Arc` per parked worker in a deque under its lock.
    let locked = Mutex::new(VecDeque::new());
    let entry = Arc::new(0u64);
    group.bench_function("locked_deque_push_pop", |b| {
        b.iter(|| {
            locked.lock().unwrap().push_back(Arc::clone(&entry));
            black_box(locked.lock().unwrap().pop_back())
        })
    });
    let lock_free = treiber::Stack::new();
    group.bench_function("treiber_epoch_push_pop", |b| {
        b.iter(|| {
            lock_free.push(Arc::clone(&entry));
            black_box(lock_free.pop())
        })
    });
    // What every park and wake costs on top, whatever the stack: the other
    // thread is parked, is unparked, and unparks us back. Half of one round
    // trip is one wake.
    group.bench_function("park_unpark_round_trip", |b| {
        b.iter_custom(|iters| {
            let (ready_tx, ready) = mpsc::channel();
            let main = thread::current();
            let partner = thread::spawn(move || {
                let me = thread::current();
                ready_tx.send(me).unwrap();
                for _ in 0..iters {
                    thread::park();
                    main.unpark();
                }
            });
            let partner_thread = ready.recv().unwrap();
            let start = Instant::now();
            for _ in 0..iters {
                partner_thread.unpark();
                thread::park();
            }
            let elapsed = start.elapsed();
            partner.join().unwrap();
            elapsed
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = tiny, max_queued, spawn, sleepy, idle_stack
}
criterion_main!(benches);

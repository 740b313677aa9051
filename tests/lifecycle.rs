//! Pools that come and go: many threads make, use, share and drop pools,
//! with background and manual sweeps racing them, and the program checks
//! that every object made was dropped exactly once.
//!
//! A test without the test harness, so that it is one plain program: `cargo
//! test` runs it, and CI also runs it under `valgrind --leak-check=full`
//! (`.ci/nightly leaks`): a pool must free everything it allocated, in every
//! thread's stash, in the overflow and in its bookkeeping, whatever the order
//! in which pools, threads and guards go away, threads that use a pool only
//! in their teardown included.
//!
//! ```text
//! cargo test --release --test lifecycle            # 20 rounds
//! target/release/deps/lifecycle-<hash> 10          # any number of rounds
//! ```

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use stashpool::{LocalPool, Pooled};

static MADE: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// A buffer that counts its lives.
struct Counted(Vec<u8>);

impl Counted {
    fn new() -> Self {
        MADE.fetch_add(1, Ordering::Relaxed);
        Counted(vec![0; 256])
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

static SHARED: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);

/// Runs its closure when dropped: from a thread-local destructor.
struct Late(Option<Box<dyn FnOnce()>>);

impl Drop for Late {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

thread_local! {
    static LATE: Cell<Option<Late>> = const { Cell::new(None) };
}

/// Runs `f` late in this thread's teardown: its destructor is registered
/// now, before anything the pool registers, so it runs after all of that.
fn on_teardown(f: impl FnOnce() + 'static) {
    LATE.with(|late| late.set(Some(Late(Some(Box::new(f))))));
}

fn main() {
    let rounds = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let mut kept = Vec::new();
    for round in 0..rounds {
        // A pool per round, shared by a few threads that come and go.
        let pool = Arc::new(
            LocalPool::builder(Counted::new)
                .max_stashed(4)
                .max_idle(16)
                .sweep_every(Duration::from_millis(1))
                .build(),
        );
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..200 {
                        match (i + t) % 5 {
                            0 | 1 => held.push(pool.get_owned()),
                            2 => drop(held.pop()),
                            3 => pool.with(|buf| buf.0[0] = i as u8),
                            _ => SHARED.with(|buf| buf.push(1)),
                        }
                        if i % 50 == 0 {
                            pool.sweep();
                        }
                    }
                    // Some guards outlive the thread that took them.
                    held
                })
            })
            .collect();
        // Threads that use the pool only in their teardown: the first takes
        // its thread id there (and gives it back, after its exit hook ran),
        // the second after it gave its id back (it used `SHARED` first), so
        // it goes around stashes.
        let late: Vec<_> = (0..2)
            .map(|t| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    on_teardown(move || pool.with(|buf| buf.0[1] = 1));
                    if t == 1 {
                        SHARED.with(|buf| buf.push(1));
                    }
                })
            })
            .collect();
        let mut outlived = Vec::new();
        for worker in workers {
            outlived.extend(worker.join().unwrap());
        }
        for thread in late {
            thread.join().unwrap();
        }
        // Keep a few objects out of the pool for good, return the rest.
        if let Some(guard) = outlived.pop() {
            kept.push(stashpool::PooledOwned::into_inner(guard));
        }
        drop(outlived);
        if round % 2 == 0 {
            pool.sweep();
        }
        // Dropped here (the last `Arc`), with objects in the stashes of
        // threads that have exited and in the overflow.
        drop(pool);

        // A scoped pool, borrowed by scoped threads.
        let local = LocalPool::builder(Counted::new).manual_sweep().build();
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let a = local.get();
                    let b = local.get();
                    kept_none(Pooled::into_inner(a));
                    drop(b);
                });
            }
        });
    }
    drop(kept);
    let (made, dropped) = (
        MADE.load(Ordering::Relaxed),
        DROPPED.load(Ordering::Relaxed),
    );
    println!("{rounds} rounds: {made} objects made, {dropped} dropped");
    assert_eq!(made, dropped, "every object made was dropped exactly once");
}

/// Drops an object taken out of a pool for good.
fn kept_none(object: Counted) {
    drop(object);
}

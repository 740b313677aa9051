//! `fork()` while other threads are inside the pools: threads hammer a
//! stashless pool (every object through the singles: the stack, the ring
//! and the batch queue behind them), a stashed pool (stashes, batches, steals and
//! spills) and a worker pool whose tasks use both, while the main thread
//! forks again and again. Each child sweeps, gets and puts more objects
//! than the singles' stack and ring hold (so it reaches every slot the
//! parent's threads may have left mid-operation), and must exit within a
//! deadline; the parent kills the children that do not, and the test fails
//! if there was one.
//!
//! `STASHPOOL_FORKS` sets how many forks (default: a few hundred, seconds
//! in a debug build).
//!
//! A test binary of its own: the child's sweeper sweeps every pool of the
//! child, and other tests' pools may hold objects whose `Drop` takes locks
//! their threads hold at the fork.
#![cfg(all(target_os = "linux", feature = "workers", not(miri)))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use stashpool::LocalPool;
use stashpool::workers::WorkerPool;

type Pool = LocalPool<Vec<u8>, fn() -> Vec<u8>>;

fn buffer() -> Vec<u8> {
    vec![0; 64]
}

/// How long a child may take: far more than the milliseconds it needs.
const DEADLINE: Duration = Duration::from_secs(10);

/// Children alive at once.
const IN_FLIGHT: usize = 4;

/// More than the singles' stack and ring hold together, so that a child
/// holding this many at once, then returning them, goes through every slot.
const HELD: usize = 200;

/// What a child does: sweeps, then gets and puts on both pools. Returns
/// whether every object looked as the pools make them.
fn child(stashless: &Pool, stashed: &Pool) -> bool {
    let mut ok = true;
    for pool in [stashless, stashed] {
        pool.sweep();
        let held: Vec<_> = (0..HELD).map(|_| pool.get()).collect();
        ok &= held.iter().all(|buf| buf.len() == 64);
        drop(held);
        for _ in 0..HELD {
            pool.with(|buf| buf[0] = 1);
            pool.put(buffer());
        }
        pool.sweep();
    }
    ok
}

/// A forked child: runs `child` and ends, with status 0 if it returned
/// true, never returning into the test harness.
fn fork(child: impl FnOnce() -> bool) -> libc::pid_t {
    // SAFETY: `fork` has no preconditions; the child only runs `child` and
    // `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
        // SAFETY: ends the child at once, running no parent-owned cleanup.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    pid
}

/// Children that ended badly or not at all.
#[derive(Debug, Default)]
struct Outcome {
    failed: usize,
    hung: usize,
}

/// Reaps the children in `live` that have ended, and kills those past
/// their deadline (counted hung).
fn reap(live: &mut Vec<(libc::pid_t, Instant)>, outcome: &mut Outcome) {
    live.retain(|&(pid, deadline)| {
        let mut status = 0;
        // SAFETY: `pid` is this process's child; `status` is a valid
        // out-pointer.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            let passed = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            outcome.failed += usize::from(!passed);
            return false;
        }
        assert_eq!(done, 0, "waitpid failed");
        if Instant::now() < deadline {
            return true;
        }
        // SAFETY: as above; the child is reaped after the kill.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, &mut status, 0);
        }
        outcome.hung += 1;
        false
    });
}

#[test]
fn no_forked_child_hangs_while_other_threads_use_the_pools() {
    let forks: usize = std::env::var("STASHPOOL_FORKS")
        .map(|n| n.parse().expect("STASHPOOL_FORKS: a number"))
        .unwrap_or(if cfg!(debug_assertions) { 300 } else { 1000 });
    let stashless: Arc<Pool> = Arc::new(
        LocalPool::builder(buffer as fn() -> Vec<u8>)
            .max_stashed(0)
            .sweep_every(Duration::from_millis(1))
            .build(),
    );
    let stashed: Arc<Pool> = Arc::new(
        LocalPool::builder(buffer as fn() -> Vec<u8>)
            .max_stashed(8)
            .sweep_every(Duration::from_millis(1))
            .build(),
    );
    let workers = WorkerPool::new(2);
    let stop = AtomicBool::new(false);
    let mut outcome = Outcome::default();
    thread::scope(|s| {
        // Gets and returns in runs of every length up to past the
        // singles' capacity, so the ring fills, wraps and spills.
        for pool in [&stashless, &stashless, &stashed] {
            let stop = &stop;
            s.spawn(move || {
                let mut held = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    held.extend((0..i % 150).map(|_| pool.get()));
                    held.clear();
                    pool.with(|buf| buf[0] = 1);
                }
            });
        }
        // Worker threads, and a submitter that keeps them busy.
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let (stashless, stashed) = (Arc::clone(&stashless), Arc::clone(&stashed));
                workers.submit(move || {
                    let held: Vec<_> = (0..20).map(|_| stashless.get()).collect();
                    stashed.with(|buf| buf[0] = 1);
                    drop(held);
                });
            }
        });
        let mut live = Vec::new();
        for _ in 0..forks {
            while live.len() == IN_FLIGHT {
                reap(&mut live, &mut outcome);
                thread::sleep(Duration::from_millis(1));
            }
            live.push((
                fork(|| child(&stashless, &stashed)),
                Instant::now() + DEADLINE,
            ));
        }
        while !live.is_empty() {
            reap(&mut live, &mut outcome);
            thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
    });
    workers.wait();
    eprintln!("{forks} forks: {outcome:?}");
    assert_eq!(
        (outcome.hung, outcome.failed),
        (0, 0),
        "children of {forks} forks hung or failed"
    );
}

/// A child starts each pool afresh at its first use there: the parent's
/// idle objects, which its threads may have left mid-operation, stay
/// untouched in the child (and whole in the parent), and the child's pool
/// has its whole `max_idle` room.
#[test]
fn a_child_starts_its_pools_afresh() {
    const MAX: usize = 200;
    let pool: Pool = LocalPool::builder(buffer as fn() -> Vec<u8>)
        .max_stashed(0)
        .max_idle(MAX)
        .manual_sweep()
        .build();
    for _ in 0..=MAX {
        pool.put(buffer());
    }
    assert_eq!(pool.stats().rejected, 1, "full");
    let pid = fork(|| {
        let mut ok = pool.stats() == stashpool::Stats::default();
        for _ in 0..MAX {
            pool.put(buffer());
        }
        ok &= pool.stats().rejected == 0 && pool.stats().idle == MAX;
        pool.put(buffer());
        ok && pool.stats().rejected == 1
    });
    wait_for(pid);
    assert_eq!(pool.stats().idle, MAX, "the parent's objects are its own");
}

/// Objects taken before a fork and given back in the child, by a guard or
/// by a `with` whose closure forked, go to the child's pool or leave it,
/// and never into the parent's state, which the child does not touch.
#[test]
fn objects_taken_before_a_fork_come_back_to_the_childs_pool() {
    for max_stashed in [0, 8] {
        let pool: Pool = LocalPool::builder(buffer as fn() -> Vec<u8>)
            .max_stashed(max_stashed)
            .manual_sweep()
            .build();
        let (pool, guard) = (&pool, pool.get());
        let pid = fork(move || {
            drop(guard);
            let ok = pool.stats().returned == 1 && pool.stats().created == 0;
            ok && child(pool, pool)
        });
        wait_for(pid);
        let pid = pool.with(|buf| {
            // SAFETY: as in `fork`; the child ends in `_exit` below.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            buf[0] = u8::from(pid == 0);
            pid
        });
        if pid == 0 {
            let ok = child(pool, pool);
            // SAFETY: ends the child at once, running no parent-owned cleanup.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        wait_for(pid);
    }
}

/// Waits for the child `pid`: it must end well within the deadline.
fn wait_for(pid: libc::pid_t) {
    let mut live = vec![(pid, Instant::now() + DEADLINE)];
    let mut outcome = Outcome::default();
    while !live.is_empty() {
        reap(&mut live, &mut outcome);
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!((outcome.hung, outcome.failed), (0, 0));
}

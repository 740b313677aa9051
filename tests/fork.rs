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

/// A child forked while another thread adds frame shapes adds one
/// itself: a shape's link is published with one compare-and-swap, so a
/// fork mid-add leaves the child the link unmade, never made halfway by a
/// thread it does not have.
#[cfg(feature = "image")]
#[test]
fn a_child_adds_a_shape_to_pools_its_parent_was_adding_to() {
    use stashpool::image::RgbaPools;
    use std::sync::atomic::AtomicPtr;

    // The pools a thread is adding shapes to; each round's replaces the
    // last, which is freed only once the new one is published, so the
    // pointer a child finds is always to live pools.
    let current = AtomicPtr::new(Box::into_raw(Box::new(RgbaPools::new())));
    let stop = AtomicBool::new(false);
    let mut outcome = Outcome::default();
    thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let pools = Box::into_raw(Box::new(RgbaPools::new()));
                // SAFETY: each pointer stored in `current` comes from
                // `Box::into_raw` and is freed once, here, by the one
                // thread that swaps it out.
                drop(unsafe { Box::from_raw(current.swap(pools, Ordering::AcqRel)) });
                // SAFETY: `pools` is freed only by this thread, later.
                let pools = unsafe { &*pools };
                for width in 1..=4 {
                    pools.pool(width, 1);
                }
            }
        });
        // Until the first child that hangs: one is enough to fail.
        for _ in 0..200 {
            if outcome.hung > 0 {
                break;
            }
            let pid = fork(|| {
                // SAFETY: in the child, the thread that frees these pools
                // does not exist.
                let pools = unsafe { &*current.load(Ordering::Acquire) };
                pools.pool(5, 1).dimensions() == (5, 1)
            });
            let mut live = vec![(pid, Instant::now() + DEADLINE)];
            while !live.is_empty() {
                reap(&mut live, &mut outcome);
                thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    // SAFETY: the adding thread has ended; the last pools are freed once.
    drop(unsafe { Box::from_raw(current.load(Ordering::Relaxed)) });
    assert_eq!(
        (outcome.hung, outcome.failed),
        (0, 0),
        "children hung or failed"
    );
}

// === a child drops only what it made ===

/// An object that knows its process: the one that made it, or a child
/// whose guard held it and marked it. Dropped anywhere else, it counts as
/// a child dropping its parent's object.
struct Owned {
    owner: u32,
}

/// Objects dropped by a process that does not own them.
static FOREIGN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for Owned {
    fn drop(&mut self) {
        if self.owner != std::process::id() {
            FOREIGN.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn owned() -> Owned {
    Owned {
        owner: std::process::id(),
    }
}

type Owners = LocalPool<Owned, fn() -> Owned>;

/// Whether this process has dropped none but its own objects; says which
/// check failed otherwise (the child's stderr is the test's).
fn none_foreign(check: &str) -> bool {
    let foreign = FOREIGN.load(Ordering::Relaxed);
    if foreign != 0 {
        eprintln!("{check}: the child dropped {foreign} of its parent's objects");
    }
    foreign == 0
}

/// Puts `n` objects into `pool` from a thread that then exits, so they sit
/// idle in the overflow and no hook of this thread holds the pool.
fn idle_in(pool: &Owners, n: usize) {
    thread::scope(|s| {
        s.spawn(|| {
            let held: Vec<_> = (0..n).map(|_| pool.get()).collect();
            drop(held);
        });
    });
    assert_eq!(pool.stats().idle, n);
}

/// A child that drops a stashless pool leaves its parent's idle objects
/// alone (they are the parent's), and the parent's stay whole.
#[test]
fn a_child_that_drops_a_stashless_pool_drops_none_of_its_objects() {
    let pool: Owners = LocalPool::builder(owned as fn() -> Owned)
        .max_stashed(0)
        .manual_sweep()
        .build();
    for _ in 0..10 {
        pool.put(owned());
    }
    let pool = std::mem::ManuallyDrop::new(pool);
    wait_for(fork(|| {
        // SAFETY: the child's only thread; `pool` is not used after.
        drop(unsafe { std::ptr::read(&*pool) });
        none_foreign("drop")
    }));
    assert_eq!(pool.stats().idle, 10, "the parent's objects are its own");
    drop(std::mem::ManuallyDrop::into_inner(pool));
}

/// A pool whose last reference in the child is the `Arc` it drops (the
/// thread that made a stash was joined, and its exit hook let go): that
/// drops nothing of the parent's.
#[test]
fn a_child_that_drops_the_last_arc_of_a_pool_drops_none_of_its_objects() {
    let pool: Arc<Owners> = Arc::new(
        LocalPool::builder(owned as fn() -> Owned)
            .manual_sweep()
            .build(),
    );
    idle_in(&pool, 10);
    assert_eq!(Arc::strong_count(&pool), 1, "no hook holds it");
    // Moved into the child's closure, which the parent drops after the
    // fork, dropping its own objects.
    wait_for(fork(move || {
        drop(pool);
        none_foreign("drop")
    }));
}

/// Threads get and return on a stashless pool (every object through the
/// singles' stack and ring and the batch queue) while the main thread
/// forks; each child drops the pool, which its parent's threads left
/// mid-operation. No child may crash, hang or drop a parent's object.
#[test]
fn children_drop_a_pool_their_parents_threads_were_using() {
    let forks: usize = std::env::var("STASHPOOL_FORKS")
        .map(|n| n.parse().expect("STASHPOOL_FORKS: a number"))
        .unwrap_or(2000);
    let pool = std::mem::ManuallyDrop::new(
        LocalPool::builder(owned as fn() -> Owned)
            .max_stashed(0)
            .manual_sweep()
            .build(),
    );
    let pool: &Owners = &pool;
    let stop = AtomicBool::new(false);
    let mut outcome = Outcome::default();
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut held = Vec::new();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    held.extend((0..i % 100).map(|_| pool.get()));
                    held.clear();
                    pool.put(owned());
                }
            });
        }
        let mut live = Vec::new();
        for _ in 0..forks {
            while live.len() == IN_FLIGHT {
                reap(&mut live, &mut outcome);
                thread::yield_now();
            }
            let child = fork(|| {
                // SAFETY: the child's only thread: the parent's threads that
                // borrow `pool` are not in it, and `pool` is not used after.
                unsafe { std::ptr::drop_in_place(std::ptr::from_ref(pool).cast_mut()) };
                none_foreign("drop")
            });
            live.push((child, Instant::now() + DEADLINE));
        }
        while !live.is_empty() {
            reap(&mut live, &mut outcome);
            thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
    });
    eprintln!("{forks} forks: {outcome:?}");
    assert_eq!((outcome.hung, outcome.failed), (0, 0));
}

static STATIC: Owners = LocalPool::builder(owned as fn() -> Owned)
    .max_stashed(0)
    .manual_sweep()
    .build();

/// Every other way a child reaches a pool made before the fork: `stats`,
/// `sweep` and `clear` start the child's own state; an owned guard and
/// frozen `Bytes` taken before and dropped in the child come back to it; a
/// multi-size pool's byte budget counts afresh;
/// the sweeper registry holds the child's pools only; a `static` pool, the
/// ready-made pools and a worker pool with a task queued are used or
/// dropped. None of it drops a parent's object, runs a parent's task or
/// waits for a parent's thread.
#[test]
fn every_way_a_child_reaches_its_parents_pools_leaves_them_alone() {
    let pool: Arc<Owners> = Arc::new(
        LocalPool::builder(owned as fn() -> Owned)
            .sweep_every(Duration::from_millis(1))
            .build(),
    );
    idle_in(&pool, 10);
    let guard = Arc::clone(&pool).get_owned();
    for _ in 0..10 {
        STATIC.put(owned());
    }
    let bytes = stashpool::bytes::BytePool::new(4096);
    #[cfg(feature = "bytes")]
    let (bytes, frozen) = {
        let bytes = Arc::new(bytes);
        let mut buf = Arc::clone(&bytes).get_owned();
        buf.extend_from_slice(b"frozen before the fork");
        (bytes, buf.freeze())
    };
    drop((0..4).map(|_| bytes.get()).collect::<Vec<_>>());
    // A budget that one buffer of the 112 KiB class fills, in the parent.
    let sizes = stashpool::bytes::BytePools::builder(64, 1 << 20)
        .max_idle_bytes(1 << 17)
        .build();
    drop(sizes.get(100_000));
    assert_eq!(sizes.stats().idle_bytes, 112 << 10);
    // One worker, held in a task until the child has ended, and a task
    // queued behind it that holds a parent's object.
    // Dropped in the parent only once its worker is released (the child's
    // closure, dropped in the parent after the fork, only borrows it).
    let workers = std::mem::ManuallyDrop::new(WorkerPool::builder(1).max_queued(4).build());
    let release = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicBool::new(false));
    {
        let (release, running) = (Arc::clone(&release), Arc::clone(&running));
        workers.submit(move || {
            running.store(true, Ordering::Release);
            while !release.load(Ordering::Acquire) {
                thread::yield_now();
            }
        });
    }
    while !running.load(Ordering::Acquire) {
        thread::yield_now();
    }
    let queued = owned();
    workers.submit(move || drop(queued));
    let pid = fork(|| {
        let mut ok = true;
        // The parent's state is not the child's: it starts afresh.
        ok &= pool.stats() == stashpool::Stats::default();
        pool.sweep();
        pool.sweep();
        pool.clear();
        ok &= none_foreign("stats, sweep, clear");
        // An owned guard from before the fork: the child's object now.
        let mut guard = guard;
        guard.owner = std::process::id();
        drop(guard);
        let stats = pool.stats();
        ok &= (stats.returned, stats.created, stats.idle) == (1, 0, 1);
        // The child's sweeper sweeps the child's state (the registry holds
        // the parent's no more): the object is trimmed by its second sweep.
        let deadline = Instant::now() + DEADLINE;
        while pool.stats().trimmed == 0 && Instant::now() < deadline {
            thread::yield_now();
        }
        ok &= pool.stats().trimmed == 1;
        ok &= none_foreign("the child's sweeper");
        // A static pool, never dropped: used afresh.
        ok &= STATIC.stats().idle == 0;
        STATIC.put(owned());
        STATIC.clear();
        ok &= none_foreign("a static pool");
        // Frozen bytes from before the fork come back to the child's pool.
        #[cfg(feature = "bytes")]
        {
            drop(frozen);
            ok &= bytes.stats().returned == 1;
        }
        ok &= bytes.stats().idle <= 1;
        drop(bytes);
        // The classes' budget is the child's own, empty: it keeps one.
        drop(sizes.get(100_000));
        let stats = sizes.stats();
        ok &= (stats.idle, stats.idle_bytes, stats.rejected) == (1, 112 << 10, 0);
        drop(sizes);
        // The worker pool: the parent's worker is not here to join, and the
        // queued task is the parent's, neither run nor dropped here.
        // SAFETY: the child's only thread; `workers` is not used after.
        drop(unsafe { std::ptr::read(&*workers) });
        ok &= none_foreign("a worker pool");
        drop(pool);
        ok & none_foreign("drop")
    });
    wait_for(pid);
    release.store(true, Ordering::Release);
    drop(std::mem::ManuallyDrop::into_inner(workers));
}

/// A fork while another thread of the parent is preloading a pool (inside
/// its `create`, holding the claim to make the pool): the child, which
/// does not have that thread, makes and fills the pool itself instead of
/// waiting for it.
#[test]
fn a_child_forked_mid_preload_fills_the_pool_itself() {
    use std::sync::atomic::AtomicUsize;
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static INSIDE: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    /// The first call stops until released; the others make at once.
    fn slow_first() -> Vec<u8> {
        if CALLS.fetch_add(1, Ordering::Relaxed) == 0 {
            INSIDE.store(true, Ordering::Release);
            while !RELEASE.load(Ordering::Acquire) {
                thread::yield_now();
            }
        }
        buffer()
    }
    let pool: Pool = LocalPool::builder(slow_first as fn() -> Vec<u8>)
        .preload(4)
        .manual_sweep()
        .build();
    /// Releases the first `create`, also if the test fails meanwhile.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            RELEASE.store(true, Ordering::Release);
        }
    }
    thread::scope(|s| {
        let preloading = s.spawn(|| pool.stats().created);
        let release = Release;
        while !INSIDE.load(Ordering::Acquire) {
            thread::yield_now();
        }
        wait_for(fork(|| {
            let held: Vec<_> = (0..4).map(|_| pool.get()).collect();
            let stats = pool.stats();
            held.len() == 4 && (stats.created, stats.gets) == (4, 4)
        }));
        drop(release);
        assert_eq!(preloading.join().unwrap(), 4, "the parent's own preload");
    });
}

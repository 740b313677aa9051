//! Every thread gets a fast path in a pool, whatever else the process runs:
//! whether a thread has a stash in a pool depends only on how that pool is
//! used, never on the other threads or pools of the process.
//!
//! A test binary of its own: each test sets up threads that hold on to
//! stashpool thread ids, which must not be disturbed by tests running
//! beside it. Whether a thread has a stash shows through the public API: an
//! object it puts into its own stash cannot be got by another thread, where
//! one put by a thread without a stash goes to the overflow, which any
//! thread can take from.

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, mpsc};
use std::thread;
use std::time::Duration;

use stashpool::{LocalPool, Pooled};

/// How long a test may take before it counts as a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);

fn pool() -> LocalPool<Vec<u8>> {
    LocalPool::builder(Vec::new as fn() -> Vec<u8>)
        .manual_sweep()
        .build()
}

/// Runs `use_pool` on a new thread, which then stays alive until the
/// returned sender is dropped or sent to.
fn on_a_live_thread(use_pool: impl FnOnce() + Send + 'static) -> mpsc::Sender<()> {
    let (done, used) = mpsc::channel();
    let (release, wait) = mpsc::channel::<()>();
    thread::spawn(move || {
        use_pool();
        done.send(()).unwrap();
        let _ = wait.recv();
    });
    used.recv().unwrap();
    release
}

/// Every object that any thread can take from `pool` now.
fn takeable(pool: &LocalPool<Vec<u8>>) -> Vec<u8> {
    let mut all: Vec<u8> = std::iter::from_fn(|| pool.try_get().map(Pooled::into_inner))
        .flatten()
        .collect();
    all.sort_unstable();
    all
}

/// A thread whose first use of a pool is in a `pthread_key_create`
/// destructor (which glibc runs after the thread-local destructors) still
/// has what it leaves behind dealt with: its objects are flushed to the
/// overflow and its thread id goes back. Before, its exit hooks and its id
/// leaked, and after 16 such threads no new thread of the process got a
/// stash in any pool.
#[cfg(target_os = "linux")]
#[test]
fn a_first_use_in_a_pthread_key_destructor_leaves_nothing_behind() {
    use std::sync::LazyLock;

    static LATE: LazyLock<LocalPool<Vec<u8>>> = LazyLock::new(pool);
    static NEXT: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn late_use(_: *mut libc::c_void) {
        LATE.put(vec![NEXT.fetch_add(1, Ordering::Relaxed) as u8]);
    }

    common::run_with_deadline(DEADLINE, || {
        const THREADS: usize = if cfg!(miri) { 4 } else { 24 };
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: a valid place for the key, and a destructor that lives as
        // long as the process.
        let made = unsafe { libc::pthread_key_create(&mut key, Some(late_use)) };
        assert_eq!(made, 0);
        for _ in 0..THREADS {
            thread::spawn(move || {
                let value = std::ptr::NonNull::<u8>::dangling().as_ptr().cast();
                // SAFETY: `key` is live; any non-null value runs the
                // destructor at exit.
                let set = unsafe { libc::pthread_setspecific(key, value) };
                assert_eq!(set, 0);
            })
            .join()
            .unwrap();
        }
        let expected: Vec<u8> = (0..THREADS as u8).collect();
        assert_eq!(
            takeable(&LATE),
            expected,
            "every late thread's object was flushed"
        );

        // A new thread still gets a stash of its own in a new pool.
        let fresh: &'static LocalPool<Vec<u8>> = Box::leak(Box::new(pool()));
        let release = on_a_live_thread(move || fresh.with(|buf| buf.push(1)));
        assert_eq!(
            takeable(fresh),
            [] as [u8; 0],
            "the object is in that thread's stash"
        );
        drop(release);
    });
}

/// A pool that keeps at most 2 idle objects, used by one thread at a time,
/// keeps a stash for its current user, even when long-lived threads of
/// another pool hold the thread ids of its earlier users. Before, its two
/// stashes stayed with those ids, and its sole user had none.
#[test]
fn a_bounded_pool_keeps_a_stash_for_its_current_user() {
    common::run_with_deadline(DEADLINE, || {
        let bounded: &'static LocalPool<Vec<u8>> = Box::leak(Box::new(
            LocalPool::builder(Vec::new as fn() -> Vec<u8>)
                .max_idle(2)
                .manual_sweep()
                .build(),
        ));
        let other: &'static LocalPool<Vec<u8>> = Box::leak(Box::new(pool()));
        let mut long_lived = Vec::new();
        for round in 0..3u8 {
            // A user that exits (joined: its exit hooks have run)...
            thread::spawn(move || bounded.put(vec![round]))
                .join()
                .unwrap();
            bounded.clear();
            // ...and a long-lived thread of another pool, which takes the
            // lowest free thread id: the one the user gave back.
            long_lived.push(on_a_live_thread(move || other.put(vec![round])));
        }
        let user = on_a_live_thread(move || {
            bounded.with(|buf| {
                buf.clear();
                buf.push(9);
            })
        });
        assert_eq!(takeable(bounded), [] as [u8; 0], "in its user's stash");
        drop((user, long_lived));
    });
}

std::thread_local! {
    /// Counts its thread's exit when destroyed. Made first on a thread, so
    /// destroyed after every thread-local made later, stashpool's too.
    static EXITED: Exit = const { Exit(Cell::new(false)) };
}

static EXITS: AtomicUsize = AtomicUsize::new(0);

struct Exit(Cell<bool>);

impl Drop for Exit {
    fn drop(&mut self) {
        if self.0.get() {
            EXITS.fetch_add(1, Ordering::Release);
        }
    }
}

/// Back-to-back `thread::scope`s: a scope returns when its threads' closures
/// have, before their thread-local destructors run, so the next scope's
/// threads start while the last ones still hold their thread ids. Before,
/// those threads took ids past the bound on stashes and had none for their
/// whole life; now a pool's slots go to whichever threads use it, and the
/// exited threads' slots are free for them.
#[test]
fn back_to_back_scopes_keep_their_stashes() {
    common::run_with_deadline(DEADLINE, || {
        // Each round's threads and this one all hold a stash: at most 8 a
        // core (`LocalPoolBuilder::max_stashed`).
        let cores = thread::available_parallelism().map_or(1, usize::from);
        let threads = (8 * cores - 1).min(12);
        let rounds = if cfg!(miri) { 2 } else { 4 };
        let scoped = pool();
        let other = pool();
        for round in 0..rounds {
            let all_put = Barrier::new(threads + 1);
            let checked = Barrier::new(threads + 1);
            thread::scope(|s| {
                for n in 0..threads {
                    let (scoped, other, all_put, checked) = (&scoped, &other, &all_put, &checked);
                    s.spawn(move || {
                        EXITED.with(|exit| exit.0.set(true));
                        // A thread id, taken while the last scope's threads
                        // may still hold theirs.
                        other.put(vec![0]);
                        // Then, once they have all exited, the pool.
                        while EXITS.load(Ordering::Acquire) < round * threads {
                            thread::yield_now();
                        }
                        // Taken and returned: what a stash keeps.
                        scoped.with(|buf| {
                            buf.clear();
                            buf.push((round * threads + n) as u8);
                        });
                        all_put.wait();
                        checked.wait();
                    });
                }
                all_put.wait();
                // The last round's objects were flushed to the overflow at
                // their threads' exits; this round's are in stashes.
                let mine = round * threads..(round + 1) * threads;
                let seen: Vec<u8> = takeable(&scoped)
                    .into_iter()
                    .filter(|&v| mine.contains(&usize::from(v)))
                    .collect();
                assert_eq!(seen, [] as [u8; 0], "round {round}: each in its stash");
                checked.wait();
            });
        }
    });
}

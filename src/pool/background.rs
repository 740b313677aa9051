//! The background sweeper: one thread for the whole process that sweeps every
//! pool on its own interval, the way Go's garbage collector clears every
//! `sync.Pool` at each cycle.
//!
//! It starts with the first pool that asks for background sweeping, holds
//! pools weakly (a pool that drops leaves at once), sleeps on a condition
//! variable until a pool is due, and outlives panics from user `Drop` code,
//! so one bad object cannot stop the sweeping of every pool:
//! [`implementation`](crate::implementation), section 7.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::sync::{NEVER, lock, wait, wait_timeout};

/// Something the sweeper can sweep: a pool's shared state.
pub(crate) trait Sweep: Send + Sync {
    fn sweep(&self);
}

struct Entry {
    target: Weak<dyn Sweep>,
    interval: Duration,
    due: Instant,
}

pub(super) struct Registry {
    entries: Vec<Entry>,
    started: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    entries: Vec::new(),
    started: false,
});
static WAKE: Condvar = Condvar::new();

/// Sweeps `target` every `interval` until it drops or is deregistered.
pub(crate) fn register(target: Weak<dyn Sweep>, interval: Duration) {
    let mut registry = lock(&REGISTRY);
    registry.entries.push(Entry {
        target,
        interval,
        due: after(Instant::now(), interval),
    });
    // Starts the sweeper thread if it is not running. If the thread cannot
    // be made (the process is out of threads), pools still work and
    // `sweep()` still trims; the next registration retries.
    if !registry.started {
        registry.started = thread::Builder::new()
            .name("stashpool-sweeper".into())
            .spawn(run)
            .is_ok();
    }
    WAKE.notify_one();
}

/// Stops sweeping `target` (it is alive, so no other target has its
/// address, and a `Weak` keeps an entry's address from being reused).
pub(crate) fn deregister(target: *const ()) {
    lock(&REGISTRY)
        .entries
        .retain(|entry| entry.target.as_ptr().cast::<()>() != target);
}

fn run() {
    // Here, before any sweep, rather than on a pool's path: registering a
    // process with several threads for `membarrier` makes the kernel wait
    // for each of their CPUs.
    crate::pool::barrier::register();
    let mut due = Vec::new();
    loop {
        collect_due(&mut due);
        for target in due.drain(..) {
            // A panicking `Drop` of a trimmed object propagates out of
            // `sweep`; the other objects of that sweep were still dropped.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| target.sweep())) {
                // Under a guard: a payload whose `Drop` panics must not
                // end the thread that sweeps every pool in the process.
                crate::pool::unwind::drop_payload(payload);
            }
        }
    }
}

/// Waits until at least one pool is due, then moves the due ones into `due`.
fn collect_due(due: &mut Vec<Arc<dyn Sweep>>) {
    let mut registry = lock(&REGISTRY);
    loop {
        let now = Instant::now();
        let next = registry.entries.iter().map(|entry| entry.due).min();
        match next {
            None => registry = wait(&WAKE, registry),
            Some(next) if next > now => {
                registry = wait_timeout(&WAKE, &REGISTRY, registry, next - now).0;
            }
            Some(_) => break,
        }
    }
    let now = Instant::now();
    registry.entries.retain_mut(|entry| {
        if entry.due > now {
            return true;
        }
        entry.due = after(now, entry.interval);
        match entry.target.upgrade() {
            Some(target) => {
                due.push(target);
                true
            }
            None => false,
        }
    });
}

/// `now + interval`, with intervals past [`NEVER`] taken as `NEVER` so the
/// sum cannot overflow.
fn after(now: Instant, interval: Duration) -> Instant {
    now + interval.min(NEVER)
}

/// The registry, locked: the fork handlers hold it across a fork, so that
/// no thread is changing it when the child's copy is taken.
#[cfg(target_os = "linux")]
pub(super) fn lock_registry() -> std::sync::MutexGuard<'static, Registry> {
    lock(&REGISTRY)
}

#[cfg(target_os = "linux")]
impl Registry {
    /// In a forked child: the parent's sweeper is not in this process, and
    /// the pools registered are the parent's state, which the child leaves
    /// alone (`fork.rs`); its pools register their new state again.
    pub(super) fn forked(&mut self) {
        self.started = false;
        self.entries.clear();
    }
}

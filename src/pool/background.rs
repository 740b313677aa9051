//! The background sweeper: one thread for the whole process that sweeps every
//! pool on its own interval, the way Go's garbage collector clears every
//! `sync.Pool` at each cycle.
//!
//! The thread starts with the first pool that asks for background sweeping.
//! It holds pools weakly (a pool that drops leaves at once, and a pool the
//! sweeper holds for a moment is still emptied synchronously by its drop), and
//! when no pool is registered it sleeps on a condition variable, costing
//! nothing. A panic in a user `Drop` run by a sweep is caught and ignored, so
//! one bad object cannot stop the sweeping of every pool in the process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crate::sync::{lock, wait, wait_timeout, UniqueIds, NEVER};

/// Something the sweeper can sweep: a pool's shared state.
pub(crate) trait Sweep: Send + Sync {
    fn sweep(&self);
}

struct Entry {
    id: u64,
    target: Weak<dyn Sweep>,
    interval: Duration,
    due: Instant,
}

struct Registry {
    entries: Vec<Entry>,
    started: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    entries: Vec::new(),
    started: false,
});
static WAKE: Condvar = Condvar::new();
static NEXT_ID: UniqueIds = UniqueIds::new();

/// A fresh key for `register` and `deregister`.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.next()
}

/// Sweeps `target` every `interval` until it drops or is deregistered.
pub(crate) fn register(id: u64, target: Weak<dyn Sweep>, interval: Duration) {
    let mut registry = lock(&REGISTRY);
    registry.entries.push(Entry {
        id,
        target,
        interval,
        due: after(Instant::now(), interval),
    });
    // If the thread cannot be made (the process is out of threads), pools
    // still work and `sweep()` still trims; the next registration retries.
    start(&mut registry);
    WAKE.notify_one();
}

/// Starts the sweeper thread if pools are registered and it is not running.
/// Call with the registry locked.
fn start(registry: &mut Registry) {
    if !registry.started && !registry.entries.is_empty() {
        registry.started = thread::Builder::new()
            .name("stashpool-sweeper".into())
            .spawn(run)
            .is_ok();
    }
}

/// Stops sweeping the pool registered as `id`.
pub(crate) fn deregister(id: u64) {
    lock(&REGISTRY).entries.retain(|entry| entry.id != id);
}

fn run() {
    let mut due = Vec::new();
    loop {
        collect_due(&mut due);
        for target in due.drain(..) {
            // A panicking `Drop` of a trimmed object propagates out of
            // `sweep`; the other objects of that sweep were still dropped.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| target.sweep())) {
                // Under a guard: a payload whose `Drop` panics must not
                // end the thread that sweeps every pool in the process.
                crate::pool::sweep::drop_payload(payload);
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

// === fork ===
//
// A forked child has one thread, the one that called `fork()`. Three things
// of the parent's other threads would outlive them there: a pool's sweep
// lock and the claims a sweep holds on stashes (the child's next get or
// sweep would wait for them forever), the `busy` flag of a thread caught
// inside its critical section (a sweep would wait for it forever), and this
// module's sweeper thread (the registry would say it runs, and nothing would
// be swept in the background again). So, with `pthread_atfork`:
//
// * before a fork, the forking thread takes the fork gate exclusively
//   (`sync::FORK_GATE`: every sweep-lock section holds it shared, so this
//   waits for sweeps in progress, which run no user code and are short) and
//   the registry's lock;
// * after it, the parent releases both; the child records which threads
//   were left behind (`owner::forked`: sweeps skip a stash whose owner was
//   caught in its critical section, `owner::died_in_fork`), releases both,
//   and starts a sweeper of its own for the pools registered at its next
//   pool operation off the hot path (`resume`).

#[cfg(target_os = "linux")]
pub(crate) mod fork {
    use std::cell::RefCell;
    use std::sync::atomic::AtomicU64;
    use std::sync::{MutexGuard, RwLockWriteGuard};

    use super::{Registry, REGISTRY, RESUME};
    use crate::sync::{lock, FORK_GATE};
    use std::sync::atomic::Ordering;

    /// What the forking thread holds across a fork.
    type Held = (RwLockWriteGuard<'static, ()>, MutexGuard<'static, Registry>);

    thread_local! {
        static FORKING: RefCell<Option<Held>> = const { RefCell::new(None) };
    }

    /// The fork handlers' registration.
    static INSTALL: Install = Install::new();

    /// Installs the fork handlers, once per process.
    pub(crate) fn install() {
        INSTALL.run(|| {
            // SAFETY: the three handlers are `extern "C" fn()` without
            // arguments that never unwind (nothing in them panics: poisoned
            // locks are taken anyway and thread-local access is fallible).
            // If registration fails (out of memory) forks are simply not
            // guarded, as before any pool was made.
            let _ = unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        });
    }

    /// A registration run once per process, which returns to no caller
    /// before it is done: a caller that went on to make and lock pools
    /// while the handlers were not in place could carry a held lock into a
    /// child forked meanwhile.
    ///
    /// Not a `Once`: a process forked while another thread was inside one
    /// would leave its child waiting for ever on that thread. Callers that
    /// race the installer spin until it is done, and the word names the
    /// installing process, so a child forked mid-install, whose installer
    /// is not in it, installs itself instead of waiting (unless the
    /// handlers were registered before the fork: the child handler then
    /// marks the registration done).
    pub(crate) struct Install {
        /// `DONE`, or the id of the process whose thread is installing, or
        /// 0 before anyone has started.
        state: AtomicU64,
    }

    const DONE: u64 = u64::MAX;

    impl Install {
        pub(crate) const fn new() -> Self {
            Self {
                state: AtomicU64::new(0),
            }
        }

        pub(crate) fn run(&self, register: impl FnOnce()) {
            let me = u64::from(std::process::id());
            loop {
                // Acquire: pairs with the release of `DONE`.
                match self.state.load(Ordering::Acquire) {
                    DONE => return,
                    // Another thread of this process is installing.
                    installer if installer == me => std::thread::yield_now(),
                    // Nobody, or a process this one was forked from.
                    other => {
                        let claim = self.state.compare_exchange(
                            other,
                            me,
                            Ordering::Acquire,
                            Ordering::Relaxed,
                        );
                        if claim.is_ok() {
                            break;
                        }
                    }
                }
            }
            register();
            self.done();
        }

        /// Marks the registration done. Release: what it did is seen by
        /// every caller that reads `DONE`.
        pub(crate) fn done(&self) {
            self.state.store(DONE, Ordering::Release);
        }

        #[cfg(test)]
        pub(crate) fn installing_in(&self, process: u64) {
            self.state.store(process, Ordering::Relaxed);
        }
    }

    extern "C" fn prepare() {
        let gate = FORK_GATE
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let registry = lock(&REGISTRY);
        // Fails only in a thread-local destructor of this thread: the fork
        // is then unguarded (the guards are released at once).
        let _ = FORKING.try_with(|forking| *forking.borrow_mut() = Some((gate, registry)));
    }

    extern "C" fn parent() {
        let _ = FORKING.try_with(|forking| drop(forking.borrow_mut().take()));
    }

    extern "C" fn child() {
        // This handler runs, so the parent registered it: a fork that came
        // while the registering thread had yet to say so finds it done.
        INSTALL.done();
        let _ = FORKING.try_with(|forking| {
            if let Some((gate, mut registry)) = forking.borrow_mut().take() {
                crate::pool::owner::forked();
                // The parent's sweeper is not in this process. A new one is
                // started by the child's next pool operation off the hot
                // path (`resume`), not here: a child handler should not
                // make threads, and a child that goes on to `exec` needs
                // none.
                registry.started = false;
                RESUME.store(!registry.entries.is_empty(), Ordering::Relaxed);
                drop((registry, gate));
            }
        });
    }
}

/// Set in a forked child whose parent swept pools in the background: the
/// child's sweeper is yet to be started.
static RESUME: AtomicBool = AtomicBool::new(false);

/// Starts the background sweeper in a forked child, once, if its parent had
/// one. Called on the pool's slower paths (a new object, a spill or a steal,
/// `sweep` and `clear`): a relaxed load when there is nothing to do.
#[inline]
pub(crate) fn resume() {
    if RESUME.load(Ordering::Relaxed) && RESUME.swap(false, Ordering::Relaxed) {
        start(&mut lock(&REGISTRY));
    }
}

/// Makes `fork()` safe for every pool (see above). Called when a pool's
/// shared state is made.
pub(crate) fn guard_forks() {
    #[cfg(target_os = "linux")]
    fork::install();
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Barrier;

    use super::fork::Install;

    /// A caller that races the installer returns only once the handlers
    /// are registered, so it cannot lock pools that a fork would catch
    /// unguarded.
    #[test]
    fn a_racing_caller_waits_for_the_registration() {
        let install = Install::new();
        let registered = AtomicBool::new(false);
        let (inside, go_on) = (Barrier::new(2), Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                install.run(|| {
                    inside.wait();
                    go_on.wait();
                    registered.store(true, Ordering::Relaxed);
                })
            });
            inside.wait(); // the installer is registering
            let racer = s.spawn(|| {
                install.run(|| panic!("registered twice"));
                registered.load(Ordering::Relaxed)
            });
            go_on.wait();
            assert!(racer.join().unwrap(), "returned before the registration");
        });
    }

    /// A child forked while a thread of its parent was registering finds
    /// the registration under way in a process that is not its own, and
    /// registers itself rather than wait for a thread it does not have.
    #[test]
    fn a_registration_left_by_a_parent_is_taken_over() {
        let install = Install::new();
        install.installing_in(u64::from(std::process::id()) + 1);
        let mut registered = false;
        install.run(|| registered = true);
        assert!(registered);
        install.run(|| panic!("registered twice"));
    }
}

//! `fork()`: a forked child starts each pool afresh.
//!
//! A child has one thread, the forking one: whatever the parent's other
//! threads were doing inside a pool (a stash half-changed, a queue
//! mid-push) stays half-done in the child for ever. So a child never
//! touches its parent's pool state. With `pthread_atfork` handlers,
//! installed with the first pool ([`guard`]): before a fork, the forking
//! thread takes the fork gate exclusively (`sync::FORK_GATE`, which every
//! sweep-lock section and the switch of barriers hold), the sweeper
//! registry's lock and, on targets without 64-bit atomics, the lock on
//! tokens and table ids, so that none of them is under way; after it, the
//! parent releases them, and the child bumps the process [`generation`],
//! forgets the sweeper's registry, releases them, then gives its thread a
//! new token and an empty stash cache and forgets its exit hooks (all of
//! them the parent's). A pool whose shared state is of an earlier
//! generation makes a new one at its next use off the hot path
//! (`LocalPool::current`), and registers it with a sweeper of the child's
//! own; the parent's is left untouched, and if the child drops its last
//! reference, dropped without its objects (`Shared`'s drop): a child drops
//! only what it made. Linux only (`libc` is a Linux-only dependency);
//! elsewhere these are no-ops. Why:
//! [`implementation`](crate::implementation), section 7a.

/// Makes `fork()` safe for every pool. Called when a pool's shared state
/// or a worker pool is made, so before any of its locks can be held.
pub(crate) fn guard() {
    #[cfg(all(target_os = "linux", not(stashpool_loom)))]
    linux::install();
}

/// How many forks this process descends from (as far as the fork handlers
/// saw): pool state made in an earlier generation is the parent's.
#[cfg(all(target_os = "linux", not(stashpool_loom)))]
static GENERATION: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// This process's generation (see [`GENERATION`]): one relaxed load. Only
/// the child handler changes it, before the child runs any other code, so
/// every thread of a process reads the same value. Always 0 where no fork
/// is handled (and under loom, which models none).
#[inline(always)]
pub(crate) fn generation() -> usize {
    #[cfg(all(target_os = "linux", not(stashpool_loom)))]
    {
        GENERATION.load(std::sync::atomic::Ordering::Relaxed)
    }
    #[cfg(not(all(target_os = "linux", not(stashpool_loom))))]
    {
        0
    }
}

#[cfg(all(target_os = "linux", not(stashpool_loom)))]
mod linux {
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{MutexGuard, RwLockWriteGuard};

    use super::GENERATION;
    use crate::lazy::Claim;
    use crate::pool::background::{self, Registry};
    use crate::sync::FORK_GATE;

    /// What the forking thread holds across a fork.
    type Held = (
        RwLockWriteGuard<'static, ()>,
        MutexGuard<'static, Registry>,
        Option<MutexGuard<'static, u64>>,
    );

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
    /// Not a `Once` (`implementation`, section 7a): a [`Claim`], so that a
    /// child forked mid-install, whose installer is not in it, installs
    /// itself instead of waiting (unless the handlers were registered
    /// before the fork: the child handler then marks the registration
    /// done).
    pub(crate) struct Install {
        claim: Claim,
        done: AtomicBool,
    }

    impl Install {
        pub(crate) const fn new() -> Self {
            Self {
                claim: Claim::new(),
                done: AtomicBool::new(false),
            }
        }

        pub(crate) fn run(&self, register: impl FnOnce()) {
            self.claim.run(
                // Acquire: pairs with the release of `done`.
                || self.done.load(Ordering::Acquire).then_some(()),
                || {
                    register();
                    self.done();
                },
                "stashpool: the fork handlers' registration re-entered",
            );
        }

        /// Marks the registration done. Release: what it did is seen by
        /// every caller that finds it done.
        pub(crate) fn done(&self) {
            self.done.store(true, Ordering::Release);
        }

        #[cfg(test)]
        pub(crate) fn installing_in(&self, process: u32) {
            self.claim.held_by(process);
        }
    }

    extern "C" fn prepare() {
        let gate = FORK_GATE.exclusive();
        let registry = background::lock_registry();
        let numbers = crate::per_thread::hold_numbers();
        // Fails only in a thread-local destructor of this thread: the fork
        // is then unguarded (the guards are released at once).
        let _ = FORKING.try_with(|forking| {
            *forking.borrow_mut() = Some((gate, registry, numbers));
        });
    }

    extern "C" fn parent() {
        let _ = FORKING.try_with(|forking| drop(forking.borrow_mut().take()));
    }

    extern "C" fn child() {
        // This handler runs, so the parent registered it: a fork that came
        // while the registering thread had yet to say so finds it done.
        INSTALL.done();
        GENERATION.fetch_add(1, Ordering::Relaxed);
        let _ = FORKING.try_with(|forking| {
            if let Some((gate, mut registry, numbers)) = forking.borrow_mut().take() {
                // The parent's sweeper is not in this process, and its pools'
                // state is the parent's: the pools register their new state,
                // which starts a sweeper, at their next use.
                registry.forked();
                drop((numbers, registry, gate));
            }
        });
        // Nothing this thread found, lent or hooked in the parent is taken
        // for this process's. After the numbers' release: a new token is
        // one of them.
        crate::per_thread::forked();
        crate::pool::exit::forget();
    }
}

#[cfg(all(test, target_os = "linux", not(stashpool_loom)))]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::linux::Install;
    use crate::per_thread::PerThread;

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

    /// A child forked while another thread takes tokens and table ids
    /// takes its own: where they are behind a lock (no 64-bit atomics), the
    /// handlers hold it across the fork, so it is never left held in the
    /// child by a thread the child does not have.
    #[test]
    #[cfg(not(miri))] // Miri cannot fork.
    fn a_child_takes_the_numbers_its_parent_was_taking_at_the_fork() {
        super::guard();
        let stop = AtomicBool::new(false);
        let hung = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    drop(PerThread::<u8>::new());
                }
            });
            let hung = (0..200)
                .filter(|_| hangs(|| drop(PerThread::<u8>::new())))
                .count();
            stop.store(true, Ordering::Relaxed);
            hung
        });
        assert_eq!(hung, 0, "children hung taking a number");
    }

    /// Whether a child forked to run `child` fails to end within ten
    /// seconds (it is then killed).
    #[cfg(not(miri))]
    fn hangs(child: impl FnOnce()) -> bool {
        // SAFETY: the child runs `child`, which takes no lock the fork
        // handlers do not hold, and ends at once.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            child();
            // SAFETY: ends the child, running no parent-owned cleanup.
            unsafe { libc::_exit(0) };
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut status = 0;
        // SAFETY: `pid` is this process's child, `status` an out-pointer.
        while unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0 {
            if std::time::Instant::now() > deadline {
                // SAFETY: as above; reaped after the kill.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                return true;
            }
            std::thread::yield_now();
        }
        false
    }

    /// A child forked while a thread of its parent was registering finds
    /// the registration under way in a process that is not its own, and
    /// registers itself rather than wait for a thread it does not have.
    #[test]
    fn a_registration_left_by_a_parent_is_taken_over() {
        let install = Install::new();
        install.installing_in(std::process::id() + 1);
        let mut registered = false;
        install.run(|| registered = true);
        assert!(registered);
        install.run(|| panic!("registered twice"));
    }
}

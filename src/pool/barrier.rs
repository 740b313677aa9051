//! An asymmetric memory barrier: nearly free for stash owners, dear (and
//! rare) for sweepers.
//!
//! The heavy barrier ([`Heavy`]) can act as a `SeqCst` fence in every
//! thread of the process (Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`), so that [`light`], the
//! owner's side, need only keep its store and its load in program order: a
//! compiler fence. Registering a process for `membarrier` makes the kernel
//! wait for every CPU that runs one of its threads, so no pool operation
//! does it: owners start on `SeqCst` fences, sweepers on fences too, and
//! [`register`] (the background sweeper, before its first sweep, or a
//! manual sweep) registers off the pools' paths. From then on every new
//! sweep uses `membarrier`, and once the sweeps that used a fence are done,
//! owners move to compiler fences, for good. Where `membarrier` is
//! unavailable (another OS, an old kernel, a seccomp policy, Miri) both
//! sides stay `SeqCst` fences. The handshake these serve, and why it is
//! exclusive, also through the switch:
//! [`implementation`](crate::implementation), section 4.

#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
use crossbeam_utils::CachePadded;

#[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
use std::sync::atomic::{AtomicU8, AtomicUsize};

#[cfg(stashpool_loom)]
use loom::sync::atomic::{AtomicU8, AtomicUsize};

use crate::sync::{fence, Ordering};

/// A pool's handle on the process's barriers. Nothing in a real build (the
/// state is a `static`); under loom a reference to the model's state,
/// which each pool keeps, since loom drops its statics before the last
/// thread-locals (and with them the exit flushes, which sweep) are gone.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Strategy {
    #[cfg(stashpool_loom)]
    state: &'static State,
}

/// The owners' barrier and the sweepers', and the switch between them.
#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
#[derive(Debug)]
struct State {
    /// `FENCE` until the switch, then `MEMBARRIER` for good. Read by every
    /// owner-side barrier, written once: on a line of its own.
    owners: CachePadded<AtomicU8>,
    /// `BOUND` once every new sweep uses `membarrier` (`REFUSED` if the
    /// kernel has none), plus `FENCE_SWEEP` for each sweep in flight that
    /// uses a fence.
    sweepers: CachePadded<AtomicUsize>,
}

#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
mod word {
    /// Owners use `SeqCst` fences.
    pub(super) const FENCE: u8 = 0;
    /// Owners use compiler fences; every sweep in flight uses `membarrier`.
    pub(super) const MEMBARRIER: u8 = 1;
    /// The process is registered: every sweep from now on uses `membarrier`.
    pub(super) const BOUND: usize = 1;
    /// The kernel refused the registration: fences for good.
    pub(super) const REFUSED: usize = 2;
    /// One sweep in flight that uses a fence.
    pub(super) const FENCE_SWEEP: usize = 4;
}

#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
use word::*;

#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
impl State {
    /// Moves owners to compiler fences. Called once, by whichever thread
    /// made the change that left the sweepers bound and no sweep that uses
    /// a fence in flight; that change was an acquire-release read-modify-
    /// write of `sweepers`, so this thread has seen every such sweep release
    /// its claims.
    fn switch_owners(&self) {
        // Orders all of that before whatever each owner does after it next
        // reads the owners' word, which it reads with a relaxed load
        // (`implementation`, section 4).
        membarrier();
        self.owners.store(MEMBARRIER, Ordering::Release);
    }
}

#[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
static STATE: State = State {
    owners: CachePadded::new(AtomicU8::new(FENCE)),
    sweepers: CachePadded::new(AtomicUsize::new(0)),
};

#[cfg(stashpool_loom)]
loom::lazy_static! {
    static ref STATE: &'static State = Box::leak(Box::new(State {
        owners: CachePadded::new(AtomicU8::new(FENCE)),
        sweepers: CachePadded::new(AtomicUsize::new(0)),
    }));
}

/// The handle for a new pool.
pub(crate) fn strategy() -> Strategy {
    Strategy {
        #[cfg(stashpool_loom)]
        state: *STATE,
    }
}

#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
fn state(strategy: Strategy) -> &'static State {
    #[cfg(stashpool_loom)]
    {
        strategy.state
    }
    #[cfg(not(stashpool_loom))]
    {
        let _ = strategy;
        &STATE
    }
}

/// The owner's side: orders a preceding store before a following load.
#[inline(always)]
pub(crate) fn light(strategy: Strategy) {
    #[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
    if state(strategy).owners.load(Ordering::Relaxed) == MEMBARRIER {
        // Every sweep in flight issues a heavy barrier that supplies the
        // hardware fence; we only stop the compiler from reordering.
        crate::sync::compiler_fence(Ordering::SeqCst);
        return;
    }
    #[cfg(stashpool_loom)]
    owner_checks(state(strategy));
    let _ = strategy;
    fence(Ordering::SeqCst);
}

/// Under loom, where both barriers are fences, what the switch must give
/// an owner that uses a compiler fence: no sweep that uses a fence is in
/// flight, nor will one be. The load is an acquire load here, standing in
/// for the membarrier the switch issues, which orders the switching
/// thread's past before the owner's future and which loom cannot model
/// (`implementation`, section 9).
#[cfg(stashpool_loom)]
fn owner_checks(state: &State) {
    if state.owners.load(Ordering::Acquire) == MEMBARRIER {
        let sweepers = state.sweepers.load(Ordering::Relaxed);
        assert_eq!(
            sweepers / FENCE_SWEEP,
            0,
            "an owner on compiler fences while a sweep uses a fence"
        );
        assert_eq!(sweepers & BOUND, BOUND, "owners switched before sweepers");
    }
}

/// Under loom: whether owners have moved to compiler fences.
#[cfg(stashpool_loom)]
pub(crate) fn switched() -> bool {
    state(strategy()).owners.load(Ordering::Relaxed) == MEMBARRIER
}

/// A sweep's heavy barrier, for the claims it makes: made before the
/// claims, issued between them and the loads of `busy`, and dropped only
/// after every claim is released (while a sweep that uses a fence is in
/// flight, owners stay on fences).
#[must_use]
#[derive(Debug)]
pub(crate) struct Heavy {
    #[cfg_attr(
        not(any(stashpool_loom, all(target_os = "linux", not(miri)))),
        allow(dead_code)
    )]
    strategy: Strategy,
    /// A `SeqCst` fence (and counted in `sweepers` where owners can
    /// switch), rather than `membarrier`.
    fence: bool,
}

impl Heavy {
    /// Picks this sweep's barrier: `membarrier` once the sweepers are bound
    /// to it, else a fence, counted until the sweep is done.
    pub(crate) fn new(strategy: Strategy) -> Self {
        #[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
        {
            let sweepers = &state(strategy).sweepers;
            // Acquire: a sweep that reads `BOUND` issues `membarrier` after
            // the registration that came before it.
            let mut word = sweepers.load(Ordering::Acquire);
            loop {
                if word & BOUND != 0 {
                    return Self {
                        strategy,
                        fence: false,
                    };
                }
                match sweepers.compare_exchange_weak(
                    word,
                    word + FENCE_SWEEP,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(now) => word = now,
                }
            }
        }
        Self {
            strategy,
            fence: true,
        }
    }

    /// The barrier itself: after the claims, before the loads of `busy`.
    pub(crate) fn issue(&self) {
        if self.fence {
            fence(Ordering::SeqCst);
        } else {
            membarrier();
        }
    }
}

impl Drop for Heavy {
    fn drop(&mut self) {
        #[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
        if self.fence {
            let state = state(self.strategy);
            // Release: the sweep's claims were released before; acquire: the
            // last one out switches the owners, having seen the others'.
            let before = state.sweepers.fetch_sub(FENCE_SWEEP, Ordering::AcqRel);
            if before == BOUND | FENCE_SWEEP {
                state.switch_owners();
            }
        }
    }
}

/// Registers the process for `membarrier`, if it is not yet and the kernel
/// allows it: every sweep from then on uses it, and owners move to compiler
/// fences once the sweeps that use a fence are done. The first call can
/// take milliseconds in a process with several threads (the kernel waits
/// for each of their CPUs), so it is made off the pools' paths (the
/// background sweeper's start, a manual sweep), never inside a sweep-lock
/// section; later calls are a relaxed load.
pub(crate) fn register() {
    #[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
    {
        let state = state(strategy());
        if state.sweepers.load(Ordering::Relaxed) & (BOUND | REFUSED) != 0 {
            return;
        }
        // Under loom: a kernel that has it.
        #[cfg(stashpool_loom)]
        let bound = true;
        #[cfg(not(stashpool_loom))]
        let bound = linux::register();
        // In the fork gate, as every sweep that uses a fence is: a child
        // forked between binding the sweepers and switching the owners
        // would keep its owners on fences for good.
        let _gate = crate::sync::fork_gate();
        let before = state
            .sweepers
            .fetch_or(if bound { BOUND } else { REFUSED }, Ordering::AcqRel);
        if bound && before & BOUND == 0 && before / FENCE_SWEEP == 0 {
            state.switch_owners();
        }
    }
}

/// A full fence in every thread of the process; only once the sweepers
/// are bound (registration succeeded). A fence under loom.
#[cfg(any(stashpool_loom, all(target_os = "linux", not(miri))))]
fn membarrier() {
    #[cfg(stashpool_loom)]
    fence(Ordering::SeqCst);
    #[cfg(not(stashpool_loom))]
    linux::membarrier();
}

/// Never called where sweepers cannot be bound (`Heavy::fence` is set).
#[cfg(not(any(stashpool_loom, all(target_os = "linux", not(miri)))))]
fn membarrier() {
    fence(Ordering::SeqCst);
}

#[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
mod linux {
    // From <linux/membarrier.h>; stable kernel ABI since Linux 4.14.
    pub(super) const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    pub(super) const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    pub(super) fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags)` takes two integers and touches no
        // user memory; unknown commands fail with EINVAL.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) }
    }

    /// Registers the process; whether it may use the barrier now. The
    /// registration is idempotent and a forked child inherits it.
    pub(super) fn register() -> bool {
        let supported = call(MEMBARRIER_CMD_QUERY);
        if supported < 0
            || supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED == 0
            || call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0
        {
            return false;
        }
        // A registered process can always issue the command; check once
        // anyway, so a kernel that disagrees keeps us on fences instead of
        // failing later, when owners already rely on it.
        call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
    }

    pub(super) fn membarrier() {
        // Registration succeeded and was tested, so the kernel refuses now
        // only for want of memory (ENOMEM, for a CPU mask) or a signal:
        // retry a while. Continuing without the barrier would let a sweeper
        // and an owner touch a stash at once, so after that, stop loudly
        // (the sweep's claims are released as it unwinds).
        for attempt in 0..100 {
            if call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
                return;
            }
            if attempt > 10 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        panic!(
            "stashpool: membarrier(PRIVATE_EXPEDITED) keeps failing after registration: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(all(test, target_os = "linux", not(stashpool_loom), not(miri)))]
mod tests {
    use super::*;

    /// After `register`, on a kernel with expedited private membarriers,
    /// new sweeps use `membarrier` and owners switch to compiler fences
    /// once the sweeps already in flight are done (other tests of this
    /// binary may be sweeping); on a kernel without, all stays on fences.
    #[test]
    fn registration_binds_sweepers_then_switches_owners() {
        use linux::{call, MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_QUERY};
        let supported = call(MEMBARRIER_CMD_QUERY);
        let expedited = supported >= 0 && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0;
        register();
        let sweepers = STATE.sweepers.load(Ordering::Acquire);
        let strategy = strategy();
        let heavy = Heavy::new(strategy);
        if expedited {
            assert_eq!(sweepers & BOUND, BOUND, "membarrier query: {supported:#x}");
            assert!(
                !heavy.fence,
                "a sweep after the registration uses membarrier"
            );
            assert_eq!(call(MEMBARRIER_CMD_PRIVATE_EXPEDITED), 0, "registered");
            // The sweeps that counted themselves before are finite.
            while STATE.owners.load(Ordering::Acquire) != MEMBARRIER {
                std::thread::yield_now();
            }
        } else {
            assert_eq!(
                sweepers & REFUSED,
                REFUSED,
                "membarrier query: {supported:#x}"
            );
            assert!(heavy.fence);
            assert_eq!(STATE.owners.load(Ordering::Relaxed), FENCE);
        }
        // Both barriers are callable whatever was chosen.
        light(strategy);
        heavy.issue();
    }
}

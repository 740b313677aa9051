//! An asymmetric memory barrier: nearly free for stash owners, dear (and
//! rare) for sweepers.
//!
//! [`heavy`] acts as a `SeqCst` fence in every thread of the process
//! (Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`), so [`light`],
//! the owner's side, need only keep its store and its load in program
//! order: a compiler fence. Where `membarrier` is unavailable (another OS,
//! an old kernel, a seccomp policy, Miri, loom) both are `SeqCst` fences.
//! The [`Strategy`] is chosen once per process, before any pool's first
//! owner-side barrier, and every pool records it, so owners never mix
//! strategies. The handshake these serve and why it is exclusive:
//! [`implementation`](crate::implementation), section 4.

#[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
use std::sync::atomic::AtomicU8;

use crate::sync::{fence, Ordering};

/// Which heavy barrier this process has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// `membarrier(2)` is registered: owners use compiler fences.
    #[cfg_attr(any(stashpool_loom, miri, not(target_os = "linux")), allow(dead_code))]
    Membarrier,
    /// No process-wide barrier: owners and sweepers both use `SeqCst` fences.
    Fence,
}

/// The strategy for this process, deciding it on the first call.
///
/// Must be called before a pool's first owner-side barrier (pools call it
/// when their shared state is made, which every owner path goes through).
pub(crate) fn strategy() -> Strategy {
    #[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
    {
        // Not a `OnceLock` (`implementation`, section 7a): threads that
        // race here all register (registration is idempotent) and reach the
        // same answer, since the kernel's does not change.
        const UNKNOWN: u8 = 0;
        const MEMBARRIER: u8 = 1;
        const FENCE: u8 = 2;
        static STRATEGY: AtomicU8 = AtomicU8::new(UNKNOWN);
        match STRATEGY.load(std::sync::atomic::Ordering::Acquire) {
            MEMBARRIER => Strategy::Membarrier,
            FENCE => Strategy::Fence,
            _ => {
                let strategy = linux::register();
                let code = match strategy {
                    Strategy::Membarrier => MEMBARRIER,
                    Strategy::Fence => FENCE,
                };
                // Release: a thread that reads the answer sees the
                // registration made before it.
                STRATEGY.store(code, std::sync::atomic::Ordering::Release);
                strategy
            }
        }
    }
    #[cfg(not(all(target_os = "linux", not(stashpool_loom), not(miri))))]
    {
        Strategy::Fence
    }
}

/// The owner's side: orders a preceding store before a following load.
#[inline(always)]
pub(crate) fn light(strategy: Strategy) {
    match strategy {
        // The heavy barrier supplies the hardware fence; we only stop the
        // compiler from reordering.
        #[cfg(not(stashpool_loom))]
        Strategy::Membarrier => crate::sync::compiler_fence(Ordering::SeqCst),
        _ => fence(Ordering::SeqCst),
    }
}

/// The sweeper's side: a full fence in every thread of the process.
#[cold]
pub(crate) fn heavy(strategy: Strategy) {
    match strategy {
        #[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
        Strategy::Membarrier => linux::membarrier(),
        _ => fence(Ordering::SeqCst),
    }
}

#[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
mod linux {
    use super::Strategy;

    // From <linux/membarrier.h>; stable kernel ABI since Linux 4.14.
    pub(super) const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    pub(super) const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    pub(super) fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags)` takes two integers and touches no
        // user memory; unknown commands fail with EINVAL.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) }
    }

    pub(super) fn register() -> Strategy {
        let supported = call(MEMBARRIER_CMD_QUERY);
        if supported < 0
            || supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED == 0
            || call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0
        {
            return Strategy::Fence;
        }
        // A registered process can always issue the command; check once
        // anyway, so a kernel that disagrees sends us to the fallback instead
        // of failing later, when owners already rely on it.
        if call(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 {
            return Strategy::Fence;
        }
        Strategy::Membarrier
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_is_stable_and_matches_the_kernel() {
        let first = strategy();
        assert_eq!(first, strategy(), "decided once for the process");
        #[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
        {
            use linux::{call, MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_QUERY};
            let supported = call(MEMBARRIER_CMD_QUERY);
            let expedited = supported >= 0 && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0;
            // A kernel with expedited private membarriers gets them (the
            // registration cannot fail for a process that may use them).
            let expected = if expedited {
                Strategy::Membarrier
            } else {
                Strategy::Fence
            };
            assert_eq!(first, expected, "membarrier query: {supported:#x}");
            if first == Strategy::Membarrier {
                assert_eq!(call(MEMBARRIER_CMD_PRIVATE_EXPEDITED), 0, "registered");
            }
        }
        #[cfg(not(all(target_os = "linux", not(stashpool_loom), not(miri))))]
        assert_eq!(first, Strategy::Fence);
        // Both barriers must be callable with the chosen strategy.
        light(first);
        heavy(first);
    }
}

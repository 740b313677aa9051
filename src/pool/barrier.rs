//! An asymmetric memory barrier: nearly free for stash owners, dear (and
//! rare) for sweepers.
//!
//! The heavy barrier ([`Heavy`]) can act as a `SeqCst` fence in every
//! thread of the process (Linux's
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`), so that [`light`], the
//! owner's side, need only keep its store and its load in program order: a
//! compiler fence. Registering a process for `membarrier` makes the kernel
//! wait for every CPU that runs one of its threads, so no pool operation
//! does it: both sides start on `SeqCst` fences, and [`register`] (the
//! background sweeper, before its first sweep, or a manual sweep) registers
//! off the pools' paths, then switches both sides at once, for good, with
//! the fork gate held exclusively: no sweep is in flight then. Where
//! `membarrier` is unavailable (another OS, an old kernel, a seccomp
//! policy, Miri) both sides stay `SeqCst` fences. The handshake these
//! serve, and why it is exclusive, also through the switch:
//! [`implementation`](crate::implementation), section 4.

use crate::sync::{AtomicU8, Gate, Ordering, fence};

/// Both sides use `SeqCst` fences.
const FENCE: u8 = 0;
/// Owners use compiler fences, sweepers `membarrier`.
const MEMBARRIER: u8 = 1;
/// The kernel refused the registration, or has no `membarrier`: fences
/// for good.
const REFUSED: u8 = 2;

/// A pool's handle on the process's barriers. Nothing in a real build (the
/// state is a `static`); under loom a reference to the model's state,
/// which each pool keeps, since loom drops its statics before the last
/// thread-locals (and with them the exit flushes, which sweep) are gone.
#[derive(Clone, Copy)]
pub(crate) struct Strategy {
    #[cfg(stashpool_loom)]
    state: &'static Model,
}

/// Under loom: the barrier word, the gate, and the sweeps in flight that
/// use a fence, which an owner on compiler fences asserts there are none
/// of (`light`).
#[cfg(stashpool_loom)]
struct Model {
    word: AtomicU8,
    gate: Gate,
    fence_sweeps: loom::sync::atomic::AtomicUsize,
}

#[cfg(stashpool_loom)]
loom::lazy_static! {
    static ref MODEL: &'static Model = Box::leak(Box::new(Model {
        word: AtomicU8::new(FENCE),
        gate: Gate::new(),
        fence_sweeps: loom::sync::atomic::AtomicUsize::new(0),
    }));
}

/// `FENCE` until the switch, then `MEMBARRIER` or `REFUSED` for good. Read
/// by every owner-side barrier, written once: on a line of its own.
#[cfg(not(stashpool_loom))]
static WORD: crossbeam_utils::CachePadded<AtomicU8> =
    crossbeam_utils::CachePadded::new(AtomicU8::new(FENCE));

/// The handle for a new pool.
pub(crate) fn strategy() -> Strategy {
    Strategy {
        #[cfg(stashpool_loom)]
        state: *MODEL,
    }
}

/// The process's barrier word.
fn word(strategy: Strategy) -> &'static AtomicU8 {
    #[cfg(stashpool_loom)]
    return &strategy.state.word;
    #[cfg(not(stashpool_loom))]
    {
        let _ = strategy;
        &WORD
    }
}

/// The fork gate (`sync::FORK_GATE`), which every section that holds a
/// pool's sweep lock holds shared; under loom, the model's.
pub(crate) fn gate(strategy: Strategy) -> &'static Gate {
    #[cfg(stashpool_loom)]
    return &strategy.state.gate;
    #[cfg(not(stashpool_loom))]
    {
        let _ = strategy;
        &crate::sync::FORK_GATE
    }
}

/// The owner's side: orders a preceding store before a following load.
#[inline(always)]
pub(crate) fn light(strategy: Strategy) {
    // Under loom both sides are fences; what an owner on a compiler fence
    // relies on is checked instead. The acquire load stands for the
    // switch's `membarrier`, which loom cannot model (`implementation`,
    // section 9).
    #[cfg(stashpool_loom)]
    if word(strategy).load(Ordering::Acquire) == MEMBARRIER {
        let sweeps = strategy.state.fence_sweeps.load(Ordering::Relaxed);
        assert_eq!(
            sweeps, 0,
            "an owner on compiler fences while a sweep uses a fence"
        );
    }
    #[cfg(not(stashpool_loom))]
    if word(strategy).load(Ordering::Relaxed) == MEMBARRIER {
        // Every sweep in flight issues `membarrier`, which supplies the
        // hardware fence; we only stop the compiler from reordering.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        return;
    }
    fence(Ordering::SeqCst);
}

/// Under loom: whether owners have moved to compiler fences.
#[cfg(stashpool_loom)]
pub(crate) fn switched() -> bool {
    word(strategy()).load(Ordering::Relaxed) == MEMBARRIER
}

/// A sweep's heavy barrier, for the claims it makes: picked inside the
/// sweep lock's section (so the switch is not under way), issued between
/// the claims and the loads of `busy`.
#[must_use]
pub(crate) struct Heavy {
    #[cfg(stashpool_loom)]
    strategy: Strategy,
    /// A `SeqCst` fence rather than `membarrier`.
    fence: bool,
}

impl Heavy {
    /// Picks this sweep's barrier: `membarrier` once the process switched,
    /// else a fence. Call with the fork gate held (the sweep lock's
    /// section), and drop after every claim is released.
    pub(crate) fn new(strategy: Strategy) -> Self {
        let fence = word(strategy).load(Ordering::Relaxed) != MEMBARRIER;
        #[cfg(stashpool_loom)]
        if fence {
            strategy.state.fence_sweeps.fetch_add(1, Ordering::Relaxed);
        }
        Self {
            #[cfg(stashpool_loom)]
            strategy,
            fence,
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

#[cfg(stashpool_loom)]
impl Drop for Heavy {
    fn drop(&mut self) {
        if self.fence {
            let sweeps = &self.strategy.state.fence_sweeps;
            sweeps.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Registers the process for `membarrier`, if it is not yet and the kernel
/// allows it, and switches both sides to it. The registration can take
/// milliseconds in a process with several threads (the kernel waits for
/// each of their CPUs), so it is made off the pools' paths (the background
/// sweeper's start, a manual sweep), never inside a sweep-lock section,
/// and outside the gate; later calls are a relaxed load.
///
/// The switch itself holds the fork gate exclusively: every sweep that
/// used a fence has then released its claims, and every sweep after it
/// reads the new word. Its `membarrier`, issued before the word is stored,
/// orders those sweeps before whatever an owner does after it reads the
/// word with its relaxed load (section 4).
pub(crate) fn register() {
    let strategy = strategy();
    let word = word(strategy);
    if word.load(Ordering::Relaxed) != FENCE {
        return;
    }
    // Under loom: a kernel that has it; elsewhere than Linux (and under
    // Miri), none.
    let bound = cfg!(stashpool_loom) || linux::register();
    let _gate = gate(strategy).exclusive();
    if word.load(Ordering::Relaxed) != FENCE {
        return;
    }
    if bound {
        membarrier();
        word.store(MEMBARRIER, Ordering::Release);
    } else {
        word.store(REFUSED, Ordering::Relaxed);
    }
}

/// A full fence in every thread of the process; only once registered. A
/// fence under loom.
fn membarrier() {
    #[cfg(all(target_os = "linux", not(stashpool_loom), not(miri)))]
    linux::membarrier();
    #[cfg(not(all(target_os = "linux", not(stashpool_loom), not(miri))))]
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

/// No `membarrier` here.
#[cfg(not(all(target_os = "linux", not(stashpool_loom), not(miri))))]
mod linux {
    pub(super) fn register() -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux", not(stashpool_loom), not(miri)))]
mod tests {
    use super::*;

    /// After `register`, on a kernel with expedited private membarriers,
    /// both sides have switched: new sweeps use `membarrier`; on a kernel
    /// without, both stay on fences.
    #[test]
    fn registration_switches_both_sides_at_once() {
        use linux::{MEMBARRIER_CMD_PRIVATE_EXPEDITED, MEMBARRIER_CMD_QUERY, call};
        let supported = call(MEMBARRIER_CMD_QUERY);
        let expedited = supported >= 0 && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0;
        register();
        let strategy = strategy();
        let heavy = Heavy::new(strategy);
        let now = WORD.load(Ordering::Relaxed);
        if expedited {
            assert_eq!(now, MEMBARRIER, "membarrier query: {supported:#x}");
            assert!(!heavy.fence, "a sweep after the switch uses membarrier");
            assert_eq!(call(MEMBARRIER_CMD_PRIVATE_EXPEDITED), 0, "registered");
        } else {
            assert_eq!(now, REFUSED, "membarrier query: {supported:#x}");
            assert!(heavy.fence);
        }
        // Both barriers are callable whatever was chosen.
        light(strategy);
        heavy.issue();
    }
}

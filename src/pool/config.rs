//! A pool's configuration and its defaults.

use std::time::Duration;

use crate::pool::budget::FamilyRef;

/// How many objects one thread keeps in its private stash by default.
///
/// A stash slot is one pointer, so the stash itself costs 1 KiB; what the
/// capacity bounds is how many idle objects a thread may keep between
/// sweeps. 128 lets a thread that holds up to about a hundred objects at
/// once (a fan-out, a batch of requests) return and take them again without
/// touching shared memory, where 64 made such a thread spill and steal
/// batches every round (the `overflow` workload of `benches/pool.rs`, Go's
/// hold-100-then-return-100 shape, shows the difference). Sweeps still trim
/// what it keeps, and `max_idle` bounds it.
pub const DEFAULT_MAX_STASHED: usize = 128;

/// How often the background sweeper sweeps a pool by default: every 5
/// seconds.
///
/// An idle object is dropped by the second sweep after its last use, so
/// between 5 and 10 seconds after a burst ends the memory it used is freed.
/// That is quick enough for memory to come back while a program is still
/// running, and slow enough that objects used every few seconds stay pooled
/// and a sweep (a pass over the stashes and one `membarrier` call) costs a
/// negligible share of one core.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The shortest interval `LocalPoolBuilder::sweep_every` accepts, 1 ms;
/// shorter ones are raised to it, so a typo cannot turn the sweeper into a
/// busy loop.
pub const MIN_SWEEP_INTERVAL: Duration = Duration::from_millis(1);

/// How many of a pool's stashes hold a slot at once, per core
/// (`available_parallelism`), as glibc bounds its malloc arenas:
/// [`implementation`](crate::implementation), section 3a.
pub(crate) const STASHES_PER_CORE: usize = 8;

/// The bound on a pool's stashes: [`STASHES_PER_CORE`] per core, read once
/// per process. Under loom, none (models bound it explicitly).
pub(crate) fn default_max_stashes() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Not a `OnceLock` (`implementation`, section 7a): threads that
    // race here compute the same answer, and any of them may store it.
    static MAX: AtomicUsize = AtomicUsize::new(0);
    if cfg!(stashpool_loom) {
        return usize::MAX;
    }
    match MAX.load(Ordering::Relaxed) {
        0 => {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let max = cores.saturating_mul(STASHES_PER_CORE);
            MAX.store(max, Ordering::Relaxed);
            max
        }
        max => max,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) max_stashed: usize,
    pub(crate) max_idle: usize,
    /// The byte budget (`budget.rs`); `usize::MAX`: none.
    pub(crate) max_idle_bytes: usize,
    /// The budget shared with other pools, in place of `max_idle_bytes`.
    pub(crate) family: Option<FamilyRef>,
    /// `None`: manual sweeping only.
    pub(crate) sweep_every: Option<Duration>,
    /// `None`: [`default_max_stashes`].
    pub(crate) max_stashes: Option<usize>,
    /// Objects made and pooled idle when the pool is first used.
    pub(crate) preload: usize,
}

impl Config {
    pub(crate) const DEFAULT: Self = Self {
        max_stashed: DEFAULT_MAX_STASHED,
        max_idle: usize::MAX,
        max_idle_bytes: usize::MAX,
        family: None,
        sweep_every: Some(DEFAULT_SWEEP_INTERVAL),
        max_stashes: None,
        preload: 0,
    };
}

/// `interval`, checked and raised to [`MIN_SWEEP_INTERVAL`]: what every
/// `sweep_every` takes.
///
/// # Panics
///
/// If `interval` is zero.
pub(crate) const fn sweep_interval(interval: Duration) -> Duration {
    assert!(
        !interval.is_zero(),
        "stashpool: the sweep interval must be non-zero (use `manual_sweep` to sweep only on demand)"
    );
    // `const`, for builders of `static` pools, where `Ord::max` cannot be
    // called: seconds first, then nanoseconds.
    if interval.as_nanos() < MIN_SWEEP_INTERVAL.as_nanos() {
        MIN_SWEEP_INTERVAL
    } else {
        interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_intervals_below_the_minimum_are_raised_to_it() {
        // In a `const` context too, as a `static` pool's builder calls it.
        const RAISED: Duration = sweep_interval(Duration::from_nanos(1));
        assert_eq!(RAISED, MIN_SWEEP_INTERVAL);
        assert_eq!(
            sweep_interval(Duration::from_micros(999)),
            MIN_SWEEP_INTERVAL
        );
        assert_eq!(sweep_interval(MIN_SWEEP_INTERVAL), MIN_SWEEP_INTERVAL);
        let above = Duration::new(0, 1_000_001);
        assert_eq!(sweep_interval(above), above);
        assert_eq!(sweep_interval(Duration::new(1, 0)), Duration::new(1, 0));
    }

    #[test]
    #[should_panic(expected = "stashpool: the sweep interval must be non-zero")]
    fn a_zero_sweep_interval_is_refused() {
        sweep_interval(Duration::ZERO);
    }
}

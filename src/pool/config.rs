//! A pool's configuration and its defaults.

use std::time::Duration;

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
    #[cfg(not(stashpool_loom))]
    {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Not a `OnceLock` (`implementation`, section 7a): threads that
        // race here compute the same answer, and any of them may store it.
        static MAX: AtomicUsize = AtomicUsize::new(0);
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
    #[cfg(stashpool_loom)]
    {
        usize::MAX
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    pub(crate) max_stashed: usize,
    pub(crate) max_idle: usize,
    /// `None`: manual sweeping only.
    pub(crate) sweep_every: Option<Duration>,
    /// `None`: [`default_max_stashes`].
    pub(crate) max_stashes: Option<usize>,
}

impl Config {
    pub(crate) const DEFAULT: Self = Self {
        max_stashed: DEFAULT_MAX_STASHED,
        max_idle: usize::MAX,
        sweep_every: Some(DEFAULT_SWEEP_INTERVAL),
        max_stashes: None,
    };
}

/// `interval`, checked and raised to [`MIN_SWEEP_INTERVAL`]: what every
/// `sweep_every` takes.
///
/// # Panics
///
/// If `interval` is zero.
pub(crate) fn sweep_interval(interval: Duration) -> Duration {
    assert!(
        !interval.is_zero(),
        "stashpool: the sweep interval must be non-zero (use `manual_sweep` to sweep only on demand)"
    );
    interval.max(MIN_SWEEP_INTERVAL)
}

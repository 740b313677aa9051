//! Counters a pool keeps about itself.

/// Counters since the pool was made.
///
/// Each thread counts its own operations in its own stash, so counting costs
/// the hot path no shared write; [`LocalPool::stats`](crate::LocalPool::stats)
/// adds them up. While other threads use the pool the sum is a snapshot of
/// moving counters; `idle` is exact whenever no other thread is using the
/// pool (for example after the threads that used it were joined).
///
/// The counters obey `idle == returned - reused - trimmed`: an object enters
/// the pool when it is returned and leaves it when a `get` reuses it or a
/// sweep trims it. Objects never accepted (`rejected`) are not counted as
/// returned.
///
/// # Examples
///
/// ```
/// use stashpool::LocalPool;
///
/// let pool = LocalPool::builder(|| vec![0u8; 16]).manual_sweep().build();
/// drop(pool.get()); // created, then returned
/// drop(pool.get()); // reused, then returned
/// let stats = pool.stats();
/// assert_eq!((stats.created, stats.reused, stats.returned), (1, 1, 2));
/// assert_eq!(stats.idle, 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Objects made by `create()` (misses).
    pub created: u64,
    /// Gets served from a stash or the overflow (hits).
    pub reused: u64,
    /// Objects accepted back (guard drop, `with`, `put`).
    pub returned: u64,
    /// Objects dropped on return: `recycle` said no, or the stash and the
    /// overflow were both full.
    pub rejected: u64,
    /// Objects dropped by sweeps.
    pub trimmed: u64,
    /// Objects pooled right now, all threads and the overflow together.
    pub idle: usize,
}

impl Stats {
    /// The share of gets served without calling `create`, from 0.0 to 1.0
    /// (`0.0` before the first get).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(String::new);
    /// for _ in 0..4 {
    ///     pool.with(|s| s.push('x'));
    /// }
    /// assert_eq!(pool.stats().hit_rate(), 0.75);
    /// ```
    pub fn hit_rate(&self) -> f64 {
        let gets = self.created + self.reused;
        if gets == 0 {
            0.0
        } else {
            self.reused as f64 / gets as f64
        }
    }
}

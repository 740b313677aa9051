//! Counters a pool keeps about itself.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign};

/// Counters since the pool was made.
///
/// Each thread counts its own operations in its own stash, so counting costs
/// the hot path no shared write; [`LocalPool::stats`](crate::LocalPool::stats)
/// adds them up. While other threads use the pool the sum is a snapshot of
/// moving counters; `idle` is exact whenever no other thread is using the
/// pool (for example after the threads that used it were joined).
///
/// "The threads were joined" means `JoinHandle::join`: `std::thread::scope`
/// returns when the scoped threads' closures have returned, which can be
/// before their thread-local destructors (and so their exit hooks, which
/// move their stashes to the overflow) have run. Right after a scope, the
/// counters are exact, but an object a scoped thread returned may still sit
/// in that thread's stash rather than in the overflow.
///
/// The counters obey `idle == returned - reused - trimmed`: an object enters
/// the pool when it is returned and leaves it when a `get` reuses it or a
/// sweep trims it. Objects dropped on return, whether by the pool's rules
/// (`discarded`) or for want of room (`rejected`), are not counted as
/// returned: each object handed out (`gets`, which is `created + reused`
/// less what a [`preload`](crate::LocalPoolBuilder::preload) made) or given
/// with `put` comes back as one of `returned`, `discarded` or `rejected`,
/// unless it is still lent out or was kept for good (`into_inner`); a
/// preloaded object counts as made and returned.
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
/// assert_eq!((stats.gets, stats.created, stats.reused, stats.returned), (2, 1, 1, 2));
/// assert_eq!(stats.idle, 1);
/// assert_eq!(
///     stats.to_string(),
///     "gets=2 created=1 reused=1 returned=2 discarded=0 rejected=0 trimmed=0 idle=1 \
///      idle_bytes=24"
/// );
/// ```
///
/// `idle_bytes` is 24 because a closure's pool counts each object as
/// `size_of::<T>()`, the default [`Recycle::footprint`](crate::Recycle::footprint):
/// the ready-made pools count what their objects hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Objects handed out (by `get`, `get_owned`, `with`, or a `try_get`
    /// that found one): `created + reused`, less the objects
    /// [`preload`](crate::LocalPoolBuilder::preload) made.
    pub gets: u64,
    /// Objects made by `create()`: misses, and preloaded objects.
    pub created: u64,
    /// Gets served from a stash or the overflow (hits).
    pub reused: u64,
    /// Objects accepted back (guard drop, `with`, `put`).
    pub returned: u64,
    /// Objects dropped on return by the pool's rules, as intended: `recycle`
    /// said no (or panicked), or a panic unwound through the guard or the
    /// `with` closure that held the object (it may be half-modified).
    pub discarded: u64,
    /// Objects dropped on return because the pool had no room: the stash
    /// and the overflow were both full (see
    /// [`max_idle`](crate::LocalPoolBuilder::max_idle), `max_idle(0)` included).
    pub rejected: u64,
    /// Objects dropped by sweeps and by `clear`.
    pub trimmed: u64,
    /// Objects pooled right now, all threads and the overflow together.
    pub idle: usize,
    /// The bytes the `idle` objects hold: the sum of their
    /// [`Recycle::footprint`](crate::Recycle::footprint)s, each as of its
    /// return, or `idle` times
    /// [`FIXED_FOOTPRINT`](crate::Recycle::FIXED_FOOTPRINT). Exact when
    /// `idle` is.
    pub idle_bytes: usize,
}

impl Stats {
    /// The counters of two pools together (also `+`, `+=` and `Sum`), for
    /// pools built from several `LocalPool`s.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::{LocalPool, Stats};
    ///
    /// let (a, b) = (LocalPool::new(|| 1u8), LocalPool::new(|| 2u8));
    /// a.with(|_| ());
    /// b.with(|_| ());
    /// let total: Stats = [a.stats(), b.stats()].into_iter().sum();
    /// assert_eq!(total.created, 2);
    /// assert_eq!(total, a.stats() + b.stats());
    /// ```
    pub fn combined(self, other: Stats) -> Stats {
        Stats {
            gets: self.gets + other.gets,
            created: self.created + other.created,
            reused: self.reused + other.reused,
            returned: self.returned + other.returned,
            discarded: self.discarded + other.discarded,
            rejected: self.rejected + other.rejected,
            trimmed: self.trimmed + other.trimmed,
            idle: self.idle + other.idle,
            idle_bytes: self.idle_bytes + other.idle_bytes,
        }
    }

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
        if self.gets == 0 {
            0.0
        } else {
            self.reused as f64 / self.gets as f64
        }
    }
}

/// The counters as `key=value` pairs on one line, in the order of the
/// fields: for logs, and easy to parse back.
///
/// A note after a `;` says what the counters leave to the reader to see,
/// and names the setting that changes it:
///
/// * the pool **discarded** most of what came back (more than it kept and
///   rejected together): it makes nearly every object anew, as plain
///   allocation would. A frame pool under
///   [`Reset::Zero`](crate::Reset::Zero) drops written frames of 1 MiB or
///   more; [`Reset::Keep`](crate::Reset::Keep) keeps them; a recycler
///   that refuses them decides the same.
/// * it **rejected** most of what came back (more than it kept): its
///   [`max_idle`](crate::LocalPoolBuilder::max_idle) or
///   [`max_idle_bytes`](crate::LocalPoolBuilder::max_idle_bytes) is below
///   what its threads hold at once.
/// * **no get reused an object**: two or more gets, all made, nothing
///   dropped: each object was taken while the others were in use (or on a
///   thread of its own), so there was nothing to reuse and the pool saved
///   nothing.
///
/// # Examples
///
/// ```
/// use stashpool::LocalPool;
///
/// let pool = LocalPool::new(String::new);
/// pool.with(|s| s.push('x'));
/// pool.with(|s| s.push('y'));
/// assert_eq!(
///     format!("buffers: {}", pool.stats()),
///     "buffers: gets=2 created=1 reused=1 returned=2 discarded=0 rejected=0 trimmed=0 idle=1 \
///      idle_bytes=24"
/// );
///
/// // A recycler that refuses every object: nothing is reused.
/// struct Refuse;
/// impl stashpool::Recycle<Vec<u8>> for Refuse {
///     fn create(&self) -> Vec<u8> {
///         Vec::new()
///     }
///     fn recycle(&self, _: &mut Vec<u8>) -> bool {
///         false
///     }
/// }
/// let refusing = LocalPool::new(Refuse);
/// refusing.with(|_| ());
/// refusing.with(|_| ());
/// assert_eq!(
///     refusing.stats().to_string(),
///     "gets=2 created=2 reused=0 returned=0 discarded=2 rejected=0 trimmed=0 idle=0 \
///      idle_bytes=0; \
///      note: 2 of the 2 objects that came back were discarded (by the recycler, or a \
///      Reset policy: Reset::Keep keeps written frames), so it reuses little of what it makes"
/// );
///
/// // Every object taken before any came back: nothing to reuse.
/// let frames = LocalPool::new(|| vec![0u8; 1024]);
/// let all_live: Vec<_> = (0..3).map(|_| frames.get()).collect();
/// drop(all_live);
/// assert!(frames.stats().to_string().ends_with(
///     "note: no get reused an object (3 gets, 3 made): each was taken while the others \
///      were in use, so the pool saved nothing"
/// ));
/// ```
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Stats {
            gets,
            created,
            reused,
            returned,
            discarded,
            rejected,
            trimmed,
            idle,
            idle_bytes,
        } = self;
        write!(
            f,
            "gets={gets} created={created} reused={reused} returned={returned} \
             discarded={discarded} rejected={rejected} trimmed={trimmed} idle={idle} \
             idle_bytes={idle_bytes}"
        )?;
        let came_back = discarded
            .saturating_add(*returned)
            .saturating_add(*rejected);
        if *discarded > returned.saturating_add(*rejected) {
            write!(
                f,
                "; note: {discarded} of the {came_back} objects that came back were discarded \
                 (by the recycler, or a Reset policy: Reset::Keep keeps written frames), so it \
                 reuses little of what it makes"
            )?;
        } else if rejected > returned {
            write!(
                f,
                "; note: {rejected} of the {came_back} objects that came back were rejected for \
                 want of room: max_idle or max_idle_bytes is below what the threads hold at once"
            )?;
        } else if *gets >= 2 && *reused == 0 && *created >= *gets && discarded + rejected == 0 {
            write!(
                f,
                "; note: no get reused an object ({gets} gets, {created} made): each was taken \
                 while the others were in use, so the pool saved nothing"
            )?;
        }
        Ok(())
    }
}

impl Add for Stats {
    type Output = Stats;

    fn add(self, other: Stats) -> Stats {
        self.combined(other)
    }
}

impl AddAssign for Stats {
    fn add_assign(&mut self, other: Stats) {
        *self = self.combined(other);
    }
}

impl Sum for Stats {
    fn sum<I: Iterator<Item = Stats>>(iter: I) -> Stats {
        iter.fold(Stats::default(), Stats::combined)
    }
}

//! `LocalPoolBuilder`, and `LocalPool::builder` that makes one.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use crate::Recycle;
use crate::lazy::LazyArc;
use crate::pool::budget::FamilyRef;
use crate::pool::config::{Config, sweep_interval};
use crate::pool::local_pool::LocalPool;

/// Configures a [`LocalPool`]; made by [`LocalPool::builder`].
///
/// Every method is a `const fn`, `build` too, so a configured pool is a
/// plain `static`, as Go's `var pool = sync.Pool{...}` is.
///
/// # Examples
///
/// ```
/// use stashpool::LocalPool;
///
/// let pool = LocalPool::builder(String::new)
///     .max_stashed(8)
///     .max_idle(64)
///     .manual_sweep()
///     .build();
/// assert_eq!(pool.stats().idle, 0);
/// ```
///
/// A configured `static` (a closure that captures nothing coerces to the
/// `fn` pointer the type names):
///
/// ```
/// use std::time::Duration;
/// use stashpool::LocalPool;
///
/// static BUFS: LocalPool<Vec<u8>> = LocalPool::builder((|| Vec::with_capacity(4096)) as fn() -> _)
///     .max_idle(64)
///     .sweep_every(Duration::from_secs(2))
///     .build();
///
/// BUFS.with(|buf| buf.extend_from_slice(b"configured"));
/// assert_eq!(BUFS.stats().idle, 1);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct LocalPoolBuilder<T, R> {
    pub(super) recycler: R,
    pub(super) config: Config,
    pub(super) _objects: PhantomData<fn() -> T>,
}

impl<T: Send + 'static, R: Recycle<T>> LocalPoolBuilder<T, R> {
    /// Most objects one thread keeps in its private stash (default
    /// [`DEFAULT_MAX_STASHED`](crate::DEFAULT_MAX_STASHED)).
    ///
    /// A stash keeps what its thread's own use calls for, up to `n`: none
    /// at first, one after its thread's first get, and twice as many each
    /// time a get finds it empty after it passed objects on (the rule by
    /// which tcmalloc grows its per-CPU caches); a sweep that finds no get
    /// found it empty since the previous sweep halves it again, and one that
    /// finds the thread took nothing since then sets it back to none. So a
    /// thread that only returns objects other threads took (the consumer of
    /// a channel) keeps none but what it gives back for several takers,
    /// which it gathers into batches of 8 (up to `n`); a thread that only
    /// takes keeps one; and a thread that takes and returns (a loop, a
    /// burst) soon keeps all it holds. A return that finds the stash at its limit
    /// moves the older half to the overflow.
    ///
    /// An object whose guard is dropped on another thread than took it goes
    /// back to the thread that took it (the consumer of a channel gives it
    /// back to the producer, which finds it when its stash runs dry, and
    /// keeps up to `n` of what came back), as long as the returning thread
    /// gives back that thread's objects alone; a thread that gives back the
    /// objects of several threads (a writer fed by many readers) passes
    /// them to the shared overflow, where whichever thread takes next finds
    /// them. [`LocalPool`]'s docs show both;
    /// [`implementation`](crate::implementation), section 3c, says why.
    ///
    /// `0` is allowed and means no private stash: every return goes to the
    /// overflow and every get comes from it, a shared pool with no thread
    /// affinity (and one overflow operation per get and per put). A byte
    /// budget ([`max_idle_bytes`](Self::max_idle_bytes)) implies it.
    ///
    /// At most 8 threads per core (`available_parallelism`) keep a stash in
    /// a pool at once: the threads that use *this* pool, first come first
    /// served. A thread's exit frees its place for the next thread, and so
    /// does a sweep that finds it has not used the pool since the previous
    /// one while another thread waits; threads beyond those share their
    /// objects through the overflow, as with `max_stashed(0)`. Why this
    /// bound: [`implementation`](crate::implementation), section 3a.
    pub const fn max_stashed(mut self, n: usize) -> Self {
        self.config.max_stashed = n;
        self
    }

    /// Most idle objects the pool keeps, all threads' stashes and the
    /// overflow together (default: no limit, as in Go; sweeps bound the pool
    /// by recent use). So the memory a pool keeps does not grow with the
    /// number of threads that use it. It bounds only what the pool keeps:
    /// not the objects in use, nor how many the pool makes (a `get` that
    /// finds nothing idle makes one, however many are out).
    ///
    /// * After any sweep, [`stats().idle`](crate::Stats::idle) is at most
    ///   `n` (objects returned while the sweep runs may come on top).
    /// * Between sweeps each stash keeps at most its share, `n` divided by
    ///   the number of stashes (and at most
    ///   [`max_stashed`](Self::max_stashed)); shares are recut when a
    ///   thread makes its stash and at every sweep. A return past what the
    ///   stash keeps now (see [`max_stashed`](Self::max_stashed)) spills to
    ///   the overflow, which takes it while it holds fewer than `n`; if the
    ///   overflow is full, a stash below its share keeps it after all, and
    ///   otherwise it is dropped and counted in
    ///   [`Stats::rejected`](crate::Stats::rejected).
    /// * `0` keeps nothing: every return is dropped (and counted rejected).
    ///
    /// So between sweeps `idle` can exceed `n`: by the stashes' shares
    /// (`max_idle(2)` on one thread keeps 2 in its stash and 2 in the
    /// overflow), and by objects already idle that find no room: those a
    /// recut of the shares moves from a stash to an overflow already full,
    /// the rest of a batch a get took while returns filled its room, and
    /// those an exiting thread's stash keeps for want of room in the
    /// overflow; the next sweep brings it back to `n`. It is not a hard
    /// cap at every instant, which would take a count shared by every
    /// thread on every get and return: the write the per-thread stashes
    /// exist to avoid.
    ///
    /// Shares are cut for the threads that keep a stash now (see
    /// [`max_stashed`](Self::max_stashed)), at most `n` of them, since
    /// more would have a share of zero.
    ///
    /// In a bounded pool an object whose guard is dropped on another thread
    /// than took it stays with the thread that drops it (its stash, or the
    /// overflow), under the bound, rather than going back to the thread
    /// that took it, where it would be idle past that thread's share (see
    /// [`max_stashed`](Self::max_stashed)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::builder(|| vec![0u8; 1 << 16]).max_idle(2).manual_sweep().build();
    /// let bufs: Vec<_> = (0..5).map(|_| pool.get()).collect();
    /// drop(bufs); // 2 kept in this thread's stash, 2 in the overflow, 1 dropped
    /// assert_eq!(pool.stats().rejected, 1);
    /// pool.sweep();
    /// assert!(pool.stats().idle <= 2);
    ///
    /// // Objects in use are not bounded: 5 out at once, so 5 made.
    /// assert_eq!(pool.stats().created, 5);
    /// ```
    pub const fn max_idle(mut self, n: usize) -> Self {
        self.config.max_idle = n;
        self
    }

    /// Keeps at most `n` bytes idle, as [`Recycle::footprint`] counts
    /// them, at every instant (the default: no bound): for objects whose
    /// size varies, such as buffers that grow to fit what they hold, where
    /// a count of objects bounds nothing.
    ///
    /// A returned object is pooled only if its footprint fits in what the
    /// idle objects leave of `n`; else it is dropped and counted in
    /// [`Stats::rejected`](crate::Stats::rejected), so an object larger
    /// than `n` is never kept. A get or a sweep that takes an object frees
    /// its bytes. Unlike [`max_idle`](Self::max_idle), this is a hard cap:
    /// the pool counts the bytes in one place that every thread updates,
    /// on each return that pools an object and each get that reuses one.
    /// Since every such get and return writes a line all threads share,
    /// a pool with a budget keeps no per-thread stashes: its idle objects
    /// are all in the shared overflow, as with
    /// [`max_stashed(0)`](Self::max_stashed), and each get and return costs
    /// a shared operation or two. That is little beside the objects a byte
    /// budget is for, large ones; a pool without a budget pays nothing for
    /// it. The two bounds combine: an object is kept only where both have
    /// room.
    ///
    /// # Examples
    ///
    /// A burst of large buffers leaves no more than the budget behind, with
    /// no sweep (the complaint of golang/go#23199):
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(1 << 20).max_idle_bytes(2 << 20).manual_sweep().build();
    /// let burst: Vec<_> = (0..8).map(|_| pool.get()).collect();
    /// drop(burst);
    /// let stats = pool.stats();
    /// assert!(stats.idle_bytes <= 2 << 20);
    /// assert_eq!((stats.idle, stats.rejected), (2, 6));
    /// ```
    pub const fn max_idle_bytes(mut self, n: usize) -> Self {
        self.config.max_idle_bytes = n;
        self
    }

    /// Counts this pool's idle bytes in `family`'s budget, with the other
    /// pools configured with it (a multi-size pool's classes).
    pub(crate) fn share_budget(mut self, family: FamilyRef) -> Self {
        self.config.family = Some(family);
        self
    }

    /// Sweeps automatically on this interval, on the process-wide sweeper
    /// thread (the default, every [`DEFAULT_SWEEP_INTERVAL`](crate::DEFAULT_SWEEP_INTERVAL)). Intervals
    /// shorter than [`MIN_SWEEP_INTERVAL`](crate::MIN_SWEEP_INTERVAL) are raised to it.
    ///
    /// # Panics
    ///
    /// If `interval` is zero: a pool swept continuously could never keep an
    /// object. Use [`manual_sweep`](Self::manual_sweep) to control sweeps.
    pub const fn sweep_every(mut self, interval: Duration) -> Self {
        self.config.sweep_every = Some(sweep_interval(interval));
        self
    }

    /// Under loom: at most `n` stashes hold a slot at once, for models of
    /// threads without one.
    #[cfg(stashpool_loom)]
    #[doc(hidden)]
    pub const fn loom_max_stashes(mut self, n: usize) -> Self {
        self.config.max_stashes = Some(n);
        self
    }

    /// No automatic sweeping: only [`LocalPool::sweep`] calls trim.
    pub const fn manual_sweep(mut self) -> Self {
        self.config.sweep_every = None;
        self
    }

    /// `n` objects made and pooled idle when the pool is first used, by
    /// any call, [`stats`](LocalPool::stats) included (Go `bp`'s
    /// `Preload`): the first `n` gets, on any thread, find an object
    /// waiting. Default `0`.
    ///
    /// They are idle objects like any other: counted in
    /// [`created`](crate::Stats::created) and
    /// [`returned`](crate::Stats::returned) (not in
    /// [`gets`](crate::Stats::gets)), kept up to
    /// [`max_idle`](Self::max_idle) (the rest counted
    /// [`rejected`](crate::Stats::rejected)), and trimmed by sweeps: an
    /// object preloaded and never taken is dropped by the second sweep, as
    /// with Go's `sync.Pool`, rather than kept for good as `bp` keeps it.
    ///
    /// Threads whose first calls race wait while one of them fills the
    /// pool, so exactly `n` objects are made for them.
    ///
    /// # Panics
    ///
    /// The first call on the pool panics if `create` does (the objects made
    /// before stay pooled), or if `create` uses the pool it is preloading.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::builder(|| vec![0u8; 4096]).preload(4).manual_sweep().build();
    /// let stats = pool.stats(); // the first call: the pool is filled
    /// assert_eq!((stats.created, stats.idle, stats.gets), (4, 4, 0));
    ///
    /// drop(pool.get());
    /// assert_eq!(pool.stats().created, 4); // found one waiting
    ///
    /// pool.sweep();
    /// pool.sweep(); // idle since the first sweep: dropped
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub const fn preload(mut self, n: usize) -> Self {
        self.config.preload = n;
        self
    }

    crate::sync::loom_const_fn! {
        /// Makes the pool.
        ///
        /// `const`, so a configured pool can be a `static` (see the type's
        /// docs); nothing is allocated until the pool is first used.
        ///
        /// # Examples
        ///
        /// ```
        /// use stashpool::LocalPool;
        ///
        /// static IDS: LocalPool<String> = LocalPool::builder(String::new as fn() -> String)
        ///     .max_stashed(4)
        ///     .build();
        ///
        /// IDS.with(|id| id.push_str("abc"));
        /// assert_eq!(IDS.stats().created, 1);
        /// ```
        pub fn build(self) -> LocalPool<T, R> {
            // A `const fn` cannot move the recycler out of `self` (the builder
            // would be left for a destructor it cannot run): it is read out,
            // and the builder forgotten.
            // SAFETY: `recycler` is read once, and `self` is forgotten right
            // after, so it is neither used nor dropped again: a move, done by
            // hand. Nothing between the two can unwind.
            let recycler = unsafe { std::ptr::read(&self.recycler) };
            let config = self.config;
            std::mem::forget(self);
            LocalPool {
                recycler,
                config,
                shared: LazyArc::new(),
            }
        }
    }
}

impl<T: Send + 'static, R: Recycle<T>> LocalPool<T, R> {
    /// A builder to configure the pool before making it.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::builder(|| vec![0u8; 1024])
    ///     .max_stashed(16)
    ///     .max_idle(256)
    ///     .sweep_every(Duration::from_secs(1))
    ///     .build();
    /// pool.with(|buf| buf[0] = 1);
    /// ```
    pub const fn builder(recycler: R) -> LocalPoolBuilder<T, R> {
        LocalPoolBuilder {
            recycler,
            config: Config::DEFAULT,
            _objects: PhantomData,
        }
    }
}

impl<T, R> fmt::Debug for LocalPoolBuilder<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalPoolBuilder")
            .field("max_stashed", &self.config.max_stashed)
            .field("max_idle", &self.config.max_idle)
            .field("sweep_every", &self.config.sweep_every)
            .field("preload", &self.config.preload)
            .finish_non_exhaustive()
    }
}

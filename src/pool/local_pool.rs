//! `LocalPool`: the public face of the pool, and the paths an object takes
//! out of it (the paths back are `returning.rs`'s).

use std::fmt;
use std::mem;
use std::ptr::NonNull;

use crate::lazy::{LazyArc, LazyArcRef};
use crate::pool::config::Config;
use crate::pool::guard::{Pooled, PooledOwned};
use crate::pool::node::{Home, Node};
use crate::pool::returning::DiscardOnUnwind;
use crate::pool::shared::Shared;
use crate::pool::stash::{Counters, Stash};
use crate::sync::Arc;
use crate::{Recycle, Stats};

/// A pool of reusable objects: Go's `sync.Pool`, with per-thread stashes.
///
/// Each thread keeps up to [`max_stashed`](crate::LocalPoolBuilder::max_stashed)
/// returned objects in a private stash, as many as its own use calls for,
/// so a get and a return on the same thread take no lock and, besides the
/// object, write only that stash, which other threads write only while
/// they hold it (a sweep, say). (At most 8 threads per core keep a stash
/// in a pool at once; see
/// [`max_stashed`](crate::LocalPoolBuilder::max_stashed).) An object
/// taken on one thread and dropped on another goes back to the thread that
/// took it (a channel's consumer gives it back to the producer's loan book
/// with one release store, into the object's own node), unless the
/// dropping thread gives back objects of several threads, which it then
/// gathers and passes to the shared overflow eight at a time. A thread whose stash is empty takes what
/// came back, then a batch from a shared overflow, before making a new
/// object; a thread whose stash is at its limit moves its oldest half
/// there.
/// Sweeps keep the pool as large as recent use needs: an object returned
/// and not taken again survives one sweep and is dropped by the second
/// (Go's victim cache), wherever it is. By default a process-wide
/// background thread sweeps every pool each
/// [`DEFAULT_SWEEP_INTERVAL`](crate::DEFAULT_SWEEP_INTERVAL).
///
/// Objects come from a [`Recycle`]r: any `Fn() -> T`, or a type that also
/// resets returned objects and refuses ones not worth keeping.
///
/// # Examples
///
/// Scoped use, with a `static` pool:
///
/// ```
/// use stashpool::LocalPool;
///
/// static BUFS: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));
///
/// let len = BUFS.with(|buf| {
///     buf.clear();
///     buf.extend_from_slice(b"hello");
///     buf.len()
/// });
/// assert_eq!(len, 5);
/// ```
///
/// A guard, returned to the pool when it drops:
///
/// ```
/// use stashpool::LocalPool;
///
/// let pool = LocalPool::new(String::new);
/// let mut s = pool.get();
/// s.push_str("pooled");
/// assert_eq!(&*s, "pooled");
/// drop(s); // back in this thread's stash
/// assert_eq!(pool.stats().idle, 1);
/// ```
///
/// Buffers filled on one thread and dropped on another: the consumer keeps
/// none, and a handful serve every message.
///
/// ```standalone_crate
/// use std::sync::mpsc;
/// use std::thread;
/// use stashpool::LocalPool;
///
/// let pool = LocalPool::new(|| Vec::<u8>::with_capacity(4096));
/// thread::scope(|s| {
///     let (to_consumer, received) = mpsc::sync_channel(4);
///     s.spawn(move || {
///         for buf in received {
///             drop(buf); // back to the producer
///         }
///     });
///     for i in 0..100u8 {
///         let mut buf = pool.get();
///         buf.push(i);
///         to_consumer.send(buf).unwrap();
///     }
/// });
/// assert!(pool.stats().created < 20, "{:?}", pool.stats());
/// ```
///
/// A pool owns its objects, which therefore must be `Send` (they move
/// between threads through the overflow):
///
/// ```compile_fail
/// use std::rc::Rc;
/// let pool = stashpool::LocalPool::new(|| Rc::new(0));
/// ```
pub struct LocalPool<T: Send + 'static, R: Recycle<T> = fn() -> T> {
    pub(super) recycler: R,
    pub(super) config: Config,
    /// Made on first use (so that `new` can be `const`).
    pub(super) shared: LazyArc<Shared<T>>,
}

impl<T: Send + 'static, R: Recycle<T>> LocalPool<T, R> {
    crate::sync::loom_const_fn! {
        /// A pool with the default configuration and background sweeping on.
        ///
        /// `const`, so a pool can be a `static`; nothing is allocated and no
        /// thread is started until the pool is first used.
        ///
        /// # Examples
        ///
        /// ```
        /// use stashpool::LocalPool;
        ///
        /// static BUFS: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));
        ///
        /// let mut buf = BUFS.get();
        /// buf.extend_from_slice(b"abc");
        /// assert!(buf.capacity() >= 4096);
        /// ```
        pub fn new(recycler: R) -> Self {
            Self {
                recycler,
                config: Config::DEFAULT,
                shared: LazyArc::new(),
            }
        }
    }

    /// To move the guard to another thread or task, use
    /// [`get_owned`](Self::get_owned) on the pool in an `Arc`: this guard
    /// borrows the pool, so it cannot outlive it (a `static` pool's guard
    /// can go anywhere).
    ///
    /// An object from this thread's stash, else from the shared overflow,
    /// else a new one from `create()`. It goes back to the pool, through
    /// `recycle`, when the guard drops.
    ///
    /// A guard dropped while its thread panics drops its object instead: a
    /// panic may have left it half-modified.
    ///
    /// # Panics
    ///
    /// If `create()` panics; the pool is unaffected.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(Vec::<u32>::new);
    /// let mut v = pool.get();
    /// v.push(7);
    /// assert_eq!(v[0], 7);
    /// ```
    #[inline(always)]
    pub fn get(&self) -> Pooled<'_, T, R> {
        Pooled::new(self, self.lend())
    }

    /// An idle object, if the pool has one: from this thread's stash, else
    /// from the shared overflow. Never calls `create()`, so a caller that
    /// must not grow the pool (a fixed set of frame buffers, a budget of
    /// connections) can tell "none free" from "made one". `None` also for a
    /// pool that has never made anything.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(|| vec![0u8; 1024]);
    /// assert!(pool.try_get().is_none()); // nothing made yet
    /// pool.put(vec![7; 16]);
    /// let buf = pool.try_get().expect("the buffer just put");
    /// assert_eq!(buf[0], 7);
    /// assert!(pool.try_get().is_none()); // it is lent out
    /// assert_eq!(pool.stats().created, 0);
    /// ```
    pub fn try_get(&self) -> Option<Pooled<'_, T, R>> {
        self.made()?;
        let (shared, stash) = self.local();
        let node = match stash {
            Some(stash) => shared.lend(stash, Self::WEIGHED)?,
            None => Node::lend(shared.pop_single(&shared.orphans)?, Home::NONE),
        };
        Some(Pooled::new(self, node))
    }

    /// Same as [`get`](Self::get), for a pool in an `Arc`: the guard owns a
    /// reference to the pool, so it is `'static` and can move to (and be
    /// dropped on) another thread.
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use std::sync::Arc;
    /// use stashpool::LocalPool;
    ///
    /// let pool = Arc::new(LocalPool::new(String::new));
    /// let mut s = pool.get_owned();
    /// std::thread::spawn(move || s.push_str("returned on another thread"))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(pool.stats().returned, 1);
    /// ```
    #[inline(always)]
    pub fn get_owned(self: &std::sync::Arc<Self>) -> PooledOwned<T, R> {
        // SAFETY: the pool is the `Arc`'s own value.
        unsafe { self.get_owned_by(std::sync::Arc::clone(self)) }
    }

    /// [`get_owned`](Self::get_owned) for a pool that lives inside
    /// another, `owner`, which the guard keeps alive instead: how a
    /// ready-made pool lends `'static` guards.
    ///
    /// # Safety
    ///
    /// `self` must live as long as `*owner` and not move: a field of it,
    /// or in an allocation it owns and frees only when it drops.
    #[inline(always)]
    pub(crate) unsafe fn get_owned_by<P>(&self, owner: std::sync::Arc<P>) -> PooledOwned<T, R, P> {
        // SAFETY: the caller's word.
        unsafe { PooledOwned::new(owner, self, self.lend()) }
    }

    /// Scoped use: runs `f` on a pooled object, which goes back to the pool
    /// (through `recycle`) after `f` returns.
    ///
    /// If `f` panics, the object is dropped, not pooled, and the pool stays
    /// usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Write;
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(|| Vec::with_capacity(64));
    /// let n = pool.with(|buf: &mut Vec<u8>| {
    ///     buf.clear();
    ///     write!(buf, "{}-{}", 1, 2).unwrap();
    ///     buf.len()
    /// });
    /// assert_eq!(n, 3);
    /// ```
    #[inline(always)]
    pub fn with<U>(&self, f: impl FnOnce(&mut T) -> U) -> U {
        // One stash lookup serves both ends: the object goes back to the
        // stash it came from, which this thread owns throughout the call.
        let (shared, stash) = self.local();
        let Some(stash) = stash else {
            return self.with_stashless(&shared, f);
        };
        let mut node = match shared.take(stash, Self::WEIGHED) {
            Some(node) => node,
            None => self.create(&stash.counters),
        };
        // If `f` unwinds, `node` is dropped with this frame, not pooled (the
        // object may be half-modified), and counted discarded.
        let unwinding = DiscardOnUnwind(&stash.counters);
        let out = f(node.value_mut());
        mem::forget(unwinding);
        self.recycle_into_stash(&shared, stash, node, true);
        out
    }

    /// Gives an object to the pool (like Go's `Put`). It passes through
    /// `recycle` first, and is dropped if that refuses it or if the stash and
    /// the overflow are both full.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(Vec::<u8>::new);
    /// pool.put(Vec::with_capacity(100));
    /// assert!(pool.get().capacity() >= 100);
    /// ```
    #[inline(always)]
    pub fn put(&self, value: T) {
        // Whatever the caller did to it, the pool has not recycled it.
        self.return_node(self.boxed(value), true);
    }

    /// One sweep now: the analogue of one Go GC cycle for this pool.
    ///
    /// Objects that were idle at the previous sweep and are idle still are
    /// dropped; the others are marked, to be dropped by the next sweep if
    /// nobody takes them before. So an object returned and never taken again
    /// survives exactly one sweep and is dropped by the second, wherever it
    /// is: in any thread's stash (also of a thread that is blocked or has
    /// exited) or in the shared overflow. When `sweep` returns, the objects
    /// it trimmed have been dropped.
    ///
    /// A sweep takes no lock the pool's users take: a get or a return waits
    /// only if it finds its own stash claimed by a sweep in progress, until
    /// the sweep has reached that stash (one `membarrier` call and the
    /// stashes before it).
    ///
    /// On Linux, the process's first sweep (this, or the background
    /// sweeper's start) registers it for `membarrier`, which in a process
    /// with several threads can wait milliseconds for the kernel; until
    /// then the pools' gets and returns use a `SeqCst` fence, and none of
    /// them waits for it.
    ///
    /// # Panics
    ///
    /// If an object's `Drop` panics: every other trimmed object is still
    /// dropped, then the first panic is resumed; the pool stays usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::builder(|| [0u8; 64]).manual_sweep().build();
    /// pool.put([1; 64]);
    /// pool.sweep(); // survives one sweep...
    /// assert_eq!(pool.stats().idle, 1);
    /// pool.sweep(); // ...and is dropped by the second
    /// assert_eq!(pool.stats().idle, 0);
    /// assert_eq!(pool.stats().trimmed, 1);
    /// ```
    pub fn sweep(&self) {
        // Off the gets' and returns' paths (a no-op once done; loom models
        // register when they choose, `loom_register`).
        #[cfg(not(stashpool_loom))]
        crate::pool::barrier::register();
        if let Some(shared) = self.made() {
            shared.sweep();
        }
    }

    /// Drops every idle object now, in every thread's stash (also of threads
    /// that are blocked or have exited) and in the overflow, before it
    /// returns. Objects in use are untouched and come back as usual. The
    /// dropped objects count as [`trimmed`](Stats::trimmed).
    ///
    /// For a program that knows it will not need its buffers for a while
    /// (a phase ends, a cache is reconfigured), instead of waiting for two
    /// sweeps.
    ///
    /// # Panics
    ///
    /// If an object's `Drop` panics: every other object is still dropped,
    /// then the first panic is resumed; the pool stays usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(|| vec![0u8; 4096]);
    /// let held = pool.get();
    /// pool.put(vec![0; 4096]);
    /// pool.clear();
    /// assert_eq!(pool.stats().idle, 0);
    /// drop(held); // comes back as usual
    /// assert_eq!(pool.stats().idle, 1);
    /// ```
    pub fn clear(&self) {
        if let Some(shared) = self.made() {
            shared.clear();
        }
    }

    /// Counters since the pool was made (see [`Stats`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::LocalPool;
    ///
    /// let pool = LocalPool::new(|| 0u64);
    /// pool.with(|n| *n += 1);
    /// let stats = pool.stats();
    /// assert_eq!((stats.created, stats.returned, stats.idle), (1, 1, 1));
    /// ```
    pub fn stats(&self) -> Stats {
        let mut stats = self.made().map(|shared| shared.stats()).unwrap_or_default();
        // Preloaded objects were made, not handed out.
        stats.gets = stats.gets.saturating_sub(self.config.preload as u64);
        stats
    }

    /// The recycler this pool makes and resets objects with.
    pub fn recycler(&self) -> &R {
        &self.recycler
    }

    // === internals ===

    /// The shared state, made if need be. Its process's: `local` and
    /// `current` make sure of that for every path that reaches it.
    #[inline(always)]
    pub(super) fn shared(&self) -> LazyArcRef<'_, Shared<T>> {
        match self.shared.get() {
            Some(shared) => shared,
            None => self.publish(None),
        }
    }

    /// `shared` itself, or, in a forked child, the child's own state that
    /// replaces it (`fork.rs`; the parent's is left untouched).
    #[inline]
    fn current<'a>(&'a self, shared: LazyArcRef<'a, Shared<T>>) -> LazyArcRef<'a, Shared<T>> {
        if shared.overflow.here() {
            shared
        } else {
            self.publish(Some(shared))
        }
    }

    /// Publishes this process's shared state: the first (`stale`: none
    /// yet), or, in a forked child, one in place of its parent's `stale`,
    /// which is left untouched, never freed. Racing threads each make one
    /// and the first to publish wins (`LazyArc`), unless the pool is to be
    /// preloaded: then one thread of the process makes it at a time, under
    /// the cell's claim, and fills it before publishing it, so that the
    /// first `preload` gets, on any thread, find their objects. If
    /// `create` panics while preloading, what it made is published, then
    /// the panic resumed.
    #[cold]
    fn publish<'a>(
        &'a self,
        stale: Option<LazyArcRef<'a, Shared<T>>>,
    ) -> LazyArcRef<'a, Shared<T>> {
        let panicked = std::cell::Cell::new(None);
        let make = || {
            let shared = Arc::new(Shared::new(&self.config, R::FIXED_FOOTPRINT));
            let preload = || self.preload(&shared);
            if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(preload)) {
                panicked.set(Some(panic));
            }
            shared
        };
        let publish = || match stale {
            None => self.shared.get_or_make(make, |made| self.announce(made)),
            Some(stale) => self.shared.renew(stale, make, |made| self.announce(made)),
        };
        let shared = match self.config.preload {
            0 => publish(),
            _ => self.shared.claim().run(
                || self.shared.get().filter(|shared| shared.overflow.here()),
                publish,
                "stashpool: a pool's `create` used the pool it was preloading",
            ),
        };
        if let Some(panic) = panicked.take() {
            std::panic::resume_unwind(panic);
        }
        shared
    }

    /// Registers a newly published shared state with the sweeper.
    fn announce(&self, shared: &Arc<Shared<T>>) {
        // loom cannot model a timer thread; models sweep by calling `sweep`.
        #[cfg(not(stashpool_loom))]
        if let Some(interval) = self.config.sweep_every {
            let weak: std::sync::Weak<Shared<T>> = Arc::downgrade(shared);
            crate::pool::background::register(weak, interval);
        }
        #[cfg(stashpool_loom)]
        let _ = shared;
    }

    /// The shared state and this thread's stash in it, if it has one: from
    /// the stash cache's first entry, or (out of line) looked up or made.
    #[inline(always)]
    pub(super) fn local(&self) -> (LazyArcRef<'_, Shared<T>>, Option<&Stash<T>>) {
        if let Some(shared) = self.shared.get() {
            // A hit means this thread remembered its stash in this very
            // table (table ids are never reused), which `local_slow` does
            // only for this process's state.
            if let Some(stash) = shared.get().stashes.cached() {
                return (shared, Some(stash));
            }
        }
        self.local_slow()
    }

    #[cold]
    #[inline(never)]
    fn local_slow(&self) -> (LazyArcRef<'_, Shared<T>>, Option<&Stash<T>>) {
        let shared = self.current(self.shared());
        (shared, Shared::find_stash(shared))
    }

    /// Fills a pool's shared state, made by this thread and not yet
    /// published, with `config.preload` idle objects, in the overflow,
    /// where any thread's get finds them: made and put, so counted created
    /// and returned.
    #[cold]
    fn preload(&self, shared: &Shared<T>) {
        for _ in 0..self.config.preload {
            let mut node = self.create(&shared.orphans);
            if Self::WEIGHED {
                // A panic in `footprint` drops the object, counted discarded.
                let unwinding = DiscardOnUnwind(&shared.orphans);
                node.bytes = self.recycler.footprint(node.value_mut());
                mem::forget(unwinding);
            }
            shared.preload(&shared.orphans, node);
        }
    }

    /// The shared state if it was made, this process's (`current`); a pool
    /// to preload is made and filled by its first call, whatever the call
    /// (`LocalPoolBuilder::preload`).
    fn made(&self) -> Option<LazyArcRef<'_, Shared<T>>> {
        let shared = match self.config.preload {
            0 => self.shared.get()?,
            _ => self.shared(),
        };
        Some(self.current(shared))
    }

    /// Takes an object out of the pool, or makes one, for a guard: the node
    /// records the stash it came from (see `Home`), whose loan book may
    /// track it (`loans.rs`).
    #[inline(always)]
    fn lend(&self) -> NonNull<Node<T>> {
        let (shared, stash) = self.local();
        match stash {
            Some(stash) => match shared.lend(stash, Self::WEIGHED) {
                Some(node) => node,
                None => shared.lend_made(stash, self.create(&stash.counters)),
            },
            None => Node::lend(self.take_stashless(&shared), Home::NONE),
        }
    }

    /// A new object, counted in `counters`.
    #[cold]
    fn create<const S: bool>(&self, counters: &Counters<S>) -> Box<Node<T>> {
        let node = self.boxed(self.recycler.create());
        counters.created.bump();
        node
    }

    /// Whether returns weigh objects: not if every object weighs the same
    /// (`Recycle::FIXED_FOOTPRINT`), which its node then records from the
    /// start, and which `Shared::stats` multiplies by the idle count.
    pub(super) const WEIGHED: bool = R::FIXED_FOOTPRINT.is_none();

    /// A node for `value`, new to the pool.
    fn boxed(&self, value: T) -> Box<Node<T>> {
        let mut node = Node::boxed(value);
        node.bytes = R::FIXED_FOOTPRINT.unwrap_or(0);
        node
    }

    // === without a stash ===
    //
    // A thread has no stash when every slot of the pool is held by other
    // threads (`shared.rs`), or when its thread-locals are being destroyed
    // (its thread id can already belong to another thread). It still pools:
    // objects come from the overflow (or `create`) and go back to it
    // directly, one at a time.

    /// An object from the overflow, or a new one, for a thread without a
    /// stash.
    #[cold]
    fn take_stashless(&self, shared: &Shared<T>) -> Box<Node<T>> {
        match shared.pop_single(&shared.orphans) {
            Some(node) => node,
            None => self.create(&shared.orphans),
        }
    }

    #[cold]
    fn with_stashless<U>(&self, shared: &Shared<T>, f: impl FnOnce(&mut T) -> U) -> U {
        let mut node = self.take_stashless(shared);
        let unwinding = DiscardOnUnwind(&shared.orphans);
        let out = f(node.value_mut());
        mem::forget(unwinding);
        self.recycle_into_overflow(shared, node, true);
        out
    }
}

/// What the background sweeper does with a pool, for loom models: it
/// upgrades its weak reference to the pool's shared state and sweeps
/// through that strong reference, which can outlive the `LocalPool`.
#[cfg(stashpool_loom)]
impl<T: Send + 'static, R: Recycle<T>> LocalPool<T, R> {
    #[doc(hidden)]
    pub fn loom_background_sweep(&self) -> impl FnOnce() + Send + 'static {
        let shared = self.publish(None).to_arc();
        move || shared.sweep()
    }

    /// Under loom: how many of the pool's stashes hold a slot now.
    #[doc(hidden)]
    pub fn loom_slots_held(&self) -> usize {
        self.shared
            .get()
            .map_or(0, |shared| shared.lock_sweep().held)
    }

    /// Registers the model's process for `membarrier`, as the background
    /// sweeper and `sweep` do outside loom: owners switch barriers.
    #[doc(hidden)]
    pub fn loom_register() {
        crate::pool::barrier::register();
    }

    /// Makes this model take the fork gate in every section that holds a
    /// sweep lock, as outside loom; first in a model that calls
    /// `loom_register`, the gate's one writer under loom.
    #[doc(hidden)]
    pub fn loom_model_gate() {
        crate::pool::barrier::gate(crate::pool::barrier::strategy()).model();
    }

    /// Under loom: whether owners have moved to compiler fences.
    #[doc(hidden)]
    pub fn loom_owners_switched() -> bool {
        crate::pool::barrier::switched()
    }

    /// Makes the calling model thread one that is late in its teardown, its
    /// thread id given back: its gets and returns go around the stashes
    /// (`sync::end_thread_id`), for loom models of the stashless paths.
    #[doc(hidden)]
    pub fn loom_end_thread_id() {
        crate::sync::end_thread_id();
    }

    /// Has the calling model thread's stash keep a loan book from its next
    /// refill on, as a thread that gives back this thread's objects alone
    /// advises outside loom (`Returns::START`), without a model thread to
    /// give a first one back.
    #[doc(hidden)]
    pub fn loom_keep_book(&self) {
        if let (_, Some(stash)) = self.local() {
            stash.returns.advise(crate::pool::stash::Returns::START);
        }
    }
}

#[cfg(not(stashpool_loom))]
impl<T: Send + 'static> crate::pool::background::Sweep for Shared<T> {
    fn sweep(&self) {
        Shared::sweep(self)
    }
}

/// Dropping a pool drops every object pooled in it, in every thread's stash
/// and in the overflow, before `drop` returns. If some objects' `Drop`
/// panics, every other object is still dropped and the first panic is then
/// resumed.
///
/// Objects that a concurrent sweep (the background sweeper's) has already
/// taken out of the pool are that sweep's: it drops them on its own thread,
/// possibly just after `drop` returns. Pool drop does not wait for them:
/// waiting on user `Drop` code on another thread could deadlock
/// ([`implementation`](crate::implementation), section 7).
impl<T: Send + 'static, R: Recycle<T>> Drop for LocalPool<T, R> {
    fn drop(&mut self) {
        // A forked child's parent state is left as it is (`current`).
        if let Some(shared) = self.shared.get().filter(|shared| shared.overflow.here()) {
            #[cfg(not(stashpool_loom))]
            crate::pool::background::deregister(std::ptr::from_ref(&*shared).cast());
            shared.close();
        }
    }
}

impl<T: Send + 'static, R: Recycle<T>> fmt::Debug for LocalPool<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalPool")
            .field("max_stashed", &self.config.max_stashed)
            .field("max_idle", &self.config.max_idle)
            .field("sweep_every", &self.config.sweep_every)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static + Default> Default for LocalPool<T> {
    /// A pool that makes objects with `T::default()`.
    fn default() -> Self {
        Self::new(T::default)
    }
}

#[cfg(all(test, not(stashpool_loom)))]
mod tests {
    use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
    use std::thread;

    use crate::pool::stash::sections;
    use crate::{LocalPool, Pooled};

    type Pool = LocalPool<Vec<u8>>;

    fn pool(max_stashed: usize) -> Pool {
        LocalPool::builder(Vec::new as fn() -> Vec<u8>)
            .max_stashed(max_stashed)
            .manual_sweep()
            .build()
    }

    /// How many objects each stash holds, read as a sweep reads them.
    fn lengths(pool: &Pool) -> Vec<usize> {
        let shared = pool.shared.get().expect("used");
        let _sweeping = shared.lock_sweep();
        let mut all = Vec::new();
        shared.with_every_stash(|stash| all.push(stash.with_claimed(|local| local.items.len())));
        all
    }

    /// How many objects this thread's stash holds.
    fn mine(pool: &Pool) -> usize {
        let shared = pool.shared.get().expect("used");
        let stash = shared.stashes.get().expect("a stash");
        stash.with_owner(shared.strategy, |local| local.items.len())
    }

    /// A thread that drops what it is sent, and says so.
    fn consumer<'a>(
        s: &'a thread::Scope<'a, '_>,
    ) -> (SyncSender<Pooled<'a, Vec<u8>>>, Receiver<()>) {
        let (send, guards) = sync_channel::<Pooled<'a, Vec<u8>>>(0);
        let (done, acks) = sync_channel(0);
        s.spawn(move || {
            for guard in guards {
                drop(guard);
                done.send(()).unwrap();
            }
        });
        (send, acks)
    }

    /// A stash never holds more than `max_stashed`, whatever comes back to
    /// it from other threads and in whatever order: checked after every
    /// step of a sequence that grows the stash's limit, lends more than it
    /// holds, has the loans given back on another thread while the stash
    /// is full, and takes them back.
    #[test]
    fn no_stash_ever_holds_more_than_max_stashed() {
        const MAX: usize = 4;
        let pool = pool(MAX);
        let check = |step: &str| {
            let lengths = lengths(&pool);
            assert!(lengths.iter().all(|&n| n <= MAX), "{step}: {lengths:?}");
        };
        for _ in 0..6 {
            let burst: Vec<_> = (0..MAX).map(|_| pool.get()).collect();
            drop(burst);
            check("a burst");
        }
        assert_eq!(mine(&pool), MAX, "the limit grew to max_stashed");
        thread::scope(|s| {
            let (to, acks) = consumer(s);
            let give = |guard| {
                to.send(guard).unwrap();
                acks.recv().unwrap();
                check("given back");
            };
            for _ in 0..3 {
                give(pool.get());
            }
            let mut holds = Vec::new();
            while mine(&pool) > 0 {
                holds.push(pool.get());
            }
            check("the stash emptied");
            let mut loans: Vec<_> = (0..7).map(|_| pool.get()).collect();
            check("seven lent");
            give(loans.remove(0));
            give(loans.remove(0));
            drop(pool.get());
            check("taken back");
            drop(holds);
            check("held ones returned");
            for guard in loans.drain(..) {
                give(guard);
            }
            drop(pool.get());
            check("the rest taken back");
            pool.sweep();
            check("a sweep");
            drop(pool.get());
            check("after the sweep");
        });
        let stats = pool.stats();
        assert_eq!(stats.idle as u64, stats.created, "nothing lost: {stats:?}");
    }

    /// `f`'s result, and how many owner critical sections it entered.
    fn sections<R>(f: impl FnOnce() -> R) -> (usize, R) {
        let mut out = None;
        let n = sections::count(|| out = Some(f()));
        (n, out.expect("ran"))
    }

    /// Each path into and out of the pool enters its thread's stash's
    /// critical section (`Stash::with_owner`) once; a get that asks for a
    /// slot twice, and a return on another thread, given back to the
    /// thread that took it, not at all.
    #[test]
    fn each_path_enters_the_owners_critical_section_once() {
        let pool = pool(8);
        let (n, guard) = sections(|| pool.get());
        assert_eq!(n, 2, "a get that makes its object, and lends it");
        assert_eq!(sections(|| drop(guard)).0, 1, "a return");
        let (n, guard) = sections(|| pool.get());
        assert_eq!((n, pool.stats().reused), (1, 1), "a get from the stash");
        drop(guard);
        assert_eq!(sections(|| pool.try_get()).0, 1, "try_get");
        assert_eq!(sections(|| pool.with(|_| ())).0, 2, "with: a get, a return");
        assert_eq!(sections(|| pool.put(Vec::new())).0, 1, "put");
        // Returns to a stash at its limit spill, in the same section.
        let held: Vec<_> = (0..20).map(|_| pool.get()).collect();
        let created = pool.stats().created;
        assert_eq!(
            sections(|| drop(held)).0,
            20,
            "twenty returns, spills included"
        );
        assert!(
            pool.stats().created >= created && mine(&pool) < 20,
            "spilled"
        );
        // A get that finds its stash empty, the objects in the overflow.
        let held: Vec<_> = (0..mine(&pool)).map(|_| pool.get()).collect();
        let created = pool.stats().created;
        let (n, guard) = sections(|| pool.get());
        assert_eq!((n, pool.stats().created), (1, created), "a steal");
        drop((guard, held));
        // A thread that gives back this thread's objects alone advises it
        // to keep a loan book (that first return, untracked, goes to its
        // own stash); the next refill heeds it, and loans entered there
        // come back with no section on the returning thread.
        let first = pool.get();
        let given = thread::scope(|s| s.spawn(|| sections(|| drop(first)).0).join().unwrap());
        assert_eq!(given, 1, "an untracked return on another thread");
        let held: Vec<_> = (0..=mine(&pool)).map(|_| pool.get()).collect();
        drop(held);
        let lent: Vec<_> = (0..3).map(|_| pool.get()).collect();
        let given = thread::scope(|s| s.spawn(|| sections(|| drop(lent)).0).join().unwrap());
        assert_eq!(given, 0, "returns on another thread, to the taker's book");
        // A get that finds its loans given back.
        let held: Vec<_> = (0..mine(&pool)).map(|_| pool.get()).collect();
        let created = pool.stats().created;
        let (n, guard) = sections(|| pool.get());
        assert_eq!((n, pool.stats().created), (1, created), "taken back");
        drop((guard, held));
        // A get that finds nothing anywhere, from an empty stash.
        pool.clear();
        let (n, guard) = sections(|| pool.get());
        assert_eq!((n, pool.stats().created), (2, created + 1), "made");
        drop(guard);
        // A thread that gives back several threads' objects gathers them in
        // its own stash.
        let theirs = thread::scope(|s| s.spawn(|| pool.get()).join().unwrap());
        let (mine_too, other) = (pool.get(), pool.get());
        let given = thread::scope(|s| {
            s.spawn(|| {
                // A stash with a slot (this thread may have inherited the
                // exited thread's, which gave its slot back).
                pool.with(|_| ());
                drop(mine_too);
                sections(|| drop(theirs)).0
            })
            .join()
            .unwrap()
        });
        assert_eq!(given, 1, "a return on a thread that serves several");
        drop(other);
    }

    /// A thread whose stash has no slot asks for one when a get finds
    /// nothing: the slot's section and the get's.
    #[test]
    fn a_get_that_takes_a_slot_enters_twice() {
        let mut pool = pool(8);
        pool.config.max_stashes = Some(1);
        thread::scope(|s| {
            s.spawn(|| pool.put(Vec::new())).join().unwrap();
        });
        // The other thread's exit gave its slot back; this thread has none.
        drop(pool.get());
        let inherited = thread::scope(|s| {
            s.spawn(|| {
                let (n, guard) = sections(|| pool.get());
                drop(guard);
                n
            })
            .join()
            .unwrap()
        });
        assert!(inherited <= 2, "{inherited}");
    }

    /// Concurrent workouts of the loan books, sized for Miri: a producer
    /// whose objects a consumer gives back while it takes them back, with
    /// sweeps and clears reaching the lists meanwhile; objects out when
    /// their thread exits; and objects kept, refused or panicked on by the
    /// thread that gives them back.
    mod given_back {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
        use std::thread;

        use crate::{LocalPool, Pooled, Recycle};

        /// A pooled object: counts its drops; `payload` is written by
        /// whoever holds it and by `recycle` on whatever thread gives it
        /// back, so Miri's race detector checks every hand-off.
        struct Item {
            dropped: Arc<AtomicUsize>,
            tag: usize,
            payload: Box<[u64; 4]>,
        }

        impl Drop for Item {
            fn drop(&mut self) {
                assert_eq!(self.payload[0], self.payload[3], "torn object");
                self.dropped.fetch_add(1, Ordering::SeqCst);
            }
        }

        /// Makes `Item`s and counts them; refuses every `refuse_every`-th
        /// recycle (0: none), and panics on the `panic_at`-th (0: none).
        #[derive(Default)]
        struct Items {
            created: AtomicUsize,
            dropped: Arc<AtomicUsize>,
            recycles: AtomicUsize,
            refuse_every: AtomicUsize,
            panic_at: AtomicUsize,
        }

        impl Recycle<Item> for Items {
            fn create(&self) -> Item {
                self.created.fetch_add(1, Ordering::SeqCst);
                Item {
                    dropped: Arc::clone(&self.dropped),
                    tag: usize::MAX,
                    payload: Box::new([0; 4]),
                }
            }

            fn recycle(&self, item: &mut Item) -> bool {
                let n = self.recycles.fetch_add(1, Ordering::SeqCst) + 1;
                item.payload[0] = n as u64;
                item.payload[3] = n as u64;
                assert_ne!(n, self.panic_at.load(Ordering::SeqCst), "recycle panics");
                let every = self.refuse_every.load(Ordering::SeqCst);
                every == 0 || !n.is_multiple_of(every)
            }
        }

        type Pool = LocalPool<Item, Items>;
        type Guard<'a> = Pooled<'a, Item, Items>;

        fn pool() -> Pool {
            LocalPool::builder(Items::default()).manual_sweep().build()
        }

        const N: usize = if cfg!(miri) { 300 } else { 4000 };

        /// Writes the guard's object as its holder.
        fn stamp(guard: &mut Guard<'_>, tag: usize) {
            guard.tag = tag;
            let p = guard.payload[0] + 1;
            guard.payload[0] = p;
            guard.payload[3] = p;
        }

        /// Lends `n` objects into `to`, every `keep_every`-th (0: none)
        /// returned on this thread instead.
        fn produce<'a>(pool: &'a Pool, to: SyncSender<Guard<'a>>, n: usize, keep_every: usize) {
            for i in 0..n {
                let mut guard = pool.get();
                stamp(&mut guard, i);
                if keep_every != 0 && i % keep_every == keep_every - 1 {
                    continue;
                }
                to.send(guard).unwrap();
            }
        }

        /// Drops what it is sent, writing it first.
        fn consume(guards: Receiver<Guard<'_>>) -> usize {
            guards
                .into_iter()
                .map(|mut guard| {
                    let p = guard.payload[3] + 1;
                    guard.payload[0] = p;
                    guard.payload[3] = p;
                })
                .count()
        }

        /// Drops the pool: every object made must then have been dropped.
        fn finish(pool: Pool) -> (usize, crate::Stats) {
            let stats = pool.stats();
            let dropped = Arc::clone(&pool.recycler().dropped);
            let created = pool.recycler().created.load(Ordering::SeqCst);
            drop(pool);
            assert_eq!(created, dropped.load(Ordering::SeqCst), "{stats:?}");
            assert_eq!(created as u64, stats.created);
            (created, stats)
        }

        #[test]
        fn a_producer_takes_back_while_a_consumer_gives_back() {
            let pool = pool();
            let consumed = thread::scope(|s| {
                let (to, guards) = sync_channel(8);
                let consumer = s.spawn(move || consume(guards));
                produce(&pool, to, N, 9);
                consumer.join().unwrap()
            });
            assert_eq!(consumed, N - N / 9);
            let (created, stats) = finish(pool);
            assert!(created < 40, "objects reused across threads: {stats:?}");
        }

        /// As above, while one thread sweeps without pause and another
        /// clears a few times: sweeps and clears collect the book while the
        /// consumer gives loans back, and cannot keep the producer from its
        /// stash.
        #[test]
        fn sweeps_and_clears_reach_the_list_meanwhile() {
            /// Stops the sweeper when dropped, so that a panic on this
            /// thread fails the test rather than leave the scope waiting.
            struct Done<'a>(&'a AtomicBool);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let pool = pool();
            let done = AtomicBool::new(false);
            let consumed = thread::scope(|s| {
                let (to, guards) = sync_channel(8);
                let consumer = s.spawn(move || consume(guards));
                let (pool, done) = (&pool, &done);
                let sweeper = s.spawn(move || {
                    while !done.load(Ordering::SeqCst) {
                        pool.sweep();
                    }
                });
                let stop = Done(done);
                let clearer = s.spawn(move || {
                    for _ in 0..3 {
                        for _ in 0..40 {
                            thread::yield_now();
                        }
                        pool.clear();
                    }
                });
                produce(pool, to, N, 11);
                let consumed = consumer.join().unwrap();
                clearer.join().unwrap();
                drop(stop);
                sweeper.join().unwrap();
                consumed
            });
            assert_eq!(consumed, N - N / 11);
            finish(pool);
        }

        /// The producer exits with 12 objects out, given back after its
        /// exit (or while it exits); a new thread then finds them all.
        #[test]
        fn objects_out_when_their_thread_exits() {
            const OUT: usize = 12;
            let pool = pool();
            for concurrent in [false, true] {
                let (to_holder, held) = sync_channel::<Guard<'_>>(OUT);
                let created = thread::scope(|s| {
                    let pool = &pool;
                    let holder = s.spawn(move || {
                        let held: Vec<_> = held.iter().collect();
                        assert_eq!(held.len(), OUT);
                        if concurrent {
                            held.into_iter().for_each(drop);
                            Vec::new()
                        } else {
                            held
                        }
                    });
                    s.spawn(move || {
                        for i in 0..OUT {
                            let mut guard = pool.get();
                            stamp(&mut guard, 1000 + i);
                            to_holder.send(guard).unwrap();
                        }
                    })
                    .join()
                    .unwrap();
                    let rest = holder.join().unwrap();
                    let created = pool.recycler().created.load(Ordering::SeqCst);
                    s.spawn(move || drop(rest)).join().unwrap();
                    created
                });
                thread::scope(|s| {
                    s.spawn(|| {
                        let got: Vec<_> = (0..OUT).map(|_| pool.get()).collect();
                        let now = pool.recycler().created.load(Ordering::SeqCst);
                        assert_eq!(now, created, "none made: {:?}", pool.stats());
                        assert!(got.iter().all(|item| item.tag >= 1000));
                    });
                });
            }
            finish(pool);
        }

        /// Objects leave the pool on the consumer: kept (`into_inner`),
        /// refused by the recycler, and one panicked on (caught around the
        /// drop). Nothing is lost or dropped twice.
        #[test]
        fn objects_kept_refused_or_panicked_on_elsewhere() {
            let pool = pool();
            pool.recycler().refuse_every.store(5, Ordering::SeqCst);
            pool.recycler().panic_at.store(37, Ordering::SeqCst);
            let n = if cfg!(miri) { 240 } else { 3000 };
            let (kept, panics) = thread::scope(|s| {
                let (to, guards) = sync_channel::<Guard<'_>>(8);
                let consumer = s.spawn(move || {
                    let (mut kept, mut panics) = (0, 0);
                    for (i, mut guard) in guards.into_iter().enumerate() {
                        guard.tag += 1;
                        if i % 4 == 3 {
                            drop(Pooled::into_inner(guard));
                            kept += 1;
                        } else if catch_unwind(AssertUnwindSafe(|| drop(guard))).is_err() {
                            panics += 1;
                        }
                    }
                    (kept, panics)
                });
                produce(&pool, to, n, 0);
                consumer.join().unwrap()
            });
            assert_eq!((kept, panics), (n / 4, 1));
            let (_, stats) = finish(pool);
            assert!(stats.discarded >= 10, "{stats:?}");
        }
    }
}

//! `LocalPool`: the public face of the pool, and the paths an object takes
//! out of it and back.

use std::fmt;
use std::mem;
use std::ptr::NonNull;
use std::time::Duration;

use crate::lazy::{LazyArc, LazyArcRef};
use crate::pool::config::Config;
use crate::pool::guard::{Pooled, PooledOwned};
use crate::pool::node::{loan, Home, Node};
use crate::pool::shared::Shared;
use crate::pool::stash::{Counters, Returns, Stash};
use crate::sync::{Arc, Ordering};
use crate::{Recycle, Stats};

/// A pool of reusable objects: Go's `sync.Pool`, with per-thread stashes.
///
/// Each thread keeps up to [`max_stashed`](crate::LocalPoolBuilder::max_stashed)
/// returned objects in a private stash, so a get and a return on the same
/// thread touch no shared memory: as many as its own use calls for. (At
/// most 8 threads per core keep a stash in a pool at once; see
/// [`max_stashed`](crate::LocalPoolBuilder::max_stashed).) An object
/// taken on one thread and dropped on another goes back to the thread that
/// took it (a channel's consumer gives it back to the producer, through
/// the object itself, with no shared queue), unless the dropping thread
/// gives back objects of several threads, which it then shares through the
/// overflow. A thread whose stash is empty takes what came back, then a
/// batch from a shared overflow, before making a new object; a thread
/// whose stash is at its limit moves its oldest half there.
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
/// ```
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
    #[cfg(not(stashpool_loom))]
    pub const fn new(recycler: R) -> Self {
        Self {
            recycler,
            config: Config::DEFAULT,
            shared: LazyArc::new(),
        }
    }

    /// A pool with the default configuration (under loom, not `const`).
    #[cfg(stashpool_loom)]
    pub fn new(recycler: R) -> Self {
        Self::builder(recycler).build()
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
        let shared = self.made()?;
        let node = match Shared::stash(shared) {
            Some(stash) => match shared.lend(stash) {
                Some(node) => node,
                None => shared.lend_from(stash, shared.pop_overflow(stash)?),
            },
            None => Self::lend_unhomed(shared.pop_single(&shared.orphans)?),
        };
        Some(Pooled::new(self, node))
    }

    /// Same as [`get`](Self::get), for a pool in an `Arc`: the guard owns a
    /// reference to the pool, so it is `'static` and can move to (and be
    /// dropped on) another thread.
    ///
    /// # Examples
    ///
    /// ```
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
        let shared = self.shared();
        let Some(stash) = Shared::stash(shared) else {
            return self.with_stashless(&shared, f);
        };
        let mut node = self.take_from(&shared, stash);
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
        self.return_node(Node::boxed(value), true);
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
        crate::pool::fork::after_fork();
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
        crate::pool::fork::after_fork();
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

    #[inline(always)]
    fn shared(&self) -> LazyArcRef<'_, Shared<T>> {
        match self.shared.get() {
            Some(shared) => shared,
            None => self.init(),
        }
    }

    #[cold]
    fn init(&self) -> LazyArcRef<'_, Shared<T>> {
        let config = self.config;
        self.shared.get_or_make(
            || {
                Arc::new(Shared::new(
                    config.max_stashed,
                    config.max_idle,
                    config.max_stashes,
                    next_id(),
                ))
            },
            |shared| {
                if let Some(interval) = config.sweep_every {
                    register(shared.id, shared, interval);
                }
                self.preload(shared);
            },
        )
    }

    /// Fills a pool whose shared state this thread just published with
    /// `config.preload` idle objects, in the overflow, where any thread's
    /// get finds them: made and put, so counted created and returned.
    #[cold]
    fn preload(&self, shared: &Shared<T>) {
        for _ in 0..self.config.preload {
            shared.push_single(&shared.orphans, self.create(&shared.orphans));
        }
    }

    /// The shared state, if made; a pool to preload is made and filled by
    /// its first call, whatever the call (`LocalPoolBuilder::preload`).
    #[inline]
    fn made(&self) -> Option<LazyArcRef<'_, Shared<T>>> {
        if self.config.preload > 0 {
            Some(self.shared())
        } else {
            self.shared.get()
        }
    }

    /// Takes an object out of the pool, or makes one, for a guard: the node
    /// records the stash it came from (see `Home`), whose loan book tracks
    /// it (`loans.rs`).
    #[inline(always)]
    fn lend(&self) -> NonNull<Node<T>> {
        let shared = self.shared();
        match Shared::stash(shared) {
            Some(stash) => match shared.lend(stash) {
                Some(node) => node,
                None => self.lend_slow(&shared, stash),
            },
            None => Self::lend_unhomed(self.take_stashless(&shared)),
        }
    }

    /// `lend` when the stash has nothing: from the overflow, or made.
    #[cold]
    fn lend_slow(&self, shared: &Shared<T>, stash: &Stash<T>) -> NonNull<Node<T>> {
        shared.lend_from(stash, self.take_slow(shared, stash))
    }

    /// Lends `node` from no stash (a thread without one): no home, no
    /// book.
    fn lend_unhomed(mut node: Box<Node<T>>) -> NonNull<Node<T>> {
        node.home = Home::NONE;
        NonNull::from(Box::leak(node))
    }

    #[inline(always)]
    fn take_from(&self, shared: &Shared<T>, stash: &Stash<T>) -> Box<Node<T>> {
        match shared.pop(stash) {
            Some(node) => node,
            None => self.take_slow(shared, stash),
        }
    }

    #[cold]
    fn take_slow(&self, shared: &Shared<T>, stash: &Stash<T>) -> Box<Node<T>> {
        match shared.pop_overflow(stash) {
            Some(node) => node,
            None => self.create(&stash.counters),
        }
    }

    /// A new object, counted in `counters`.
    #[cold]
    fn create<const S: bool>(&self, counters: &Counters<S>) -> Box<Node<T>> {
        crate::pool::fork::after_fork();
        let node = Node::boxed(self.recycler.create());
        counters.created.bump();
        node
    }

    // === the two paths back ===
    //
    // `return_lent`: a guard's node, which records the stash it came from;
    // `return_node`: any other object (`put`, a guard dropped on another
    // thread), whose stash is looked up. Both end in `recycle_into_stash`, or in
    // `recycle_into_overflow` on a thread without a stash. Each says whether
    // the object may have been written, which picks `recycle` or
    // `recycle_unwritten`: a guard's node records it, `with` and `put` lend
    // or take `&mut` access, so theirs always was.

    /// Returns a node lent by `lend` (from a dropped guard) through
    /// `recycle`: straight to the stash it came from when this thread took
    /// it, else as `return_elsewhere` does.
    ///
    /// # Safety
    ///
    /// `node` must have been lent by this pool's `lend`, and be held by
    /// the caller, who gives it up.
    #[inline(always)]
    pub(crate) unsafe fn return_lent(&self, node: NonNull<Node<T>>) {
        // SAFETY: the caller holds the node.
        let (written, home) = unsafe {
            (
                Node::take_written(node.as_ptr()),
                (*node.as_ptr()).home.owned(),
            )
        };
        let Some(stash) = home else {
            // Out of line, so that the common case stays small enough to
            // inline into the guard's drop.
            // SAFETY: the caller's word.
            return outlined(move || unsafe { self.return_elsewhere(node, written) });
        };
        // SAFETY: `owned` found this thread's own stash in the pool that
        // lent `node` (the caller's word), whose object type is `T`;
        // stashes live in their own allocations until the pool's shared
        // state drops (`StashBox`), and `&self` keeps the pool alive for
        // this call.
        let stash = unsafe { &*stash.cast::<Stash<T>>() };
        // SAFETY: not in a loan book (`owned`), so the caller's alone; from
        // `Box::leak`.
        let node = unsafe { Box::from_raw(node.as_ptr()) };
        // `lend` made the shared state, so it is there.
        self.recycle_into_stash(&self.shared(), stash, node, written)
    }

    /// `return_lent` of a node in the loan book of `stash`, this thread's:
    /// recycled where it is (a sweep may read its state meanwhile), then
    /// out of the book and into the stash.
    ///
    /// # Safety
    ///
    /// As `return_lent`; `node` was lent from `stash`, this thread's.
    unsafe fn return_tracked(&self, stash: &Stash<T>, node: NonNull<Node<T>>, written: bool) {
        // SAFETY: the caller's word.
        let kept = unsafe { self.recycle_lent(&stash.counters, node, written, Some(stash)) };
        if let Some(node) = kept {
            // SAFETY: as above.
            unsafe { self.shared().push_lent(stash, node) }
        }
    }

    /// Returns a lent node on another thread than the one that took it (or
    /// on a thread in its teardown): back through the node to the loan book
    /// of the stash that lent it, if it is in one (`loans.rs`), else
    /// as `return_node` does.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    unsafe fn return_elsewhere(&self, node: NonNull<Node<T>>, written: bool) {
        // SAFETY: the caller holds the node.
        if let Some(stash) = unsafe { (*node.as_ptr()).home.mine() } {
            // Taken on this thread, and in its stash's loan book.
            // SAFETY: `mine` found this thread's own stash (see
            // `return_lent`); the caller's word.
            return unsafe { self.return_tracked(&*stash.cast::<Stash<T>>(), node, written) };
        }
        let shared = self.shared();
        let mine = Shared::stash(shared);
        // SAFETY: the caller holds the node. Relaxed: its state was set when
        // it was lent, and published to this thread with the guard.
        let (tracked, home) = unsafe {
            let node = node.as_ptr();
            (
                Node::loan(node).load(Ordering::Relaxed) == loan::LENT,
                &(*node).home,
            )
        };
        // The stash that lent it, if a thread with a token lent it from one.
        let origin = (home.token() != 0).then(|| home.stash());
        // Whether this thread gives back one taking thread's objects, which
        // then go back to that thread, or several threads', which are
        // shared (`loans.rs`).
        let one_taker = match (mine, origin) {
            (Some(mine), Some(origin)) => mine.returner.note(origin),
            _ => false,
        };
        if tracked {
            // SAFETY: the caller's word.
            unsafe {
                match mine {
                    Some(stash) => self.give_back(&stash.counters, node, written, one_taker),
                    None => self.give_back(&shared.orphans, node, written, false),
                }
            }
            return;
        }
        if let (true, Some(origin)) = (one_taker, origin) {
            // SAFETY: `lend` recorded a stash of this pool, which lives as
            // long as the pool; the object goes back to its thread from
            // now on.
            unsafe { &*origin.cast::<Stash<T>>() }
                .returns
                .advise(Returns::START);
        }
        // SAFETY: in no book, so the caller's alone; from `Box::leak`.
        let node = unsafe { Box::from_raw(node.as_ptr()) };
        match mine {
            Some(stash) => self.recycle_into_stash(&shared, stash, node, written),
            None => self.recycle_into_overflow(&shared, node, written),
        }
    }

    /// Recycles a node that another thread's loan book holds, and marks it
    /// given back there, counted in `counters` (this thread's).
    ///
    /// # Safety
    ///
    /// As `return_lent`, for a node in another thread's book.
    unsafe fn give_back<const S: bool>(
        &self,
        counters: &Counters<S>,
        node: NonNull<Node<T>>,
        written: bool,
        one_taker: bool,
    ) {
        // SAFETY: the caller's word.
        if let Some(node) = unsafe { self.recycle_lent(counters, node, written, None) } {
            counters.returned.bump();
            // SAFETY: the caller's word; `lend` made the shared state.
            unsafe { self.shared().give_back(node, one_taker) };
        }
    }

    /// Passes a lent node's object through `recycle` where it is (it may
    /// be in a loan book, which other threads read): the node if kept;
    /// else `None`, its object dropped (`let_go`) and counted discarded,
    /// also if the recycler panics.
    ///
    /// # Safety
    ///
    /// As `return_lent`; `home` is `node`'s stash if this thread took it
    /// (`Home::owned`), else `None`.
    #[inline(always)]
    unsafe fn recycle_lent<const S: bool>(
        &self,
        counters: &Counters<S>,
        node: NonNull<Node<T>>,
        written: bool,
        home: Option<&Stash<T>>,
    ) -> Option<NonNull<Node<T>>> {
        let unwinding = LetGoOnUnwind {
            pool: self,
            counters,
            node,
            home,
        };
        // SAFETY: the caller holds the node.
        let value = unsafe { Node::object_mut(node.as_ptr()) };
        let keep = if written {
            self.recycler.recycle(value)
        } else {
            self.recycler.recycle_unwritten(value)
        };
        mem::forget(unwinding);
        if keep {
            return Some(node);
        }
        counters.discarded.bump();
        // SAFETY: the caller's word.
        unsafe { self.let_go(node, home) };
        None
    }

    /// Drops the object of a lent node that leaves the pool (see
    /// `leave`).
    ///
    /// # Safety
    ///
    /// As `recycle_lent`.
    #[cold]
    unsafe fn let_go(&self, node: NonNull<Node<T>>, home: Option<&Stash<T>>) {
        // SAFETY: the caller's word.
        match unsafe { self.leave(node, home) } {
            Leaving::Mine(node) => drop(node),
            Leaving::Theirs(shell) => {
                // Marked gone even if the object's `Drop` panics: the book
                // must not keep a node that nobody will give back.
                let _gone = MarkGone(shell);
                // SAFETY: the caller held the node; `MarkGone` marks it
                // emptied.
                unsafe { Node::drop_value(shell.as_ptr()) }
            }
        }
    }

    /// The object of a lent node, out of the pool for good (`into_inner`).
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    pub(crate) unsafe fn keep_lent(&self, node: NonNull<Node<T>>) -> T {
        // SAFETY: the caller holds the node; `owned` gives this thread's
        // stash in this pool (see `return_lent`).
        let home = unsafe { (*node.as_ptr()).home.mine() }
            .map(|stash| unsafe { &*stash.cast::<Stash<T>>() });
        // SAFETY: the caller's word.
        match unsafe { self.leave(node, home) } {
            Leaving::Mine(node) => node.into_value(),
            Leaving::Theirs(shell) => {
                let _gone = MarkGone(shell);
                // SAFETY: the caller held the node; `MarkGone` marks it
                // emptied.
                unsafe { Node::take_value(shell.as_ptr()) }
            }
        }
    }

    /// A lent node whose object leaves the pool: out of this thread's loan
    /// book (if it is in it), for this thread to free; or a node of
    /// another thread's book, which stays there as an empty shell
    /// ([`loan::GONE`]) for that book to free.
    ///
    /// # Safety
    ///
    /// As `recycle_lent`.
    unsafe fn leave(&self, node: NonNull<Node<T>>, home: Option<&Stash<T>>) -> Leaving<T> {
        // SAFETY: the caller holds the node. Relaxed: as in
        // `return_elsewhere`.
        let tracked = unsafe { Node::loan(node.as_ptr()) }.load(Ordering::Relaxed) == loan::LENT;
        match home {
            // SAFETY: the caller's word: lent from `stash`, this thread's.
            Some(stash) if tracked => Leaving::Mine(unsafe { self.shared().reclaim(stash, node) }),
            None if tracked => Leaving::Theirs(node),
            // SAFETY: in no book, so the caller's alone; from `Box::leak`.
            _ => Leaving::Mine(unsafe { Box::from_raw(node.as_ptr()) }),
        }
    }

    /// Returns an object to the pool through `recycle`, into this thread's
    /// stash.
    #[inline(always)]
    pub(crate) fn return_node(&self, node: Box<Node<T>>, written: bool) {
        let shared = self.shared();
        match Shared::stash(shared) {
            Some(stash) => self.recycle_into_stash(&shared, stash, node, written),
            None => self.recycle_into_overflow(&shared, node, written),
        }
    }

    /// Recycles `node` into `stash`, this thread's.
    #[inline(always)]
    fn recycle_into_stash(
        &self,
        shared: &Shared<T>,
        stash: &Stash<T>,
        node: Box<Node<T>>,
        written: bool,
    ) {
        if let Some(node) = self.recycle(&stash.counters, node, written) {
            shared.push(stash, node);
        }
    }

    /// Passes a returned object through `recycle` (`recycle_unwritten` if
    /// nobody could have written it): the node, if kept; else `None`, the
    /// object dropped and counted discarded (also if the recycler panics:
    /// the node then drops as the panic unwinds).
    #[inline(always)]
    fn recycle<const S: bool>(
        &self,
        counters: &Counters<S>,
        mut node: Box<Node<T>>,
        written: bool,
    ) -> Option<Box<Node<T>>> {
        let unwinding = DiscardOnUnwind(counters);
        let keep = if written {
            self.recycler.recycle(node.value_mut())
        } else {
            self.recycler.recycle_unwritten(node.value_mut())
        };
        mem::forget(unwinding);
        if keep {
            Some(node)
        } else {
            counters.discarded.bump();
            None
        }
    }

    // === without a stash ===
    //
    // A thread has no stash when every slot of the pool is held by other
    // threads (`shared.rs`), or when its thread-locals are being destroyed
    // (its thread id can already belong to another thread). It still pools:
    // objects come from the overflow (or `create`) and go back to it
    // directly, one at a time.

    /// Recycles `node` straight into the overflow (no stash on this thread).
    #[cold]
    fn recycle_into_overflow(&self, shared: &Shared<T>, node: Box<Node<T>>, written: bool) {
        if let Some(node) = self.recycle(&shared.orphans, node, written) {
            shared.push_single(&shared.orphans, node);
        }
    }

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

    /// Drops a lent object whose guard is dropped while its thread panics
    /// (the panic may have left it half-modified), counting it discarded.
    /// On whatever thread the guard is, so in the shared counts.
    ///
    /// # Safety
    ///
    /// As `return_lent`.
    #[cold]
    pub(crate) unsafe fn discard_unwound(&self, node: NonNull<Node<T>>) {
        self.shared().orphans.discarded.bump();
        // SAFETY: the caller holds the node; `owned` gives this thread's
        // stash in this pool (see `return_lent`).
        let home = unsafe { (*node.as_ptr()).home.mine() }
            .map(|stash| unsafe { &*stash.cast::<Stash<T>>() });
        // SAFETY: the caller's word.
        unsafe { self.let_go(node, home) }
    }
}

/// What a lent node whose object leaves the pool is (`LocalPool::leave`).
enum Leaving<T> {
    /// This thread's to free.
    Mine(Box<Node<T>>),
    /// In another thread's loan book, which frees it once it is emptied
    /// and marked gone.
    Theirs(NonNull<Node<T>>),
}

/// Marks a lent node emptied ([`loan::GONE`]) when dropped, so that its
/// loan book frees the shell; after that, the node is not touched again.
struct MarkGone<T>(NonNull<Node<T>>);

impl<T> Drop for MarkGone<T> {
    fn drop(&mut self) {
        // Release: the emptying happens before the book frees the shell.
        // SAFETY: the node is live until this store hands it to its book.
        unsafe { Node::loan(self.0.as_ptr()) }.store(loan::GONE, Ordering::Release);
    }
}

/// Drops a lent node's object (`LocalPool::let_go`), counted discarded,
/// if `recycle` panics on it.
struct LetGoOnUnwind<'a, T: Send + 'static, R: Recycle<T>, const S: bool> {
    pool: &'a LocalPool<T, R>,
    counters: &'a Counters<S>,
    node: NonNull<Node<T>>,
    home: Option<&'a Stash<T>>,
}

impl<T: Send + 'static, R: Recycle<T>, const S: bool> Drop for LetGoOnUnwind<'_, T, R, S> {
    fn drop(&mut self) {
        self.counters.discarded.bump();
        // SAFETY: `recycle_lent`'s caller held the node, and gives it up.
        unsafe { self.pool.let_go(self.node, self.home) }
    }
}

/// Calls `f` out of line: keeps a rare path from growing an inlined caller.
#[cold]
#[inline(never)]
fn outlined<U>(f: impl FnOnce() -> U) -> U {
    f()
}

/// Counts an object discarded if `recycle`, or the closure it is lent to,
/// panics on it.
struct DiscardOnUnwind<'a, const S: bool>(&'a Counters<S>);

impl<const S: bool> Drop for DiscardOnUnwind<'_, S> {
    fn drop(&mut self) {
        self.0.discarded.bump();
    }
}

#[cfg(not(stashpool_loom))]
fn next_id() -> u64 {
    crate::pool::background::next_id()
}

/// Under loom there is no sweeper, but ids still name pools to the per-thread
/// stash cache (`owner::last_stash`), so they must still be distinct.
#[cfg(stashpool_loom)]
fn next_id() -> u64 {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(not(stashpool_loom))]
fn register<T: Send + 'static>(id: u64, shared: &Arc<Shared<T>>, interval: Duration) {
    let weak: std::sync::Weak<Shared<T>> = Arc::downgrade(shared);
    crate::pool::background::register(id, weak, interval);
}

/// loom cannot model a timer thread; loom models sweep by calling `sweep`.
#[cfg(stashpool_loom)]
fn register<T: Send + 'static>(_: u64, _: &Arc<Shared<T>>, _: Duration) {}

/// What the background sweeper does with a pool, for loom models: it
/// upgrades its weak reference to the pool's shared state and sweeps
/// through that strong reference, which can outlive the `LocalPool`.
#[cfg(stashpool_loom)]
impl<T: Send + 'static, R: Recycle<T>> LocalPool<T, R> {
    #[doc(hidden)]
    pub fn loom_background_sweep(&self) -> impl FnOnce() + Send + 'static {
        let shared = self.init().to_arc();
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
    /// get that finds it empty on, as a thread that gives back this
    /// thread's objects alone advises outside loom (`Returns::START`),
    /// without a model thread to give a first one back.
    #[doc(hidden)]
    pub fn loom_keep_book(&self) {
        if let Some(stash) = Shared::stash(self.init()) {
            stash.returns.advise(Returns::START);
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
        if let Some(shared) = self.shared.get() {
            #[cfg(not(stashpool_loom))]
            crate::pool::background::deregister(shared.id);
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

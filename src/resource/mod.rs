//! What the resource pools share, one file each: their builder and the
//! core knobs (here), the contents policy ([`reset`]), pools of several
//! size classes ([`classes`]) and buffers of a length the allocator may
//! refuse ([`fallible`]).
//!
//! Each resource pool (`BytePool`, `MmapPool`, ...) wraps one or more
//! `LocalPool`s whose recycler it makes from its own parameters (a buffer
//! size, a frame's dimensions). A core `LocalPoolBuilder` needs the
//! recycler up front, so a resource builder cannot hold one while its
//! parameters may still change; it records the core knobs instead and
//! applies them to each `LocalPool` when it builds. One generic builder
//! serves every resource pool, so the knobs are written and documented
//! once; each pool adds its own `const fn build` (`const_build!`), since
//! a `const fn` cannot call a trait's method to make the pool.
//!
//! Every resource pool answers `new` and `builder` with the pool's
//! parameters and an accessor for each of them. A pool of objects answers
//! `get`, `try_get`, `get_owned`, `with` and `put` ([`object_pool!`], or
//! `classes::class_pool!` for the multi-size pools, which take the size
//! first); every pool answers [`Pool`](crate::Pool)'s `sweep`, `clear` and
//! `stats` as inherent methods too, so the common calls need no import
//! ([`resource_pool!`]). Sizes in bytes are `capacity` (and
//! `max_capacity`), counts of objects `max_*`.

use std::fmt;
use std::time::Duration;

pub(crate) mod classes;
pub(crate) mod fallible;
pub(crate) mod reset;

use crate::{LocalPool, LocalPoolBuilder, Recycle, Reset};

/// Configures a resource pool before making it; made by the pool's
/// `builder` function (for example [`BytePool::builder`]).
///
/// It has the knobs of the core [`LocalPoolBuilder`] (applied to every [`LocalPool`]
/// the resource pool is made of) and, for some pools, knobs of their own
/// such as [`max_capacity`](ResourceBuilder::max_capacity).
///
/// Every method is a `const fn`, `build` too, so a configured pool is a
/// plain `static`.
///
/// [`BytePool::builder`]: crate::bytes::BufferPool::builder
/// [`LocalPool`]: crate::LocalPool
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use stashpool::bytes::BytePool;
///
/// let pool = BytePool::builder(4096)
///     .max_capacity(64 * 1024)
///     .max_stashed(16)
///     .max_idle(256)
///     .sweep_every(Duration::from_secs(10))
///     .build();
/// assert!(pool.get().capacity() >= 4096);
/// ```
///
/// A configured `static`:
///
/// ```
/// use stashpool::bytes::ChunkPool;
/// use stashpool::Reset;
///
/// static CHUNKS: ChunkPool = ChunkPool::builder(64 * 1024).reset(Reset::Keep).build();
///
/// assert_eq!(CHUNKS.get().len(), 64 * 1024);
/// assert_eq!(CHUNKS.reset(), Reset::Keep);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct ResourceBuilder<P: sealed::Resource> {
    pub(crate) params: P::Params,
    pub(crate) knobs: sealed::Knobs,
}

impl<P: sealed::Resource> ResourceBuilder<P> {
    pub(crate) const fn new(params: P::Params) -> Self {
        Self {
            params,
            knobs: sealed::Knobs::DEFAULT,
        }
    }

    /// Most objects one thread keeps in its private stash (see
    /// [`LocalPoolBuilder::max_stashed`](crate::LocalPoolBuilder::max_stashed)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::StringPool;
    ///
    /// let pool = StringPool::builder(256).max_stashed(4).build();
    /// pool.with(|s| s.push_str("hi"));
    /// ```
    pub const fn max_stashed(mut self, n: usize) -> Self {
        self.knobs.max_stashed = Some(n);
        self
    }

    /// Most idle objects each of the pool's `LocalPool`s keeps, all
    /// threads' stashes and the overflow together, after every sweep (see
    /// [`LocalPoolBuilder::max_idle`](crate::LocalPoolBuilder::max_idle)
    /// for between sweeps); it does not bound the objects in use, nor how
    /// many are made. A multi-size pool applies it to each size.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(1024).max_idle(8).build();
    /// pool.with(|buf| buf.push(1));
    /// ```
    pub const fn max_idle(mut self, n: usize) -> Self {
        self.knobs.max_idle = Some(n);
        self
    }

    /// Most bytes the idle objects of each of the pool's `LocalPool`s
    /// hold, at every instant (see
    /// [`LocalPoolBuilder::max_idle_bytes`](crate::LocalPoolBuilder::max_idle_bytes)):
    /// an object returned past it is dropped. Each object counts as what
    /// it holds: a buffer its capacity, a frame its pixels, a map its
    /// length. A multi-size pool applies it to all its sizes together:
    /// one budget for its classes, not one each. A pool with a budget keeps
    /// no per-thread stashes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::{BytePool, BytePools};
    ///
    /// let pool = BytePool::builder(1024).max_idle_bytes(64 << 10).build();
    /// pool.with(|buf| buf.push(1));
    /// assert_eq!(pool.stats().idle_bytes, 1024);
    ///
    /// // 48 KiB for the classes together: a 32 KiB buffer and a 16 KiB
    /// // one fit, a second 16 KiB one does not.
    /// let pools = BytePools::builder(1024, 1 << 20).max_idle_bytes(48 << 10).build();
    /// let bufs = [pools.get(32 << 10), pools.get(16 << 10), pools.get(16 << 10)];
    /// drop(bufs);
    /// let stats = pools.stats();
    /// assert_eq!((stats.idle_bytes, stats.rejected), (48 << 10, 1));
    /// ```
    pub const fn max_idle_bytes(mut self, n: usize) -> Self {
        self.knobs.max_idle_bytes = Some(n);
        self
    }

    /// Sweeps automatically on this interval (see
    /// [`LocalPoolBuilder::sweep_every`](crate::LocalPoolBuilder::sweep_every)).
    ///
    /// # Panics
    ///
    /// If `interval` is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(1024)
    ///     .sweep_every(Duration::from_millis(500))
    ///     .build();
    /// pool.with(|buf| buf.push(1));
    /// ```
    pub const fn sweep_every(mut self, interval: Duration) -> Self {
        self.knobs.sweep = sealed::Sweep::Every(crate::pool::sweep_interval(interval));
        self
    }

    /// No automatic sweeping: only the pool's `sweep` calls trim (see
    /// [`LocalPoolBuilder::manual_sweep`](crate::LocalPoolBuilder::manual_sweep)).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = BytePool::builder(1024).manual_sweep().build();
    /// drop(pool.get());
    /// pool.sweep();
    /// assert_eq!(pool.stats().idle, 1); // survives one sweep
    /// pool.sweep();
    /// assert_eq!(pool.stats().idle, 0); // dropped by the second
    /// ```
    pub const fn manual_sweep(mut self) -> Self {
        self.knobs.sweep = sealed::Sweep::Manual;
        self
    }
}

impl<P: sealed::Resource + sealed::Contents> ResourceBuilder<P> {
    /// What the pool does to a returned object's contents (default
    /// [`Reset::Zero`]); the pool's docs say what each policy costs there.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::io::CopyPool;
    /// use stashpool::Reset;
    ///
    /// // Copies through buffers that are not zeroed between uses.
    /// let pool = CopyPool::builder(64 * 1024).reset(Reset::Keep).build();
    /// assert_eq!(pool.reset(), Reset::Keep);
    /// ```
    pub const fn reset(mut self, reset: Reset) -> Self {
        self.knobs.reset = reset;
        self
    }
}

impl<P: sealed::Resource + sealed::Preload> ResourceBuilder<P> {
    /// `n` objects made and pooled idle when the pool is first used, by
    /// any call, `stats()` included (Go `bp`'s `Preload`; see
    /// [`LocalPoolBuilder::preload`](crate::LocalPoolBuilder::preload)).
    /// Sweeps trim them as any idle object: preloaded and never taken,
    /// they are gone after two sweeps. Default `0`.
    ///
    /// A multi-size pool preloads each class (or frame shape) with `n`
    /// on that class's first use, `stats()` included. Under a
    /// [`max_idle_bytes`](Self::max_idle_bytes), a preload stops where the
    /// budget is full. `CopyPool`, whose copy buffers and `read_all`
    /// vectors are two kinds, has no `preload`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkPool;
    ///
    /// static CHUNKS: ChunkPool = ChunkPool::builder(16 * 1024).preload(4).build();
    ///
    /// assert_eq!(CHUNKS.stats().created, 4); // made on this first call
    /// let chunks: Vec<_> = (0..4).map(|_| CHUNKS.get()).collect();
    /// assert_eq!(CHUNKS.stats().created, 4); // the first 4 gets made none
    /// # drop(chunks);
    /// ```
    ///
    /// ```
    /// use stashpool::bytes::BytePools;
    ///
    /// let pools = BytePools::builder(1024, 8192).preload(2).build();
    /// let buf = pools.get(3000); // the 3072-byte class's first use
    /// assert_eq!(pools.class_stats(3000).unwrap().created, 2);
    /// assert_eq!(pools.class_stats(3000).unwrap().idle, 1);
    /// # drop(buf);
    /// ```
    ///
    /// `CopyPool` has none:
    ///
    /// ```compile_fail
    /// use stashpool::io::CopyPool;
    ///
    /// let pool = CopyPool::builder(4096).preload(4).build();
    /// ```
    pub const fn preload(mut self, n: usize) -> Self {
        self.knobs.preload = n;
        self
    }
}

impl<P: sealed::Resource> fmt::Debug for ResourceBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceBuilder")
            .field("params", &self.params)
            .field("knobs", &self.knobs)
            .finish()
    }
}

/// What only the crate can name: `Resource::build` takes `Knobs`, so only
/// the crate implements `Resource` (re-exported for users to read), and
/// which pools a `ResourceBuilder` builds is for the crate to decide.
pub(crate) mod sealed {
    use super::*;

    /// What the hidden methods of the crate's public sealed traits
    /// (`Buffer`, `Frame`, `Guard`) take: no one outside the crate can name
    /// it, so no one else can implement them, and their rendered
    /// declarations name no trait a user cannot find.
    #[derive(Clone, Copy, Debug)]
    pub struct Token;

    /// A ready-made pool: what a [`ResourceBuilder`] builds, with the
    /// `build` of that pool's builder.
    ///
    /// Sealed: implemented by the crate's ready-made pools only, whose
    /// `builder` functions make their builders.
    pub trait Resource: Sized {
        /// The pool's own parameters.
        #[doc(hidden)]
        type Params: fmt::Debug;
    }

    /// A ready-made pool whose objects hold contents a user can read: its
    /// builder has [`reset`](ResourceBuilder::reset), and the pool's docs
    /// say what each [`Reset`] policy costs there.
    ///
    /// Sealed: implemented by the crate's pools only.
    pub trait Contents {}

    /// A ready-made pool of one kind of object: its builder has
    /// [`preload`](ResourceBuilder::preload).
    ///
    /// Sealed: implemented by the crate's pools only.
    pub trait Preload {}

    /// How the pool sweeps.
    #[derive(Clone, Copy, Debug, Default)]
    pub enum Sweep {
        /// The core pool's default.
        #[default]
        Default,
        Every(Duration),
        Manual,
    }

    /// The knobs set so far: the core builder's (`None`: the core
    /// default, which this layer does not repeat), the reset policy and
    /// the preload.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Knobs {
        pub(crate) max_stashed: Option<usize>,
        pub(crate) max_idle: Option<usize>,
        pub(crate) max_idle_bytes: Option<usize>,
        pub(crate) sweep: Sweep,
        pub(crate) reset: Reset,
        pub(crate) preload: usize,
    }

    impl Knobs {
        /// Nothing set: `Default`, in a `const` context.
        pub(crate) const DEFAULT: Self = Self {
            max_stashed: None,
            max_idle: None,
            max_idle_bytes: None,
            sweep: Sweep::Default,
            reset: Reset::Zero,
            preload: 0,
        };
    }

    impl Knobs {
        /// Applies the knobs that were set to a core builder.
        pub(crate) const fn apply<T: Send + 'static, R: Recycle<T>>(
            self,
            mut builder: LocalPoolBuilder<T, R>,
        ) -> LocalPoolBuilder<T, R> {
            if let Some(n) = self.max_stashed {
                builder = builder.max_stashed(n);
            }
            if let Some(n) = self.max_idle {
                builder = builder.max_idle(n);
            }
            if let Some(n) = self.max_idle_bytes {
                builder = builder.max_idle_bytes(n);
            }
            builder = match self.sweep {
                Sweep::Every(interval) => builder.sweep_every(interval),
                Sweep::Manual => builder.manual_sweep(),
                Sweep::Default => builder,
            };
            builder.preload(self.preload)
        }

        /// A `LocalPool` of `recycler`'s objects with these knobs.
        pub(crate) const fn pool<T: Send + 'static, R: Recycle<T>>(
            self,
            recycler: R,
        ) -> LocalPool<T, R> {
            self.apply(LocalPool::builder(recycler)).build()
        }
    }
}

/// Implements [`Pool`](crate::Pool) for a resource pool made of
/// `LocalPool`s, with the same three calls as inherent methods that
/// forward to it (so that the common calls need no import of the trait).
///
/// `$pools` lists the pool's `LocalPool`s (or other `Pool`s) as an
/// iterator of `&dyn Pool`, given `$this: &Self`; `$example` makes a pool
/// of this type in the generated doctests.
macro_rules! resource_pool {
    ([$($generics:tt)*] $ty:ty, |$this:ident| $pools:expr, $($example:tt)+) => {
        impl<$($generics)*> $crate::Pool for $ty {
            fn sweep(&self) {
                let $this = self;
                $pools.for_each(|pool: &dyn $crate::Pool| pool.sweep())
            }

            fn clear(&self) {
                let $this = self;
                $pools.for_each(|pool: &dyn $crate::Pool| pool.clear())
            }

            fn stats(&self) -> $crate::Stats {
                let $this = self;
                $pools.map(|pool: &dyn $crate::Pool| pool.stats()).sum()
            }
        }

        impl<$($generics)*> $ty {
            /// One sweep now: objects idle since the previous sweep are
            /// dropped (see [`Pool::sweep`](crate::Pool::sweep)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $($example)+, ";")]
            /// pool.sweep();
            /// ```
            pub fn sweep(&self) {
                <Self as $crate::Pool>::sweep(self)
            }

            /// Drops every idle object now (see
            /// [`Pool::clear`](crate::Pool::clear)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $($example)+, ";")]
            /// pool.clear();
            /// assert_eq!(pool.stats().idle, 0);
            /// ```
            pub fn clear(&self) {
                <Self as $crate::Pool>::clear(self)
            }

            /// Counters since the pool was made, added up over the pools
            /// it is made of (see [`Pool::stats`](crate::Pool::stats)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $($example)+, ";")]
            /// assert_eq!(pool.stats().created, 0);
            /// ```
            pub fn stats(&self) -> $crate::Stats {
                <Self as $crate::Pool>::stats(self)
            }
        }
    };
}

pub(crate) use resource_pool;

/// The calls of a pool of one kind of object, forwarded to its `LocalPool`
/// field `pool`: `get`, `try_get`, `get_owned`, `with` and `put`, with the
/// same docs on every ready-made pool. `$example` makes a pool of this
/// type in the generated doctests.
macro_rules! object_pool {
    ([$($generics:tt)*] $ty:ty, $object:ty, $recycler:ty, $example:literal) => {
        impl<$($generics)*> $ty {
            /// To move the guard to another thread or task, use
            /// [`get_owned`](Self::get_owned) on the pool in an `Arc`: this
            /// guard borrows the pool, so it cannot outlive it (a `static`
            /// pool's guard can go anywhere).
            ///
            /// An object from this thread's stash, else the shared
            /// overflow, else a new one; it goes back to the pool, reset
            /// as the pool's docs say, when the guard drops (see
            /// [`LocalPool::get`](crate::LocalPool::get)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $example, ";")]
            /// let object = pool.get();
            /// drop(object); // back to the pool
            /// assert_eq!(pool.stats().returned, 1);
            /// ```
            #[inline]
            pub fn get(&self) -> $crate::Pooled<'_, $object, $recycler> {
                self.pool.get()
            }

            /// An idle object, if the pool has one; never makes one (see
            /// [`LocalPool::try_get`](crate::LocalPool::try_get)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $example, ";")]
            /// assert!(pool.try_get().is_none()); // nothing made yet
            /// drop(pool.get());
            /// assert!(pool.try_get().is_some());
            /// ```
            #[inline]
            pub fn try_get(&self) -> Option<$crate::Pooled<'_, $object, $recycler>> {
                self.pool.try_get()
            }

            /// [`get`](Self::get) for a pool in an `Arc`: the guard keeps
            /// the pool alive, so it is `'static` and can move to another
            /// thread (see [`LocalPool::get_owned`](crate::LocalPool::get_owned)).
            ///
            /// # Examples
            ///
            /// ```standalone_crate
            #[doc = concat!("let pool = std::sync::Arc::new(", $example, ");")]
            /// let object = pool.get_owned();
            /// std::thread::spawn(move || drop(object)).join().unwrap();
            /// assert_eq!(pool.stats().returned, 1);
            /// ```
            #[inline]
            pub fn get_owned(
                self: &std::sync::Arc<Self>,
            ) -> $crate::PooledOwned<$object, $recycler, Self> {
                // SAFETY: `pool` is a field of the `Arc`'s value.
                unsafe { self.pool.get_owned_by(std::sync::Arc::clone(self)) }
            }

            /// Runs `f` on an object (as from [`get`](Self::get)), which
            /// goes back to the pool after `f` returns, or is dropped if
            /// `f` panics (see [`LocalPool::with`](crate::LocalPool::with)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $example, ";")]
            /// pool.with(|_object| { /* use it */ });
            /// assert_eq!(pool.stats().returned, 1);
            /// ```
            #[inline]
            pub fn with<U>(&self, f: impl FnOnce(&mut $object) -> U) -> U {
                self.pool.with(f)
            }

            /// Gives an object to the pool, as Go's `Put` does: it is reset
            /// as a returned one is, and dropped if it does not fit the
            /// pool (counted in [`Stats::discarded`](crate::Stats::discarded))
            /// (see [`LocalPool::put`](crate::LocalPool::put)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $example, ";")]
            /// let object = stashpool::Pooled::into_inner(pool.get());
            /// pool.put(object);
            /// assert_eq!(pool.stats().idle, 1);
            /// ```
            #[inline]
            pub fn put(&self, object: $object) {
                self.pool.put(object)
            }
        }
    };
}

pub(crate) use object_pool;

/// The `build` of one ready-made pool's builder: `[generics] Pool`, then
/// `|params, knobs| pool`, a `const` expression that makes the pool from
/// the builder's parameters and knobs, then a builder call for the
/// doctest (`"stashpool::bytes::ChunkPool::builder(4096)"`) and the
/// pool's path.
macro_rules! const_build {
    (
        [$($generics:tt)*] $ty:ty,
        |$params:pat_param, $knobs:ident| $make:expr,
        $builder:expr,
        $path:expr
    ) => {
        impl<$($generics)*> $crate::ResourceBuilder<$ty> {
            /// Makes the pool.
            ///
            /// `const`, so a configured pool is a plain `static`: nothing
            /// is allocated until its first use.
            ///
            /// # Panics
            ///
            /// If the pool's parameters are invalid (its `new` lists what
            /// it refuses); in a `static`, at compile time.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("static POOL: ", $path, " = ", $builder, ".max_idle(8).build();")]
            ///
            /// assert_eq!(POOL.stats().created, 0); // nothing made yet
            /// ```
            pub const fn build(self) -> $ty {
                let $params = self.params;
                let $knobs = self.knobs;
                $make
            }
        }
    };
}

pub(crate) use const_build;

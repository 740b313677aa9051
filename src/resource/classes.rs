//! The size-class layer under every multi-size pool (Go `bp`'s
//! `Multi*Pool`s): which sub-pool serves a request, and how the sub-pools
//! are kept.
//!
//! Two ways to pick a sub-pool, for two kinds of request:
//!
//! * [`SizeClasses`]: a request for `len` bytes goes to the smallest class
//!   that holds it, an index computed from `len` with no search: one class
//!   per power of two (`mmap::MmapPools`, whose maps are whole pages), or
//!   four, as jemalloc and mimalloc space theirs, so that no request gets
//!   more than a quarter above what it asked for (`bytes::BytePools`);
//! * [`Shapes`]: a request for a frame of one shape goes to that shape's
//!   own pool, made on first use (`image::RgbaPools`, `image::YCbCrPools`).
//!   Programs use a handful of frame shapes, so a short list that only
//!   ever grows serves them: a lookup walks it without a lock, and a pool,
//!   once made, stays where it is for as long as the multi-size pool
//!   lives, so guards can borrow it.
//!
//! [`SizedGuard`] is the guard of the byte-sized pools, which also serve
//! requests above their largest class, with an object that is not pooled.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::lazy::Lazy;
use crate::pool::budget::{Family, FamilyRef};
use crate::resource::sealed::{Knobs, Token};
use crate::sync::Arc;
use crate::{LocalPool, Pooled, PooledOwned, Recycle, Reset};

/// One `LocalPool` per class from `min` to `max` bytes (both rounded up to
/// a class), made on first use so that a multi-size pool can be made in a
/// `const` context. The classes are `2^k`, and with four per doubling also
/// `1.25`, `1.5` and `1.75` times `2^k` (every size up to 4 is a class).
///
/// The pools are made without a lock (`Lazy`: racing first users each make
/// a set, one is kept), so that a `fork()` cannot catch them half made
/// ([`implementation`](crate::implementation), section 7a); once made they
/// stay where they are until the multi-size pool drops, so guards can
/// borrow them.
pub(crate) struct SizeClasses<T: Send + 'static, R: Recycle<T>> {
    pools: Lazy<Classes<T, R>>,
    /// Classes per doubling, as a power of two: 0 (one) or 2 (four).
    grid: u32,
    /// The index of the smallest class on the grid of every class.
    first: usize,
    max: usize,
    knobs: Knobs,
    /// The recycler of a class of objects of this size.
    recycler: fn(usize, Reset) -> R,
}

/// The classes' pools, and the byte budget they share.
struct Classes<T: Send + 'static, R: Recycle<T>> {
    /// `pools[i]` serves requests of up to the `i`-th class's size.
    /// Dropped before `family`, which they refer to.
    pools: Box<[LocalPool<T, R>]>,
    /// With `max_idle_bytes`, one budget for every class, not one each: a
    /// class per quarter of a doubling would multiply it many times over.
    #[allow(dead_code)] // Kept for the pools, which refer to it.
    family: Option<Arc<Family>>,
}

/// The largest class a pool of power-of-two classes may have: the largest
/// power of two a Rust allocation can hold.
pub(crate) const MAX_CLASS: usize = 1 << (usize::BITS - 2);

impl<T: Send + 'static, R: Recycle<T>> SizeClasses<T, R> {
    /// Classes for requests of `min` to `max` bytes, `2^grid` per
    /// doubling, each pool made from `knobs` and the recycler `recycler`
    /// gives for its size.
    ///
    /// # Panics
    ///
    /// With `message`, if `min` is zero, `min > max` or `max > MAX_CLASS`.
    pub(crate) const fn new(
        (min, max): (usize, usize),
        grid: u32,
        knobs: Knobs,
        recycler: fn(usize, Reset) -> R,
        message: &'static str,
    ) -> Self {
        if min == 0 || min > max || max > MAX_CLASS {
            panic!("{}", message);
        }
        Self {
            pools: Lazy::new(),
            grid,
            first: index(grid, class_above(grid, min)),
            max,
            knobs,
            recycler,
        }
    }

    /// Every class's pool, smallest first, made now if need be.
    fn pools(&self) -> &[LocalPool<T, R>] {
        let classes = self.pools.get_or_make(|| {
            let family = self
                .knobs
                .max_idle_bytes
                .map(|max| Arc::new(Family::new(max)));
            let pools = self
                .sizes()
                .map(|size| {
                    let recycler = (self.recycler)(size, self.knobs.reset);
                    let builder = self.knobs.apply(LocalPool::builder(recycler));
                    match &family {
                        Some(family) => builder.share_budget(FamilyRef::new(family)),
                        None => builder,
                    }
                    .build()
                })
                .collect();
            Classes { pools, family }
        });
        &classes.pools
    }

    /// The pools made so far: all of them, or none before the first use.
    pub(crate) fn made(&self) -> &[LocalPool<T, R>] {
        self.pools.get().map_or(&[], |classes| &classes.pools)
    }

    /// The pool of the smallest class that holds `len` bytes, or `None`
    /// when `len > max`.
    #[inline]
    pub(crate) fn get(&self, len: usize) -> Option<&LocalPool<T, R>> {
        if len > self.max {
            return None;
        }
        // `len <= max <= MAX_CLASS`, so the class cannot overflow.
        let class = index(self.grid, class_above(self.grid, len.max(1)));
        self.pools().get(class.saturating_sub(self.first))
    }

    /// The pool of the class an object of `size` bytes belongs to: the
    /// largest class of at most `size`, else the smallest (whose recycler
    /// then refuses the object as it would a returned one that shrank).
    pub(crate) fn home(&self, size: usize) -> &LocalPool<T, R> {
        let pools = self.pools();
        let class = match size {
            0 => 0,
            _ => index(self.grid, class_below(self.grid, size)).saturating_sub(self.first),
        };
        &pools[class.min(pools.len() - 1)]
    }

    /// The class sizes, smallest first.
    pub(crate) fn sizes(&self) -> impl Iterator<Item = usize> + '_ {
        let last = index(self.grid, class_above(self.grid, self.max));
        (self.first..=last).map(|class| size(self.grid, class))
    }

    /// The largest request that is pooled.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// The knobs each class is made with.
    pub(crate) fn knobs(&self) -> &Knobs {
        &self.knobs
    }
}

// === the class grid ===
//
// With `2^g` classes per doubling, the classes are every size up to `2^g`,
// then, above each `2^k`, the multiples of `2^(k-g)` up to `2^(k+1)`. A
// class's index counts them from 1.

/// The distance from a class of `2^k <= size < 2^(k+1)` to the next.
const fn step(grid: u32, size: usize) -> usize {
    match size.ilog2().checked_sub(grid) {
        Some(shift) => 1 << shift,
        None => 1,
    }
}

/// The smallest class of at least `len` (`1 <= len <= MAX_CLASS`).
const fn class_above(grid: u32, len: usize) -> usize {
    let step = step(grid, len);
    len.div_ceil(step) * step
}

/// The largest class of at most `size` (`size >= 1`).
const fn class_below(grid: u32, size: usize) -> usize {
    let step = step(grid, size);
    size / step * step
}

/// The index of `class`, a class on the grid.
const fn index(grid: u32, class: usize) -> usize {
    let per = 1 << grid;
    if class <= per {
        return class - 1;
    }
    let k = class.ilog2();
    per - 1 + per * (k - grid) as usize + ((class >> (k - grid)) - per)
}

/// The size of the class with index `index`.
const fn size(grid: u32, index: usize) -> usize {
    let per = 1 << grid;
    if index < per {
        return index + 1;
    }
    let above = index - (per - 1);
    let (octave, nth) = (above / per, above % per);
    (per + nth) << octave
}

/// A multi-size pool of byte-sized objects, `struct $ty { classes:
/// SizeClasses<$object, $recycler> }`: its `new` and `builder`, the calls
/// `get`, `try_get`, `get_owned`, `with` and `put` by length, its classes'
/// sizes and counters, `Debug`, and `Pool`. `$class_recycler(size, reset)`
/// is a class's recycler, `$bad` the panic message for bad bounds,
/// `$alone(len)` makes an object for a request above the largest class,
/// `$size(&object)` is the size `put` files an object under, and `$path`
/// the type's path, for the doctests.
macro_rules! class_pool {
    (
        $ty:ident,
        $object:ty,
        $recycler:ty,
        $grid:expr,
        $class_recycler:expr,
        $bad:expr,
        $alone:expr,
        $size:expr,
        $path:literal
    ) => {
        impl $ty {
            /// A pool with classes from `min` to `max` bytes (each rounded
            /// up to a class; the type's docs give the spacing); requests
            /// above `max` are not pooled.
            ///
            /// `const`, so a pool can be a `static`; the classes are made
            /// on first use.
            ///
            /// # Panics
            ///
            /// If `min` is zero, `min > max`, or `max` is larger than
            /// 2<sup>62</sup> bytes on 64-bit targets.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// assert_eq!(pool.classes().next(), Some(4096));
            /// ```
            pub const fn new(min: usize, max: usize) -> Self {
                Self::with_knobs((min, max), $crate::resource::sealed::Knobs::DEFAULT)
            }

            /// A builder, to set the core knobs (they apply to every
            /// class, `max_idle` to each class, `max_idle_bytes` to all
            /// classes together).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::builder(4096, 1 << 20).max_idle(8).build();")]
            /// pool.with(10, |object| object.len());
            /// assert_eq!(pool.stats().returned, 1);
            /// ```
            pub const fn builder(min: usize, max: usize) -> $crate::ResourceBuilder<Self> {
                $crate::ResourceBuilder::new((min, max))
            }

            const fn with_knobs(
                (min, max): (usize, usize),
                knobs: $crate::resource::sealed::Knobs,
            ) -> Self {
                Self {
                    classes: $crate::resource::classes::SizeClasses::new(
                        (min, max),
                        $grid,
                        knobs,
                        $class_recycler,
                        $bad,
                    ),
                }
            }

            /// To move the guard to another thread or task, use
            /// [`get_owned`](Self::get_owned) on the pool in an `Arc`: this
            /// guard borrows the pool, so it cannot outlive it (a `static`
            /// pool's guard can go anywhere).
            ///
            /// An object of at least `len` bytes from the smallest class
            /// that holds `len`, reset as the pool's docs say; or, when
            /// `len` is above the largest class, one made alone and
            /// dropped with its guard.
            ///
            /// # Panics
            ///
            /// If a new object is needed and cannot be allocated (for
            /// example when `len` is larger than `isize::MAX`).
            ///
            /// # Examples
            ///
            /// ```
            /// use stashpool::SizedGuard;
            ///
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// let object = pool.get(100);
            /// assert!(SizedGuard::is_pooled(&object));
            /// assert!(!SizedGuard::is_pooled(&pool.get(1 << 21)));
            /// ```
            #[inline]
            pub fn get(&self, len: usize) -> $crate::SizedGuard<$crate::Pooled<'_, $object, $recycler>> {
                match self.classes.get(len) {
                    Some(pool) => $crate::SizedGuard::pooled(pool.get()),
                    None => $crate::SizedGuard::alone($alone(len)),
                }
            }

            /// An idle object of the class that holds `len` bytes, if it
            /// has one; never makes one, and `None` above the largest
            /// class (see [`LocalPool::try_get`](crate::LocalPool::try_get)).
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// assert!(pool.try_get(100).is_none()); // nothing made yet
            /// drop(pool.get(100));
            /// assert!(pool.try_get(100).is_some());
            /// ```
            #[inline]
            pub fn try_get(
                &self,
                len: usize,
            ) -> Option<$crate::SizedGuard<$crate::Pooled<'_, $object, $recycler>>> {
                self.classes.get(len)?.try_get().map($crate::SizedGuard::pooled)
            }

            /// [`get`](Self::get) for a pool in an `Arc`: the guard keeps
            /// the pool alive, so it is `'static` and can move to another
            /// thread.
            ///
            /// # Examples
            ///
            /// ```standalone_crate
            #[doc = concat!("let pool = std::sync::Arc::new(", $path, "::new(4096, 1 << 20));")]
            /// let object = pool.get_owned(100);
            /// std::thread::spawn(move || drop(object)).join().unwrap();
            /// assert_eq!(pool.stats().returned, 1);
            /// ```
            #[inline]
            pub fn get_owned(
                self: &std::sync::Arc<Self>,
                len: usize,
            ) -> $crate::SizedGuard<$crate::PooledOwned<$object, $recycler, Self>> {
                match self.classes.get(len) {
                    // SAFETY: the class's pool lives in `classes`, a field
                    // of the `Arc`'s value, which keeps its pools in place
                    // until it drops.
                    Some(pool) => $crate::SizedGuard::pooled(unsafe {
                        pool.get_owned_by(std::sync::Arc::clone(self))
                    }),
                    None => $crate::SizedGuard::alone($alone(len)),
                }
            }

            /// Runs `f` on an object of at least `len` bytes (as from
            /// [`get`](Self::get)), which goes back to its class after `f`
            /// returns, or is dropped if `f` panics.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// let size = pool.with(100, |object| object.len());
            /// assert_eq!(pool.stats().returned, 1);
            /// # let _ = size;
            /// ```
            #[inline]
            pub fn with<U>(&self, len: usize, f: impl FnOnce(&mut $object) -> U) -> U {
                match self.classes.get(len) {
                    Some(pool) => pool.with(f),
                    None => f(&mut $alone(len)),
                }
            }

            /// Gives an object to the pool, as Go's `Put` does: to the
            /// class of the largest size it can serve, which resets it as
            /// a returned object and keeps it if it fits there (see the
            /// pool's docs); one that fits no class is dropped and counted
            /// in [`Stats::discarded`](crate::Stats::discarded).
            ///
            /// # Examples
            ///
            /// ```
            /// use stashpool::SizedGuard;
            ///
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// let object = SizedGuard::into_inner(pool.get(100));
            /// pool.put(object);
            /// assert_eq!(pool.stats().idle, 1);
            /// ```
            pub fn put(&self, object: $object) {
                self.classes.home($size(&object)).put(object)
            }

            /// The counters of the class that serves requests of `len`
            /// bytes, or `None` if such requests are not pooled.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// drop(pool.get(100));
            /// assert_eq!(pool.class_stats(100).unwrap().idle, 1);
            /// assert!(pool.class_stats(1 << 21).is_none());
            /// ```
            pub fn class_stats(&self, len: usize) -> Option<$crate::Stats> {
                self.classes.get(len).map($crate::LocalPool::stats)
            }

            /// The class sizes in bytes, smallest first.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// let classes: Vec<usize> = pool.classes().collect();
            /// assert_eq!((classes[0], classes[classes.len() - 1]), (4096, 1 << 20));
            /// assert!(classes.windows(2).all(|pair| pair[1] > pair[0]));
            /// ```
            pub fn classes(&self) -> impl Iterator<Item = usize> + '_ {
                self.classes.sizes()
            }

            /// The largest request that is pooled, in bytes: larger ones
            /// are made alone.
            ///
            /// # Examples
            ///
            /// ```
            #[doc = concat!("let pool = ", $path, "::new(4096, 1 << 20);")]
            /// assert_eq!(pool.max_capacity(), 1 << 20);
            /// ```
            pub fn max_capacity(&self) -> usize {
                self.classes.max()
            }
        }

        impl $crate::resource::sealed::Resource for $ty {
            type Params = (usize, usize);
        }

        impl $crate::resource::sealed::Preload for $ty {}

        $crate::resource::const_build!(
            [] $ty,
            |params, knobs| $ty::with_knobs(params, knobs),
            concat!($path, "::builder(4096, 1 << 20)"),
            $path
        );

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("classes", &self.classes().collect::<Vec<_>>())
                    .field("max_capacity", &self.max_capacity())
                    .field("knobs", &self.classes.knobs())
                    .field("stats", &self.stats())
                    .finish()
            }
        }

        $crate::resource::resource_pool!(
            [] $ty,
            |this| this.classes.made().iter().map(|pool| pool as &dyn $crate::Pool),
            concat!($path, "::new(4096, 1 << 20)")
        );
    };
}

pub(crate) use class_pool;

/// Pools made on first use, one per key (a frame's shape).
///
/// Its links are [`Lazy`]s, published with one compare-and-swap: a
/// `fork()` that catches a thread adding a key leaves the child the link
/// unmade, never half made ([`implementation`](crate::implementation),
/// section 7a).
#[cfg(feature = "image")]
pub(crate) struct Shapes<K, P> {
    head: Lazy<Node<K, P>>,
}

#[cfg(feature = "image")]
struct Node<K, P> {
    key: K,
    pool: P,
    next: Lazy<Node<K, P>>,
}

#[cfg(feature = "image")]
impl<K: Copy + Eq, P> Shapes<K, P> {
    pub(crate) const fn new() -> Self {
        Self { head: Lazy::new() }
    }

    /// The pool for `key`, made with `make` if there is none yet.
    ///
    /// Two threads that add different keys at once both succeed: the one
    /// that loses the race for a link drops the pool it made and moves on
    /// to the next.
    #[inline]
    pub(crate) fn get(&self, key: K, make: impl Fn(K) -> P) -> &P {
        let mut link = &self.head;
        loop {
            let node = link.get_or_make(|| Node {
                key,
                pool: make(key),
                next: Lazy::new(),
            });
            if node.key == key {
                return &node.pool;
            }
            link = &node.next;
        }
    }

    /// Every pool made so far, with its key, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &P)> + '_ {
        let mut link = &self.head;
        std::iter::from_fn(move || {
            let node = link.get()?;
            link = &node.next;
            Some((node.key, &node.pool))
        })
    }
}

#[cfg(feature = "image")]
impl<K, P> Drop for Shapes<K, P> {
    fn drop(&mut self) {
        // Unlink the nodes one by one, so a long list cannot overflow the
        // stack with nested drops.
        let mut next = self.head.take();
        while let Some(mut node) = next {
            next = node.next.take();
        }
    }
}

#[cfg(feature = "image")]
impl<K: Copy + Eq + fmt::Debug, P: fmt::Debug> fmt::Debug for Shapes<K, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A guard of a byte-sized multi-size pool: an object from one of its
/// classes, which goes back there when dropped, or, for a request above
/// the largest class, an object of its own, dropped with the guard.
///
/// Dereferences to the object.
///
/// # Examples
///
/// ```
/// use stashpool::bytes::BytePools;
/// use stashpool::SizedGuard;
///
/// let pool = BytePools::new(64, 1024);
/// assert!(SizedGuard::is_pooled(&pool.get(100)));
/// assert!(!SizedGuard::is_pooled(&pool.get(5000))); // above the largest class
/// ```
pub struct SizedGuard<G: Deref>
where
    G::Target: std::marker::Sized,
{
    repr: Repr<G, G::Target>,
}

enum Repr<G, T> {
    Pooled(G),
    Alone(T),
}

impl<G: Deref> SizedGuard<G>
where
    G::Target: std::marker::Sized,
{
    pub(crate) fn pooled(guard: G) -> Self {
        Self {
            repr: Repr::Pooled(guard),
        }
    }

    pub(crate) fn alone(object: G::Target) -> Self {
        Self {
            repr: Repr::Alone(object),
        }
    }

    /// Whether the object came from (and goes back to) a class, rather
    /// than being made alone for a request above the largest class.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePools;
    /// use stashpool::SizedGuard;
    ///
    /// let pool = BytePools::new(64, 1024);
    /// assert!(SizedGuard::is_pooled(&pool.get(1024)));
    /// assert!(!SizedGuard::is_pooled(&pool.get(1025)));
    /// ```
    pub fn is_pooled(this: &Self) -> bool {
        matches!(this.repr, Repr::Pooled(_))
    }
}

/// A guard of a pooled object, [`Pooled`] or [`PooledOwned`]: what a
/// [`SizedGuard`] can hold.
///
/// Sealed: implemented by the crate's two guards only.
pub trait Guard: DerefMut
where
    Self::Target: Sized,
{
    /// Keeps the object; it will not go back to the pool.
    #[doc(hidden)]
    fn into_object(this: Self, _: Token) -> Self::Target;
}

impl<T: Send + 'static, R: Recycle<T>> Guard for Pooled<'_, T, R> {
    fn into_object(this: Self, _: Token) -> T {
        Pooled::into_inner(this)
    }
}

impl<T: Send + 'static, R: Recycle<T>, P> Guard for PooledOwned<T, R, P> {
    fn into_object(this: Self, _: Token) -> T {
        PooledOwned::into_inner(this)
    }
}

impl<G: Guard> SizedGuard<G>
where
    G::Target: Sized,
{
    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function, so it cannot shadow a method of the object.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePools;
    /// use stashpool::SizedGuard;
    ///
    /// let pool = BytePools::new(64, 1024);
    /// let kept: Vec<u8> = SizedGuard::into_inner(pool.get(10));
    /// assert!(kept.capacity() >= 64);
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub fn into_inner(this: Self) -> G::Target {
        match this.repr {
            Repr::Pooled(guard) => G::into_object(guard, Token),
            Repr::Alone(object) => object,
        }
    }
}

impl<G: DerefMut> Deref for SizedGuard<G>
where
    G::Target: std::marker::Sized,
{
    type Target = G::Target;

    #[inline]
    fn deref(&self) -> &G::Target {
        match &self.repr {
            Repr::Pooled(guard) => guard,
            Repr::Alone(object) => object,
        }
    }
}

impl<G: DerefMut> DerefMut for SizedGuard<G>
where
    G::Target: std::marker::Sized,
{
    #[inline]
    fn deref_mut(&mut self) -> &mut G::Target {
        match &mut self.repr {
            Repr::Pooled(guard) => guard,
            Repr::Alone(object) => object,
        }
    }
}

impl<G: DerefMut> fmt::Debug for SizedGuard<G>
where
    G::Target: std::marker::Sized + fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// What the object is a view of, the guard is, as for [`Pooled`]: a
/// `BytePools` buffer is an `AsRef<[u8]>`.
impl<G: DerefMut, U: ?Sized> AsRef<U> for SizedGuard<G>
where
    G::Target: Sized + AsRef<U>,
{
    fn as_ref(&self) -> &U {
        (**self).as_ref()
    }
}

/// Through `DerefMut`, so the guard records the write.
impl<G: DerefMut, U: ?Sized> AsMut<U> for SizedGuard<G>
where
    G::Target: Sized + AsMut<U>,
{
    fn as_mut(&mut self) -> &mut U {
        (**self).as_mut()
    }
}

/// A sized guard is whatever its object is for I/O, as [`Pooled`] is: a
/// pooled `Vec<u8>` is an `io::Write`.
///
/// ```
/// use stashpool::bytes::BytePools;
///
/// let pool = BytePools::new(64, 1024);
/// let mut buf = pool.get(100);
/// std::io::copy(&mut &b"copied"[..], &mut buf).unwrap();
/// assert_eq!(&buf[..], b"copied");
/// ```
impl<G: DerefMut> std::io::Write for SizedGuard<G>
where
    G::Target: std::io::Write + Sized,
{
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (**self).write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        (**self).write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        (**self).flush()
    }
}

/// A sized guard of a reader is a reader.
impl<G: DerefMut> std::io::Read for SizedGuard<G>
where
    G::Target: std::io::Read + Sized,
{
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (**self).read(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(size: usize, _: Reset) -> impl Fn() -> usize + Send + Sync {
        move || size
    }

    #[test]
    fn classes_round_up_to_powers_of_two() {
        let classes = SizeClasses::new((100, 1000), 0, Knobs::DEFAULT, sized, "test pool");
        assert_eq!(classes.sizes().collect::<Vec<_>>(), [128, 256, 512, 1024]);
        assert!(classes.made().is_empty(), "made on first use");
        let class = |len| classes.get(len).map(|pool| *pool.get());
        assert_eq!(class(0), Some(128));
        assert_eq!(class(129), Some(256));
        assert_eq!(class(1000), Some(1024));
        assert_eq!(class(1001), None);
        assert_eq!(classes.made().len(), 4);
    }

    /// Making the classes takes no lock: a thread caught making them holds
    /// up no other, as a `fork()` child would be held up for ever by a
    /// parent's thread caught making them at the fork
    /// ([`implementation`](crate::implementation), section 7a).
    #[test]
    fn no_thread_waits_for_another_to_make_the_classes() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc;
        use std::time::Duration;

        static INSIDE: AtomicBool = AtomicBool::new(false);
        static RELEASE: AtomicBool = AtomicBool::new(false);
        thread_local! {
            static HOLD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        /// `sized`, but held on a thread marked `HOLD` until `RELEASE`.
        fn held(size: usize, reset: Reset) -> impl Fn() -> usize + Send + Sync {
            if HOLD.get() {
                INSIDE.store(true, Ordering::Release);
                while !RELEASE.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            }
            sized(size, reset)
        }

        let classes = SizeClasses::new((1, 4), 0, Knobs::DEFAULT, held, "test pool");
        let classes = &classes;
        std::thread::scope(|s| {
            let holder = s.spawn(|| {
                HOLD.set(true);
                classes.get(1).map(|pool| *pool.get())
            });
            while !INSIDE.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let (tx, rx) = mpsc::channel();
            s.spawn(move || tx.send(classes.get(4).map(|pool| *pool.get())));
            // A deadline only so that a thread that waits fails the test
            // rather than hanging it; a passing run does not wait on it.
            let got = rx.recv_timeout(Duration::from_secs(30));
            RELEASE.store(true, Ordering::Release);
            assert_eq!(
                got,
                Ok(Some(4)),
                "a thread waited for another to make the classes"
            );
            assert_eq!(holder.join().unwrap(), Some(1));
        });
    }

    #[test]
    fn an_object_is_filed_under_the_largest_class_it_can_serve() {
        let classes = SizeClasses::new((128, 1024), 0, Knobs::DEFAULT, sized, "test pool");
        let home = |size| *classes.home(size).get();
        assert_eq!(home(0), 128);
        assert_eq!(home(100), 128);
        assert_eq!(home(255), 128);
        assert_eq!(home(256), 256);
        assert_eq!(home(1 << 20), 1024);
        let quarters = SizeClasses::new((128, 1024), 2, Knobs::DEFAULT, sized, "test pool");
        let home = |size| *quarters.home(size).get();
        assert_eq!(
            (home(100), home(159), home(160), home(1000)),
            (128, 128, 160, 896)
        );
    }

    /// With `max_idle_bytes`, one budget for all the classes: objects of
    /// `size_of::<usize>()` bytes each (the default footprint), two of
    /// three kept whatever their class.
    #[test]
    fn the_classes_share_one_byte_budget() {
        let knobs = Knobs {
            max_idle_bytes: Some(2 * std::mem::size_of::<usize>()),
            ..Knobs::DEFAULT
        };
        let classes = SizeClasses::new((1, 20), 2, knobs, sized, "test pool");
        let held: Vec<_> = [3, 9, 17]
            .iter()
            .map(|&len| classes.get(len).unwrap().get())
            .collect();
        drop(held);
        let stats: Vec<_> = classes.made().iter().map(LocalPool::stats).collect();
        let total: crate::Stats = stats.iter().copied().sum();
        assert_eq!((total.idle, total.rejected), (2, 1), "{total:?}");
        assert_eq!(stats.iter().filter(|stats| stats.returned == 1).count(), 2);
    }

    #[test]
    fn four_classes_per_doubling() {
        let classes = SizeClasses::new((65, 1000), 2, Knobs::DEFAULT, sized, "test pool");
        let sizes: Vec<usize> = classes.sizes().collect();
        assert_eq!(
            sizes,
            [
                80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024
            ]
        );
        let class = |len| classes.get(len).map(|pool| *pool.get());
        assert_eq!(
            (class(1), class(65), class(81), class(128), class(129)),
            (Some(80), Some(80), Some(96), Some(128), Some(160))
        );
        assert_eq!((class(1000), class(1001)), (Some(1024), None));
        let small = SizeClasses::new((1, 20), 2, Knobs::DEFAULT, sized, "test pool");
        assert_eq!(
            small.sizes().collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20]
        );
    }

    /// The grid's index and size are inverse, and every class is within a
    /// quarter of every length it serves (from the fourth class on: below
    /// it, every size is a class).
    #[test]
    fn the_grid_wastes_at_most_a_quarter() {
        // Up to 2^60 bytes, on either grid.
        for (grid, classes) in [(0, 60), (2, 4 * 58)] {
            for index in 0..classes {
                let class = size(grid, index);
                assert_eq!(super::index(grid, class), index, "grid {grid}");
                assert_eq!(class_above(grid, class), class);
                assert_eq!(class_below(grid, class), class);
                assert_eq!(class_above(grid, class + 1), size(grid, index + 1));
            }
        }
        for len in (1..100_000).chain([MAX_CLASS / 3, MAX_CLASS - 1, MAX_CLASS]) {
            let class = class_above(2, len);
            assert!(class >= len && class - len <= len / 4, "{len} -> {class}");
        }
    }

    #[test]
    #[cfg(feature = "image")]
    fn shapes_are_made_once_each() {
        let shapes = Shapes::new();
        let made = std::cell::Cell::new(0);
        let make = |key: u32| {
            made.set(made.get() + 1);
            key * 10
        };
        assert_eq!(*shapes.get(1, make), 10);
        assert_eq!(*shapes.get(2, make), 20);
        assert_eq!(*shapes.get(1, make), 10);
        assert_eq!(made.get(), 2);
        assert_eq!(shapes.iter().map(|(k, _)| k).collect::<Vec<_>>(), [1, 2]);
    }

    /// Threads that add the same keys at once, each in its own order, all
    /// get the one pool kept for a key; the list holds each key once.
    #[test]
    #[cfg(feature = "image")]
    fn racing_threads_keep_one_pool_per_key() {
        const KEYS: u32 = if cfg!(miri) { 8 } else { 64 };
        let shapes = Shapes::new();
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for thread in 0..4 {
                let (shapes, barrier) = (&shapes, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for i in 0..KEYS {
                        let key = (i * (2 * thread + 1)) % KEYS;
                        let pool = shapes.get(key, Box::new);
                        assert_eq!(**pool, key);
                        assert!(std::ptr::eq(pool, shapes.get(key, |_| unreachable!())));
                    }
                });
            }
        });
        let mut keys: Vec<u32> = shapes.iter().map(|(key, _)| key).collect();
        keys.sort_unstable();
        assert_eq!(keys, (0..KEYS).collect::<Vec<_>>());
    }
}

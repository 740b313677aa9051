//! The size-class layer under every multi-size pool (Go `bp`'s
//! `Multi*Pool`s): which sub-pool serves a request, and how the sub-pools
//! are kept.
//!
//! Two ways to pick a sub-pool, for two kinds of request:
//!
//! * [`SizeClasses`]: a request for `len` bytes goes to the smallest
//!   power-of-two class that holds it, an index computed from `len` with no
//!   search (`bytes::SizeClassPool`, `mmap::MmapClassPool`);
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
#[cfg(feature = "image")]
use std::sync::OnceLock;

/// One pool per power-of-two class from `min` to `max` bytes (both
/// rounded up).
pub(crate) struct SizeClasses<P> {
    /// `pools[i]` serves requests of up to `min_class << i` bytes.
    pools: Box<[P]>,
    min_class: usize,
    max: usize,
}

/// The largest class a pool of power-of-two classes may have: the largest
/// power of two a Rust allocation can hold.
pub(crate) const MAX_CLASS: usize = 1 << (usize::BITS - 2);

impl<P> SizeClasses<P> {
    /// Classes for requests of `min` to `max` bytes, each pool made by
    /// `make` from its class size.
    ///
    /// # Panics
    ///
    /// If `min` is zero, `min > max` or `max > MAX_CLASS`, with a message
    /// that names `pool`.
    pub(crate) fn new(min: usize, max: usize, pool: &str, make: impl FnMut(usize) -> P) -> Self {
        assert!(
            min > 0,
            "stashpool: {pool}: the smallest class must be non-zero"
        );
        assert!(
            min <= max,
            "stashpool: {pool}: the smallest class must not exceed the largest"
        );
        assert!(
            max <= MAX_CLASS,
            "stashpool: {pool}: the largest class must be at most 2^(usize::BITS - 2) bytes"
        );
        let (min_class, max_class) = (min.next_power_of_two(), max.next_power_of_two());
        let count = max_class.trailing_zeros() - min_class.trailing_zeros() + 1;
        Self {
            pools: (0..count)
                .map(|class| min_class << class)
                .map(make)
                .collect(),
            min_class,
            max,
        }
    }

    /// The pool of the smallest class that holds `len` bytes, or `None`
    /// when `len > max`.
    #[inline]
    pub(crate) fn get(&self, len: usize) -> Option<&P> {
        if len > self.max {
            return None;
        }
        // `len <= max <= MAX_CLASS`, so this cannot overflow.
        let size = len.max(self.min_class).next_power_of_two();
        let class = (size.trailing_zeros() - self.min_class.trailing_zeros()) as usize;
        self.pools.get(class)
    }

    /// The class sizes, smallest first.
    pub(crate) fn sizes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.pools.len()).map(|class| self.min_class << class)
    }

    /// Every class's pool, smallest first.
    pub(crate) fn pools(&self) -> &[P] {
        &self.pools
    }

    /// The largest request that is pooled.
    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

/// Pools made on first use, one per key (a frame's shape).
///
/// Its links are `OnceLock`s, the one thing made under a lock that a
/// `fork()` can catch half made
/// ([`implementation`](crate::implementation), section 7a).
#[cfg(feature = "image")]
pub(crate) struct Shapes<K, P> {
    head: OnceLock<Box<Node<K, P>>>,
}

#[cfg(feature = "image")]
struct Node<K, P> {
    key: K,
    pool: P,
    next: OnceLock<Box<Node<K, P>>>,
}

#[cfg(feature = "image")]
impl<K: Copy + Eq, P> Shapes<K, P> {
    pub(crate) const fn new() -> Self {
        Self {
            head: OnceLock::new(),
        }
    }

    /// The pool for `key`, made with `make` if there is none yet.
    ///
    /// Two threads that add different keys at once both succeed: the one
    /// that loses the race for a slot moves on to the next.
    #[inline]
    pub(crate) fn get(&self, key: K, make: impl Fn(K) -> P) -> &P {
        let mut slot = &self.head;
        loop {
            let node = match slot.get() {
                Some(node) => node,
                None => slot.get_or_init(|| {
                    Box::new(Node {
                        key,
                        pool: make(key),
                        next: OnceLock::new(),
                    })
                }),
            };
            if node.key == key {
                return &node.pool;
            }
            slot = &node.next;
        }
    }

    /// Every pool made so far, with its key, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &P)> + '_ {
        let mut slot = &self.head;
        std::iter::from_fn(move || {
            let node = slot.get()?;
            slot = &node.next;
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
/// use stashpool::bytes::{SizeClassPool, SizedBuffer};
///
/// let pool = SizeClassPool::new(64, 1024);
/// assert!(SizedBuffer::is_pooled(&pool.get(100)));
/// assert!(!SizedBuffer::is_pooled(&pool.get(5000))); // above the largest class
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

/// A guard that can give up its object: what [`SizedGuard::into_inner`] needs
/// of the guards it wraps. Implemented by the crate's guards only.
pub trait IntoInner: Deref + private::Sealed {
    /// Keeps the object; it will not go back to the pool.
    #[doc(hidden)]
    fn into_inner(this: Self) -> Self::Target;
}

mod private {
    pub trait Sealed {}
}

impl<B: crate::bytes::Buffer> private::Sealed for crate::bytes::PooledBuffer<'_, B> {}
impl<B: crate::bytes::Buffer> IntoInner for crate::bytes::PooledBuffer<'_, B> {
    fn into_inner(this: Self) -> B {
        crate::Pooled::into_inner(this)
    }
}

impl<T: Send + 'static, W: crate::resource::reset::Wipe<T>> private::Sealed
    for crate::resource::reset::Tracked<'_, T, W>
{
}
impl<T: Send + 'static, W: crate::resource::reset::Wipe<T>> IntoInner
    for crate::resource::reset::Tracked<'_, T, W>
{
    fn into_inner(this: Self) -> T {
        crate::resource::reset::Tracked::into_inner(this)
    }
}

impl<G: IntoInner> SizedGuard<G>
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

    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function, so it cannot shadow a method of the object.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::{SizeClassPool, SizedBuffer};
    ///
    /// let pool = SizeClassPool::new(64, 1024);
    /// let kept: Vec<u8> = SizedBuffer::into_inner(pool.get(10));
    /// assert!(kept.capacity() >= 64);
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub fn into_inner(this: Self) -> G::Target {
        match this.repr {
            Repr::Pooled(guard) => G::into_inner(guard),
            Repr::Alone(object) => object,
        }
    }

    /// Whether the object came from (and goes back to) a class, rather
    /// than being made alone for a request above the largest class.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::{SizeClassPool, SizedBuffer};
    ///
    /// let pool = SizeClassPool::new(64, 1024);
    /// assert!(SizedBuffer::is_pooled(&pool.get(1024)));
    /// assert!(!SizedBuffer::is_pooled(&pool.get(1025)));
    /// ```
    pub fn is_pooled(this: &Self) -> bool {
        matches!(this.repr, Repr::Pooled(_))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_powers_of_two() {
        let classes = SizeClasses::new(100, 1000, "test pool", |size| size);
        assert_eq!(classes.sizes().collect::<Vec<_>>(), [128, 256, 512, 1024]);
        assert_eq!(classes.get(0), Some(&128));
        assert_eq!(classes.get(129), Some(&256));
        assert_eq!(classes.get(1000), Some(&1024));
        assert_eq!(classes.get(1001), None);
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
}

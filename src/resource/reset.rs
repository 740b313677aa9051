//! What a resource pool does to the contents of a returned object: the
//! [`Reset`] policy, and the guard that tells the pool whether there is
//! anything to reset.
//!
//! Zeroing a returned frame or map in full costs what a fresh zeroed one
//! costs, which is what the pool was meant to save. So a pool zeroes only
//! what its last user could have written: a [`Tracked`] guard marks its
//! object dirty the first time it hands out `&mut` access (through
//! `DerefMut`), and an object only ever read through `Deref` goes back as
//! it came. Callers that overwrite what they use can skip the zeroing
//! altogether with [`Reset::Keep`], as Go's `bp` pools do.

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::{Pooled, Recycle};

/// What a resource pool does to a returned object's contents.
///
/// Set with `.reset(Reset)` on the builder of every pool whose objects
/// hold readable contents (`io::BufReaderPool`, `io::CopyPool`,
/// `image::RgbaPool`, `image::YCbCrPool`, `mmap::MmapPool` and the
/// multi-size pools); each pool's docs say what either policy costs there.
///
/// # Examples
///
/// ```
/// use stashpool::io::BufReaderPool;
/// use stashpool::Reset;
///
/// assert_eq!(Reset::default(), Reset::Zero);
/// let pool = BufReaderPool::builder(4096).reset(Reset::Keep).build();
/// assert_eq!(pool.reset(), Reset::Keep);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reset {
    /// Nothing one user wrote can be read by the next. The cost is in
    /// proportion to what the last user could have written, not to the
    /// object's size.
    #[default]
    Zero,
    /// Contents are kept, as Go's `bp` pools do: the next user sees what
    /// the last one left. For callers that overwrite what they use (a
    /// decoder that fills every pixel, a copy that reads before it writes).
    Keep,
}

/// Checks and wipes objects of one kind: the part of a recycler a
/// [`Tracker`] needs.
///
/// Public in a private module: it appears in the bounds of [`Tracked`],
/// but only the crate can name or implement it.
pub trait Wipe<T>: Send + Sync + 'static {
    /// Makes a new object, with every byte zero.
    fn create(&self) -> T;
    /// Whether a returned object may be pooled again (it still has the
    /// pool's shape), after restoring the layout fields a user may have
    /// changed (a frame's strides), contents aside.
    fn fits(&self, value: &mut T) -> bool;
    /// Zeroes every byte a user can read.
    fn wipe(&self, value: &mut T);
    /// Whether a written object is zeroed in place with
    /// [`wipe`](Self::wipe) (`true`, the default) or dropped, so that the
    /// next `get` makes a fresh one with [`create`](Self::create): for
    /// objects so large that a fresh zeroed allocation costs no more than
    /// zeroing them.
    fn wipes_in_place(&self) -> bool {
        true
    }
}

/// A pooled object and whether a user may have written to it since it was
/// last wiped.
#[derive(Debug)]
pub struct Dirty<T> {
    value: T,
    dirty: bool,
}

/// The recycler of a pool of [`Dirty`] objects: refuses those that no
/// longer fit, and wipes dirty ones when the policy is [`Reset::Zero`]
/// (or refuses them, where the objects are better made afresh: see
/// [`Wipe::wipes_in_place`]).
#[derive(Clone, Copy, Debug)]
pub struct Tracker<W> {
    pub(crate) objects: W,
    pub(crate) reset: Reset,
}

impl<T, W: Wipe<T>> Recycle<Dirty<T>> for Tracker<W> {
    fn create(&self) -> Dirty<T> {
        Dirty {
            value: self.objects.create(),
            dirty: false,
        }
    }

    fn recycle(&self, object: &mut Dirty<T>) -> bool {
        if !self.objects.fits(&mut object.value) {
            return false;
        }
        if object.dirty && self.reset == Reset::Zero {
            if !self.objects.wipes_in_place() {
                return false;
            }
            self.objects.wipe(&mut object.value);
            object.dirty = false;
        }
        true
    }
}

/// A pooled object that goes back to its pool when dropped, and remembers
/// whether it was written through it.
///
/// Dereferences to the object. The first `DerefMut` marks the object
/// dirty; a pool whose policy is [`Reset::Zero`] zeroes a dirty object
/// when it comes back (or, for an object so large that a fresh zeroed one
/// costs no more, such as a large image frame, drops it), and leaves one
/// that was only read as it is.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "mmap")] {
/// use stashpool::mmap::MmapPool;
///
/// let pool = MmapPool::new(4096);
/// let mut map = pool.get(); // a `Tracked` guard
/// assert_eq!(map[0], 0); // a read: nothing to zero on return
/// map[0] = 7; // a write: the map is zeroed on return
/// # }
/// ```
pub struct Tracked<'a, T: Send + 'static, W: Wipe<T>>(Pooled<'a, Dirty<T>, Tracker<W>>);

impl<'a, T: Send + 'static, W: Wipe<T>> Tracked<'a, T, W> {
    #[cfg(any(feature = "image", feature = "mmap"))]
    pub(crate) fn new(guard: Pooled<'a, Dirty<T>, Tracker<W>>) -> Self {
        Self(guard)
    }

    /// Keeps the object; it will not go back to the pool.
    ///
    /// An associated function, so it cannot shadow a method of the object.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "mmap")] {
    /// use stashpool::mmap::MmapPool;
    /// use stashpool::Tracked;
    ///
    /// let pool = MmapPool::new(4096);
    /// let map: memmap2::MmapMut = Tracked::into_inner(pool.get());
    /// assert_eq!(map.len(), 4096);
    /// assert_eq!(pool.stats().idle, 0);
    /// # }
    /// ```
    pub fn into_inner(this: Self) -> T {
        Pooled::into_inner(this.0).value
    }

    /// Whether the object was handed out for writing since it left the
    /// pool (and so, under [`Reset::Zero`], will be zeroed on return, or
    /// dropped for a fresh zeroed one where the pool does that).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "mmap")] {
    /// use stashpool::mmap::MmapPool;
    /// use stashpool::Tracked;
    ///
    /// let pool = MmapPool::new(4096);
    /// let mut map = pool.get();
    /// assert!(!Tracked::is_dirty(&map));
    /// map[1] = 1;
    /// assert!(Tracked::is_dirty(&map));
    /// # }
    /// ```
    pub fn is_dirty(this: &Self) -> bool {
        this.0.dirty
    }
}

impl<T: Send + 'static, W: Wipe<T>> Deref for Tracked<'_, T, W> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: Send + 'static, W: Wipe<T>> DerefMut for Tracked<'_, T, W> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        let object = &mut *self.0;
        object.dirty = true;
        &mut object.value
    }
}

impl<T: Send + 'static + fmt::Debug, W: Wipe<T>> fmt::Debug for Tracked<'_, T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A whole recycler's `recycle` for a [`Wipe`]: keeps an object that
/// fits, zeroed.
#[cfg(any(feature = "image", feature = "mmap"))]
pub(crate) fn wipe_if_fits<T>(objects: &impl Wipe<T>, value: &mut T) -> bool {
    let fits = objects.fits(value);
    if fits {
        objects.wipe(value);
    }
    fits
}

/// Runs `f` on the object of a pool of [`Dirty`] objects, marking it dirty
/// (`f` gets `&mut` access).
#[cfg(any(feature = "image", feature = "mmap"))]
pub(crate) fn with_dirty<T, U>(object: &mut Dirty<T>, f: impl FnOnce(&mut T) -> U) -> U {
    object.dirty = true;
    f(&mut object.value)
}

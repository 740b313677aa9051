//! `FramePool`: frames of one shape, zeroed on return.

use std::fmt;

use ::image::RgbaImage;

use super::{RgbaRecycler, YCbCrFrame, YCbCrRecycler};
use crate::resource::sealed::Knobs;
use crate::{LocalPool, Pooled, Recycle, Stats};

/// A kind of frame a [`FramePool`] can pool: [`RgbaImage`] or
/// [`YCbCrFrame`].
///
/// Sealed: each kind comes with the recycler that zeroes it.
pub trait Frame: private::Sealed + Sized + Send + 'static {
    /// Makes frames of one shape, zeroes returned ones, and drops those
    /// whose shape changed.
    type Recycler: Recycle<Self> + fmt::Debug + Send + Sync + 'static;
}

impl Frame for RgbaImage {
    type Recycler = RgbaRecycler;
}

impl Frame for YCbCrFrame {
    type Recycler = YCbCrRecycler;
}

mod private {
    pub trait Sealed {}

    impl Sealed for image::RgbaImage {}
    impl Sealed for super::YCbCrFrame {}
}

/// A pooled frame: goes back to its [`FramePool`], zeroed, when dropped.
pub type PooledFrame<'a, F> = Pooled<'a, F, <F as Frame>::Recycler>;

/// A pool of frames of one shape: [`RgbaPool`](super::RgbaPool) of
/// [`RgbaImage`]s, [`YCbCrPool`](super::YCbCrPool) of [`YCbCrFrame`]s.
///
/// Rendering, decoding and scaling code that needs a frame per image can
/// reuse frames instead of allocating megabytes each time (see the
/// [module docs](super) for what that buys). A frame comes out zeroed and is zeroed again on return, so the
/// next user cannot see the last user's picture. A frame whose shape was
/// changed while it was out (through `DerefMut` a user can swap in a frame
/// of another size) is dropped instead of pooled.
///
/// Built on [`LocalPool`]: per-thread stashes over a shared overflow,
/// trimmed by sweeps.
///
/// # Examples
///
/// ```
/// use stashpool::image::{RgbaPool, Subsampling, YCbCrPool};
///
/// let rgba = RgbaPool::new(320, 240);
/// let yuv = YCbCrPool::new(320, 240, Subsampling::S420);
/// assert_eq!(rgba.get().dimensions(), (320, 240));
/// assert_eq!(yuv.get().cb.len(), 160 * 120);
/// ```
pub struct FramePool<F: Frame> {
    pool: LocalPool<F, F::Recycler>,
    width: u32,
    height: u32,
}

impl<F: Frame> FramePool<F> {
    /// A pool with the default knobs; `recycler` makes `width` x `height`
    /// frames.
    pub(crate) const fn from_recycler(recycler: F::Recycler, width: u32, height: u32) -> Self {
        Self {
            pool: LocalPool::new(recycler),
            width,
            height,
        }
    }

    /// As `from_recycler`, with the core knobs.
    pub(crate) fn with_knobs(recycler: F::Recycler, width: u32, height: u32, knobs: Knobs) -> Self {
        Self {
            pool: knobs.pool(recycler),
            width,
            height,
        }
    }

    /// A zeroed frame, from this thread's stash, the shared overflow, or a
    /// new allocation. It goes back to the pool, zeroed, when the guard
    /// drops.
    ///
    /// # Panics
    ///
    /// If a new frame is needed and cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use image::Rgba;
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::new(4, 4);
    /// let mut frame = pool.get();
    /// assert_eq!(frame.get_pixel(0, 0), &Rgba([0, 0, 0, 0]));
    /// frame.put_pixel(1, 1, Rgba([255, 0, 0, 255]));
    /// ```
    #[inline]
    pub fn get(&self) -> PooledFrame<'_, F> {
        self.pool.get()
    }

    /// Runs `f` on a zeroed frame, which goes back to the pool after `f`
    /// returns (or is dropped if `f` panics).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPool};
    ///
    /// let pool = YCbCrPool::new(16, 16, Subsampling::S420);
    /// let luma_sum: u32 = pool.with(|frame| {
    ///     frame.y.fill(2);
    ///     frame.y.iter().map(|&v| v as u32).sum()
    /// });
    /// assert_eq!(luma_sum, 512);
    /// ```
    #[inline]
    pub fn with<U>(&self, f: impl FnOnce(&mut F) -> U) -> U {
        self.pool.with(f)
    }

    /// One sweep now: frames idle since the previous sweep are dropped (see
    /// [`LocalPool::sweep`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::builder(8, 8).manual_sweep().build();
    /// drop(pool.get());
    /// pool.sweep();
    /// pool.sweep();
    /// assert_eq!(pool.stats().trimmed, 1);
    /// ```
    pub fn sweep(&self) {
        self.pool.sweep()
    }

    /// Counters since the pool was made (see [`Stats`]); frames dropped
    /// because their shape changed count as `rejected`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::new(8, 8);
    /// drop(pool.get());
    /// assert_eq!(pool.stats().idle, 1);
    /// ```
    pub fn stats(&self) -> Stats {
        self.pool.stats()
    }

    /// The frames' width and height, in pixels.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{RgbaPool, Subsampling, YCbCrPool};
    ///
    /// assert_eq!(RgbaPool::new(3, 2).dimensions(), (3, 2));
    /// assert_eq!(YCbCrPool::new(3, 2, Subsampling::S422).dimensions(), (3, 2));
    /// ```
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The recycler that makes and zeroes this pool's frames.
    pub(crate) fn recycler(&self) -> &F::Recycler {
        self.pool.recycler()
    }
}

impl<F: Frame> fmt::Debug for FramePool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramePool")
            .field("dimensions", &self.dimensions())
            .field("recycler", self.recycler())
            .field("pool", &self.pool)
            .finish()
    }
}

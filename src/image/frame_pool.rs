//! `FramePool`: frames of one shape; `FramePools`: frames of any shape,
//! one `FramePool` per shape.

use std::fmt;

use ::image::{GrayImage, RgbaImage};

use super::{GrayRecycler, RgbaRecycler, Subsampling, YCbCrFrame, YCbCrRecycler};
use crate::resource::classes::Shapes;
use crate::resource::sealed::{Contents, Knobs, Preload, Resource, Token};
use crate::resource::{object_pool, resource_pool};
use crate::{LocalPool, Pooled, PooledOwned, Recycle, Reset};

/// A kind of frame a [`FramePool`] can pool: [`RgbaImage`], [`GrayImage`]
/// or [`YCbCrFrame`].
///
/// [`RgbaImage`]: https://docs.rs/image/0.25/image/type.RgbaImage.html
/// [`GrayImage`]: https://docs.rs/image/0.25/image/type.GrayImage.html
///
/// Sealed: each kind comes with the recycler that checks and zeroes it.
pub trait Frame: Sized + Send + 'static {
    /// Makes frames of one shape, zeroes returned ones, and drops those
    /// whose shape changed.
    type Recycler: Recycle<Self> + fmt::Debug + Send + Sync + 'static;
    /// What a shape needs besides width and height (the subsampling of a
    /// [`YCbCrFrame`]).
    type Params: Copy + fmt::Debug + Send + Sync + 'static;

    /// The recycler of `width` x `height` frames under `reset`.
    #[doc(hidden)]
    fn recycler(
        width: u32,
        height: u32,
        params: Self::Params,
        reset: Reset,
        _: Token,
    ) -> Self::Recycler;

    /// The frame's width and height, in pixels.
    #[doc(hidden)]
    fn shape(&self, _: Token) -> (u32, u32);
}

impl Frame for RgbaImage {
    type Recycler = RgbaRecycler;
    type Params = ();

    fn recycler(width: u32, height: u32, (): (), reset: Reset, _: Token) -> RgbaRecycler {
        let mut recycler = RgbaRecycler::new(width, height);
        recycler.reset = reset;
        recycler
    }

    fn shape(&self, _: Token) -> (u32, u32) {
        self.dimensions()
    }
}

impl Frame for GrayImage {
    type Recycler = GrayRecycler;
    type Params = ();

    fn recycler(width: u32, height: u32, (): (), reset: Reset, _: Token) -> GrayRecycler {
        let mut recycler = GrayRecycler::new(width, height);
        recycler.reset = reset;
        recycler
    }

    fn shape(&self, _: Token) -> (u32, u32) {
        self.dimensions()
    }
}

impl Frame for YCbCrFrame {
    type Recycler = YCbCrRecycler;
    type Params = Subsampling;

    fn recycler(
        width: u32,
        height: u32,
        subsampling: Subsampling,
        reset: Reset,
        _: Token,
    ) -> YCbCrRecycler {
        let mut recycler = YCbCrRecycler::new(width, height, subsampling);
        recycler.reset = reset;
        recycler
    }

    fn shape(&self, _: Token) -> (u32, u32) {
        (self.width(), self.height())
    }
}

/// A pooled frame: goes back to its [`FramePool`] when dropped, zeroed (or
/// replaced, if large) if it was written through the guard (see
/// [`Pooled::is_written`]) and the pool's policy is [`Reset::Zero`].
pub type PooledFrame<'a, F> = Pooled<'a, F, <F as Frame>::Recycler>;

/// A pooled frame that keeps its pool alive, from `get_owned` on a
/// [`FramePool`] (or, as `PooledFrameOwned<F, FramePools<F>>`, on a
/// [`FramePools`]) in an `Arc`: [`PooledFrame`] that is `'static` and
/// `Send`.
pub type PooledFrameOwned<F, P = FramePool<F>> = PooledOwned<F, <F as Frame>::Recycler, P>;

/// A pool of frames of one shape: [`RgbaPool`](super::RgbaPool) of
/// [`RgbaImage`]s, [`GrayPool`](super::GrayPool) of `GrayImage`s,
/// [`YCbCrPool`](super::YCbCrPool) of [`YCbCrFrame`]s.
///
/// [`RgbaImage`]: https://docs.rs/image/0.25/image/type.RgbaImage.html
/// [`RgbaImage::new`]: https://docs.rs/image/0.25/image/struct.ImageBuffer.html#method.new
///
/// Rendering, decoding and scaling code that needs a frame per image can
/// reuse frames instead of allocating megabytes each time. A frame whose
/// shape was changed while it was out (through `DerefMut` a user can swap
/// in a frame of another size) is dropped instead of pooled.
///
/// # Contents
///
/// * [`Reset::Zero`] (the default): a frame comes out zeroed. The guard
///   records when it first hands out `&mut` access (what is written
///   through a `&mut RgbaImage` cannot be followed further), and a frame
///   that was only read goes back as it is, at no cost. A written frame:
///   - under 1 MiB is zeroed in place when it comes back (a `memset`),
///     which costs less than allocating a zeroed frame and keeps the
///     allocator out;
///   - of 1 MiB or more is dropped (counted in [`Stats::discarded`](crate::Stats::discarded)), and
///     the next `get` allocates a fresh zeroed frame. At that size the zeroing is the whole cost either
///     way, so this costs what [`RgbaImage::new`] or [`YCbCrFrame::new`]
///     cost, never more, and the allocator can do better than a `memset`
///     where it can: it may hand out fresh pages that the kernel zeroes
///     only where they are touched (glibc does for a block above its mmap
///     threshold), so a user who writes a few rows pays for those, and it
///     can serve frames of several shapes from one block where a pool
///     keeps a frame per shape. The other side of lazily zeroed pages: a
///     user who writes such a frame whole pays a page fault per page, as
///     with a new frame, which costs far more than a `memset` would.
///
///   So under `Zero` a pool of large frames is about as fast as allocating
///   for frames that are written, and far faster for frames only read; it
///   keeps idle only the frames that were not written. Code that writes
///   large frames whole is better served by `Keep`.
/// * [`Reset::Keep`]: nothing is zeroed; a frame comes out holding the
///   picture its last user left, as with Go's `bp`. For code that writes
///   every pixel it uses (a decoder, a renderer that clears first): the
///   get and return then cost what they cost for any pooled object,
///   whatever the frame's size, the one policy under which a pool of large, written frames is much
///   faster than allocating them.
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
    reset: Reset,
}

impl<F: Frame> FramePool<F> {
    /// A pool with the default knobs; `recycler` makes `width` x `height`
    /// frames.
    pub(crate) const fn from_recycler(recycler: F::Recycler, width: u32, height: u32) -> Self {
        Self {
            pool: LocalPool::new(recycler),
            width,
            height,
            reset: Reset::Zero,
        }
    }

    /// A pool of `width` x `height` frames with these knobs.
    ///
    /// # Panics
    ///
    /// As the `new` of each kind of frame pool.
    pub(crate) fn with_knobs(width: u32, height: u32, params: F::Params, knobs: Knobs) -> Self {
        let recycler = F::recycler(width, height, params, knobs.reset, Token);
        Self::with_recycler(recycler, width, height, knobs)
    }

    /// A pool with these knobs whose `recycler` makes `width` x `height`
    /// frames under `knobs.reset`: what a `const` build calls, with the
    /// recycler of its kind of frame.
    pub(crate) const fn with_recycler(
        recycler: F::Recycler,
        width: u32,
        height: u32,
        knobs: Knobs,
    ) -> Self {
        Self {
            pool: knobs.pool(recycler),
            width,
            height,
            reset: knobs.reset,
        }
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

    /// What the pool does to a returned frame's contents (see the type
    /// docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPool;
    /// use stashpool::Reset;
    ///
    /// let pool = RgbaPool::builder(8, 8).reset(Reset::Keep).build();
    /// assert_eq!(pool.reset(), Reset::Keep);
    /// ```
    pub fn reset(&self) -> Reset {
        self.reset
    }

    /// The recycler that makes and checks this pool's frames.
    pub(crate) fn recycler(&self) -> &F::Recycler {
        self.pool.recycler()
    }
}

object_pool!([F: Frame] FramePool<F>, F, F::Recycler, "stashpool::image::RgbaPool::new(4, 4)");

resource_pool!(
    [F: Frame] FramePool<F>,
    |this| std::iter::once(&this.pool as &dyn crate::Pool),
    "stashpool::image::RgbaPool::new(4, 4)"
);

impl<F: Frame> Contents for FramePool<F> {}

impl<F: Frame> fmt::Debug for FramePool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramePool")
            .field("dimensions", &self.dimensions())
            .field("recycler", self.recycler())
            .field("pool", &self.pool)
            .finish()
    }
}

// === impl FramePools ===

/// Frames of any shape, one [`FramePool`] per shape, made on first use (Go
/// `bp`'s `MultiImageRGBAPool` and `MultiImageYCbCrPool`):
/// [`RgbaPools`](super::RgbaPools) and [`YCbCrPools`](super::YCbCrPools).
///
/// Each shape's pool takes the builder's knobs, the reset policy among
/// them (see [`FramePool`] for what each policy costs: under
/// [`Reset::Zero`] a written frame of 1 MiB or more goes back to the
/// allocator, which can then serve every shape from one block, so a
/// program that turns between shapes pays what allocating each frame
/// would; under [`Reset::Keep`] each shape keeps its frames, and a frame
/// costs a get and a return). `sweep`, `clear` and `stats` act on every
/// shape's pool; `stats` adds them up.
///
/// Made for the handful of shapes a program uses: a request finds its
/// shape's pool by walking the shapes seen so far, without a lock, and a
/// shape's pool, once made, stays until the `FramePools` is dropped (its
/// idle frames go with sweeps, as in any pool). A program that sees
/// thousands of distinct shapes is better served by rounding them up to a
/// few.
///
/// # Examples
///
/// ```
/// use stashpool::image::RgbaPools;
///
/// let pools = RgbaPools::new();
/// for (width, height) in [(640, 480), (320, 240), (640, 480)] {
///     let frame = pools.get(width, height);
///     assert_eq!(frame.dimensions(), (width, height));
/// }
/// assert_eq!(pools.shapes().count(), 2);
/// assert_eq!(pools.stats().reused, 1);
/// ```
pub struct FramePools<F: Frame> {
    shapes: Shapes<(u32, u32), FramePool<F>>,
    params: F::Params,
    knobs: Knobs,
}

impl<F: Frame> FramePools<F> {
    /// Pools with the default knobs.
    pub(crate) const fn from_params(params: F::Params) -> Self {
        Self::with_knobs(params, Knobs::DEFAULT)
    }

    /// Pools with these knobs.
    pub(crate) const fn with_knobs(params: F::Params, knobs: Knobs) -> Self {
        Self {
            shapes: Shapes::new(),
            params,
            knobs,
        }
    }

    pub(crate) fn params(&self) -> F::Params {
        self.params
    }

    /// The pool of `width` x `height` frames, made if this is the first
    /// request for that shape.
    ///
    /// # Panics
    ///
    /// If `width` or `height` is zero, or a frame would be larger than
    /// `isize::MAX` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = RgbaPools::new();
    /// assert_eq!(pools.pool(16, 9).dimensions(), (16, 9));
    /// ```
    #[inline]
    pub fn pool(&self, width: u32, height: u32) -> &FramePool<F> {
        self.shapes.get((width, height), |(width, height)| {
            FramePool::with_knobs(width, height, self.params, self.knobs)
        })
    }

    /// To move the guard to another thread or task, use
    /// [`get_owned`](Self::get_owned) on the pools in an `Arc`: this guard
    /// borrows them, so it cannot outlive them (a `static`'s guard can go
    /// anywhere).
    ///
    /// A `width` x `height` frame, from the pool of that shape (see
    /// [`FramePool::get`]).
    ///
    /// # Panics
    ///
    /// As [`pool`](Self::pool), or if a new frame cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPools};
    ///
    /// let pools = YCbCrPools::new(Subsampling::S420);
    /// let frame = pools.get(64, 48);
    /// assert_eq!((frame.y.len(), frame.cb.len()), (64 * 48, 32 * 24));
    /// ```
    #[inline]
    pub fn get(&self, width: u32, height: u32) -> PooledFrame<'_, F> {
        self.pool(width, height).get()
    }

    /// Runs `f` on a `width` x `height` frame, which goes back to the pool
    /// of that shape after `f` returns (see [`FramePool::with`]).
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = RgbaPools::new();
    /// let bytes = pools.with(4, 4, |frame| frame.len());
    /// assert_eq!(bytes, 4 * 4 * 4);
    /// ```
    #[inline]
    pub fn with<U>(&self, width: u32, height: u32, f: impl FnOnce(&mut F) -> U) -> U {
        self.pool(width, height).with(f)
    }

    /// An idle `width` x `height` frame, if the pool of that shape has
    /// one; never makes a frame (nor a pool for a shape not seen before).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = RgbaPools::new();
    /// assert!(pools.try_get(4, 4).is_none());
    /// drop(pools.get(4, 4));
    /// assert!(pools.try_get(4, 4).is_some());
    /// ```
    #[inline]
    pub fn try_get(&self, width: u32, height: u32) -> Option<PooledFrame<'_, F>> {
        self.made(width, height)?.try_get()
    }

    /// [`get`](Self::get) for pools in an `Arc`: the guard keeps the pools
    /// alive, so it is `'static` and can move to another thread.
    ///
    /// # Panics
    ///
    /// As [`get`](Self::get).
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use std::sync::Arc;
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = Arc::new(RgbaPools::new());
    /// let frame = pools.get_owned(8, 8);
    /// std::thread::spawn(move || assert_eq!(frame.dimensions(), (8, 8)))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(pools.stats().returned, 1);
    /// ```
    #[inline]
    pub fn get_owned(
        self: &std::sync::Arc<Self>,
        width: u32,
        height: u32,
    ) -> PooledOwned<F, F::Recycler, Self> {
        // SAFETY: a shape's pool stays where it is until the `FramePools`,
        // the `Arc`'s value, drops (`Shapes`).
        unsafe {
            self.pool(width, height)
                .pool
                .get_owned_by(std::sync::Arc::clone(self))
        }
    }

    /// Gives a frame to the pool of its shape, as Go's `Put` does; it is
    /// reset as a returned frame is. A frame of a shape no `get` has asked
    /// for is dropped: the pools are made for the shapes the program asks
    /// for, not for whatever frames it hands in.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    /// use stashpool::Pooled;
    ///
    /// let pools = RgbaPools::new();
    /// let frame = Pooled::into_inner(pools.get(4, 3));
    /// pools.put(frame);
    /// assert_eq!(pools.stats().idle, 1);
    /// pools.put(image::RgbaImage::new(5, 5)); // no pool of that shape
    /// assert_eq!(pools.stats().idle, 1);
    /// assert_eq!(pools.shapes().count(), 1);
    /// ```
    pub fn put(&self, frame: F) {
        let (width, height) = frame.shape(Token);
        if let Some(pool) = self.made(width, height) {
            pool.put(frame)
        }
    }

    /// The pool of `width` x `height` frames, if a request made it.
    fn made(&self, width: u32, height: u32) -> Option<&FramePool<F>> {
        let (_, pool) = self
            .shapes
            .iter()
            .find(|&(shape, _)| shape == (width, height))?;
        Some(pool)
    }

    /// The shapes requested so far, `(width, height)`, oldest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = RgbaPools::new();
    /// drop(pools.get(2, 2));
    /// assert_eq!(pools.shapes().collect::<Vec<_>>(), [(2, 2)]);
    /// ```
    pub fn shapes(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.shapes.iter().map(|(shape, _)| shape)
    }

    /// What the pools do to a returned frame's contents (see
    /// [`FramePool`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    /// use stashpool::Reset;
    ///
    /// assert_eq!(RgbaPools::new().reset(), Reset::Zero);
    /// ```
    pub fn reset(&self) -> Reset {
        self.knobs.reset
    }
}

resource_pool!(
    [F: Frame] FramePools<F>,
    |this| this.shapes.iter().map(|(_, pool)| pool as &dyn crate::Pool),
    "stashpool::image::RgbaPools::new()"
);

impl<F: Frame> Contents for FramePools<F> {}

impl<F: Frame> Resource for FramePools<F> {
    type Params = F::Params;
}

impl<F: Frame> Preload for FramePools<F> {}

impl<F: Frame> fmt::Debug for FramePools<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramePools")
            .field("params", &self.params)
            .field("reset", &self.knobs.reset)
            .field("shapes", &self.shapes)
            .finish()
    }
}

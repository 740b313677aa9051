//! `GrayPool`: `image::GrayImage` frames of one size.

use ::image::GrayImage;
use ::image::metadata::Cicp;

use super::{FramePool, FramePools, PooledFrame, PooledFrameOwned, WIPE_IN_PLACE_BELOW, frame_len};
use crate::resource::fallible;
use crate::resource::reset::{self, Wipe};
use crate::resource::sealed::{Preload, Resource};
use crate::resource::{ResourceBuilder, const_build};
use crate::{Recycle, Reset};

/// A pooled grayscale frame: goes back to its [`GrayPool`] when dropped
/// (see [`PooledFrame`]).
pub type PooledGray<'a> = PooledFrame<'a, GrayImage>;

/// A pooled grayscale frame that keeps its pool alive, from `get_owned`
/// on a [`GrayPool`] (or, as `PooledGrayOwned<GrayPools>`, on a
/// [`GrayPools`]) in an `Arc`: [`PooledGray`] that is `'static` and
/// `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::image::{GrayPool, GrayPools, PooledGrayOwned};
///
/// let pool = Arc::new(GrayPool::new(8, 8));
/// let frame: PooledGrayOwned = pool.get_owned();
/// let pools = Arc::new(GrayPools::new());
/// let thumb: PooledGrayOwned<GrayPools> = pools.get_owned(4, 4);
/// std::thread::spawn(move || drop((frame, thumb))).join().unwrap();
/// assert_eq!(pool.stats().returned + pools.stats().returned, 2);
/// ```
pub type PooledGrayOwned<P = GrayPool> = PooledFrameOwned<GrayImage, P>;

/// A pool of [`GrayImage`] frames (one byte of luma per pixel) of one
/// size: masks, thumbnails, the luma a detector or a scaler works on. See
/// [`FramePool`].
///
/// [`GrayImage`]: https://docs.rs/image/0.25/image/type.GrayImage.html
/// [`GrayImage::new`]: https://docs.rs/image/0.25/image/struct.ImageBuffer.html#method.new
///
/// Under [`Reset::Zero`], the default, a frame comes out with every pixel
/// zero (black): a frame only read costs nothing to return, a written one
/// under 1 MiB (fewer pixels than 1024 x 1024) is zeroed in place, and a
/// larger written one is dropped and replaced by a fresh zeroed
/// allocation, which costs what [`GrayImage::new`] costs (counted in
/// [`Stats::discarded`](crate::Stats::discarded): a pool of large frames
/// that are all written reuses none of them). Under [`Reset::Keep`] a frame
/// holds what its last user left, and costs a get and a return whatever
/// its size: the policy for code that writes every pixel it uses. See
/// [`FramePool`] for why. A frame whose size or color space changed while
/// it was out is dropped on return.
///
/// # Examples
///
/// ```
/// use image::Luma;
/// use stashpool::image::GrayPool;
///
/// static MASKS: GrayPool = GrayPool::new(64, 48);
///
/// fn coverage(threshold: u8) -> usize {
///     let mut mask = MASKS.get();
///     for (x, _, pixel) in mask.enumerate_pixels_mut() {
///         *pixel = Luma([if x as u8 >= threshold { 255 } else { 0 }]);
///     }
///     mask.iter().filter(|&&v| v == 255).count() // stands in for using it
/// }
///
/// assert_eq!(coverage(32), 32 * 48);
/// assert_eq!(coverage(16), 48 * 48);
/// assert_eq!(MASKS.stats().created, 1);
/// ```
///
/// With `image::imageops`: the functions that take the image `&mut`
/// (`overlay`, `replace`, `invert`, `brighten_in_place`, ...) render into
/// a pooled frame; those that return an image (`resize`, `blur`,
/// `grayscale`) allocate their output whatever the pool, so pool the frames
/// they read, or copy their output in with `replace`.
///
/// ```
/// use image::{GrayImage, Luma, imageops};
/// use stashpool::image::GrayPool;
///
/// static CANVAS: GrayPool = GrayPool::new(32, 32);
///
/// let glyph = GrayImage::from_pixel(8, 8, Luma([200]));
/// let mut frame = CANVAS.get();
/// imageops::overlay(&mut *frame, &glyph, 4, 4); // drawn into the pooled frame
/// imageops::invert(&mut *frame);
/// assert_eq!(frame.get_pixel(0, 0), &Luma([255]));
/// assert_eq!(frame.get_pixel(5, 5), &Luma([55]));
/// ```
pub type GrayPool = FramePool<GrayImage>;

impl FramePool<GrayImage> {
    /// A pool of `width` x `height` grayscale frames.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `width` or `height` is zero, or a frame would be larger than
    /// `isize::MAX` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::GrayPool;
    ///
    /// let pool = GrayPool::new(1920, 1080);
    /// assert_eq!(pool.dimensions(), (1920, 1080));
    /// ```
    pub const fn new(width: u32, height: u32) -> Self {
        Self::from_recycler(GrayRecycler::new(width, height), width, height)
    }

    /// A builder, to set the core knobs and the reset policy.
    ///
    /// Under the default [`Reset::Zero`], a frame of 1 MiB or more that was
    /// written is dropped on return, not reused (zeroing it would cost what
    /// a fresh zeroed frame costs): a pool of such frames that are all
    /// written makes one per `get`, as plain allocation does, and its
    /// [`Stats`](crate::Stats) display says so. Code that writes every
    /// pixel it uses sets `.reset(Reset::Keep)`, and then reuses them.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::GrayPool;
    /// use stashpool::Reset;
    ///
    /// static THUMBS: GrayPool = GrayPool::builder(160, 90).reset(Reset::Keep).build();
    /// assert_eq!(THUMBS.get().dimensions(), (160, 90));
    /// ```
    pub const fn builder(width: u32, height: u32) -> ResourceBuilder<Self> {
        ResourceBuilder::new((width, height))
    }
}

impl Resource for FramePool<GrayImage> {
    /// Width and height.
    type Params = (u32, u32);
}

impl Preload for FramePool<GrayImage> {}

const_build!(
    [] GrayPool,
    |(width, height), knobs| {
        let mut recycler = GrayRecycler::new(width, height);
        recycler.reset = knobs.reset;
        GrayPool::with_recycler(recycler, width, height, knobs)
    },
    "stashpool::image::GrayPool::builder(160, 90)",
    "stashpool::image::GrayPool"
);

/// Grayscale frames of any size, one [`GrayPool`] per size, made on first
/// use: see [`FramePools`].
///
/// Each size's pool costs what a [`GrayPool`] of that size costs under the
/// policy set on the builder: under [`Reset::Zero`], the default, a
/// written frame of 1 MiB or more costs what [`GrayImage::new`] costs (it
/// goes back to the allocator) and one only read costs nothing; under
/// [`Reset::Keep`] contents are kept and any frame costs a get and a
/// return.
///
/// [`GrayImage::new`]: https://docs.rs/image/0.25/image/struct.ImageBuffer.html#method.new
///
/// # Examples
///
/// ```
/// use stashpool::image::GrayPools;
///
/// static THUMBS: GrayPools = GrayPools::new();
///
/// fn thumbnail(width: u32, height: u32) -> usize {
///     THUMBS.with(width, height, |frame| {
///         frame.fill(0x80);
///         frame.len() // stands in for encoding it
///     })
/// }
///
/// assert_eq!(thumbnail(64, 64), 64 * 64);
/// assert_eq!(thumbnail(32, 16), 32 * 16);
/// assert_eq!(thumbnail(64, 64), 64 * 64);
/// assert_eq!(THUMBS.stats().created, 2);
/// ```
pub type GrayPools = FramePools<GrayImage>;

impl FramePools<GrayImage> {
    /// Pools of grayscale frames, one per size, with the default knobs.
    ///
    /// `const`, so the pools can be a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::GrayPools;
    ///
    /// let pools = GrayPools::new();
    /// assert_eq!(pools.get(3, 2).dimensions(), (3, 2));
    /// ```
    pub const fn new() -> Self {
        Self::from_params(())
    }

    /// A builder, to set the core knobs and the reset policy (they apply
    /// to every size's pool).
    ///
    /// Under the default [`Reset::Zero`], a frame of 1 MiB or more that was
    /// written is dropped on return, not reused: pools of such frames that
    /// are all written make one per `get`, and their
    /// [`Stats`](crate::Stats) display says so. Code that writes every
    /// pixel it uses sets `.reset(Reset::Keep)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::GrayPools;
    /// use stashpool::Reset;
    ///
    /// let pools = GrayPools::builder().reset(Reset::Keep).max_idle(2).build();
    /// pools.with(2, 2, |frame| frame.fill(7));
    /// assert!(pools.get(2, 2).iter().all(|&v| v == 7)); // kept
    /// ```
    pub const fn builder() -> ResourceBuilder<Self> {
        ResourceBuilder::new(())
    }
}

const_build!(
    [] GrayPools,
    |(), knobs| GrayPools::with_knobs((), knobs),
    "stashpool::image::GrayPools::builder()",
    "stashpool::image::GrayPools"
);

impl Default for FramePools<GrayImage> {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes zeroed grayscale frames of one size, zeroes returned ones, and
/// drops those that changed size or color space.
///
/// The recycler of a [`GrayPool`].
///
/// # Examples
///
/// ```
/// use stashpool::image::GrayRecycler;
/// use stashpool::Recycle;
///
/// let recycler = GrayRecycler::new(2, 2);
/// let mut frame = recycler.create();
/// frame.put_pixel(0, 0, image::Luma([255]));
/// assert!(recycler.recycle(&mut frame));
/// assert!(frame.iter().all(|&v| v == 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrayRecycler {
    width: u32,
    height: u32,
    /// Bytes in a frame: one per pixel.
    len: usize,
    pub(crate) reset: Reset,
}

impl GrayRecycler {
    /// A recycler of `width` x `height` frames.
    ///
    /// # Panics
    ///
    /// As [`GrayPool::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::GrayRecycler;
    ///
    /// let recycler = GrayRecycler::new(640, 480);
    /// # let _ = recycler;
    /// ```
    pub const fn new(width: u32, height: u32) -> Self {
        let len = frame_len(width, height, 1);
        Self {
            width,
            height,
            len,
            reset: Reset::Zero,
        }
    }
}

impl Recycle<GrayImage> for GrayRecycler {
    fn create(&self) -> GrayImage {
        GrayImage::from_raw(self.width, self.height, fallible::zeroed(self.len))
            .expect("stashpool: a frame buffer of width * height bytes fits its image")
    }

    fn recycle(&self, frame: &mut GrayImage) -> bool {
        reset::recycle(self, self.reset, frame, true)
    }

    fn recycle_unwritten(&self, frame: &mut GrayImage) -> bool {
        reset::recycle(self, self.reset, frame, false)
    }

    fn footprint(&self, frame: &GrayImage) -> usize {
        frame.as_raw().capacity()
    }
}

impl Wipe<GrayImage> for GrayRecycler {
    fn fits(&self, frame: &mut GrayImage) -> bool {
        // A frame swapped in through `DerefMut` may differ in any way the
        // safe API allows; keep only those that still match a new frame.
        frame.dimensions() == (self.width, self.height)
            && frame.as_raw().len() == self.len
            && frame.color_space() == Cicp::SRGB
    }

    fn wipe(&self, frame: &mut GrayImage) {
        // `Deref` reaches the whole buffer (`fits` checked its length), so
        // this clears every byte the next user could read.
        let bytes: &mut [u8] = frame;
        bytes.fill(0);
    }

    fn wipes_in_place(&self) -> bool {
        self.len < WIPE_IN_PLACE_BELOW
    }
}

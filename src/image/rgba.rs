//! `RgbaPool`: `image::RgbaImage` frames of one size.

use ::image::RgbaImage;
use ::image::metadata::Cicp;

use super::{FramePool, FramePools, PooledFrame, PooledFrameOwned, WIPE_IN_PLACE_BELOW, frame_len};
use crate::resource::fallible;
use crate::resource::reset::{self, Wipe};
use crate::resource::sealed::{Preload, Resource};
use crate::resource::{ResourceBuilder, const_build};
use crate::{Recycle, Reset};

/// A pooled RGBA frame: goes back to its [`RgbaPool`] when dropped (see
/// [`PooledFrame`]).
pub type PooledRgba<'a> = PooledFrame<'a, RgbaImage>;

/// A pooled RGBA frame that keeps its pool alive, from `get_owned` on an
/// [`RgbaPool`] (or, as `PooledRgbaOwned<RgbaPools>`, on an [`RgbaPools`])
/// in an `Arc`: [`PooledRgba`] that is `'static` and `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::image::{PooledRgbaOwned, RgbaPool, RgbaPools};
///
/// let pool = Arc::new(RgbaPool::new(8, 8));
/// let frame: PooledRgbaOwned = pool.get_owned();
/// let pools = Arc::new(RgbaPools::new());
/// let thumb: PooledRgbaOwned<RgbaPools> = pools.get_owned(4, 4);
/// std::thread::spawn(move || drop((frame, thumb))).join().unwrap();
/// assert_eq!(pool.stats().returned + pools.stats().returned, 2);
/// ```
pub type PooledRgbaOwned<P = RgbaPool> = PooledFrameOwned<RgbaImage, P>;

/// A pool of [`RgbaImage`] frames of one size (Go's `bp.ImageRGBAPool`):
/// see [`FramePool`].
///
/// [`RgbaImage`]: https://docs.rs/image/0.25/image/type.RgbaImage.html
/// [`RgbaImage::new`]: https://docs.rs/image/0.25/image/struct.ImageBuffer.html#method.new
///
/// Under [`Reset::Zero`], the default, a frame comes
/// out with every pixel zero (transparent black): a frame only read costs
/// nothing to return, a written one under 1 MiB (fewer pixels than
/// 512 x 512) is zeroed in place, and a larger written one is replaced by
/// a fresh zeroed allocation, which costs what [`RgbaImage::new`] costs.
/// Under [`Reset::Keep`] a frame holds what its last
/// user left, and costs a get and a return whatever its size: the policy
/// for code that writes every pixel it uses. See [`FramePool`] for why. A
/// frame whose size or color space changed while it was out is dropped on
/// return.
///
/// # Examples
///
/// ```
/// use image::Rgba;
/// use stashpool::image::RgbaPool;
///
/// static FRAMES: RgbaPool = RgbaPool::new(64, 48);
///
/// fn render(shade: u8) -> u64 {
///     let mut frame = FRAMES.get();
///     for pixel in frame.pixels_mut() {
///         *pixel = Rgba([shade, shade, shade, 255]);
///     }
///     frame.iter().map(|&b| b as u64).sum() // stands in for encoding it
/// }
///
/// assert_eq!(render(1), 64 * 48 * (3 + 255));
/// assert_eq!(render(2), 64 * 48 * (6 + 255));
/// assert_eq!(FRAMES.stats().created, 1);
/// ```
pub type RgbaPool = FramePool<RgbaImage>;

impl FramePool<RgbaImage> {
    /// A pool of `width` x `height` RGBA frames.
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
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::new(1920, 1080);
    /// assert_eq!(pool.dimensions(), (1920, 1080));
    /// ```
    pub const fn new(width: u32, height: u32) -> Self {
        Self::from_recycler(RgbaRecycler::new(width, height), width, height)
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
    /// use stashpool::image::RgbaPool;
    /// use stashpool::Reset;
    ///
    /// // `bp`'s behaviour, for a renderer that writes every pixel.
    /// static FRAMES: RgbaPool = RgbaPool::builder(1280, 720).reset(Reset::Keep).build();
    ///
    /// FRAMES.with(|frame| frame.fill(0xFF));
    /// FRAMES.with(|frame| frame.fill(0x80));
    /// assert_eq!(FRAMES.stats().created, 1); // reused, though written
    /// assert_eq!(FRAMES.get().dimensions(), (1280, 720));
    /// ```
    pub const fn builder(width: u32, height: u32) -> ResourceBuilder<Self> {
        ResourceBuilder::new((width, height))
    }
}

impl Resource for FramePool<RgbaImage> {
    /// Width and height.
    type Params = (u32, u32);
}

impl Preload for FramePool<RgbaImage> {}

const_build!(
    [] RgbaPool,
    |(width, height), knobs| {
        let mut recycler = RgbaRecycler::new(width, height);
        recycler.reset = knobs.reset;
        RgbaPool::with_recycler(recycler, width, height, knobs)
    },
    "stashpool::image::RgbaPool::builder(640, 480)",
    "stashpool::image::RgbaPool"
);

/// RGBA frames of any size, one [`RgbaPool`] per size, made on first use
/// (Go's `bp.MultiImageRGBAPool`): see [`FramePools`].
///
/// Each size's pool costs what an [`RgbaPool`] of that size costs under
/// the policy set on the builder: under [`Reset::Zero`],
/// the default, a written frame of 1 MiB or more costs what
/// [`RgbaImage::new`] costs (it goes back to the allocator, which can
/// serve every size from one block) and one only read costs nothing; under
/// [`Reset::Keep`] contents are kept and any frame
/// costs a get and a return.
///
/// [`RgbaImage::new`]: https://docs.rs/image/0.25/image/struct.ImageBuffer.html#method.new
///
/// # Examples
///
/// ```
/// use stashpool::image::RgbaPools;
///
/// static FRAMES: RgbaPools = RgbaPools::new();
///
/// fn thumbnail(width: u32, height: u32) -> usize {
///     FRAMES.with(width, height, |frame| {
///         frame.fill(0xFF);
///         frame.len() // stands in for encoding it
///     })
/// }
///
/// assert_eq!(thumbnail(64, 64), 64 * 64 * 4);
/// assert_eq!(thumbnail(32, 16), 32 * 16 * 4);
/// assert_eq!(thumbnail(64, 64), 64 * 64 * 4);
/// assert_eq!(FRAMES.stats().created, 2);
/// ```
pub type RgbaPools = FramePools<RgbaImage>;

impl FramePools<RgbaImage> {
    /// Pools of RGBA frames, one per size, with the default knobs.
    ///
    /// `const`, so the pools can be a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPools;
    ///
    /// let pools = RgbaPools::new();
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
    /// use stashpool::image::RgbaPools;
    /// use stashpool::Reset;
    ///
    /// let pools = RgbaPools::builder().reset(Reset::Keep).max_idle(2).build();
    /// pools.with(2, 2, |frame| frame.fill(7));
    /// assert!(pools.get(2, 2).iter().all(|&b| b == 7)); // kept
    /// ```
    pub const fn builder() -> ResourceBuilder<Self> {
        ResourceBuilder::new(())
    }
}

const_build!(
    [] RgbaPools,
    |(), knobs| RgbaPools::with_knobs((), knobs),
    "stashpool::image::RgbaPools::builder()",
    "stashpool::image::RgbaPools"
);

impl Default for FramePools<RgbaImage> {
    fn default() -> Self {
        Self::new()
    }
}

/// Makes zeroed RGBA frames of one size, zeroes returned ones, and drops
/// those that changed size or color space.
///
/// The recycler of an [`RgbaPool`].
///
/// # Examples
///
/// ```
/// use stashpool::image::RgbaRecycler;
/// use stashpool::Recycle;
///
/// let recycler = RgbaRecycler::new(2, 2);
/// let mut frame = recycler.create();
/// frame.put_pixel(0, 0, image::Rgba([255, 255, 255, 255]));
/// assert!(recycler.recycle(&mut frame));
/// assert!(frame.iter().all(|&b| b == 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RgbaRecycler {
    width: u32,
    height: u32,
    /// Bytes in a frame: 4 per pixel.
    len: usize,
    pub(crate) reset: Reset,
}

impl RgbaRecycler {
    /// A recycler of `width` x `height` frames.
    ///
    /// # Panics
    ///
    /// As [`RgbaPool::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaRecycler;
    ///
    /// let recycler = RgbaRecycler::new(640, 480);
    /// ```
    pub const fn new(width: u32, height: u32) -> Self {
        let len = frame_len(width, height, 4);
        Self {
            width,
            height,
            len,
            reset: Reset::Zero,
        }
    }
}

impl Recycle<RgbaImage> for RgbaRecycler {
    fn create(&self) -> RgbaImage {
        RgbaImage::from_raw(self.width, self.height, fallible::zeroed(self.len))
            .expect("stashpool: a frame buffer of width * height * 4 bytes fits its image")
    }

    fn recycle(&self, frame: &mut RgbaImage) -> bool {
        reset::recycle(self, self.reset, frame, true)
    }

    fn recycle_unwritten(&self, frame: &mut RgbaImage) -> bool {
        reset::recycle(self, self.reset, frame, false)
    }

    fn footprint(&self, frame: &RgbaImage) -> usize {
        frame.as_raw().capacity()
    }
}

impl Wipe<RgbaImage> for RgbaRecycler {
    fn fits(&self, frame: &mut RgbaImage) -> bool {
        // A frame swapped in through `DerefMut` may differ in any way the
        // safe API allows; keep only those that still match a new frame.
        frame.dimensions() == (self.width, self.height)
            && frame.as_raw().len() == self.len
            && frame.color_space() == Cicp::SRGB
    }

    fn wipe(&self, frame: &mut RgbaImage) {
        // `Deref` reaches the whole buffer (`fits` checked its length), so
        // this clears every byte the next user could read.
        let bytes: &mut [u8] = frame;
        bytes.fill(0);
    }

    fn wipes_in_place(&self) -> bool {
        self.len < WIPE_IN_PLACE_BELOW
    }
}

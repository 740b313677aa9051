//! `YCbCrPool`: planar Y'CbCr frames of one size and subsampling.

use std::fmt;

use super::{FramePool, FramePools, PooledFrame, PooledFrameOwned, WIPE_IN_PLACE_BELOW, frame_len};
use crate::resource::fallible;
use crate::resource::reset::{self, Wipe};
use crate::resource::sealed::{Preload, Resource};
use crate::resource::{ResourceBuilder, const_build};
use crate::{Recycle, Reset};

/// How the chroma planes of a [`YCbCrFrame`] are subsampled (as Go's
/// `image.YCbCrSubsampleRatio`).
///
/// # Examples
///
/// ```
/// use stashpool::image::Subsampling;
///
/// // Odd sizes round up: every luma sample has a chroma sample.
/// assert_eq!(Subsampling::S420.chroma_size(5, 3), (3, 2));
/// assert_eq!(Subsampling::S422.chroma_size(5, 3), (3, 3));
/// assert_eq!(Subsampling::S444.chroma_size(5, 3), (5, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subsampling {
    /// 4:4:4, one chroma sample per pixel.
    S444,
    /// 4:2:2, one chroma sample per two pixels of a row.
    S422,
    /// 4:2:0, one chroma sample per 2x2 block of pixels.
    S420,
}

impl Subsampling {
    /// The width and height of each chroma plane of a `width` x `height`
    /// frame.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::Subsampling;
    ///
    /// assert_eq!(Subsampling::S420.chroma_size(1920, 1080), (960, 540));
    /// ```
    pub const fn chroma_size(self, width: u32, height: u32) -> (u32, u32) {
        match self {
            Self::S444 => (width, height),
            Self::S422 => (width.div_ceil(2), height),
            Self::S420 => (width.div_ceil(2), height.div_ceil(2)),
        }
    }
}

/// A planar Y'CbCr frame (Go's `image.YCbCr`): one luma plane and two
/// chroma planes, subsampled as [`Subsampling`] says.
///
/// The sample for pixel `(x, y)` is `y[frame.y_offset(x, y)]` in the luma
/// plane and at `frame.c_offset(x, y)` in each chroma plane. Rows are
/// `y_stride` and `c_stride` bytes apart.
///
/// # Examples
///
/// ```
/// use stashpool::image::{Subsampling, YCbCrFrame};
///
/// let mut frame = YCbCrFrame::new(4, 2, Subsampling::S420);
/// assert_eq!((frame.y.len(), frame.cb.len(), frame.cr.len()), (8, 2, 2));
/// let (y, c) = (frame.y_offset(3, 1), frame.c_offset(3, 1));
/// frame.y[y] = 235;
/// frame.cb[c] = 128;
/// assert_eq!((y, c), (7, 1));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct YCbCrFrame {
    /// The luma plane: `height` rows of `y_stride` bytes.
    pub y: Vec<u8>,
    /// The blue-difference chroma plane: rows of `c_stride` bytes.
    pub cb: Vec<u8>,
    /// The red-difference chroma plane: rows of `c_stride` bytes.
    pub cr: Vec<u8>,
    /// Bytes from one luma row to the next.
    pub y_stride: usize,
    /// Bytes from one chroma row to the next.
    pub c_stride: usize,
    width: u32,
    height: u32,
    subsampling: Subsampling,
}

impl YCbCrFrame {
    /// A zeroed `width` x `height` frame with tightly packed rows.
    ///
    /// # Panics
    ///
    /// If `width` or `height` is zero, if a plane would be larger than
    /// `isize::MAX` bytes, or if the planes cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// let frame = YCbCrFrame::new(1920, 1080, Subsampling::S422);
    /// assert_eq!((frame.y_stride, frame.c_stride), (1920, 960));
    /// ```
    pub fn new(width: u32, height: u32, subsampling: Subsampling) -> Self {
        Shape::new(width, height, subsampling).frame()
    }

    /// The frame's width in pixels.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// assert_eq!(YCbCrFrame::new(3, 2, Subsampling::S444).width(), 3);
    /// ```
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The frame's height in pixels.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// assert_eq!(YCbCrFrame::new(3, 2, Subsampling::S444).height(), 2);
    /// ```
    pub fn height(&self) -> u32 {
        self.height
    }

    /// How the chroma planes are subsampled.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// let frame = YCbCrFrame::new(2, 2, Subsampling::S420);
    /// assert_eq!(frame.subsampling(), Subsampling::S420);
    /// ```
    pub fn subsampling(&self) -> Subsampling {
        self.subsampling
    }

    /// The index in the luma plane of pixel `(x, y)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// let frame = YCbCrFrame::new(10, 10, Subsampling::S420);
    /// assert_eq!(frame.y_offset(3, 2), 23);
    /// ```
    pub fn y_offset(&self, x: u32, y: u32) -> usize {
        y as usize * self.y_stride + x as usize
    }

    /// The index in each chroma plane of the sample that covers pixel
    /// `(x, y)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrFrame};
    ///
    /// let frame = YCbCrFrame::new(10, 10, Subsampling::S420);
    /// assert_eq!(frame.c_offset(3, 2), 6); // row 1 of width 5, column 1
    /// ```
    pub fn c_offset(&self, x: u32, y: u32) -> usize {
        let (x, y) = (x as usize, y as usize);
        match self.subsampling {
            Subsampling::S444 => y * self.c_stride + x,
            Subsampling::S422 => y * self.c_stride + x / 2,
            Subsampling::S420 => (y / 2) * self.c_stride + x / 2,
        }
    }
}

/// Shows the frame's shape, not its (large) planes.
impl fmt::Debug for YCbCrFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("YCbCrFrame")
            .field("width", &self.width)
            .field("height", &self.height)
            .field("subsampling", &self.subsampling)
            .field("y_stride", &self.y_stride)
            .field("c_stride", &self.c_stride)
            .finish_non_exhaustive()
    }
}

/// A frame's size, subsampling, and the plane layout that follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    width: u32,
    height: u32,
    subsampling: Subsampling,
    y_len: usize,
    c_len: usize,
    c_stride: usize,
}

impl Shape {
    /// # Panics
    ///
    /// As [`YCbCrFrame::new`] (but for allocation).
    const fn new(width: u32, height: u32, subsampling: Subsampling) -> Self {
        let y_len = frame_len(width, height, 1);
        let (c_width, c_height) = subsampling.chroma_size(width, height);
        Self {
            width,
            height,
            subsampling,
            y_len,
            c_len: frame_len(c_width, c_height, 1),
            c_stride: c_width as usize,
        }
    }

    fn frame(&self) -> YCbCrFrame {
        YCbCrFrame {
            y: fallible::zeroed(self.y_len),
            cb: fallible::zeroed(self.c_len),
            cr: fallible::zeroed(self.c_len),
            y_stride: self.width as usize,
            c_stride: self.c_stride,
            width: self.width,
            height: self.height,
            subsampling: self.subsampling,
        }
    }
}

// === impl YCbCrPool ===

/// A pooled Y'CbCr frame: goes back to its [`YCbCrPool`] when dropped (see
/// [`PooledFrame`]).
pub type PooledYCbCr<'a> = PooledFrame<'a, YCbCrFrame>;

/// A pooled Y'CbCr frame that keeps its pool alive, from `get_owned` on a
/// [`YCbCrPool`] (or, as `PooledYCbCrOwned<YCbCrPools>`, on a
/// [`YCbCrPools`]) in an `Arc`: [`PooledYCbCr`] that is `'static` and
/// `Send`.
///
/// # Examples
///
/// ```standalone_crate
/// use std::sync::Arc;
/// use stashpool::image::{PooledYCbCrOwned, Subsampling, YCbCrPool};
///
/// let pool = Arc::new(YCbCrPool::new(16, 16, Subsampling::S420));
/// let frame: PooledYCbCrOwned = pool.get_owned();
/// std::thread::spawn(move || drop(frame)).join().unwrap();
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub type PooledYCbCrOwned<P = YCbCrPool> = PooledFrameOwned<YCbCrFrame, P>;

/// A pool of planar [`YCbCrFrame`]s of one size and subsampling (Go's
/// `bp.ImageYCbCrPool`), for video and JPEG pipelines: see [`FramePool`].
///
/// Under [`Reset::Zero`], the default, a frame comes
/// out zeroed: a frame only read costs nothing to return, a written one
/// whose planes add up to under 1 MiB is zeroed in place, and a larger
/// written one (at 4:2:0, from about 700 000 pixels: 1280 x 720 and up)
/// is replaced by a fresh zeroed allocation, which costs what
/// [`YCbCrFrame::new`] costs.
/// Under [`Reset::Keep`] a frame holds what its last
/// user left, and costs a get and a return whatever its size: the policy
/// for a decoder that writes every sample. See [`FramePool`] for why.
/// Either way its strides are restored on return, and one whose planes
/// were replaced by planes of another length is dropped.
///
/// # Examples
///
/// ```
/// use stashpool::image::{Subsampling, YCbCrPool};
///
/// static FRAMES: YCbCrPool = YCbCrPool::new(320, 240, Subsampling::S420);
///
/// fn decode_grey(level: u8) -> usize {
///     let mut frame = FRAMES.get();
///     frame.y.fill(level);
///     frame.cb.fill(128);
///     frame.cr.fill(128);
///     frame.y.len() + frame.cb.len() // stands in for using the frame
/// }
///
/// assert_eq!(decode_grey(16), 320 * 240 + 160 * 120);
/// assert_eq!(decode_grey(235), 320 * 240 + 160 * 120);
/// assert_eq!(FRAMES.stats().created, 1);
/// ```
pub type YCbCrPool = FramePool<YCbCrFrame>;

impl FramePool<YCbCrFrame> {
    /// A pool of `width` x `height` frames with `subsampling`.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `width` or `height` is zero, or a plane would be larger than
    /// `isize::MAX` bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPool};
    ///
    /// let pool = YCbCrPool::new(1280, 720, Subsampling::S420);
    /// assert_eq!(pool.get().cb.len(), 640 * 360);
    /// ```
    pub const fn new(width: u32, height: u32, subsampling: Subsampling) -> Self {
        Self::from_recycler(
            YCbCrRecycler::new(width, height, subsampling),
            width,
            height,
        )
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
    /// use stashpool::image::{Subsampling, YCbCrPool};
    ///
    /// let pool = YCbCrPool::builder(64, 64, Subsampling::S444)
    ///     .max_stashed(2)
    ///     .build();
    /// assert_eq!(pool.get().cr.len(), 64 * 64);
    ///
    /// // `bp`'s behaviour, for a decoder that writes every sample.
    /// use stashpool::Reset;
    /// static FRAMES: YCbCrPool = YCbCrPool::builder(1920, 1080, Subsampling::S420)
    ///     .reset(Reset::Keep)
    ///     .build();
    /// assert_eq!(FRAMES.get().y.len(), 1920 * 1080);
    /// ```
    pub const fn builder(
        width: u32,
        height: u32,
        subsampling: Subsampling,
    ) -> ResourceBuilder<Self> {
        ResourceBuilder::new((width, height, subsampling))
    }

    /// The frames' chroma subsampling.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPool};
    ///
    /// let pool = YCbCrPool::new(3, 2, Subsampling::S422);
    /// assert_eq!(pool.subsampling(), Subsampling::S422);
    /// ```
    pub fn subsampling(&self) -> Subsampling {
        self.recycler().shape.subsampling
    }
}

impl Resource for FramePool<YCbCrFrame> {
    /// Width, height and subsampling.
    type Params = (u32, u32, Subsampling);
}

impl Preload for FramePool<YCbCrFrame> {}

const_build!(
    [] YCbCrPool,
    |(width, height, subsampling), knobs| {
        let mut recycler = YCbCrRecycler::new(width, height, subsampling);
        recycler.reset = knobs.reset;
        YCbCrPool::with_recycler(recycler, width, height, knobs)
    },
    "stashpool::image::YCbCrPool::builder(64, 48, stashpool::image::Subsampling::S420)",
    "stashpool::image::YCbCrPool"
);

/// Planar Y'CbCr frames of any size with one subsampling, one
/// [`YCbCrPool`] per size, made on first use (Go's
/// `bp.MultiImageYCbCrPool`): see [`FramePools`].
///
/// Each size's pool costs what a [`YCbCrPool`] of that size costs under
/// the policy set on the builder: under [`Reset::Zero`],
/// the default, a written frame of 1 MiB or more costs what
/// [`YCbCrFrame::new`] costs and one only read costs nothing; under
/// [`Reset::Keep`] contents are kept and any frame
/// costs a get and a return.
///
/// # Examples
///
/// ```
/// use stashpool::image::{Subsampling, YCbCrPools};
///
/// static FRAMES: YCbCrPools = YCbCrPools::new(Subsampling::S420);
///
/// for (width, height) in [(320, 240), (640, 480), (320, 240)] {
///     FRAMES.with(width, height, |frame| frame.y.fill(16));
/// }
/// assert_eq!(FRAMES.stats().created, 2);
/// ```
pub type YCbCrPools = FramePools<YCbCrFrame>;

impl FramePools<YCbCrFrame> {
    /// Pools of frames with `subsampling`, one per size, with the default
    /// knobs.
    ///
    /// `const`, so the pools can be a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPools};
    ///
    /// let pools = YCbCrPools::new(Subsampling::S444);
    /// assert_eq!(pools.get(4, 4).cr.len(), 16);
    /// ```
    pub const fn new(subsampling: Subsampling) -> Self {
        Self::from_params(subsampling)
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
    /// use stashpool::image::{Subsampling, YCbCrPools};
    ///
    /// let pools = YCbCrPools::builder(Subsampling::S422).max_stashed(2).build();
    /// assert_eq!(pools.get(4, 2).cb.len(), 4);
    /// ```
    pub const fn builder(subsampling: Subsampling) -> ResourceBuilder<Self> {
        ResourceBuilder::new(subsampling)
    }

    /// The frames' chroma subsampling.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrPools};
    ///
    /// assert_eq!(YCbCrPools::new(Subsampling::S420).subsampling(), Subsampling::S420);
    /// ```
    pub fn subsampling(&self) -> Subsampling {
        self.params()
    }
}

const_build!(
    [] YCbCrPools,
    |subsampling, knobs| YCbCrPools::with_knobs(subsampling, knobs),
    "stashpool::image::YCbCrPools::builder(stashpool::image::Subsampling::S420)",
    "stashpool::image::YCbCrPools"
);

/// Makes zeroed Y'CbCr frames of one shape, zeroes returned ones and
/// restores their strides, and drops those whose planes changed length.
///
/// The recycler of a [`YCbCrPool`].
///
/// # Examples
///
/// ```
/// use stashpool::image::{Subsampling, YCbCrRecycler};
/// use stashpool::Recycle;
///
/// let recycler = YCbCrRecycler::new(4, 4, Subsampling::S420);
/// let mut frame = recycler.create();
/// frame.cb[0] = 9;
/// frame.y.push(1); // the luma plane no longer fits the frame
/// assert!(!recycler.recycle(&mut frame));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YCbCrRecycler {
    shape: Shape,
    pub(crate) reset: Reset,
}

impl YCbCrRecycler {
    /// A recycler of `width` x `height` frames with `subsampling`.
    ///
    /// # Panics
    ///
    /// As [`YCbCrPool::new`].
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::{Subsampling, YCbCrRecycler};
    ///
    /// let recycler = YCbCrRecycler::new(640, 480, Subsampling::S444);
    /// ```
    pub const fn new(width: u32, height: u32, subsampling: Subsampling) -> Self {
        Self {
            shape: Shape::new(width, height, subsampling),
            reset: Reset::Zero,
        }
    }
}

impl Recycle<YCbCrFrame> for YCbCrRecycler {
    fn create(&self) -> YCbCrFrame {
        self.shape.frame()
    }

    fn recycle(&self, frame: &mut YCbCrFrame) -> bool {
        reset::recycle(self, self.reset, frame, true)
    }

    fn recycle_unwritten(&self, frame: &mut YCbCrFrame) -> bool {
        reset::recycle(self, self.reset, frame, false)
    }

    fn footprint(&self, frame: &YCbCrFrame) -> usize {
        frame.y.capacity() + frame.cb.capacity() + frame.cr.capacity()
    }
}

impl Wipe<YCbCrFrame> for YCbCrRecycler {
    fn fits(&self, frame: &mut YCbCrFrame) -> bool {
        let shape = &self.shape;
        // The planes are public fields, and the whole frame can be replaced
        // through the guard: keep only a frame of this pool's shape.
        let fits = (frame.width, frame.height, frame.subsampling)
            == (shape.width, shape.height, shape.subsampling)
            && frame.y.len() == shape.y_len
            && frame.cb.len() == shape.c_len
            && frame.cr.len() == shape.c_len;
        frame.y_stride = shape.width as usize;
        frame.c_stride = shape.c_stride;
        fits
    }

    fn wipe(&self, frame: &mut YCbCrFrame) {
        frame.y.fill(0);
        frame.cb.fill(0);
        frame.cr.fill(0);
    }

    fn wipes_in_place(&self) -> bool {
        let shape = &self.shape;
        let len = shape.y_len.saturating_add(shape.c_len.saturating_mul(2));
        len < WIPE_IN_PLACE_BELOW
    }
}

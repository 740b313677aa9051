//! `RgbaPool`: `image::RgbaImage` frames of one size.

use std::fmt;

use ::image::metadata::Cicp;
use ::image::RgbaImage;

use super::frame_len;
use crate::fallible;
use crate::resource::sealed::{Knobs, Resource};
use crate::resource::ResourceBuilder;
use crate::{LocalPool, Pooled, Recycle, Stats};

/// A pooled RGBA frame: goes back to its [`RgbaPool`], zeroed, when dropped.
pub type PooledRgba<'a> = Pooled<'a, RgbaImage, RgbaRecycler>;

/// A pool of [`RgbaImage`] frames of one size (Go's `bp.ImageRGBAPool`).
///
/// Rendering, decoding and scaling code that needs a frame per image can
/// reuse frames instead of allocating and page-faulting several megabytes
/// each time. A frame comes out with every pixel zero (transparent black)
/// and is zeroed again on return, so the next user cannot see the last
/// user's picture. A frame whose size or color space was changed while it
/// was out is dropped instead of pooled.
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
pub struct RgbaPool {
    pool: LocalPool<RgbaImage, RgbaRecycler>,
}

impl RgbaPool {
    /// A pool of `width` x `height` frames.
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
        Self {
            pool: LocalPool::new(RgbaRecycler::new(width, height)),
        }
    }

    /// A builder, to set the core knobs.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::builder(640, 480).max_idle(4).build();
    /// assert_eq!(pool.get().dimensions(), (640, 480));
    /// ```
    pub fn builder(width: u32, height: u32) -> ResourceBuilder<Self> {
        ResourceBuilder::new((width, height))
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
    pub fn get(&self) -> PooledRgba<'_> {
        self.pool.get()
    }

    /// Runs `f` on a zeroed frame, which goes back to the pool after `f`
    /// returns (or is dropped if `f` panics).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::image::RgbaPool;
    ///
    /// let pool = RgbaPool::new(8, 8);
    /// let bytes = pool.with(|frame| frame.len());
    /// assert_eq!(bytes, 8 * 8 * 4);
    /// ```
    #[inline]
    pub fn with<U>(&self, f: impl FnOnce(&mut RgbaImage) -> U) -> U {
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
    /// assert_eq!(pool.stats().idle, 0);
    /// ```
    pub fn sweep(&self) {
        self.pool.sweep()
    }

    /// Counters since the pool was made (see [`Stats`]).
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
    /// use stashpool::image::RgbaPool;
    ///
    /// assert_eq!(RgbaPool::new(3, 2).dimensions(), (3, 2));
    /// ```
    pub fn dimensions(&self) -> (u32, u32) {
        let recycler = self.pool.recycler();
        (recycler.width, recycler.height)
    }
}

impl fmt::Debug for RgbaPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RgbaPool")
            .field("dimensions", &self.dimensions())
            .field("pool", &self.pool)
            .finish()
    }
}

impl Resource for RgbaPool {
    /// Width and height.
    type Params = (u32, u32);

    fn build((width, height): (u32, u32), knobs: Knobs) -> Self {
        Self {
            pool: knobs.pool(RgbaRecycler::new(width, height)),
        }
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
        Self { width, height, len }
    }
}

impl Recycle<RgbaImage> for RgbaRecycler {
    fn create(&self) -> RgbaImage {
        RgbaImage::from_raw(self.width, self.height, fallible::zeroed(self.len))
            .expect("stashpool: a frame buffer of width * height * 4 bytes fits its image")
    }

    fn recycle(&self, frame: &mut RgbaImage) -> bool {
        // A frame swapped in through `DerefMut` may differ in any way the
        // safe API allows; keep only those that still match a new frame.
        if frame.dimensions() != (self.width, self.height)
            || frame.as_raw().len() != self.len
            || frame.color_space() != Cicp::SRGB
        {
            return false;
        }
        // `Deref` reaches the whole buffer (checked above), so this clears
        // every byte the next user could read.
        let bytes: &mut [u8] = frame;
        bytes.fill(0);
        true
    }
}

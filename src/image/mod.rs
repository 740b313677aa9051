//! Pools of image frames (feature `image`): [`RgbaPool`] of
//! [`image::RgbaImage`] frames and [`YCbCrPool`] of planar
//! [`YCbCrFrame`]s, both [`FramePool`]s, the Rust counterparts of Go's
//! `bp.ImageRGBAPool` and `bp.ImageYCbCrPool`, and [`GrayPool`] of
//! [`image::GrayImage`] frames (masks, thumbnails, luma); and
//! [`RgbaPools`], [`GrayPools`] and [`YCbCrPools`], frames of any size
//! ([`FramePools`], Go's `bp.MultiImageRGBAPool` and
//! `bp.MultiImageYCbCrPool`).
//!
//! [`image::RgbaImage`]: https://docs.rs/image/0.25/image/type.RgbaImage.html
//! [`image::GrayImage`]: https://docs.rs/image/0.25/image/type.GrayImage.html
//!
//! A frame is megabytes of memory. A pool keeps a few frames and reuses
//! them, so a program that handles image after image does not hand that
//! memory back and forth to the allocator and the kernel.
//!
//! By default ([`Reset::Zero`](crate::Reset::Zero)) no picture leaks from
//! one user to the next: a frame that was written is zeroed on return
//! when it is small (under 1 MiB), and replaced by a fresh zeroed
//! allocation when it is large, so a written frame costs at most what
//! allocating a zeroed frame costs, and a frame only read costs nothing
//! (see [`FramePool`] for the details). Code that writes every pixel it
//! uses can skip the zeroing with [`Reset::Keep`](crate::Reset::Keep), as
//! Go's `bp` does: a frame then costs a get and a return, whatever its
//! size. A pool of large frames that are all written, under the default,
//! reuses none of them: its [`Stats`](crate::Stats) display says so.
//!
//! # Examples
//!
//! Scale a stream of images into pooled frames:
//!
//! ```
//! use image::Rgba;
//! use stashpool::image::RgbaPool;
//!
//! static THUMBS: RgbaPool = RgbaPool::new(32, 32);
//!
//! fn thumbnail(shade: u8) -> Rgba<u8> {
//!     THUMBS.with(|frame| {
//!         for (x, y, pixel) in frame.enumerate_pixels_mut() {
//!             *pixel = Rgba([shade, x as u8, y as u8, 255]);
//!         }
//!         *frame.get_pixel(31, 31) // stands in for encoding the frame
//!     })
//! }
//!
//! for shade in 0..10 {
//!     assert_eq!(thumbnail(shade), Rgba([shade, 31, 31, 255]));
//! }
//! assert_eq!(THUMBS.stats().created, 1);
//! ```

mod frame_pool;
mod gray;
mod rgba;
mod ycbcr;

pub use frame_pool::{Frame, FramePool, FramePools, PooledFrame, PooledFrameOwned};
pub use gray::{GrayPool, GrayPools, GrayRecycler, PooledGray, PooledGrayOwned};
pub use rgba::{PooledRgba, PooledRgbaOwned, RgbaPool, RgbaPools, RgbaRecycler};
pub use ycbcr::{
    PooledYCbCr, PooledYCbCrOwned, Subsampling, YCbCrFrame, YCbCrPool, YCbCrPools, YCbCrRecycler,
};

/// Frames of at least this many bytes that were written are dropped on
/// return under [`Reset::Zero`](crate::Reset::Zero), and the next `get`
/// allocates a fresh zeroed frame, rather than zeroed in place.
///
/// For a frame this large the zeroing is the whole cost either way, so a
/// fresh allocation costs what zeroing in place does, and it lets the
/// allocator do better where it can: hand out fresh pages that the kernel
/// zeroes only where they are touched, or serve frames of different
/// shapes from one block, where a pool keeps a frame per shape and zeroes
/// more memory than the cache holds. Below it, zeroing in place is cheap,
/// and keeping the frame saves the allocator's work.
const WIPE_IN_PLACE_BELOW: usize = 1 << 20;

/// The bytes in a `width` x `height` plane of `bytes_per_pixel`-byte
/// pixels.
///
/// # Panics
///
/// In a `const` context too, if either side is zero or the plane would be
/// larger than `isize::MAX` bytes.
const fn frame_len(width: u32, height: u32, bytes_per_pixel: u64) -> usize {
    if width == 0 || height == 0 {
        panic!("stashpool: a frame's width and height must be non-zero");
    }
    // At most (2^32 - 1)^2 * 4 < 2^66: compute in u128, where it cannot
    // overflow, before narrowing.
    let len = width as u128 * height as u128 * bytes_per_pixel as u128;
    if len > crate::resource::fallible::MAX_LEN as u128 {
        panic!("stashpool: a frame must be at most isize::MAX bytes");
    }
    len as usize
}

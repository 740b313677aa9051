//! The pipeline of the `frame_pipeline` example, which `benches/pays.rs`
//! runs too: a producer renders frames, a `WorkerPool` scales each to a
//! thumbnail, an encoder thread writes the thumbnails as PNG, and a sink
//! thread takes the PNGs. Every object is taken on one thread and given
//! back on the next: a frame by the worker that scaled it, a thumbnail by
//! the encoder, a PNG buffer by the sink.

use std::io::{self, Write};
use std::ops::{Deref, DerefMut};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use image::codecs::png::PngEncoder;
use image::{ExtendedColorType, ImageEncoder, RgbaImage};
use stashpool::Reset;
use stashpool::bytes::{BytePool, PooledBuffer};
use stashpool::image::{PooledRgba, RgbaPool, RgbaPools};
use stashpool::workers::WorkerPool;

/// The two streams' frame sizes, 720p and 1080p; frames alternate.
pub const SHAPES: [(u32, u32); 2] = [(1280, 720), (1920, 1080)];

/// Every thumbnail's size: both streams are 16:9, scaled down 4x and 6x.
pub const THUMBNAIL: (u32, u32) = (320, 180);

/// Room in a PNG buffer at first: more than a thumbnail's PNG takes.
pub const PNG_CAPACITY: usize = 256 * 1024;

/// The message of the panics that `Config::panic_every` injects.
pub const INJECTED_PANIC: &str = "injected panic in the scaling stage";

/// Where the pipeline's frames, thumbnails and PNG buffers come from.
///
/// Each object crosses threads inside a `'static` task or a channel, so a
/// pooled one borrows a pool that lives as long as the program.
pub trait Alloc: Sync + 'static {
    /// A frame or thumbnail, holding whatever its last user left there:
    /// every stage writes all of its pixels.
    type Frame: DerefMut<Target = RgbaImage> + Send + 'static;
    /// An empty buffer with room for `PNG_CAPACITY` bytes.
    type Png: DerefMut<Target = Vec<u8>> + Send + 'static;

    fn frame(&'static self, width: u32, height: u32) -> Self::Frame;
    fn thumbnail(&'static self) -> Self::Frame;
    fn png(&'static self) -> Self::Png;
}

// === pooled ===

/// Frames, thumbnails and PNG buffers from stashpool pools.
///
/// Frames and thumbnails under `Reset::Keep`: each stage writes every
/// pixel of what it takes, so zeroing them on return would be wasted.
/// Default stashes: most objects are returned on another thread than the
/// one that takes it, and a stash keeps only what its own thread's use
/// calls for (none, for a thread that only returns), so frames flow back
/// to the threads that take them and a pool holds about as many objects
/// as are in flight at once.
/// Swept by the program (`manual_sweep`) once the stream ends.
#[derive(Debug)]
pub struct Pooled {
    pub frames: RgbaPools,
    pub thumbnails: RgbaPool,
    pub pngs: BytePool,
}

impl Pooled {
    pub fn new() -> Self {
        let (width, height) = THUMBNAIL;
        Self {
            frames: RgbaPools::builder()
                .reset(Reset::Keep)
                .manual_sweep()
                .build(),
            thumbnails: RgbaPool::builder(width, height)
                .reset(Reset::Keep)
                .manual_sweep()
                .build(),
            pngs: BytePool::builder(PNG_CAPACITY).manual_sweep().build(),
        }
    }
}

impl Alloc for Pooled {
    type Frame = PooledRgba<'static>;
    type Png = PooledBuffer<'static>;

    fn frame(&'static self, width: u32, height: u32) -> Self::Frame {
        self.frames.get(width, height)
    }

    fn thumbnail(&'static self) -> Self::Frame {
        self.thumbnails.get()
    }

    fn png(&'static self) -> Self::Png {
        self.pngs.get()
    }
}

// === plain ===

/// Every frame, thumbnail and buffer made for one use and dropped after
/// it, as the same objects the pools make.
#[derive(Debug)]
pub struct Plain;

/// An object made fresh and dropped at the end of its use.
#[derive(Debug)]
pub struct Fresh<T>(pub T);

impl<T> Deref for Fresh<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Fresh<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl Alloc for Plain {
    type Frame = Fresh<RgbaImage>;
    type Png = Fresh<Vec<u8>>;

    fn frame(&'static self, width: u32, height: u32) -> Self::Frame {
        Fresh(RgbaImage::new(width, height))
    }

    fn thumbnail(&'static self) -> Self::Frame {
        Fresh(RgbaImage::new(THUMBNAIL.0, THUMBNAIL.1))
    }

    fn png(&'static self) -> Self::Png {
        Fresh(Vec::with_capacity(PNG_CAPACITY))
    }
}

// === the stages ===

/// Fills every pixel of `frame` with the `n`th picture of a moving
/// pattern, at about the speed a decoder writes its output: each row is a
/// copy from one line of pattern, shifted by the row and the frame.
pub fn render(frame: &mut RgbaImage, n: usize) {
    let width = frame.width() as usize;
    let period = 256;
    let line: Vec<u8> = (0..width + period)
        .flat_map(|x| {
            let v = (x % period) as u8;
            [
                v,
                v.wrapping_mul(3).wrapping_add(n as u8),
                (x / 16 % 2 * 255) as u8,
                255,
            ]
        })
        .collect();
    for (y, row) in frame.chunks_exact_mut(width * 4).enumerate() {
        let shift = (y + 3 * n) % period * 4;
        row.copy_from_slice(&line[shift..shift + width * 4]);
    }
}

/// Scales `src` down into `dst` by averaging each block of pixels (a box
/// filter), writing every pixel of `dst`.
///
/// Each block's rows are first added column by column into `u16`s (one
/// wide loop the compiler vectorises), then each block's columns.
///
/// # Panics
///
/// If `dst` is not `THUMBNAIL`-sized, or `src` is wider than
/// `MAX_WIDTH` or not a whole multiple of a thumbnail.
pub fn scale(src: &RgbaImage, dst: &mut RgbaImage) {
    const MAX_WIDTH: usize = 1920;
    const WIDTH: usize = THUMBNAIL.0 as usize;
    assert_eq!(
        dst.dimensions(),
        THUMBNAIL,
        "thumbnails are THUMBNAIL-sized"
    );
    let (width, height) = (src.width() as usize, src.height() as usize);
    assert!(
        width <= MAX_WIDTH && width % WIDTH == 0 && height % THUMBNAIL.1 as usize == 0,
        "a frame is a whole multiple of a thumbnail, at most MAX_WIDTH wide"
    );
    let (bx, by) = (width / WIDTH, height / THUMBNAIL.1 as usize);
    // A block of at most 256 pixels sums to less than 2^16 per channel.
    assert!(bx * by <= 256, "a block's sum fits a u16");
    let area = (bx * by) as u16;
    let mut columns = [0u16; MAX_WIDTH * 4];
    let columns = &mut columns[..width * 4];
    for (rows, out) in src
        .chunks_exact(width * 4 * by)
        .zip(dst.chunks_exact_mut(WIDTH * 4))
    {
        columns.fill(0);
        for row in rows.chunks_exact(width * 4) {
            for (sum, &byte) in columns.iter_mut().zip(row) {
                *sum += u16::from(byte);
            }
        }
        for (pixel, block) in out.chunks_exact_mut(4).zip(columns.chunks_exact(bx * 4)) {
            for (c, channel) in pixel.iter_mut().enumerate() {
                let sum: u16 = block.iter().skip(c).step_by(4).sum();
                *channel = (sum / area) as u8;
            }
        }
    }
}

/// A writer that refuses bytes past `room`, as a full disk or a capped
/// upload would: a write with no room left writes nothing, which
/// `write_all` reports as an error.
struct Capped<'a> {
    out: &'a mut Vec<u8>,
    room: usize,
}

impl Write for Capped<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = bytes.len().min(self.room);
        self.out.extend_from_slice(&bytes[..n]);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Encodes `thumbnail` as a PNG into `out`, which fails after `room`
/// bytes.
pub fn encode(thumbnail: &RgbaImage, out: &mut Vec<u8>, room: usize) -> image::ImageResult<()> {
    let (width, height) = thumbnail.dimensions();
    PngEncoder::new(Capped { out, room }).write_image(
        thumbnail,
        width,
        height,
        ExtendedColorType::Rgba8,
    )
}

/// Checks that `png` holds a whole PNG file: its signature and, last, its
/// `IEND` chunk.
fn is_whole_png(png: &[u8]) -> bool {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    const IEND: &[u8] = b"\0\0\0\0IEND\xae\x42\x60\x82";
    png.starts_with(SIGNATURE) && png.ends_with(IEND)
}

// === the run ===

/// How a run goes.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub frames: usize,
    /// Most threads scaling at once (the `WorkerPool`'s bound).
    pub workers: usize,
    /// When not 0, the encoding of every `fail_every`th frame fails
    /// partway through, as a write error would make it.
    pub fail_every: usize,
    /// When not 0, the scaling of every `panic_every`th frame panics, with
    /// its frame and its thumbnail in hand.
    pub panic_every: usize,
}

/// What a run did, and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// From the first frame's start to the sink's last PNG.
    pub elapsed: Duration,
    pub encoded: u64,
    pub failed: u64,
    pub panicked: u64,
    pub png_bytes: u64,
}

/// Bytes a failing encode writes before its error: the PNG header and
/// part of the image.
const FAIL_AFTER: usize = 100;

/// Runs the pipeline on `config.frames` frames, objects from `alloc`.
///
/// # Panics
///
/// If a frame is lost (neither encoded, nor failed, nor panicked), an
/// injected fault did not happen, a PNG is cut short, or `config.workers`
/// is 0.
pub fn run<A: Alloc>(alloc: &'static A, config: Config) -> Report {
    // A short queue: the producer waits for the workers rather than
    // running ahead with frames in hand.
    let workers = WorkerPool::builder(config.workers)
        .max_queued(config.workers)
        .build();
    let (thumbnails, thumbnails_rx) = mpsc::sync_channel(config.workers);
    let (pngs, pngs_rx) = mpsc::sync_channel(config.workers);
    let start = Instant::now();
    let (encoded, failed, (end, png_bytes)) = thread::scope(|s| {
        let encoder = s.spawn(move || encode_all(alloc, thumbnails_rx, pngs, config.fail_every));
        let sink = s.spawn(move || sink::<A>(pngs_rx));
        for n in 0..config.frames {
            let (width, height) = SHAPES[n % SHAPES.len()];
            let mut frame = alloc.frame(width, height);
            render(&mut frame, n);
            let thumbnails: SyncSender<A::Frame> = thumbnails.clone();
            workers.submit(move || {
                let mut thumbnail = alloc.thumbnail();
                scale(&frame, &mut thumbnail);
                if config.panic_every != 0 && n % config.panic_every == config.panic_every - 1 {
                    // Unwinding drops the frame and the thumbnail: both
                    // go back to their pools, and the worker goes on.
                    panic!("{INJECTED_PANIC} (frame {n})");
                }
                drop(frame); // back to its pool, from this worker
                thumbnails
                    .send(thumbnail)
                    .expect("the encoder outlives every task");
            });
        }
        // The encoder stops once the last task has dropped its sender.
        drop(thumbnails);
        let (encoded, failed) = encoder.join().unwrap();
        (encoded, failed, sink.join().unwrap())
    });
    workers.wait();
    let panicked = workers.stats().panicked;
    assert_eq!(
        encoded + failed + panicked,
        config.frames as u64,
        "every frame is encoded, failed or panicked"
    );
    // The injected faults all happened: the pipeline went on past each.
    if let Some(panics) = config.frames.checked_div(config.panic_every) {
        assert_eq!(panicked, panics as u64, "every injected panic");
    }
    let scaled = config.frames - panicked as usize;
    if let Some(failures) = scaled.checked_div(config.fail_every) {
        assert_eq!(failed, failures as u64, "every injected encoder error");
    }
    Report {
        elapsed: end - start,
        encoded,
        failed,
        panicked,
        png_bytes,
    }
}

/// The encoder thread: each thumbnail into a PNG buffer, sent to the
/// sink. A thumbnail whose encoding fails is dropped with its buffer, both
/// back to their pools, and the stream goes on. Returns how many were
/// encoded and how many failed.
fn encode_all<A: Alloc>(
    alloc: &'static A,
    thumbnails: Receiver<A::Frame>,
    pngs: SyncSender<A::Png>,
    fail_every: usize,
) -> (u64, u64) {
    let (mut encoded, mut failed) = (0, 0);
    for (n, thumbnail) in thumbnails.into_iter().enumerate() {
        let mut png = alloc.png();
        let fails = fail_every != 0 && n % fail_every == fail_every - 1;
        let room = if fails { FAIL_AFTER } else { usize::MAX };
        match encode(&thumbnail, &mut png, room) {
            Ok(()) => {
                drop(thumbnail); // back to its pool, from the encoder
                pngs.send(png).expect("the sink outlives the encoder");
                encoded += 1;
            }
            Err(_) => failed += 1,
        }
    }
    (encoded, failed)
}

/// The sink thread: takes each PNG (as a writer to a file or a socket
/// would), checks that it is whole, and drops it, back to its pool.
/// Returns when it took the last one, and the bytes it took.
fn sink<A: Alloc>(pngs: Receiver<A::Png>) -> (Instant, u64) {
    let mut bytes = 0;
    for png in pngs {
        assert!(is_whole_png(&png), "a PNG is whole");
        bytes += png.len() as u64;
    }
    (Instant::now(), bytes)
}

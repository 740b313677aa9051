//! Fixed-size buffers lent to `Read` implementations.
//!
//! `Read::read` takes `&mut [u8]`, which must be initialised, and any safe
//! `Read` may look at the bytes it is given before overwriting them, or
//! write past the count it returns. So under [`Reset::Zero`] a buffer lent
//! to one user's reader must not still hold what another user's reader put
//! there. Each [`Scratch`] keeps a high-water mark of the bytes it handed
//! to readers and, on return, zeroes those and no more: a use that lent a
//! few hundred bytes of a 64 KiB buffer pays for a few hundred. Under
//! [`Reset::Keep`] nothing is zeroed, and a reader may see bytes an earlier
//! user's reader left.
//!
//! A buffer is not zeroed when it is made either: a [`Chunk`] zeroes each
//! byte the first time it is lent, as std's `BufReader` initialises its
//! buffer as it goes. So a new buffer costs what its first user is lent,
//! not its size, in `memset` and in resident pages: a reader's 4 KiB
//! buffer lent 1 KiB touches one page, where a zeroed allocation (which
//! `calloc` clears whole when it reuses freed memory) would touch two.

use std::fmt;
use std::mem::MaybeUninit;

use crate::resource::fallible;
use crate::resource::sealed::Knobs;
use crate::{LocalPool, Pooled, Recycle, Reset};

/// A buffer whose front is initialised: `bytes[..init]` (zeroes, or what
/// readers wrote there), and the rest not yet.
pub(crate) struct Chunk {
    bytes: Box<[MaybeUninit<u8>]>,
    /// Every byte before this is initialised.
    init: usize,
}

impl Chunk {
    /// The buffer's size.
    fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The initialised front.
    fn front(&self) -> &[u8] {
        // SAFETY:
        // - `bytes[..init]` is initialised (the field's invariant), and
        //   `init <= bytes.len()`;
        // - `MaybeUninit<u8>` has the layout of `u8`;
        // - the slice borrows `self`, so no `&mut` to those bytes exists.
        unsafe { std::slice::from_raw_parts(self.bytes.as_ptr().cast::<u8>(), self.init) }
    }

    /// The first `n` bytes (at most the buffer), initialised: those never
    /// lent before are zeroed first.
    fn front_mut(&mut self, n: usize) -> &mut [u8] {
        let n = n.min(self.bytes.len());
        if n > self.init {
            self.bytes[self.init..n].fill(MaybeUninit::new(0));
            self.init = n;
        }
        // SAFETY:
        // - `bytes[..n]` is initialised: `n <= init` now, and the front up
        //   to `init` is initialised (the field's invariant);
        // - `MaybeUninit<u8>` has the layout of `u8`, and any byte written
        //   through the slice is initialised, which keeps the invariant;
        // - the slice borrows `self` mutably, so it is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.bytes.as_mut_ptr().cast::<u8>(), n) }
    }
}

/// Makes buffers of one length, not yet initialised ([`Chunk`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fresh {
    len: usize,
}

impl Recycle<Chunk> for Fresh {
    fn create(&self) -> Chunk {
        Chunk {
            bytes: fallible::uninit(self.len),
            init: 0,
        }
    }

    // `Scratch` zeroes what it lent before the buffer comes back here, and
    // its length cannot change: nothing to do.

    fn footprint(&self, chunk: &Chunk) -> usize {
        chunk.bytes.len()
    }
}

/// The most a [`Scratch`] lends at first under [`Reset::Zero`]: a short
/// stream then costs a `memset` of this much rather than of the buffer.
const FIRST_WINDOW: usize = 1024;

/// A pool of buffers of `len` bytes.
pub(crate) struct ScratchPool {
    pool: LocalPool<Chunk, Fresh>,
    reset: Reset,
}

impl ScratchPool {
    /// # Panics
    ///
    /// With `message` if `len` is zero or larger than `isize::MAX`.
    pub(crate) const fn new(len: usize, message: &str) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: LocalPool::new(Fresh { len }),
            reset: Reset::Zero,
        }
    }

    /// As `new`, with the core knobs and the reset policy.
    pub(crate) const fn with_knobs(len: usize, message: &str, knobs: Knobs) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: knobs.pool(Fresh { len }),
            reset: knobs.reset,
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> Scratch<'_> {
        let buf = self.pool.get();
        let window = match self.reset {
            Reset::Keep => buf.len(),
            _ => FIRST_WINDOW.min(buf.len()),
        };
        Scratch {
            buf,
            lent: 0,
            window,
            reset: self.reset,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.pool.recycler().len
    }

    pub(crate) fn reset(&self) -> Reset {
        self.reset
    }

    pub(crate) fn pool(&self) -> &dyn crate::Pool {
        &self.pool
    }
}

impl fmt::Debug for ScratchPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScratchPool")
            .field("reset", &self.reset)
            .field("pool", &self.pool)
            .finish()
    }
}

/// A buffer from a [`ScratchPool`]; what it lent is zeroed on return under
/// [`Reset::Zero`].
pub(crate) struct Scratch<'a> {
    buf: Pooled<'a, Chunk, Fresh>,
    /// How many leading bytes `lend` handed out since the buffer left the
    /// pool: the most a reader could have written.
    lent: usize,
    /// What [`lend_window`](Scratch::lend_window) lends next.
    window: usize,
    reset: Reset,
}

impl Scratch<'_> {
    /// The buffer's size.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// The bytes lent so far, in this use or an earlier one (the front of
    /// the buffer; what a reader wrote there, or zeroes).
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        self.buf.front()
    }

    /// The first `n` bytes (at most the whole buffer), to pass to a
    /// reader; under [`Reset::Zero`] they are zeroed on return.
    #[inline]
    pub(crate) fn lend(&mut self, n: usize) -> &mut [u8] {
        let buf = self.buf.front_mut(n);
        self.lent = self.lent.max(buf.len());
        buf
    }

    /// The whole buffer, to pass to a reader.
    #[inline]
    pub(crate) fn lend_all(&mut self) -> &mut [u8] {
        self.lend(usize::MAX)
    }

    /// The front of the buffer, to pass to a reader that fills buffers
    /// as they come: under [`Reset::Zero`] a window that starts small and
    /// doubles each time a reader fills it (see [`filled`](Self::filled)),
    /// so a short stream is never handed, and never costs zeroing, the
    /// whole buffer; under [`Reset::Keep`] the whole buffer.
    #[inline]
    pub(crate) fn lend_window(&mut self) -> &mut [u8] {
        self.lend(self.window)
    }

    /// Records that a reader put `n` bytes in the window it was lent.
    #[inline]
    pub(crate) fn filled(&mut self, n: usize) {
        if n >= self.window {
            self.window = (2 * self.window).min(self.buf.len());
        }
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if self.reset == Reset::Zero {
            self.buf.front_mut(self.lent).fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stats;

    #[test]
    fn lent_bytes_come_back_zeroed_and_only_those() {
        let pool = ScratchPool::new(64, "bad length");
        let mut buf = pool.get();
        buf.lend(16).fill(0xEE);
        drop(buf);
        let mut buf = pool.get();
        assert_eq!(pool.stats_for_test().reused, 1);
        assert_eq!(buf.bytes(), [0; 16]);
        assert!(buf.lend_all().iter().all(|&b| b == 0));
        // Bytes past what was lent are never handed out, so never zeroed:
        // write them behind the lend's back to see that.
        buf.lend_all()[32..].fill(0xAA);
        buf.lent = 16;
        drop(buf);
        let buf = pool.get();
        assert!(buf.bytes()[..16].iter().all(|&b| b == 0));
        assert!(buf.bytes()[32..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn a_new_buffer_is_initialised_only_as_far_as_it_is_lent() {
        let pool = ScratchPool::new(4 * FIRST_WINDOW, "bad length");
        let mut buf = pool.get();
        assert!(buf.bytes().is_empty(), "nothing lent yet");
        assert_eq!(buf.len(), 4 * FIRST_WINDOW);
        assert_eq!(
            buf.lend_window(),
            vec![0; FIRST_WINDOW],
            "zeroed as it is lent"
        );
        buf.lend(10).fill(7);
        drop(buf);
        // Back in the pool with its lent front zeroed, the rest untouched.
        let mut buf = pool.get();
        assert_eq!(buf.bytes(), vec![0; FIRST_WINDOW]);
        assert_eq!(buf.lend_all().len(), 4 * FIRST_WINDOW);
        assert_eq!(buf.bytes(), vec![0; 4 * FIRST_WINDOW]);
    }

    #[test]
    fn the_window_grows_while_readers_fill_it() {
        let pool = ScratchPool::new(4 * FIRST_WINDOW, "bad length");
        let mut buf = pool.get();
        assert_eq!(buf.lend_window().len(), FIRST_WINDOW);
        buf.filled(FIRST_WINDOW - 1);
        assert_eq!(buf.lend_window().len(), FIRST_WINDOW, "not filled: stays");
        buf.filled(FIRST_WINDOW);
        assert_eq!(buf.lend_window().len(), 2 * FIRST_WINDOW);
        buf.filled(2 * FIRST_WINDOW);
        buf.filled(4 * FIRST_WINDOW);
        assert_eq!(
            buf.lend_window().len(),
            4 * FIRST_WINDOW,
            "at most the buffer"
        );
        assert_eq!(buf.lent, 4 * FIRST_WINDOW);
    }

    #[test]
    fn keep_leaves_what_was_lent() {
        let knobs = Knobs {
            reset: Reset::Keep,
            ..Knobs::default()
        };
        let pool = ScratchPool::with_knobs(8, "bad length", knobs);
        pool.get().lend_all().fill(3);
        assert_eq!(pool.get().bytes(), [3; 8]);
    }

    #[test]
    #[should_panic(expected = "bad length")]
    fn zero_length_is_refused() {
        let _ = ScratchPool::new(0, "bad length");
    }

    impl ScratchPool {
        fn stats_for_test(&self) -> Stats {
            self.pool.stats()
        }
    }
}

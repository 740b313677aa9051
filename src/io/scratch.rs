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

use std::fmt;
use std::ops::Deref;

use crate::resource::sealed::Knobs;
use crate::{fallible, LocalPool, Pooled, Recycle, Reset};

/// Makes zeroed buffers of one length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zeroed {
    len: usize,
}

impl Recycle<Box<[u8]>> for Zeroed {
    fn create(&self) -> Box<[u8]> {
        fallible::zeroed(self.len).into_boxed_slice()
    }

    // `Scratch` zeroes what it lent before the buffer comes back here, and
    // its length cannot change: nothing to do.
}

/// The most a [`Scratch`] lends at first under [`Reset::Zero`]: a short
/// stream then costs a `memset` of this much rather than of the buffer.
const FIRST_WINDOW: usize = 1024;

/// A pool of buffers of `len` bytes.
pub(crate) struct ScratchPool {
    pool: LocalPool<Box<[u8]>, Zeroed>,
    reset: Reset,
}

impl ScratchPool {
    /// # Panics
    ///
    /// With `message` if `len` is zero or larger than `isize::MAX`.
    pub(crate) const fn new(len: usize, message: &str) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: LocalPool::new(Zeroed { len }),
            reset: Reset::Zero,
        }
    }

    /// As `new`, with the core knobs and the reset policy.
    pub(crate) fn with_knobs(len: usize, message: &str, knobs: Knobs) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: knobs.pool(Zeroed { len }),
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
    buf: Pooled<'a, Box<[u8]>, Zeroed>,
    /// How many leading bytes `lend` handed out since the buffer left the
    /// pool: the most a reader could have written.
    lent: usize,
    /// What [`lend_window`](Scratch::lend_window) lends next.
    window: usize,
    reset: Reset,
}

impl Scratch<'_> {
    /// The first `n` bytes (at most the whole buffer), to pass to a
    /// reader; under [`Reset::Zero`] they are zeroed on return.
    #[inline]
    pub(crate) fn lend(&mut self, n: usize) -> &mut [u8] {
        let n = n.min(self.buf.len());
        self.lent = self.lent.max(n);
        &mut self.buf[..n]
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

impl Deref for Scratch<'_> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if self.reset == Reset::Zero {
            self.buf[..self.lent].fill(0);
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
        assert!(buf.iter().all(|&b| b == 0));
        // Bytes past what was lent are never handed out, so never zeroed:
        // write them behind the lend's back to see that.
        buf.lend_all()[32..].fill(0xAA);
        buf.lent = 16;
        drop(buf);
        let buf = pool.get();
        assert!(buf[..16].iter().all(|&b| b == 0));
        assert!(buf[32..].iter().all(|&b| b == 0xAA));
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
        assert!(pool.get().iter().all(|&b| b == 3));
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

//! Fixed-size zeroed buffers lent to `Read` implementations.
//!
//! `Read::read` takes `&mut [u8]`, which must be initialised, and any safe
//! `Read` may look at the bytes it is given before overwriting them, or
//! write past the count it returns. So a buffer lent to one user's reader
//! must not still hold what another user's reader put there. Each
//! [`Scratch`] remembers whether it was lent out and, if it was, zeroes the
//! whole buffer before it goes back: cheaper than a fresh zeroed allocation
//! (a `memset` over memory already in cache, no allocator call, no page
//! faults), and free for a use that never needed the buffer.

use std::fmt;
use std::ops::Deref;

use crate::resource::sealed::Knobs;
use crate::{fallible, LocalPool, Pooled, Recycle, Stats};

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

/// A pool of zeroed buffers of `len` bytes.
pub(crate) struct ScratchPool {
    pool: LocalPool<Box<[u8]>, Zeroed>,
}

impl ScratchPool {
    /// # Panics
    ///
    /// With `message` if `len` is zero or larger than `isize::MAX`.
    pub(crate) const fn new(len: usize, message: &str) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: LocalPool::new(Zeroed { len }),
        }
    }

    /// As `new`, with the core knobs.
    pub(crate) fn with_knobs(len: usize, message: &str, knobs: Knobs) -> Self {
        fallible::check_len(len, message);
        Self {
            pool: knobs.pool(Zeroed { len }),
        }
    }

    #[inline]
    pub(crate) fn get(&self) -> Scratch<'_> {
        Scratch {
            buf: self.pool.get(),
            lent: false,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.pool.recycler().len
    }

    pub(crate) fn sweep(&self) {
        self.pool.sweep()
    }

    pub(crate) fn stats(&self) -> Stats {
        self.pool.stats()
    }
}

impl fmt::Debug for ScratchPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.pool, f)
    }
}

/// A zeroed buffer from a [`ScratchPool`], zeroed again on return if it was
/// lent out.
pub(crate) struct Scratch<'a> {
    buf: Pooled<'a, Box<[u8]>, Zeroed>,
    /// Whether `lend` handed the buffer out since it left the pool.
    lent: bool,
}

impl Scratch<'_> {
    /// The whole buffer, to pass to a reader; it will be zeroed on return.
    #[inline]
    pub(crate) fn lend(&mut self) -> &mut [u8] {
        self.lent = true;
        &mut self.buf
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
        if self.lent {
            self.buf.fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_buffers_come_back_zeroed() {
        let pool = ScratchPool::new(64, "bad length");
        let mut buf = pool.get();
        buf.lend().fill(0xEE);
        drop(buf);
        let buf = pool.get();
        assert_eq!(pool.stats().reused, 1);
        assert!(buf.iter().all(|&b| b == 0));
    }

    #[test]
    #[should_panic(expected = "bad length")]
    fn zero_length_is_refused() {
        let _ = ScratchPool::new(0, "bad length");
    }
}

//! `bytes::BufMut` for guards of `Vec<u8>` buffers (feature `bytes`), so
//! that `read_buf`, `put_slice` and every other call that takes a
//! `BufMut` take the guard itself.

use std::ops::DerefMut;

use ::bytes::buf::UninitSlice;
use ::bytes::{Buf, BufMut};

use crate::{Pooled, PooledOwned, Recycle, SizedGuard};

/// `BufMut` for one kind of guard of a `Vec<u8>`: `[generics] Guard`, and
/// the bounds that make it one.
///
/// Every method forwards to `Vec<u8>`'s, reaching the vector through
/// `DerefMut`, so the guard records the write (what a `BufMut` writes, a
/// reset policy must see).
macro_rules! buf_mut {
    ([$($generics:tt)*] $guard:ty where $($bounds:tt)*) => {
        /// Writes go to the end of the pooled `Vec<u8>`, which grows as
        /// `Vec<u8>`'s `BufMut` grows it: `read_buf(&mut guard)` reads
        /// into its spare capacity, where `read(&mut guard)` would read
        /// nothing (the buffer comes out empty).
        ///
        /// ```
        /// use bytes::BufMut;
        /// use stashpool::bytes::BytePool;
        ///
        /// let pool = BytePool::new(64);
        /// let mut buf = pool.get();
        /// buf.put_slice(b"GET ");
        /// buf.put_u16(0x2f0a);
        /// assert_eq!(&buf[..], b"GET /\n");
        /// ```
        // SAFETY: every method forwards to `Vec<u8>`'s `BufMut`, which
        // keeps the trait's contract, on the one vector that the guard
        // holds from its `get` to its drop: the memory `chunk_mut` hands
        // out is the memory `advance_mut` then counts as written.
        unsafe impl<$($generics)*> BufMut for $guard
        where
            $($bounds)*
        {
            #[inline]
            fn remaining_mut(&self) -> usize {
                (**self).remaining_mut()
            }

            #[inline]
            unsafe fn advance_mut(&mut self, cnt: usize) {
                // SAFETY: the caller's word, on the vector this guard lent
                // out through `chunk_mut`, which is `Vec<u8>`'s to take.
                unsafe { (**self).advance_mut(cnt) }
            }

            #[inline]
            fn chunk_mut(&mut self) -> &mut UninitSlice {
                (**self).chunk_mut()
            }

            #[inline]
            fn put<B: Buf>(&mut self, src: B)
            where
                Self: Sized,
            {
                (**self).put(src)
            }

            #[inline]
            fn put_slice(&mut self, src: &[u8]) {
                (**self).put_slice(src)
            }

            #[inline]
            fn put_bytes(&mut self, val: u8, cnt: usize) {
                (**self).put_bytes(val, cnt)
            }
        }
    };
}

buf_mut!(['a, R] Pooled<'a, Vec<u8>, R> where R: Recycle<Vec<u8>>);
buf_mut!([R, P] PooledOwned<Vec<u8>, R, P> where R: Recycle<Vec<u8>>);
buf_mut!([G] SizedGuard<G> where G: DerefMut<Target = Vec<u8>>);

#[cfg(test)]
mod tests {
    use ::bytes::BufMut;

    use crate::Pooled;
    use crate::bytes::{BytePool, BytePools};

    #[test]
    fn what_a_buf_mut_writes_lands_in_the_vector_and_marks_it_written() {
        let pool = BytePool::new(8);
        let mut buf = pool.get();
        assert!(!Pooled::is_written(&buf));
        assert!(buf.remaining_mut() >= 8);
        buf.put_u8(1);
        buf.put_bytes(2, 3);
        buf.put(&b"grows past its capacity"[..]);
        assert_eq!(&buf[..4], [1, 2, 2, 2]);
        assert_eq!(buf.len(), 4 + 23);
        assert!(Pooled::is_written(&buf));
    }

    #[test]
    fn chunk_mut_and_advance_mut_reach_the_same_vector() {
        let pool = BytePools::new(16, 64);
        let mut buf = pool.get(10);
        let chunk = buf.chunk_mut();
        assert!(chunk.len() >= 10);
        chunk[..3].copy_from_slice(b"abc");
        // SAFETY: the three bytes were just written through `chunk_mut`.
        unsafe { buf.advance_mut(3) };
        assert_eq!(&buf[..], b"abc");
    }
}

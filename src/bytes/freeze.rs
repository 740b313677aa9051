//! Pooled byte buffers as `bytes::Bytes` (feature `bytes`), with no copy:
//! the `Bytes` owns the guard, and the buffer goes back to its pool when
//! the last clone drops.
//!
//! `Bytes::from_owner` keeps its owner (here the guard) in a reference-
//! counted allocation of its own and reads the owner's bytes in place; the
//! owner is dropped with the last `Bytes` that shares it, and a guard's
//! drop is its return. So the buffer cannot be lent again while any clone
//! or slice of it lives, whichever threads hold them (Netty's pooled
//! `ByteBuf`, released to its pool on its last `release`).

use std::ops::DerefMut;

use ::bytes::Bytes;

use crate::{Pooled, PooledOwned, Recycle, SizedGuard};

impl<R, P> PooledOwned<Vec<u8>, R, P>
where
    R: Recycle<Vec<u8>> + Send + Sync + 'static,
    P: Send + Sync + 'static,
{
    /// The buffer's contents as [`Bytes`], with no copy: the `Bytes`, and
    /// every clone and slice of it, read the pooled buffer in place, and
    /// the buffer goes back to its pool (reset as any returned buffer is)
    /// when the last of them drops, on whichever thread that is.
    ///
    /// The same as `Bytes::from_owner(guard)`, which works too, since the
    /// guard is an `AsRef<[u8]>`.
    ///
    /// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
    ///
    /// # Examples
    ///
    /// ```standalone_crate
    /// use std::sync::Arc;
    /// use stashpool::bytes::BytePool;
    ///
    /// let pool = Arc::new(BytePool::new(4096));
    /// let mut buf = pool.get_owned();
    /// buf.extend_from_slice(b"shared by three readers");
    /// let bytes = buf.freeze();
    /// let readers: Vec<_> = (0..3)
    ///     .map(|_| {
    ///         let bytes = bytes.clone();
    ///         std::thread::spawn(move || bytes.len())
    ///     })
    ///     .collect();
    /// drop(bytes);
    /// for reader in readers {
    ///     assert_eq!(reader.join().unwrap(), 23);
    /// }
    /// // The last clone dropped: the buffer is back, and the next get reuses it.
    /// assert_eq!(pool.stats().returned, 1);
    /// drop(pool.get());
    /// assert_eq!(pool.stats().created, 1);
    /// ```
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl<R> Pooled<'static, Vec<u8>, R>
where
    R: Recycle<Vec<u8>> + Sync + 'static,
{
    /// The buffer's contents as [`Bytes`], with no copy, for a guard of a
    /// `static` pool (a `'static` guard): as `freeze` on an owned guard
    /// ([`PooledBufferOwned`](super::PooledBufferOwned)).
    ///
    /// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::BytePool;
    ///
    /// static BUFS: BytePool = BytePool::new(1024);
    ///
    /// let mut buf = BUFS.get();
    /// buf.extend_from_slice(b"header");
    /// let bytes = buf.freeze();
    /// let head = bytes.slice(..4);
    /// drop(bytes);
    /// assert_eq!(&head[..], b"head");
    /// assert_eq!(BUFS.stats().returned, 0); // `head` still reads the buffer
    /// drop(head);
    /// assert_eq!(BUFS.stats().returned, 1);
    /// ```
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl<G> SizedGuard<G>
where
    G: DerefMut<Target = Vec<u8>> + Send + 'static,
{
    /// The buffer's contents as [`Bytes`], with no copy, for a buffer of a
    /// [`BytePools`](super::BytePools) in an `Arc` (or a `static`): as
    /// `freeze` on an owned guard
    /// ([`PooledBufferOwned`](super::PooledBufferOwned)). A buffer made
    /// alone, above the largest class, is freed with the last clone.
    ///
    /// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use stashpool::bytes::BytePools;
    ///
    /// let pool = Arc::new(BytePools::new(64, 4096));
    /// let mut buf = pool.get_owned(100);
    /// buf.extend_from_slice(&[7; 100]);
    /// let bytes = buf.freeze();
    /// assert_eq!(bytes.len(), 100);
    /// drop(bytes);
    /// assert_eq!(pool.stats().returned, 1);
    /// ```
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl<R, P> PooledOwned<Box<[u8]>, R, P>
where
    R: Recycle<Box<[u8]>> + Send + Sync + 'static,
    P: Send + Sync + 'static,
{
    /// The chunk's first `len` bytes (what a read filled) as [`Bytes`],
    /// with no copy: the `Bytes`, and every clone and slice of it, read the
    /// chunk in place, and the chunk goes back to its pool (zeroed under
    /// [`Reset::Zero`](crate::Reset::Zero), as any written chunk) when the
    /// last of them drops, on whichever thread that is.
    ///
    /// `Bytes::from_owner(chunk)` works too, for the whole chunk.
    ///
    /// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
    ///
    /// # Panics
    ///
    /// If `len` is larger than the chunk.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::Read;
    /// use std::sync::Arc;
    /// use stashpool::bytes::ChunkPool;
    ///
    /// let pool = Arc::new(ChunkPool::new(64 * 1024));
    /// let mut input = &b"a message of 24 bytes..."[..];
    ///
    /// let mut chunk = pool.get_owned();
    /// let n = input.read(&mut chunk).unwrap();
    /// let message = chunk.freeze(n);
    /// assert_eq!(&message[..], b"a message of 24 bytes...");
    ///
    /// let copies = [message.clone(), message.clone()];
    /// drop(message);
    /// assert_eq!(pool.stats().returned, 0); // two clones still read it
    /// drop(copies);
    /// assert_eq!(pool.stats().returned, 1);
    /// ```
    pub fn freeze(self, len: usize) -> Bytes {
        freeze_chunk(self, len)
    }
}

impl<R> Pooled<'static, Box<[u8]>, R>
where
    R: Recycle<Box<[u8]>> + Sync + 'static,
{
    /// The chunk's first `len` bytes as [`Bytes`], with no copy, for a
    /// guard of a `static` pool (a `'static` guard): as `freeze` on an
    /// owned chunk ([`PooledChunkOwned`](super::PooledChunkOwned)).
    ///
    /// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
    ///
    /// # Panics
    ///
    /// If `len` is larger than the chunk.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::bytes::ChunkPool;
    /// use stashpool::Reset;
    ///
    /// static CHUNKS: ChunkPool = ChunkPool::builder(4096).reset(Reset::Keep).build();
    ///
    /// let mut chunk = CHUNKS.get();
    /// chunk[..5].copy_from_slice(b"hello");
    /// let bytes = chunk.freeze(5);
    /// assert_eq!(&bytes[..], b"hello");
    /// ```
    pub fn freeze(self, len: usize) -> Bytes {
        freeze_chunk(self, len)
    }
}

/// `Bytes` of the first `len` bytes of `chunk`, which it owns.
fn freeze_chunk(chunk: impl AsRef<[u8]> + Send + 'static, len: usize) -> Bytes {
    let whole = chunk.as_ref().len();
    assert!(
        len <= whole,
        "stashpool: freeze({len}) of a chunk of {whole} bytes"
    );
    let mut bytes = Bytes::from_owner(chunk);
    // Shortens the view only: the owner, and so the chunk, is kept whole.
    bytes.truncate(len);
    bytes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::bytes::ChunkPool;

    #[test]
    fn a_frozen_chunk_reads_in_place_and_comes_back_with_its_last_clone() {
        let pool = Arc::new(ChunkPool::new(16));
        let mut chunk = pool.get_owned();
        chunk[..3].copy_from_slice(b"abc");
        let at = chunk.as_ptr();
        let bytes = chunk.freeze(3);
        assert_eq!(bytes.as_ptr(), at, "no copy");
        let tail = bytes.slice(1..);
        drop(bytes);
        assert_eq!(pool.stats().returned, 0);
        assert_eq!(&tail[..], b"bc");
        drop(tail);
        assert_eq!(pool.stats().returned, 1);
        // Written: zeroed on return, under the default `Reset::Zero`.
        assert_eq!(&pool.get()[..3], [0; 3]);
    }

    #[test]
    #[should_panic(expected = "stashpool: freeze(17) of a chunk of 16 bytes")]
    fn freezing_more_than_the_chunk_panics() {
        let pool = Arc::new(ChunkPool::new(16));
        let _ = pool.get_owned().freeze(17);
    }
}

//! Small `BytesMut` buffers carved from shared slabs (feature `bytes`):
//! Node's `Buffer.allocUnsafe` pool, done safely.
//!
//! Node keeps one 8 KiB slab and serves every `Buffer.allocUnsafe(n)` with
//! `n < slab / 2` by handing out the next `n` bytes of it, so thousands of
//! small buffers cost one allocation. A [`SlabPool`] does the same with
//! [`bytes::BytesMut`]: a piece is a `BytesMut` view of
//! its own disjoint range of a slab (`BytesMut::split_off`), the slab is
//! reference-counted by `bytes`, and its memory is freed when the last
//! piece cut from it, and its unused remainder, have dropped.
//!
//! [`bytes::BytesMut`]: https://docs.rs/bytes/1/bytes/struct.BytesMut.html
//!
//! Each thread carves from its own current slab: the remainder of a slab
//! is the object this pool keeps in a [`LocalPool`], so carving takes no
//! lock and slabs idle since the previous sweep are let go by the next one,
//! as for any other pooled object. A slab whose room has run out is used
//! again from the front, where it is, once every piece cut from it has
//! dropped (`BytesMut::try_reclaim`); only a slab still held by live
//! pieces is given up for a new one.
//!
//! Unlike `allocUnsafe`, nothing here exposes uninitialised memory: a piece
//! starts with `len() == 0`, and `BytesMut` only lets safe code read what
//! was written into it.
//!
//! # Examples
//!
//! ```
//! use bytes::BufMut;
//! use stashpool::slab::SlabPool;
//!
//! static SLABS: SlabPool = SlabPool::new(8 * 1024);
//!
//! let mut frames = Vec::new();
//! for i in 0..100u32 {
//!     let mut frame = SLABS.alloc(8);
//!     frame.put_u32(i); // a length-prefixed message header, say
//!     frame.put_u32(i * 2);
//!     frames.push(frame.freeze());
//! }
//! assert_eq!(&frames[7][..], &[0, 0, 0, 7, 0, 0, 0, 14]);
//! assert_eq!(SLABS.stats().created, 1); // 100 buffers, one allocation
//! ```

use std::fmt;
use std::mem;

use ::bytes::{Bytes, BytesMut};

use crate::resource::fallible;
use crate::resource::sealed::{Preload, Resource};
use crate::resource::{ResourceBuilder, const_build, resource_pool};
use crate::{LocalPool, Recycle};

const BAD_SIZE: &str = "stashpool: a SlabPool slab size must be non-zero and at most isize::MAX";

/// Pieces start at multiples of this many bytes from their slab's start
/// (as in Node), so word-sized loads and stores in them stay aligned.
const ALIGN: usize = 8;

/// Small [`BytesMut`] buffers carved from shared slabs of `slab_capacity`
/// bytes; larger ones allocated alone.
///
/// [`alloc`](Self::alloc)`(len)` with `len < slab_capacity / 2` cuts a piece of
/// at least `len` bytes from this thread's current slab. When the slab has
/// too little room left, it starts over from its front if every piece cut
/// from it has dropped, else a new slab is started. Larger requests get
/// a `BytesMut` of their own. Either way the caller owns the result
/// outright: it can grow it, freeze it into [`Bytes`], or send it to
/// another thread, and the slab's memory is freed once every piece of it
/// has dropped.
///
/// [`BytesMut`]: https://docs.rs/bytes/1/bytes/struct.BytesMut.html
/// [`Bytes`]: https://docs.rs/bytes/1/bytes/struct.Bytes.html
///
/// [`stats`](crate::Pool::stats) counts slabs and cuts, not pieces alone:
/// `created` is slabs allocated, `gets` is cuts (each piece, and each time
/// a slab was found used up), `reused` the cuts from a slab already
/// started, and `discarded` the slabs given up, used up while pieces of
/// them were still alive. So `created` against the pieces `alloc` handed
/// out is slabs per piece, and `discarded` near `created` says that live
/// pieces pinned nearly every slab (see the sizing rule below).
///
/// # Sizing slabs
///
/// A slab's memory is freed, or carved again, only once every piece cut
/// from it has dropped: a slab lives as long as its longest-lived piece.
/// Slabs pay where the pieces of a slab die at about the same time (the
/// header fields of a request, a batch of packets sent on): the slab is
/// reclaimed whole and carved again, and a few slabs serve any number of
/// pieces. Where one piece of each slab lives on (an entry kept in a
/// cache, a connection's state kept for its lifetime), that piece pins the
/// whole slab: at worst the pool holds a slab for every long-lived piece,
/// `slab_capacity / len` times the bytes the pieces need.
///
/// So pick `slab_capacity` from the pieces' lifetimes, not their size
/// alone:
///
/// * pieces dropped before a slab's worth of others is cut (within a
///   request, a batch, a loop's turn): `slab_capacity` of 16 or more
///   pieces, 8 KiB for pieces of up to 512 bytes as in Node;
/// * pieces that outlive most of their neighbours: at most
///   `slab_capacity / len` times their bytes is the cost; take them from a
///   pool of their own with a small `slab_capacity` (four pieces keeps the
///   waste within 4x), copy them out of the slab before keeping them
///   (`Bytes::copy_from_slice`), or allocate them alone, as
///   [`alloc`](Self::alloc) does for `len >= slab_capacity / 2`.
///
/// ```
/// use stashpool::slab::SlabPool;
///
/// // Eight pieces of 512 bytes a slab, dropped as they are used: the
/// // slab is reclaimed whole each time, and one serves all 64.
/// let pool = SlabPool::builder(4096).manual_sweep().build();
/// for _ in 0..64 {
///     drop(pool.alloc(512));
/// }
/// assert_eq!(pool.stats().created, 1);
///
/// // One piece of every eight kept: each pins its slab, 4 KiB held for
/// // every 512 bytes kept, and every slab but the last was given up.
/// let pool = SlabPool::builder(4096).manual_sweep().build();
/// let kept: Vec<_> = (0..64)
///     .map(|i| (i, pool.alloc(512)))
///     .filter(|(i, _)| i % 8 == 0)
///     .collect();
/// let stats = pool.stats();
/// assert_eq!((kept.len(), stats.created, stats.discarded), (8, 8, 7));
/// ```
///
/// What slabs save is allocator calls and per-allocation overhead: one
/// allocation per slab (and one for its shared reference count) instead of
/// one per buffer, so many small live buffers take fewer calls and less
/// heap. For small buffers they are not faster than a thread-caching
/// `malloc`, one at a time or in a batch: `BytesMut` can share memory only
/// through `bytes`' reference count, so cutting a piece and dropping it
/// are two atomic read-modify-writes on it, where `malloc` and `free` of
/// a small block from a thread cache take none; and finding this thread's
/// slab in its stash costs what any pooled object's `get` and return cost.
/// Pieces larger than such a cache keeps (glibc's: up to 1032 bytes), say
/// 1500-byte packets from 64 KiB slabs, cost what small ones do, while
/// `malloc` searches its bins for them: there carving is the faster path.
///
/// # Examples
///
/// ```
/// use stashpool::slab::SlabPool;
///
/// let pool = SlabPool::new(4096);
/// let mut a = pool.alloc(100);
/// let mut b = pool.alloc(100);
/// a.extend_from_slice(b"first");
/// b.extend_from_slice(b"second");
/// assert_eq!((&a[..], &b[..]), (&b"first"[..], &b"second"[..]));
/// assert_eq!(pool.stats().created, 1); // both from one slab
/// ```
pub struct SlabPool {
    /// The slabs threads carve from.
    slabs: LocalPool<Slab, SlabRecycler>,
}

impl SlabPool {
    /// A pool that carves buffers of less than `slab_capacity / 2` bytes from
    /// slabs of `slab_capacity` bytes.
    ///
    /// `const`, so a pool can be a `static`.
    ///
    /// # Panics
    ///
    /// If `slab_capacity` is zero or larger than `isize::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::slab::SlabPool;
    ///
    /// let pool = SlabPool::new(64 * 1024);
    /// assert_eq!(pool.slab_capacity(), 64 * 1024);
    /// ```
    pub const fn new(slab_capacity: usize) -> Self {
        fallible::check_len(slab_capacity, BAD_SIZE);
        Self {
            slabs: LocalPool::new(SlabRecycler { slab_capacity }),
        }
    }

    /// A builder, to set the core knobs (they apply to slab remainders).
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::slab::SlabPool;
    ///
    /// let pool = SlabPool::builder(8192).max_stashed(2).build();
    /// assert!(pool.alloc(10).capacity() >= 10);
    /// ```
    pub const fn builder(slab_capacity: usize) -> ResourceBuilder<Self> {
        ResourceBuilder::new(slab_capacity)
    }

    /// An empty buffer with room for at least `len` bytes: carved from a
    /// slab if `len < slab_capacity / 2`, else allocated alone.
    ///
    /// # Panics
    ///
    /// If the memory cannot be allocated, for example when `len` is larger
    /// than `isize::MAX`. It panics rather than aborts, so the caller can
    /// catch it.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::slab::SlabPool;
    ///
    /// let pool = SlabPool::new(1024);
    /// let small = pool.alloc(100); // carved
    /// let large = pool.alloc(600); // alone
    /// assert!(small.is_empty() && small.capacity() >= 100);
    /// assert!(large.is_empty() && large.capacity() >= 600);
    /// assert_eq!(pool.stats().created, 1);
    /// ```
    pub fn alloc(&self, len: usize) -> BytesMut {
        let slab_capacity = self.slab_capacity();
        if len >= slab_capacity / 2 {
            return bytes_mut(len);
        }
        // Round up so the next piece starts aligned, but never past a whole
        // slab, so that a fresh slab always has room and the loop ends.
        let room = len.next_multiple_of(ALIGN).min(slab_capacity);
        loop {
            // The piece is cut off the front and the remainder stays in
            // place, in this thread's stash: one stash lookup per piece.
            let piece = self.slabs.with(|slab| {
                if slab.rest.capacity() < room && !slab.reclaim(slab_capacity) {
                    // Too little left, and pieces still hold the slab: let
                    // it go (it is freed with the last piece cut from it).
                    // `recycle` refuses a spent slab, so the next round
                    // takes another one, or a fresh one, counted created.
                    slab.spend();
                    return None;
                }
                let rest = slab.rest.split_off(room);
                Some(mem::replace(&mut slab.rest, rest))
            });
            if let Some(piece) = piece {
                return piece;
            }
        }
    }

    /// The size of each slab, in bytes.
    ///
    /// # Examples
    ///
    /// ```
    /// use stashpool::slab::SlabPool;
    ///
    /// assert_eq!(SlabPool::new(2048).slab_capacity(), 2048);
    /// ```
    pub fn slab_capacity(&self) -> usize {
        self.slabs.recycler().slab_capacity
    }
}

resource_pool!(
    [] SlabPool,
    |this| std::iter::once(&this.slabs as &dyn crate::Pool),
    "stashpool::slab::SlabPool::new(4096)"
);

impl fmt::Debug for SlabPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlabPool")
            .field("slab_capacity", &self.slab_capacity())
            .field("slabs", &self.slabs)
            .finish()
    }
}

impl Resource for SlabPool {
    /// The slab size.
    type Params = usize;
}

impl Preload for SlabPool {}

const_build!(
    [] SlabPool,
    |slab_capacity, knobs| {
        fallible::check_len(slab_capacity, BAD_SIZE);
        SlabPool {
            slabs: knobs.pool(SlabRecycler { slab_capacity }),
        }
    },
    "stashpool::slab::SlabPool::builder(8192)",
    "stashpool::slab::SlabPool"
);

/// What a thread carves from: the unused end of a slab.
struct Slab {
    /// The part of the slab no piece has been cut from, always empty
    /// (`len() == 0`); pieces are cut off its front.
    rest: BytesMut,
    /// Set when this thread gave the slab up: it is not pooled again.
    spent: bool,
}

impl Slab {
    /// Makes the slab whole again if every piece cut from it has dropped:
    /// it is then reused where it is, with no allocation and no trip
    /// through the pool. `false` while a piece is alive.
    ///
    /// `try_reclaim` checks that `rest` is the last handle with an
    /// acquiring load of the slab's reference count, which every piece's
    /// drop released, so whatever a piece's owner wrote, on any thread,
    /// happens before the memory is handed out again.
    #[cold]
    fn reclaim(&mut self, slab_capacity: usize) -> bool {
        self.rest.try_reclaim(slab_capacity)
    }

    /// Gives the slab up: its memory goes with its last piece.
    #[cold]
    fn spend(&mut self) {
        self.rest = BytesMut::new();
        self.spent = true;
    }
}

/// Makes slabs; keeps them until they are spent.
struct SlabRecycler {
    slab_capacity: usize,
}

impl Recycle<Slab> for SlabRecycler {
    fn create(&self) -> Slab {
        let mut rest = bytes_mut(self.slab_capacity);
        // Turn the slab into `bytes`' shared form (a reference-counted
        // header beside the memory) now, rather than in the first
        // `split_off`, so that every piece takes the same path.
        drop(rest.split_off(self.slab_capacity));
        Slab { rest, spent: false }
    }

    /// Keeps a slab even when it has no room left: once its pieces have
    /// dropped, the next `alloc` on this thread reclaims it whole.
    fn recycle(&self, slab: &mut Slab) -> bool {
        !slab.spent
    }

    /// The whole slab, carved or not: its memory is freed only with the
    /// last piece.
    fn footprint(&self, _: &Slab) -> usize {
        self.slab_capacity
    }
}

/// An empty `BytesMut` with room for `capacity` bytes.
///
/// `BytesMut::with_capacity` aborts the process when the allocator fails;
/// this allocates the vector fallibly and hands it to `bytes` (which takes
/// it over without copying, since the `Bytes` is unique).
///
/// # Panics
///
/// If the allocation fails.
fn bytes_mut(capacity: usize) -> BytesMut {
    BytesMut::from(Bytes::from(fallible::with_capacity(capacity)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handed_over_vector_keeps_its_allocation_and_capacity() {
        let buf = bytes_mut(1000);
        assert!(buf.is_empty());
        assert!(buf.capacity() >= 1000);
    }
}

//! Go's `sync.Pool` for Rust: reusable objects in per-thread stashes over a
//! shared overflow, trimmed by sweeps so a pool grows when busy and shrinks
//! when idle.
//!
//! Programs that make and drop many short-lived heavy objects (byte buffers,
//! strings, readers and writers, image frames) pay for it in allocation, page
//! faults and cache misses. A [`LocalPool`] keeps such objects for reuse:
//!
//! * **Fast where it matters.** Each thread keeps a small private stash; a
//!   get and a return on the same thread take no lock and write no cache
//!   line that another thread writes, unless one holds the stash (a sweep,
//!   say). An empty stash takes a batch from a shared overflow (a
//!   `crossbeam_deque::Injector`); a full one moves half its objects there;
//!   and a stash keeps only what its own thread's use calls for (none, for
//!   a thread that only returns), so objects flow back from threads that
//!   drop them to threads that take them: to the taker's own stash, or, from
//!   a thread that gives back for many takers, in batches of 8.
//! * **Gives memory back.** A sweep drops every object that has been idle
//!   since the previous sweep (Go's victim cache): an object returned and
//!   never taken again survives one sweep and is dropped by the second,
//!   wherever it is, also in the stash of a thread that is blocked or gone.
//!   A process-wide background thread sweeps every pool on its interval.
//! * **Scoped or guarded.** [`LocalPool::with`] lends an object to a closure;
//!   [`LocalPool::get`] returns a guard that gives it back on drop;
//!   [`LocalPool::get_owned`] a guard that can cross threads.
//! * **`static` pools.** [`LocalPool::new`] is a `const fn`, and so is every
//!   builder with its `build`: a configured pool is a plain `static`.
//! * **Threads too.** `workers::WorkerPool` (feature `workers`, on by
//!   default) recycles threads the way Go's goroutine pools do.
//!
//! # Examples
//!
//! ```
//! use stashpool::LocalPool;
//!
//! static BUFS: LocalPool<Vec<u8>> = LocalPool::new(|| Vec::with_capacity(4096));
//!
//! fn render(n: u32) -> usize {
//!     BUFS.with(|buf| {
//!         buf.clear();
//!         buf.extend_from_slice(format!("item {n}").as_bytes());
//!         buf.len()
//!     })
//! }
//!
//! assert_eq!(render(7), 6);
//! assert_eq!(BUFS.stats().created, 1);
//! assert_eq!(render(8), 6);
//! assert_eq!(BUFS.stats().reused, 1); // the same buffer, no allocation
//! ```
//!
//! Resetting returned objects and refusing oversized ones is the job of a
//! [`Recycle`] implementation.
//!
//! Ready-made pools, each built on `LocalPool` and resetting what it takes
//! back: [`bytes`] (byte and text buffers, size classes, chunks to read
//! into), [`io`] (buffered readers and writers, copy buffers), `image`
//! (RGBA, grayscale and Y'CbCr frames, feature `image`), `mmap` (anonymous
//! memory maps, feature `mmap`) and `slab` (slab-carved `BytesMut`, feature
//! `bytes`). With the `bytes` feature, byte guards fit the `bytes` crate and
//! tokio: a `Vec<u8>` guard is a `bytes::BufMut` (`read_buf(&mut guard)`),
//! and an owned guard becomes a `bytes::Bytes` with no copy (`freeze`),
//! whose buffer goes back to its pool with the last clone (see [`bytes`]).
//!
//! # One surface
//!
//! Every pool of objects, `LocalPool` and the ready-made ones alike,
//! answers the same calls: `get` (a guard), `try_get` (an idle object or
//! `None`, never a new one), `get_owned` on an `Arc` (a `'static` guard),
//! `with` (scoped use), `put` (Go's `Put`), and [`Pool`]'s `sweep`, `clear`
//! and `stats`. A multi-size pool (`BytePools`, `MmapPools`, `RgbaPools`,
//! `GrayPools`, `YCbCrPools`: the plural of its one-size pool) takes the
//! size first:
//! `get(len)`, `with(width, height, f)`. The reader and writer pools lend a
//! reader or writer over a stream: `get(inner)` and `with(inner, f)`;
//! `CopyPool` copies (`copy`, `read_all`) and `SlabPool` carves
//! (`alloc(len)`) through objects they keep to themselves.
//!
//! Guards that dereference to their object ([`Pooled`], [`PooledOwned`],
//! [`SizedGuard`]) give it up with an associated function,
//! `Pooled::into_inner(guard)`, which cannot shadow a method of the object;
//! the reader and writer guards, which are the reader or writer rather
//! than dereference to one, have std's `into_inner` method.
//!
//! In names, "capacity" is a size in bytes (`BytePool::capacity`,
//! `MmapPool::capacity`, `max_capacity`), counts of objects are `max_*`
//! (`max_stashed`, `max_idle`), and what idle objects hold, as
//! [`Recycle::footprint`] counts it, is `*_bytes` (`max_idle_bytes`,
//! `Stats::idle_bytes`).

//! # Configured statics and pools in structs
//!
//! A pool's type names its recycler: `LocalPool<T>` is `LocalPool<T, fn() -> T>`.
//! A closure that captures nothing coerces to that `fn` pointer where the
//! type asks for it. Every builder and its `build` are `const fn`, so a
//! configured pool is a plain `static`, as Go's `var pool = sync.Pool{...}`
//! is (a `LazyLock` is for settings known only at run time, such as a bound
//! per core); nothing is allocated until the pool's first use. A recycler
//! that needs state is a type of its own:
//!
//! ```
//! use stashpool::bytes::ChunkPool;
//! use stashpool::{LocalPool, Recycle, Reset};
//!
//! fn buffer() -> Vec<u8> {
//!     Vec::with_capacity(4096)
//! }
//!
//! // Default configuration: `new` is `const`.
//! static PLAIN: LocalPool<Vec<u8>> = LocalPool::new(buffer);
//! // Configured: the builder is `const` too.
//! static BOUNDED: LocalPool<Vec<u8>> =
//!     LocalPool::builder(buffer as fn() -> Vec<u8>).max_idle(64).build();
//! // Go `bp`'s behaviour, contents kept, and 8 chunks ready from the start.
//! static CHUNKS: ChunkPool = ChunkPool::builder(64 * 1024)
//!     .reset(Reset::Keep)
//!     .preload(8)
//!     .build();
//!
//! // A recycler with state, named so that a struct field can name the pool.
//! struct Sized(usize);
//! impl Recycle<Vec<u8>> for Sized {
//!     fn create(&self) -> Vec<u8> {
//!         Vec::with_capacity(self.0)
//!     }
//!     fn recycle(&self, buf: &mut Vec<u8>) -> bool {
//!         buf.clear();
//!         buf.capacity() <= 4 * self.0
//!     }
//! }
//!
//! struct Server {
//!     bodies: LocalPool<Vec<u8>, Sized>,
//!     heads: LocalPool<Vec<u8>>,
//! }
//!
//! let server = Server {
//!     bodies: LocalPool::builder(Sized(64 * 1024)).max_idle(16).build(),
//!     heads: LocalPool::new(|| Vec::with_capacity(512)),
//! };
//! server.bodies.with(|body| body.extend_from_slice(b"hello"));
//! server.heads.with(|head| head.push(b'G'));
//! PLAIN.with(|buf| buf.push(1));
//! BOUNDED.with(|buf| buf.push(1));
//! assert_eq!(CHUNKS.stats().created, 8);
//! assert_eq!(server.bodies.stats().returned, 1);
//! ```
//!
//! # In async code
//!
//! A guard borrows its pool: [`Pooled`] can be held across an `.await` in a
//! future that borrows the pool, and a `static` pool's guard,
//! `Pooled<'static, T>`, is `Send` when `T` is, so it can travel in a
//! spawned task. A pool that is not `static` lends `'static` guards through
//! `get_owned` on an `Arc` ([`LocalPool::get_owned`], and the same call of
//! every ready-made pool). A guard may be dropped on another
//! thread than the one that took it (a task that moved between an
//! executor's threads): its object then goes to that thread's stash, or to
//! the overflow, and nothing is lost.
//!
//! ```standalone_crate
//! use std::sync::Arc;
//! use stashpool::{LocalPool, Pooled, PooledOwned};
//!
//! // What a spawned task must be: `Send + 'static`.
//! fn spawn(task: impl FnOnce() + Send + 'static) {
//!     std::thread::spawn(task).join().unwrap();
//! }
//!
//! static SCRATCH: LocalPool<Vec<u8>> = LocalPool::new(Vec::new);
//! let guard: Pooled<'static, Vec<u8>> = SCRATCH.get();
//! spawn(move || drop(guard));
//!
//! let pool = Arc::new(LocalPool::new(String::new as fn() -> String));
//! let owned: PooledOwned<String> = pool.get_owned();
//! spawn(move || drop(owned));
//! assert_eq!(pool.stats().returned, 1);
//! ```
//!
//! Every ready-made pool's owned guard has a name, as its borrowed guard
//! has (`bytes::PooledBufferOwned` beside `PooledBuffer`,
//! `bytes::PooledChunkOwned`, `bytes::SizedBufferOwned`,
//! `mmap::PooledMmapOwned`, `image::PooledRgbaOwned`, ...): the type that a
//! channel, a queue or a struct field of guards names.
//!
//! ```standalone_crate
//! use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
//! use std::sync::{Arc, LazyLock, Mutex};
//! use stashpool::bytes::{BytePool, PooledBufferOwned};
//!
//! // A channel of owned guards, in a `static`.
//! type Channel = (SyncSender<PooledBufferOwned>, Mutex<Receiver<PooledBufferOwned>>);
//! static BODIES: LazyLock<Channel> = LazyLock::new(|| {
//!     let (send, receive) = sync_channel(8);
//!     (send, Mutex::new(receive))
//! });
//!
//! let pool = Arc::new(BytePool::new(4096));
//! let producer = {
//!     let pool = Arc::clone(&pool);
//!     std::thread::spawn(move || {
//!         for i in 0..3 {
//!             let mut body = pool.get_owned();
//!             body.extend_from_slice(format!("body {i}").as_bytes());
//!             BODIES.0.send(body).unwrap();
//!         }
//!     })
//! };
//! let bodies: Vec<PooledBufferOwned> = (0..3)
//!     .map(|_| BODIES.1.lock().unwrap().recv().unwrap())
//!     .collect();
//! producer.join().unwrap();
//! assert_eq!(&bodies[2][..], b"body 2");
//! drop(bodies); // back to the pool, from this thread
//! assert_eq!(pool.stats().returned, 3);
//! ```
//!
//! # How it works
//!
//! [`implementation`] (the repository's `IMPLEMENTATION.md`) describes the
//! algorithm: the stash handshake that lets a sweeper reach any thread's
//! stash while owners pay only a compiler fence (once the process uses
//! `membarrier`), spill and steal, the age stamps that carry the victim
//! rule through the overflow, and why each step is correct.

#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// Pooled objects live in boxed nodes on purpose, in `Vec`s too (`node.rs`).
#![allow(clippy::vec_box)]

#[cfg(not(stashpool_loom))]
pub mod bytes;
#[cfg(all(feature = "image", not(stashpool_loom)))]
pub mod image;
#[cfg(not(stashpool_loom))]
pub mod io;
mod lazy;
#[cfg(all(feature = "mmap", not(stashpool_loom)))]
pub mod mmap;
#[cfg(not(stashpool_loom))]
mod per_thread;
mod pool;
#[cfg(not(stashpool_loom))]
mod resource;
#[cfg(all(feature = "bytes", not(stashpool_loom)))]
pub mod slab;
mod sync;
#[cfg(feature = "workers")]
pub mod workers;

pub mod implementation {
    //! How stashpool works: the design notes of the repository's
    //! `IMPLEMENTATION.md`, for the engineer who will change the code.
    #![doc = include_str!("../IMPLEMENTATION.md")]
}

// The README's examples run as doctests (one of them needs `bytes`).
#[cfg(all(doctest, feature = "bytes"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use pool::{
    DEFAULT_MAX_STASHED, DEFAULT_SWEEP_INTERVAL, LocalPool, LocalPoolBuilder, MIN_SWEEP_INTERVAL,
    Pool, Pooled, PooledOwned, Recycle, Stats,
};
#[cfg(not(stashpool_loom))]
pub use resource::ResourceBuilder;
#[cfg(not(stashpool_loom))]
pub use resource::classes::{Guard, SizedGuard};
#[cfg(not(stashpool_loom))]
pub use resource::reset::Reset;
#[cfg(not(stashpool_loom))]
pub use resource::sealed::{Contents, Preload, Resource};

//! Pools of byte and text buffers: [`BytePool`] of `Vec<u8>`,
//! [`StringPool`] of `String`, and [`BytePools`] for buffers whose
//! size varies from use to use, all to write into; and [`ChunkPool`] of
//! full-length chunks, to read into.
//!
//! Buffers come out empty and go back cleared: what one user wrote lies
//! beyond the buffer's `len`, where the safe API cannot read it. A buffer
//! that grew past its pool's `max_capacity` is dropped on return instead of
//! pooled, so one rare huge message does not pin its memory for as long as
//! the pool lives (the lesson of Go issue 23199).
//!
//! A chunk comes out at its full length, for `Read::read` to fill: zeroed
//! when made and, once written, zeroed again on return under
//! [`Reset::Zero`](crate::Reset::Zero), or left as its user left it under
//! [`Reset::Keep`](crate::Reset::Keep), as Go's `bp` does (see
//! [`ChunkPool`]).
//!
//! Pooled `Vec<u8>` buffers are [`io::Write`](std::io::Write)rs and pooled
//! `String`s are [`fmt::Write`](std::fmt::Write)rs: the guards forward both,
//! so `write!(buf, ...)` works on a guard and a function that takes
//! `impl Write` takes the guard itself.
//!
//! ```
//! use std::io::Write;
//! use stashpool::bytes::BytePool;
//!
//! fn emit(out: &mut impl Write) -> std::io::Result<()> {
//!     out.write_all(b"event\n")
//! }
//!
//! let pool = BytePool::new(256);
//! let mut buf = pool.get();
//! emit(&mut buf).unwrap();
//! assert_eq!(&buf[..], b"event\n");
//! ```
//!
//! Every byte guard, borrowed and owned, is an `AsRef<[u8]>` and an
//! `AsMut<[u8]>` (the guards forward `AsRef` and `AsMut` to their
//! buffer's). With the `bytes` feature, where Rust programs keep their
//! buffers:
//!
//! * a `Vec<u8>` guard ([`BytePool`], [`BytePools`], or a `LocalPool` of
//!   `Vec<u8>`) is a `bytes::BufMut`, so tokio's `read_buf(&mut guard)`
//!   reads into its spare capacity and `put_slice` appends to it;
//! * an owned guard (from `get_owned`, or a `static` pool's guard) becomes
//!   a `bytes::Bytes` with no copy, `guard.freeze()` (a chunk:
//!   `chunk.freeze(len)`, its first `len` bytes), and its buffer goes back
//!   to the pool when the last clone drops; `Bytes::from_owner(guard)` does
//!   the same.
//!
#![cfg_attr(feature = "bytes", doc = "```")]
#![cfg_attr(not(feature = "bytes"), doc = "```ignore")]
//! use bytes::{BufMut, Bytes};
//! use stashpool::bytes::BytePool;
//! use tokio::io::AsyncReadExt;
//!
//! static BUFS: BytePool = BytePool::new(4096);
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> std::io::Result<()> {
//!     let mut socket = &b"twelve bytes"[..]; // stands in for a `TcpStream`
//!     let mut buf = BUFS.get();
//!     let n = socket.read_buf(&mut buf).await?; // into the spare capacity
//!     buf.put_slice(b"\n");
//!     assert_eq!((n, &buf[..]), (12, &b"twelve bytes\n"[..]));
//!
//!     let line: Bytes = buf.freeze(); // no copy
//!     let for_another_task = line.clone();
//!     drop(line);
//!     assert_eq!(BUFS.stats().returned, 0); // a clone still reads the buffer
//!     drop(for_another_task);
//!     assert_eq!(BUFS.stats().returned, 1); // back with the last clone
//!     Ok(())
//! }
//! ```
//!
//! # Examples
//!
//! Encode messages into pooled buffers; after warming up no message
//! allocates:
//!
//! ```
//! use std::io::Write;
//! use stashpool::bytes::BytePool;
//!
//! static BUFS: BytePool = BytePool::new(1024);
//!
//! fn encode(id: u32, body: &str) -> usize {
//!     let mut buf = BUFS.get();
//!     write!(buf, "{id}:{}:{body}\n", body.len()).unwrap();
//!     buf.len() // a real program would send `buf` here
//! }
//!
//! for id in 0..100 {
//!     assert_eq!(encode(id, "hello"), format!("{id}:5:hello\n").len());
//! }
//! assert_eq!(BUFS.stats().created, 1);
//! ```
//!
//! Buffers sized per request:
//!
//! ```
//! use stashpool::bytes::BytePools;
//!
//! let pool = BytePools::new(256, 1 << 20);
//! for len in [100, 5_000, 70_000, 5_000] {
//!     let mut buf = pool.get(len);
//!     buf.resize(len, 0xAB);
//! }
//! assert_eq!(pool.stats().reused, 1); // the second 5 000-byte request
//! ```

#[cfg(feature = "bytes")]
mod buf_mut;
mod buffer;
mod byte_pools;
mod chunk;
#[cfg(feature = "bytes")]
mod freeze;

pub use buffer::{
    Buffer, BufferPool, BufferRecycler, BytePool, DEFAULT_MAX_CAPACITY_FACTOR, PooledBuffer,
    PooledBufferOwned, StringPool,
};
pub use byte_pools::{BytePools, MAX_CLASS, SizedBuffer, SizedBufferOwned};
pub use chunk::{ChunkPool, ChunkRecycler, PooledChunk, PooledChunkOwned};

//! Pooled I/O buffers: buffered readers ([`BufReaderPool`]) and writers
//! ([`BufWriterPool`]), and copy buffers ([`CopyPool`]).
//!
//! `std::io::BufReader::new` and `BufWriter::new` allocate a fresh 8 KiB
//! buffer per stream, and `Read::read_to_end` grows a fresh vector per
//! body. For a program that handles many short streams these allocations
//! add up; the pools here lend each stream a pooled buffer and take it
//! back when the reader, writer or body is dropped.
//!
//! `std::io::copy` needs no buffer of its own, so [`CopyPool::copy`] uses
//! its pooled buffer only for the rest of a stream longer than the buffer,
//! which it reads in fewer calls, and never where a type says no buffer is
//! needed (see its docs for the rule).
//!
//! Under [`Reset::Zero`](crate::Reset::Zero), the default, the part of a
//! buffer lent to a `Read` implementation is zeroed before it is pooled
//! again (a reader may look at the bytes it is given); under
//! [`Reset::Keep`](crate::Reset::Keep) it is not. A write buffer or body
//! vector is cleared under either, so nothing one stream put in it can be
//! read through the next stream's use of it.
//!
//! # Examples
//!
//! Parse many small requests, each through a buffered reader, with one
//! buffer between them:
//!
//! ```
//! use std::io::BufRead;
//! use stashpool::io::BufReaderPool;
//!
//! static READERS: BufReaderPool = BufReaderPool::new(4096);
//!
//! fn header_count(request: &[u8]) -> std::io::Result<usize> {
//!     let mut count = 0;
//!     for line in READERS.get(request).lines() {
//!         if line?.is_empty() {
//!             break;
//!         }
//!         count += 1;
//!     }
//!     Ok(count)
//! }
//!
//! for _ in 0..10 {
//!     let request = b"GET / HTTP/1.1\nHost: example.com\nAccept: */*\n\nbody";
//!     assert_eq!(header_count(request).unwrap(), 3);
//! }
//! assert_eq!(READERS.stats().created, 1);
//! ```

mod copy;
mod known;
mod reader;
mod scratch;
mod writer;

pub use copy::CopyPool;
pub use reader::{BufReaderPool, PooledBufReader};
pub use writer::{BufWriterPool, PooledBufWriter};

//! Byte buffers allocated without aborting the process.
//!
//! Rust's infallible allocations (`Vec::with_capacity`, `vec![0; n]`) abort
//! the process when the allocator cannot meet a request. The resource pools
//! take their sizes from callers, so a size no allocator can serve (say
//! `usize::MAX`, or a width and height that multiply past the address
//! space) must end in a panic that names the problem, which a caller can
//! catch, and never in an abort. Every byte buffer the resource pools make
//! goes through here.

use std::alloc::{self, Layout};
use std::fmt;
use std::mem::MaybeUninit;

/// The largest byte buffer Rust can describe: `isize::MAX` bytes.
pub(crate) const MAX_LEN: usize = isize::MAX as usize;

/// Panics with `message`, in a `const` context too, unless
/// `0 < len <= MAX_LEN`.
pub(crate) const fn check_len(len: usize, message: &str) {
    if len == 0 || len > MAX_LEN {
        panic!("{}", message);
    }
}

/// An empty `Vec<u8>` with room for at least `capacity` bytes.
///
/// # Panics
///
/// If the allocation fails (also when `capacity > isize::MAX`).
pub(crate) fn with_capacity(capacity: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Err(err) = buf.try_reserve_exact(capacity) {
        failed(capacity, err);
    }
    buf
}

/// `len` zero bytes, from the allocator's zeroed allocation (`calloc`).
///
/// Not `with_capacity` and a fill: an allocator serves a large block from
/// fresh pages that the kernel zeroes as they are first touched, so a
/// caller that writes part of a large buffer pays for that part only,
/// where a fill would touch (and fault in) every page up front.
///
/// # Panics
///
/// If the allocation fails (also when `len > isize::MAX`).
pub(crate) fn zeroed(len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    let layout = match Layout::array::<u8>(len) {
        Ok(layout) => layout,
        Err(err) => failed(len, err),
    };
    // SAFETY: `layout` has a non-zero size (`len > 0`).
    let ptr = unsafe { alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        failed(len, "the allocator refused it");
    }
    // SAFETY:
    // - `ptr` is non-null and was allocated by the global allocator with
    //   the layout of `len` `u8`s, the layout a `Vec<u8>` of capacity `len`
    //   has;
    // - its `len` bytes are initialized: the allocator zeroed them.
    unsafe { Vec::from_raw_parts(ptr, len, len) }
}

/// `len` bytes not yet initialised, from a plain allocation: no page of it
/// is touched until its bytes are written.
///
/// For buffers whose users initialise what they use, as they use it
/// (`io::scratch`, which says why not [`zeroed`]).
///
/// # Panics
///
/// If the allocation fails (also when `len > isize::MAX`).
pub(crate) fn uninit(len: usize) -> Box<[MaybeUninit<u8>]> {
    let mut buf = Vec::<MaybeUninit<u8>>::new();
    if let Err(err) = buf.try_reserve_exact(len) {
        failed(len, err);
    }
    // SAFETY: `MaybeUninit<u8>` needs no initialisation, and the capacity
    // is at least `len` (reserved above, on an empty vector).
    unsafe { buf.set_len(len) };
    buf.into_boxed_slice()
}

#[cold]
#[track_caller]
fn failed(len: usize, err: impl fmt::Display) -> ! {
    panic!("stashpool: cannot allocate a buffer of {len} bytes: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_panic_instead_of_aborting() {
        // Past isize::MAX the size check refuses; 2^62 bytes reaches the
        // allocator, which refuses it (Miri cannot model that refusal: it
        // stops, so it runs the size checks only).
        let too_big: &[usize] = if cfg!(miri) {
            &[usize::MAX, MAX_LEN + 1]
        } else {
            &[usize::MAX, MAX_LEN + 1, 1 << 62]
        };
        for &len in too_big {
            let caught = std::panic::catch_unwind(|| with_capacity(len));
            assert!(caught.is_err(), "{len} bytes should not be allocatable");
        }
    }

    #[test]
    fn zeroed_is_zero_and_exact() {
        for len in [0, 1, 100, 4096 + 3] {
            let mut buf = zeroed(len);
            assert_eq!((buf.len(), buf.capacity()), (len, len));
            assert!(buf.iter().all(|&b| b == 0));
            // The buffer is an ordinary `Vec`: it grows and frees as one.
            buf.push(7);
            assert_eq!(buf[len], 7);
        }
    }

    #[test]
    fn impossible_zeroed_sizes_panic_instead_of_aborting() {
        let too_big: &[usize] = if cfg!(miri) {
            &[usize::MAX, MAX_LEN + 1]
        } else {
            &[usize::MAX, MAX_LEN + 1, 1 << 62]
        };
        for &len in too_big {
            let caught = std::panic::catch_unwind(|| zeroed(len));
            assert!(caught.is_err(), "{len} bytes should not be allocatable");
            let caught = std::panic::catch_unwind(|| uninit(len));
            assert!(caught.is_err(), "{len} bytes should not be allocatable");
        }
    }

    #[test]
    fn uninit_is_exact() {
        for len in [0, 1, 4096] {
            assert_eq!(uninit(len).len(), len);
        }
    }
}

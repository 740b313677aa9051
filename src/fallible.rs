//! Byte buffers allocated without aborting the process.
//!
//! Rust's infallible allocations (`Vec::with_capacity`, `vec![0; n]`) abort
//! the process when the allocator cannot meet a request. The resource pools
//! take their sizes from callers, so a size no allocator can serve (say
//! `usize::MAX`, or a width and height that multiply past the address
//! space) must end in a panic that names the problem, which a caller can
//! catch, and never in an abort. Every byte buffer the resource pools make
//! goes through here.

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

/// `len` zero bytes.
///
/// # Panics
///
/// If the allocation fails (also when `len > isize::MAX`).
pub(crate) fn zeroed(len: usize) -> Vec<u8> {
    let mut buf = with_capacity(len);
    buf.resize(len, 0);
    buf
}

#[cold]
#[track_caller]
fn failed(len: usize, err: std::collections::TryReserveError) -> ! {
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
        let buf = zeroed(100);
        assert_eq!(buf.len(), 100);
        assert!(buf.iter().all(|&b| b == 0));
    }
}

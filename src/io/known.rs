//! Recognising, by type, the readers and writers that
//! [`io::copy`](std::io::copy) already copies without an intermediate
//! buffer.
//!
//! [`io::copy`](std::io::copy) specialises on a few concrete types: it reads straight into
//! a `Vec<u8>` writer's spare capacity (`Read::read_to_end`), and writes a
//! `&[u8]` reader to the writer in one `write_all`. A pooled buffer between
//! them only adds a copy, so `CopyPool::copy` hands such streams to
//! `io::copy` whole. Its arguments are generic and may borrow (`W` is
//! `?Sized` and need not be `'static`), so [`std::any::Any`] cannot tell
//! what they are; [`typeid::of`] gives the [`TypeId`](std::any::TypeId) of
//! any type with its lifetimes erased, which is enough to recognise a type
//! when what it is compared with has no lifetime parameter (`Vec<u8>`) or
//! when the code it is handed to cannot depend on its lifetime.

use std::io::{Read, Write};

/// `writer` as the `Vec<u8>` it is, if it is one.
#[inline]
pub(crate) fn as_vec<W: Write + ?Sized>(writer: &mut W) -> Option<&mut Vec<u8>> {
    if typeid::of::<W>() != typeid::of::<Vec<u8>>() {
        return None;
    }
    // SAFETY: `typeid::of` erases lifetimes and nothing else, so equal ids
    // mean `W` is `Vec<u8>` up to lifetimes; `Vec<u8>` has none, so `W` is
    // exactly `Vec<u8>`. It is then sized, the cast only drops the (empty)
    // pointer metadata, and the reference keeps `writer`'s address,
    // provenance and borrow.
    Some(unsafe { &mut *(writer as *mut W).cast::<Vec<u8>>() })
}

/// Calls `f` with `reader` as the `&[u8]` it is, if it is one; `None`
/// (and `f` not called) otherwise.
#[inline]
pub(crate) fn with_slice<R, T>(
    reader: &mut R,
    f: impl for<'a> FnOnce(&mut &'a [u8]) -> T,
) -> Option<T>
where
    R: Read + ?Sized,
{
    if typeid::of::<R>() != typeid::of::<&[u8]>() {
        return None;
    }
    // SAFETY: equal lifetime-erased ids mean `R` is `&'x [u8]` for some
    // lifetime `'x` we cannot name (no other `Read` type erases to
    // `&[u8]`'s id); it is sized, so the cast only drops the (empty)
    // pointer metadata, and the reference keeps `reader`'s address,
    // provenance and borrow. The slice's lifetime is left to inference,
    // which may pick one other than `'x`, but `f` must work for every
    // lifetime `'a` and return a `T` chosen before it: it can neither
    // keep the slice it finds nor store one that does not live as long,
    // only reborrow or shorten the one that is there, which is right for
    // `'x` too.
    let slice = unsafe { &mut *(reader as *mut R).cast::<&[u8]>() };
    Some(f(slice))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{self, Cursor};

    #[test]
    fn a_vec_writer_is_recognised_and_written_through() {
        let mut out = vec![1u8];
        as_vec(&mut out).expect("a Vec<u8>").push(2);
        assert_eq!(out, [1, 2]);

        // Unsized, wrapped or borrowed writers are not `Vec<u8>`.
        let dyn_out: &mut dyn Write = &mut out;
        assert!(as_vec(dyn_out).is_none());
        assert!(as_vec(&mut Cursor::new(Vec::new())).is_none());
        assert!(as_vec(&mut &mut out).is_none());
        assert!(as_vec(&mut io::sink()).is_none());
    }

    #[test]
    fn a_slice_reader_is_recognised_and_advanced() {
        let data = [1u8, 2, 3];
        let mut reader = &data[..];
        let first = with_slice(&mut reader, |slice| {
            let first = slice[0];
            *slice = &slice[1..];
            first
        });
        assert_eq!(first, Some(1));
        assert_eq!(reader, [2, 3], "the caller's slice moved on");

        let mut cursor = Cursor::new(&data[..]);
        assert!(with_slice(&mut cursor, |_| ()).is_none());
        let dyn_reader: &mut dyn Read = &mut reader;
        assert!(with_slice(dyn_reader, |_| ()).is_none());
        assert!(with_slice(&mut &mut reader, |_| ()).is_none());
    }
}

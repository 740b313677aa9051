//! `Read` and `Write` fixtures shared by the io pool tests.

use std::cell::Cell;
use std::io::{self, Read, Write};

/// A reader of `len` zero bytes that records whether any buffer it is
/// lent holds a non-zero byte: it writes only zeros itself, so such a byte
/// was left by another user.
pub struct ZeroSource<'a> {
    pub len: usize,
    pub saw_dirty: &'a Cell<bool>,
}

impl Read for ZeroSource<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.iter().any(|&b| b != 0) {
            self.saw_dirty.set(true);
        }
        let n = buf.len().min(self.len);
        buf[..n].fill(0);
        self.len -= n;
        Ok(n)
    }
}

/// A writer that takes at most `chunk` bytes per call, failing with
/// `Interrupted` every other call.
pub struct Trickle {
    pub out: Vec<u8>,
    pub chunk: usize,
    pub calls: usize,
}

impl Write for Trickle {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(2) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = data.len().min(self.chunk);
        self.out.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

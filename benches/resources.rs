//! Each resource pool against the plain-Rust way of getting the same
//! resource, in one group so the ratios come from one run.
//!
//! Every pair does the same work per iteration: get the resource, use it
//! the way a program would (write a message, read a stream, fill a frame),
//! and let it go. `<pool>/stashpool` is the pool, the other ids are the
//! plain-Rust baselines.
//!
//! Run with `cargo bench --all-features --bench resources`.

use std::hint::black_box;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};

use bytes::{BufMut, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion};
use image::RgbaImage;
use memmap2::MmapMut;
use stashpool::bytes::{BytePool, SizeClassPool, StringPool};
use stashpool::image::{RgbaPool, Subsampling, YCbCrFrame, YCbCrPool};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::mmap::MmapPool;
use stashpool::slab::SlabPool;

/// The message written into byte and text buffers.
const MESSAGE: &[u8; 64] =
    b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n....";

/// A `Read` that hides what it reads from (as a decoder or a socket wrapper
/// does), so std cannot take its fast paths for slices.
struct Opaque<'a>(&'a [u8]);

impl Read for Opaque<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

/// A `Write` that drops what it is given, and that std knows nothing
/// about (as a socket or an encoder wrapper).
#[derive(Debug)]
struct Discard;

impl Write for Discard {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        black_box(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Counts the lines of a buffered stream without allocating per line, so
/// the reader's own cost is what shows.
fn count_lines(mut reader: impl BufRead) -> usize {
    let mut count = 0;
    loop {
        let chunk = reader.fill_buf().unwrap();
        if chunk.is_empty() {
            return count;
        }
        count += chunk.iter().filter(|&&b| b == b'\n').count();
        let n = chunk.len();
        reader.consume(n);
    }
}

fn lines(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| format!("header-{i}: some value\n").into_bytes())
        .collect()
}

fn resources(c: &mut Criterion) {
    let mut g = c.benchmark_group("resources");

    // === bytes ===
    let pool = BytePool::new(4096);
    g.bench_function("bytes/stashpool", |b| {
        b.iter(|| {
            let mut buf = pool.get();
            buf.extend_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });
    g.bench_function("bytes/vec_with_capacity", |b| {
        b.iter(|| {
            let mut buf = Vec::with_capacity(black_box(4096));
            buf.extend_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });
    g.bench_function("bytes/vec_zeroed", |b| {
        b.iter(|| {
            let mut buf = vec![0u8; black_box(4096)];
            buf[..64].copy_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });

    let pool = StringPool::new(256);
    let text = std::str::from_utf8(MESSAGE).unwrap();
    g.bench_function("string/stashpool", |b| {
        b.iter(|| {
            let mut s = pool.get();
            s.push_str(text);
            black_box(s.as_str());
        })
    });
    g.bench_function("string/string_with_capacity", |b| {
        b.iter(|| {
            let mut s = String::with_capacity(black_box(256));
            s.push_str(text);
            black_box(s.as_str());
        })
    });

    // Buffers of varying size, as for messages whose length a header
    // announced: 64 bytes written into each.
    let sizes = [64, 1000, 16 * 1024, 256 * 1024];
    let pool = SizeClassPool::new(64, 1 << 20);
    g.bench_function("size_class/stashpool", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let mut buf = pool.get(sizes[i % sizes.len()]);
            buf.extend_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });
    g.bench_function("size_class/vec_with_capacity", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let mut buf = Vec::with_capacity(sizes[i % sizes.len()]);
            buf.extend_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });
    g.bench_function("size_class/vec_zeroed", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let mut buf = vec![0u8; sizes[i % sizes.len()]];
            buf[..64].copy_from_slice(MESSAGE);
            black_box(&buf[..]);
        })
    });

    // === io ===
    // A short stream per reader: 20 header lines, about 500 bytes.
    let stream = lines(20);
    let pool = BufReaderPool::new(8 * 1024);
    g.bench_function("bufreader_slice/stashpool", |b| {
        b.iter(|| black_box(count_lines(pool.reader(&stream[..]))))
    });
    g.bench_function("bufreader_slice/bufreader_new", |b| {
        b.iter(|| black_box(count_lines(BufReader::new(&stream[..]))))
    });
    g.bench_function("bufreader_opaque/stashpool", |b| {
        b.iter(|| black_box(count_lines(pool.reader(Opaque(&stream)))))
    });
    g.bench_function("bufreader_opaque/bufreader_new", |b| {
        b.iter(|| black_box(count_lines(BufReader::new(Opaque(&stream)))))
    });

    let pool = BufWriterPool::new(8 * 1024);
    g.bench_function("bufwriter/stashpool", |b| {
        b.iter(|| {
            let mut w = pool.writer(Discard);
            for _ in 0..8 {
                w.write_all(MESSAGE).unwrap();
            }
            black_box(w.into_inner().unwrap());
        })
    });
    g.bench_function("bufwriter/bufwriter_new", |b| {
        b.iter(|| {
            let mut w = BufWriter::new(Discard);
            for _ in 0..8 {
                w.write_all(MESSAGE).unwrap();
            }
            black_box(w.into_inner().unwrap());
        })
    });

    let body = vec![7u8; 16 * 1024];
    let pool = CopyPool::new(8 * 1024);
    g.bench_function("copy/stashpool", |b| {
        b.iter(|| black_box(pool.copy(&mut Opaque(&body), &mut Discard).unwrap()))
    });
    g.bench_function("copy/io_copy", |b| {
        b.iter(|| black_box(io::copy(&mut Opaque(&body), &mut Discard).unwrap()))
    });
    g.bench_function("read_all/stashpool", |b| {
        b.iter(|| black_box(pool.read_all(&mut Opaque(&body)).unwrap().len()))
    });
    g.bench_function("read_all/read_to_end", |b| {
        b.iter(|| {
            let mut v = Vec::new();
            Opaque(&body).read_to_end(&mut v).unwrap();
            black_box(v.len())
        })
    });

    // === image ===
    // Render a 640x480 frame: every pixel written.
    let pool = RgbaPool::new(640, 480);
    g.bench_function("rgba/stashpool", |b| {
        b.iter(|| {
            let mut frame = pool.get();
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });
    g.bench_function("rgba/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(640, 480);
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });

    // A 3840x2160 frame (33 MB): larger than the most glibc ever serves
    // from its heap (its mmap threshold stops rising at 32 MiB), so every
    // `RgbaImage::new` maps, faults in and unmaps fresh memory.
    let pool = RgbaPool::new(3840, 2160);
    g.bench_function("rgba_4k/stashpool", |b| {
        b.iter(|| {
            let mut frame = pool.get();
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });
    g.bench_function("rgba_4k/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(3840, 2160);
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });

    let pool = YCbCrPool::new(640, 480, Subsampling::S420);
    g.bench_function("ycbcr/stashpool", |b| {
        b.iter(|| {
            let mut frame = pool.get();
            frame.y.fill(0x80);
            frame.cb.fill(0x80);
            frame.cr.fill(0x80);
            black_box(frame.y.as_ptr());
        })
    });
    g.bench_function("ycbcr/frame_new", |b| {
        b.iter(|| {
            let mut frame = YCbCrFrame::new(640, 480, Subsampling::S420);
            frame.y.fill(0x80);
            frame.cb.fill(0x80);
            frame.cr.fill(0x80);
            black_box(frame.y.as_ptr());
        })
    });

    // === mmap ===
    // A 1 MiB chunk, filled (as when reading a file chunk into it).
    let pool = MmapPool::new(1 << 20);
    g.bench_function("mmap/stashpool", |b| {
        b.iter(|| {
            let mut map = pool.get();
            map.fill(1);
            black_box(map.as_ptr());
        })
    });
    g.bench_function("mmap/map_anon", |b| {
        b.iter(|| {
            let mut map = MmapMut::map_anon(1 << 20).unwrap();
            map.fill(1);
            black_box(map.as_ptr());
        })
    });

    // === slab ===
    let pool = SlabPool::new(8 * 1024);
    for len in [64, 1024] {
        g.bench_function(format!("slab_{len}/stashpool"), |b| {
            b.iter(|| {
                let mut buf = pool.alloc(black_box(len));
                buf.put_bytes(1, len);
                black_box(buf.as_ptr());
            })
        });
        g.bench_function(format!("slab_{len}/bytesmut_with_capacity"), |b| {
            b.iter(|| {
                let mut buf = BytesMut::with_capacity(black_box(len));
                buf.put_bytes(1, len);
                black_box(buf.as_ptr());
            })
        });
    }

    // 100 small buffers alive at once, then all dropped (a batch of
    // message headers, say).
    let mut live = Vec::with_capacity(100);
    g.bench_function("slab_batch/stashpool", |b| {
        b.iter(|| {
            live.extend((0..100).map(|_| pool.alloc(black_box(64))));
            black_box(&live);
            live.clear();
        })
    });
    g.bench_function("slab_batch/bytesmut_with_capacity", |b| {
        b.iter(|| {
            live.extend((0..100).map(|_| BytesMut::with_capacity(black_box(64))));
            black_box(&live);
            live.clear();
        })
    });

    g.finish();
}

criterion_group!(benches, resources);
criterion_main!(benches);

//! Each resource pool against the plain-Rust way of getting the same
//! resource, in one group so the ratios come from one run.
//!
//! Every row does the same work per iteration in each variant: get the
//! resource, use it the way a program would (write a message, read a
//! stream, fill a frame), and let it go. In `<row>/<variant>`, the variant
//! `stashpool` is the pool as built by default (`Reset::Zero`),
//! `stashpool_keep` the pool built with `Reset::Keep`, and the others are
//! the plain-Rust baselines.
//!
//! Run with `cargo bench --bench resources`; after
//! criterion's own output it prints, per row, baseline time / pool time
//! (above 1 the pool is faster), each time the best criterion sample of
//! the run (the least disturbed by other work on the machine).

use std::hint::black_box;
use std::io::{self, BufRead, BufReader, BufWriter, Cursor, Read, Seek, SeekFrom, Write};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use criterion::{Criterion, criterion_group};
use image::RgbaImage;
use memmap2::MmapMut;
use stashpool::Reset;
use stashpool::bytes::{BytePool, BytePools, ChunkPool, StringPool};
use stashpool::image::{RgbaPool, RgbaPools, Subsampling, YCbCrFrame, YCbCrPool, YCbCrPools};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::mmap::{MmapPool, MmapPools};
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

/// Writes the first 4 KiB of `bytes`: a user that needs part of a frame
/// (a thumbnail's worth, a header), the rest as the last user left it.
fn touch(bytes: &mut [u8]) {
    bytes[..4096].fill(1);
}

fn bytes(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
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
    let pool = BytePools::new(64, 1 << 20);
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
}

fn io(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    // A short stream per reader: 20 header lines, about 500 bytes.
    let stream = lines(20);
    let pools = [
        ("stashpool", BufReaderPool::new(8 * 1024)),
        (
            "stashpool_keep",
            BufReaderPool::builder(8 * 1024).reset(Reset::Keep).build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("bufreader_slice/{name}"), |b| {
            b.iter(|| black_box(count_lines(pool.get(&stream[..]))))
        });
        g.bench_function(format!("bufreader_opaque/{name}"), |b| {
            b.iter(|| black_box(count_lines(pool.get(Opaque(&stream)))))
        });
    }
    g.bench_function("bufreader_slice/bufreader_new", |b| {
        b.iter(|| black_box(count_lines(BufReader::new(&stream[..]))))
    });
    g.bench_function("bufreader_opaque/bufreader_new", |b| {
        b.iter(|| black_box(count_lines(BufReader::new(Opaque(&stream)))))
    });

    let pool = BufWriterPool::new(8 * 1024);
    g.bench_function("bufwriter/stashpool", |b| {
        b.iter(|| {
            let mut w = pool.get(Discard);
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

    // In-memory copies, `Cursor` into a `Vec` (where `io::copy` reads
    // straight into the vector, and `CopyPool::copy` hands it the stream
    // whole), and an opaque reader into an opaque writer (where `io::copy`
    // copies through its 8 KiB stack buffer, and `CopyPool::copy` copies
    // all but the first 32 KiB through its pooled buffer: what the larger
    // buffer costs where calls are free). 32 KiB buffers, the size of Go's
    // `io.Copy` buffer.
    let pools = [
        ("stashpool", CopyPool::new(32 * 1024)),
        (
            "stashpool_keep",
            CopyPool::builder(32 * 1024).reset(Reset::Keep).build(),
        ),
    ];
    for len in [500, 64 * 1024] {
        let body = vec![7u8; len];
        let row = format!("copy_cursor_{}", size_name(len));
        for (name, pool) in &pools {
            g.bench_function(format!("{row}/{name}"), |b| {
                let mut out = Vec::with_capacity(len);
                b.iter(|| {
                    out.clear();
                    black_box(pool.copy(&mut Cursor::new(&body), &mut out).unwrap())
                })
            });
        }
        g.bench_function(format!("{row}/io_copy"), |b| {
            let mut out = Vec::with_capacity(len);
            b.iter(|| {
                out.clear();
                black_box(io::copy(&mut Cursor::new(&body), &mut out).unwrap())
            })
        });
    }
    let body = vec![7u8; 1 << 20];
    for (name, pool) in &pools {
        g.bench_function(format!("copy_opaque_1M/{name}"), |b| {
            b.iter(|| black_box(pool.copy(&mut Opaque(&body), &mut Discard).unwrap()))
        });
    }
    g.bench_function("copy_opaque_1M/io_copy", |b| {
        b.iter(|| black_box(io::copy(&mut Opaque(&body), &mut Discard).unwrap()))
    });

    // A reader whose every call costs something, as a socket's, a pipe's, a
    // decoder's or a TLS stream's does: a file, a system call per read. This
    // is where a larger pooled buffer pays, by making fewer calls; the
    // opaque slice above shows what it costs when calls are free.
    let path = std::env::temp_dir().join(format!("stashpool-bench-{}", std::process::id()));
    std::fs::write(&path, &body).unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    for (name, pool) in &pools {
        g.bench_function(format!("copy_file_1M/{name}"), |b| {
            b.iter(|| {
                file.seek(SeekFrom::Start(0)).unwrap();
                black_box(pool.copy(&mut file, &mut Discard).unwrap())
            })
        });
    }
    g.bench_function("copy_file_1M/io_copy", |b| {
        b.iter(|| {
            file.seek(SeekFrom::Start(0)).unwrap();
            black_box(io::copy(&mut file, &mut Discard).unwrap())
        })
    });

    // Go's bp read loop over the same file: a 32 KiB buffer per read (as
    // pkg/sftp takes one per chunk), filled by `read`, its bytes used, the
    // buffer given back. A `BytePool` buffer comes out empty, so it must be
    // resized (zeroed) to full length first; a chunk comes out full length.
    let chunks = [
        ("stashpool", ChunkPool::new(32 * 1024)),
        (
            "stashpool_keep",
            ChunkPool::builder(32 * 1024).reset(Reset::Keep).build(),
        ),
    ];
    for (name, pool) in &chunks {
        g.bench_function(format!("read_file_1M_32K/{name}"), |b| {
            b.iter(|| {
                file.seek(SeekFrom::Start(0)).unwrap();
                loop {
                    let mut chunk = pool.get();
                    let n = file.read(&mut chunk).unwrap();
                    if n == 0 {
                        break;
                    }
                    black_box(&chunk[..n]);
                }
            })
        });
    }
    let buffers = BytePool::new(32 * 1024);
    g.bench_function("read_file_1M_32K/bytepool_resize", |b| {
        b.iter(|| {
            file.seek(SeekFrom::Start(0)).unwrap();
            loop {
                let mut buf = buffers.get();
                buf.resize(32 * 1024, 0);
                let n = file.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                black_box(&buf[..n]);
            }
        })
    });

    drop(file);
    let _ = std::fs::remove_file(&path);

    // Bodies of 64 KiB read whole, into a pool sized for them.
    let body = vec![7u8; 64 * 1024];
    let pool = CopyPool::new(64 * 1024);
    g.bench_function("read_all_64K/stashpool", |b| {
        b.iter(|| black_box(pool.read_all(&mut Opaque(&body)).unwrap().len()))
    });
    g.bench_function("read_all_64K/read_to_end", |b| {
        b.iter(|| {
            let mut v = Vec::new();
            Opaque(&body).read_to_end(&mut v).unwrap();
            black_box(v.len())
        })
    });
}

fn image(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    // A 1920x1080 frame, 4 KiB of it written, or all of it.
    let (w, h) = (1920, 1080);
    let pools = [
        ("stashpool", RgbaPool::new(w, h)),
        (
            "stashpool_keep",
            RgbaPool::builder(w, h).reset(Reset::Keep).build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("rgba_1080p_touch/{name}"), |b| {
            b.iter(|| {
                let mut frame = pool.get();
                touch(&mut frame);
                black_box(frame.as_raw().as_ptr());
            })
        });
        g.bench_function(format!("rgba_1080p_fill/{name}"), |b| {
            b.iter(|| {
                let mut frame = pool.get();
                frame.fill(0x80);
                black_box(frame.as_raw().as_ptr());
            })
        });
    }
    g.bench_function("rgba_1080p_touch/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(w, h);
            touch(&mut frame);
            black_box(frame.as_raw().as_ptr());
        })
    });
    g.bench_function("rgba_1080p_fill/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(w, h);
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });

    // Frames of two shapes in turn, from the pools of any shape.
    let shapes = [(1920, 1080), (1280, 720)];
    let pools = [
        ("stashpool", RgbaPools::new()),
        (
            "stashpool_keep",
            RgbaPools::builder().reset(Reset::Keep).build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("rgba_pools_touch/{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                let (w, h) = shapes[i % 2];
                let mut frame = pool.get(w, h);
                touch(&mut frame);
                black_box(frame.as_raw().as_ptr());
            })
        });
    }
    g.bench_function("rgba_pools_touch/rgbaimage_new", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let (w, h) = shapes[i % 2];
            let mut frame = RgbaImage::new(w, h);
            touch(&mut frame);
            black_box(frame.as_raw().as_ptr());
        })
    });

    // A 4096x2160 frame (35 MB), 4 KiB of it written, or all of it. Larger
    // than glibc's mmap threshold can grow, so each `RgbaImage::new` is a
    // fresh map whose pages the kernel zeroes as they are first touched:
    // cheap for a user who writes a little, dear for one who writes it all.
    let (w, h) = (4096, 2160);
    let pools = [
        ("stashpool", RgbaPool::new(w, h)),
        (
            "stashpool_keep",
            RgbaPool::builder(w, h).reset(Reset::Keep).build(),
        ),
    ];
    // Each full write of a fresh frame faults in every page: fewer samples
    // keep the row's run time near the others'.
    g.sample_size(20);
    for (name, pool) in &pools {
        g.bench_function(format!("rgba_4096x2160_touch/{name}"), |b| {
            b.iter(|| {
                let mut frame = pool.get();
                touch(&mut frame);
                black_box(frame.as_raw().as_ptr());
            })
        });
        g.bench_function(format!("rgba_4096x2160_fill/{name}"), |b| {
            b.iter(|| {
                let mut frame = pool.get();
                frame.fill(0x80);
                black_box(frame.as_raw().as_ptr());
            })
        });
    }
    g.bench_function("rgba_4096x2160_touch/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(w, h);
            touch(&mut frame);
            black_box(frame.as_raw().as_ptr());
        })
    });
    g.bench_function("rgba_4096x2160_fill/rgbaimage_new", |b| {
        b.iter(|| {
            let mut frame = RgbaImage::new(w, h);
            frame.fill(0x80);
            black_box(frame.as_raw().as_ptr());
        })
    });
    drop(pools);
    g.sample_size(100);

    // A 1080p 4:2:0 frame, every plane written.
    let (w, h) = (1920, 1080);
    let pools = [
        ("stashpool", YCbCrPool::new(w, h, Subsampling::S420)),
        (
            "stashpool_keep",
            YCbCrPool::builder(w, h, Subsampling::S420)
                .reset(Reset::Keep)
                .build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("ycbcr_1080p_fill/{name}"), |b| {
            b.iter(|| {
                let mut frame = pool.get();
                fill(&mut frame);
                black_box(frame.y.as_ptr());
            })
        });
    }
    g.bench_function("ycbcr_1080p_fill/frame_new", |b| {
        b.iter(|| {
            let mut frame = YCbCrFrame::new(w, h, Subsampling::S420);
            fill(&mut frame);
            black_box(frame.y.as_ptr());
        })
    });

    // 4:2:0 frames of two shapes in turn, every plane written, from the
    // pools of any shape: a decoder fed two stream resolutions.
    let pools = [
        ("stashpool", YCbCrPools::new(Subsampling::S420)),
        (
            "stashpool_keep",
            YCbCrPools::builder(Subsampling::S420)
                .reset(Reset::Keep)
                .build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("ycbcr_pools_fill/{name}"), |b| {
            let mut i = 0;
            b.iter(|| {
                i += 1;
                let (w, h) = shapes[i % 2];
                let mut frame = pool.get(w, h);
                fill(&mut frame);
                black_box(frame.y.as_ptr());
            })
        });
    }
    g.bench_function("ycbcr_pools_fill/frame_new", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let (w, h) = shapes[i % 2];
            let mut frame = YCbCrFrame::new(w, h, Subsampling::S420);
            fill(&mut frame);
            black_box(frame.y.as_ptr());
        })
    });
}

/// Writes every plane of `frame`, as a decoder does.
fn fill(frame: &mut YCbCrFrame) {
    frame.y.fill(0x80);
    frame.cb.fill(0x80);
    frame.cr.fill(0x80);
}

fn mmap(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    // A 1 MiB chunk, filled (as when reading a file chunk into it).
    let pools = [
        ("stashpool", MmapPool::new(1 << 20)),
        (
            "stashpool_keep",
            MmapPool::builder(1 << 20).reset(Reset::Keep).build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("mmap_1M_fill/{name}"), |b| {
            b.iter(|| {
                let mut map = pool.get();
                map.fill(1);
                black_box(map.as_ptr());
            })
        });
    }
    g.bench_function("mmap_1M_fill/map_anon", |b| {
        b.iter(|| {
            let mut map = MmapMut::map_anon(1 << 20).unwrap();
            map.fill(1);
            black_box(map.as_ptr());
        })
    });

    // 100 KB requests, every byte written, from the pool of any length.
    let len = 100_000;
    let pools = [
        ("stashpool", MmapPools::new(4096, 16 << 20)),
        (
            "stashpool_keep",
            MmapPools::builder(4096, 16 << 20)
                .reset(Reset::Keep)
                .build(),
        ),
    ];
    for (name, pool) in &pools {
        g.bench_function(format!("mmap_class_100K_fill/{name}"), |b| {
            b.iter(|| {
                let mut map = pool.get(len);
                map[..len].fill(1);
                black_box(map.as_ptr());
            })
        });
    }
    g.bench_function("mmap_class_100K_fill/map_anon", |b| {
        b.iter(|| {
            let mut map = MmapMut::map_anon(len).unwrap();
            map.fill(1);
            black_box(map.as_ptr());
        })
    });
}

fn slab(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    // Small pieces, one at a time: the sizes glibc serves from its
    // per-thread cache without a lock or a search, and slabs pay `bytes`'
    // reference count on top of finding this thread's slab.
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
    // message headers, say): what slabs are for.
    let mut live = Vec::with_capacity(100);
    g.bench_function("slab_batch_100x64/stashpool", |b| {
        b.iter(|| {
            live.extend((0..100).map(|_| pool.alloc(black_box(64))));
            black_box(&live);
            live.clear();
        })
    });
    g.bench_function("slab_batch_100x64/bytesmut_with_capacity", |b| {
        b.iter(|| {
            live.extend((0..100).map(|_| BytesMut::with_capacity(black_box(64))));
            black_box(&live);
            live.clear();
        })
    });

    // Packet buffers (an Ethernet frame's 1500 bytes, above the sizes
    // glibc caches per thread) from 64 KiB slabs, each with a header
    // written: one at a time, and a batch of 32 alive at once (a burst
    // of datagrams read before they are handled).
    let packets = SlabPool::new(64 * 1024);
    g.bench_function("slab_1500/stashpool", |b| {
        b.iter(|| {
            let mut buf = packets.alloc(black_box(1500));
            buf.put_slice(MESSAGE);
            black_box(buf.as_ptr());
        })
    });
    g.bench_function("slab_1500/bytesmut_with_capacity", |b| {
        b.iter(|| {
            let mut buf = BytesMut::with_capacity(black_box(1500));
            buf.put_slice(MESSAGE);
            black_box(buf.as_ptr());
        })
    });
    g.bench_function("slab_batch_32x1500/stashpool", |b| {
        b.iter(|| {
            live.extend((0..32).map(|_| {
                let mut buf = packets.alloc(black_box(1500));
                buf.put_slice(MESSAGE);
                buf
            }));
            black_box(&live);
            live.clear();
        })
    });
    g.bench_function("slab_batch_32x1500/bytesmut_with_capacity", |b| {
        b.iter(|| {
            live.extend((0..32).map(|_| {
                let mut buf = BytesMut::with_capacity(black_box(1500));
                buf.put_slice(MESSAGE);
                buf
            }));
            black_box(&live);
            live.clear();
        })
    });
}

fn size_name(len: usize) -> String {
    if len >= 1024 && len.is_multiple_of(1024) {
        format!("{}K", len / 1024)
    } else {
        format!("{len}")
    }
}

fn resources(c: &mut Criterion) {
    let mut g = c.benchmark_group("resources");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    bytes(&mut g);
    io(&mut g);
    image(&mut g);
    mmap(&mut g);
    slab(&mut g);
    g.finish();
}

criterion_group!(benches, resources);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    memory::report();
    ratios::report();
}

/// What slabs save beside time: heap memory for many small live buffers,
/// as glibc counts it (`mallinfo2`, which includes its per-allocation
/// overhead), read outside every timed loop.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod memory {
    use bytes::BytesMut;
    use stashpool::slab::SlabPool;

    fn heap_in_use() -> usize {
        // SAFETY: `mallinfo2` only reads glibc's counters.
        unsafe { libc::mallinfo2() }.uordblks
    }

    /// Heap bytes taken by `count` buffers made by `make`, all alive at
    /// once.
    fn measure(count: usize, make: impl Fn() -> BytesMut) -> usize {
        let mut live = Vec::with_capacity(count);
        let before = heap_in_use();
        live.extend((0..count).map(|_| make()));
        let bytes = heap_in_use().saturating_sub(before);
        drop(live);
        bytes
    }

    pub fn report() {
        println!("\nLive buffers, heap bytes in use (glibc):");
        for (count, len, slab_capacity) in [(10_000, 64, 8 * 1024), (1_000, 1500, 64 * 1024)] {
            let pool = SlabPool::builder(slab_capacity).manual_sweep().build();
            let slab = measure(count, || pool.alloc(len));
            let alone = measure(count, || BytesMut::with_capacity(len));
            println!("  {count} x {len} B:");
            println!(
                "    SlabPool, {} KiB slabs: {slab:>8} ({} slabs)",
                slab_capacity / 1024,
                pool.stats().created
            );
            println!("    BytesMut::with_capacity: {alone:>8} (one allocation each)");
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod memory {
    pub fn report() {}
}

/// Baseline / pool per row, from criterion's samples of this run.
mod ratios {
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;

    /// The best (least) time per iteration of one benchmark, in ns.
    fn best(sample: &str) -> Option<f64> {
        let iters = numbers(sample, "\"iters\":")?;
        let times = numbers(sample, "\"times\":")?;
        iters
            .iter()
            .zip(&times)
            .map(|(i, t)| t / i)
            .min_by(f64::total_cmp)
    }

    /// The numbers of the JSON array that follows `key`.
    fn numbers(json: &str, key: &str) -> Option<Vec<f64>> {
        let start = json.find(key)? + key.len();
        let rest = json[start..].trim_start().strip_prefix('[')?;
        let list = &rest[..rest.find(']')?];
        list.split(',').map(|n| n.trim().parse().ok()).collect()
    }

    fn string_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
        let start = json.find(key)? + key.len();
        let rest = json[start..].trim_start().strip_prefix('"')?;
        Some(&rest[..rest.find('"')?])
    }

    pub fn report() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion/resources");
        let Ok(dirs) = fs::read_dir(&root) else {
            return; // not run as a benchmark (as under `cargo test`)
        };
        let mut rows: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for dir in dirs.flatten() {
            let new = dir.path().join("new");
            let (Ok(bench), Ok(sample)) = (
                fs::read_to_string(new.join("benchmark.json")),
                fs::read_to_string(new.join("sample.json")),
            ) else {
                continue;
            };
            let (Some(id), Some(ns)) = (string_field(&bench, "\"function_id\":"), best(&sample))
            else {
                continue;
            };
            if let Some((row, variant)) = id.split_once('/') {
                rows.entry(row.to_owned())
                    .or_default()
                    .insert(variant.to_owned(), ns);
            }
        }
        println!("\n| row | baseline | baseline ns | Reset::Zero | Reset::Keep |");
        println!("| --- | --- | ---: | ---: | ---: |");
        for (row, variants) in &rows {
            let Some((baseline, base_ns)) =
                variants.iter().find(|(v, _)| !v.starts_with("stashpool"))
            else {
                continue;
            };
            let ratio = |variant: &str| {
                variants
                    .get(variant)
                    .map_or(String::from("-"), |ns| format!("{:.2}x", base_ns / ns))
            };
            println!(
                "| {row} | {baseline} | {base_ns:.0} | {} | {} |",
                ratio("stashpool"),
                ratio("stashpool_keep")
            );
        }
    }
}

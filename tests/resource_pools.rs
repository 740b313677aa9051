//! Every resource pool is a `Pool`: one list sweeps, clears and reports
//! them all, whatever they hold.
#![cfg(all(feature = "image", feature = "mmap", feature = "bytes"))]

use std::io;

use stashpool::bytes::{BytePool, BytePools, StringPool};
use stashpool::image::{RgbaPool, RgbaPools, Subsampling, YCbCrPool, YCbCrPools};
use stashpool::io::{BufReaderPool, BufWriterPool, CopyPool};
use stashpool::mmap::{MmapPool, MmapPools};
use stashpool::slab::SlabPool;
use stashpool::{Pool, Stats};

#[test]
fn every_resource_pool_sweeps_clears_and_reports_through_the_trait() {
    let bytes = BytePool::builder(64).manual_sweep().build();
    let strings = StringPool::builder(64).manual_sweep().build();
    let sized = BytePools::builder(64, 1024).manual_sweep().build();
    let readers = BufReaderPool::builder(64).manual_sweep().build();
    let writers = BufWriterPool::builder(64).manual_sweep().build();
    let copies = CopyPool::builder(64).manual_sweep().build();
    let rgba = RgbaPool::builder(2, 2).manual_sweep().build();
    let ycbcr = YCbCrPool::builder(2, 2, Subsampling::S420)
        .manual_sweep()
        .build();
    let maps = MmapPool::builder(4096).manual_sweep().build();
    let slabs = SlabPool::builder(4096).manual_sweep().build();
    let map_classes = MmapPools::builder(4096, 1 << 16).manual_sweep().build();
    let rgba_shapes = RgbaPools::builder().manual_sweep().build();
    let ycbcr_shapes = YCbCrPools::builder(Subsampling::S444)
        .manual_sweep()
        .build();

    drop(bytes.get());
    drop(strings.get());
    drop(sized.get(100));
    drop(readers.get(io::empty()));
    drop(writers.get(io::sink()));
    drop(copies.read_all(&mut io::empty()).unwrap());
    drop(rgba.get());
    drop(ycbcr.get());
    drop(maps.get());
    drop(slabs.alloc(8));
    drop(map_classes.get(5000));
    drop(rgba_shapes.get(3, 3));
    drop(ycbcr_shapes.get(3, 3));

    let pools: Vec<&dyn Pool> = vec![
        &bytes,
        &strings,
        &sized,
        &readers,
        &writers,
        &copies,
        &rgba,
        &ycbcr,
        &maps,
        &slabs,
        &map_classes,
        &rgba_shapes,
        &ycbcr_shapes,
    ];
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, pools.len(), "one idle object each");
    assert_eq!(total.created, pools.len() as u64);

    pools.iter().for_each(|pool| pool.sweep());
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, pools.len(), "one sweep keeps them");

    pools.iter().for_each(|pool| pool.clear());
    let total: Stats = pools.iter().map(|pool| pool.stats()).sum();
    assert_eq!(total.idle, 0, "clear drops every idle object");
    // The inherent methods are the trait's.
    assert_eq!(rgba_shapes.stats(), Pool::stats(&rgba_shapes));
}

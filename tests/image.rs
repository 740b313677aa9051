//! `RgbaPool`, `GrayPool`, `YCbCrPool` and the pools of any shape
//! (`RgbaPools`, `GrayPools`, `YCbCrPools`): reuse, reset policies, shape
//! checks, bad input, and what `Stats` says of a pool that reuses nothing.
#![cfg(feature = "image")]

use std::panic::catch_unwind;

use image::{GrayImage, Luma, Rgba, RgbaImage};
use stashpool::image::{
    GrayPool, GrayPools, RgbaPool, RgbaPools, Subsampling, YCbCrFrame, YCbCrPool, YCbCrPools,
};
use stashpool::{Pool, Pooled, Reset};

/// The panic message of `f`, which must panic.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = catch_unwind(f).unwrap_err();
    match err.downcast::<String>() {
        Ok(msg) => *msg,
        Err(err) => err.downcast_ref::<&str>().unwrap().to_string(),
    }
}

// === RgbaPool ===

#[test]
fn rgba_frames_have_the_pool_size_and_start_zeroed() {
    let pool = RgbaPool::builder(7, 5).manual_sweep().build();
    let frame = pool.get();
    assert_eq!(frame.dimensions(), (7, 5));
    assert_eq!(frame.len(), 7 * 5 * 4);
    assert!(frame.iter().all(|&b| b == 0));
}

#[test]
fn a_returned_rgba_frame_is_reused_and_zeroed() {
    let pool = RgbaPool::builder(16, 16).manual_sweep().build();
    let mut frame = pool.get();
    for pixel in frame.pixels_mut() {
        *pixel = Rgba([1, 2, 3, 4]);
    }
    let ptr = frame.as_raw().as_ptr();
    drop(frame);

    let frame = pool.get();
    assert_eq!(frame.as_raw().as_ptr(), ptr, "the same frame comes back");
    assert!(frame.as_raw().iter().all(|&b| b == 0), "the picture leaked");
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (1, 1));
}

#[test]
fn an_rgba_frame_swapped_for_another_size_is_dropped() {
    let pool = RgbaPool::builder(16, 16).manual_sweep().build();
    let mut frame = pool.get();
    *frame = RgbaImage::new(8, 8);
    drop(frame);
    let mut frame = pool.get();
    // Same size, but a longer buffer behind it than a frame needs.
    *frame = RgbaImage::from_raw(16, 16, vec![9; 16 * 16 * 4 + 1]).unwrap();
    drop(frame);
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (2, 0));
    assert_eq!(pool.get().dimensions(), (16, 16));
}

#[test]
fn an_rgba_frame_with_another_color_space_is_dropped() {
    use image::metadata::Cicp;

    let pool = RgbaPool::builder(4, 4).manual_sweep().build();
    pool.with(|frame| frame.set_color_space(Cicp::SRGB_LINEAR).unwrap());
    assert_eq!(pool.stats().discarded, 1);
    assert_eq!(pool.get().color_space(), Cicp::SRGB);
}

#[test]
fn bad_rgba_sizes_are_refused() {
    assert!(catch_unwind(|| RgbaPool::new(0, 10)).is_err());
    assert!(catch_unwind(|| RgbaPool::new(10, 0)).is_err());
    // 2^64 * 4 bytes: larger than any address space.
    assert!(catch_unwind(|| RgbaPool::new(u32::MAX, u32::MAX)).is_err());
    assert!(catch_unwind(|| RgbaPool::builder(0, 0).build()).is_err());
}

#[test]
fn an_unallocatable_rgba_frame_panics_instead_of_aborting() {
    // 2^30 x 2^30 x 4 bytes = 4 EiB: a valid size, but no allocator has it.
    let pool = RgbaPool::new(1 << 30, 1 << 30);
    assert!(catch_unwind(|| drop(pool.get())).is_err());
}

// === GrayPool ===

#[test]
fn gray_frames_have_the_pool_size_one_byte_a_pixel_and_start_zeroed() {
    let pool = GrayPool::builder(7, 5).manual_sweep().build();
    let frame = pool.get();
    assert_eq!(frame.dimensions(), (7, 5));
    assert_eq!(frame.len(), 7 * 5);
    assert!(frame.iter().all(|&v| v == 0));
}

#[test]
fn a_returned_gray_frame_is_reused_and_zeroed() {
    let pool = GrayPool::builder(16, 16).manual_sweep().build();
    let mut frame = pool.get();
    frame.put_pixel(3, 4, Luma([200]));
    let ptr = frame.as_raw().as_ptr();
    drop(frame);

    let frame = pool.get();
    assert_eq!(frame.as_raw().as_ptr(), ptr, "the same frame comes back");
    assert!(frame.iter().all(|&v| v == 0), "the picture leaked");
    assert_eq!((pool.stats().created, pool.stats().reused), (1, 1));
}

#[test]
fn a_gray_frame_swapped_for_another_size_or_color_space_is_dropped() {
    use image::metadata::Cicp;

    let pool = GrayPool::builder(8, 8).manual_sweep().build();
    pool.with(|frame| *frame = GrayImage::new(4, 4));
    pool.with(|frame| frame.set_color_space(Cicp::SRGB_LINEAR).unwrap());
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (2, 0));
    let frame = pool.get();
    assert_eq!(
        (frame.dimensions(), frame.color_space()),
        ((8, 8), Cicp::SRGB)
    );
}

#[test]
fn gray_frames_follow_the_reset_policy() {
    let keep = GrayPool::builder(4, 4).reset(Reset::Keep).build();
    assert_eq!(keep.reset(), Reset::Keep);
    keep.with(|frame| frame.fill(9));
    assert!(keep.get().iter().all(|&v| v == 9), "kept, as in Go's bp");

    // 1024 x 1024 gray is 1 MiB: written, it is dropped under `Zero`.
    let zero = GrayPool::builder(1024, 1024).manual_sweep().build();
    zero.with(|frame| frame.fill(0xEE));
    assert_eq!((zero.stats().discarded, zero.stats().idle), (1, 0));
    assert!(zero.get().iter().all(|&v| v == 0));
    let under = GrayPool::builder(1023, 1024).manual_sweep().build();
    under.with(|frame| frame.fill(0xEE));
    assert_eq!((under.stats().discarded, under.stats().idle), (0, 1));
}

#[test]
fn bad_gray_sizes_are_refused() {
    assert!(catch_unwind(|| GrayPool::new(0, 10)).is_err());
    assert!(catch_unwind(|| drop(GrayPools::new().get(10, 0))).is_err());
}

#[test]
fn gray_pools_keep_one_pool_per_shape() {
    let pools = GrayPools::builder().manual_sweep().build();
    for (width, height) in [(32, 32), (16, 8), (32, 32)] {
        pools.with(width, height, |frame| frame.fill(1));
    }
    assert_eq!(pools.shapes().collect::<Vec<_>>(), [(32, 32), (16, 8)]);
    let stats = pools.stats();
    assert_eq!((stats.created, stats.reused), (2, 1));
    assert!(pools.get(16, 8).iter().all(|&v| v == 0));
}

// === Stats of a pool that reuses nothing ===

/// A frame pool under the default `Reset::Zero` whose frames of 1 MiB or
/// more are all written reuses none of them: its display says so plainly,
/// where its counters alone would leave it to the reader.
#[test]
fn the_stats_of_a_pool_that_dropped_every_written_frame_say_so() {
    let pool = RgbaPool::builder(LARGE.0, LARGE.1).manual_sweep().build();
    for shade in 0..4 {
        pool.with(|frame| frame.fill(shade));
    }
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused, stats.discarded), (4, 0, 4));
    let shown = stats.to_string();
    assert!(
        shown.starts_with("gets=4 created=4 reused=0 returned=0 discarded=4 rejected=0"),
        "{shown}"
    );
    assert!(
        shown.contains("note: 4 of the 4 objects that came back were discarded"),
        "{shown}"
    );

    // The same frames under `Keep`: reused, and no note.
    let kept = RgbaPool::builder(LARGE.0, LARGE.1)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    for shade in 0..4 {
        kept.with(|frame| frame.fill(shade));
    }
    assert_eq!(kept.stats().created, 1);
    assert!(!kept.stats().to_string().contains("note"));
}

// === YCbCrPool ===

#[test]
fn ycbcr_planes_follow_the_subsampling() {
    for (subsampling, c_width, c_height) in [
        (Subsampling::S444, 5, 3),
        (Subsampling::S422, 3, 3),
        (Subsampling::S420, 3, 2),
    ] {
        let pool = YCbCrPool::new(5, 3, subsampling);
        let frame = pool.get();
        assert_eq!(frame.y.len(), 15);
        assert_eq!((frame.y_stride, frame.c_stride), (5, c_width));
        assert_eq!(frame.cb.len(), c_width * c_height);
        assert_eq!(frame.cr.len(), c_width * c_height);
        // The last pixel's samples are the planes' last bytes.
        assert_eq!(frame.y_offset(4, 2), frame.y.len() - 1);
        assert_eq!(frame.c_offset(4, 2), frame.cb.len() - 1);
        assert_eq!(
            (frame.width(), frame.height(), frame.subsampling()),
            (5, 3, subsampling)
        );
    }
}

#[test]
fn a_returned_ycbcr_frame_is_reused_zeroed_with_its_strides_restored() {
    let pool = YCbCrPool::builder(8, 8, Subsampling::S420)
        .manual_sweep()
        .build();
    let mut frame = pool.get();
    frame.y.fill(200);
    frame.cb.fill(100);
    frame.cr.fill(50);
    frame.y_stride = 99;
    frame.c_stride = 0;
    let ptr = frame.y.as_ptr();
    drop(frame);

    let frame = pool.get();
    assert_eq!(frame.y.as_ptr(), ptr);
    assert!(
        frame
            .y
            .iter()
            .chain(&frame.cb)
            .chain(&frame.cr)
            .all(|&b| b == 0)
    );
    assert_eq!((frame.y_stride, frame.c_stride), (8, 4));
    assert_eq!(pool.stats().reused, 1);
}

#[test]
fn a_ycbcr_frame_with_a_replaced_plane_is_dropped() {
    let pool = YCbCrPool::builder(8, 8, Subsampling::S444)
        .manual_sweep()
        .build();
    pool.with(|frame| frame.cr = vec![7; 3]);
    pool.with(|frame| frame.y.truncate(10));
    assert_eq!(pool.stats().discarded, 2);
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(pool.get().cr.len(), 64);
}

#[test]
fn a_ycbcr_frame_swapped_for_another_shape_with_the_same_plane_sizes_is_dropped() {
    let pool = YCbCrPool::builder(16, 8, Subsampling::S420)
        .manual_sweep()
        .build();
    // A transposed frame has planes of the same lengths.
    pool.with(|frame| *frame = YCbCrFrame::new(8, 16, Subsampling::S420));
    assert_eq!(pool.stats().discarded, 1);
    let frame = pool.get();
    assert_eq!((frame.width(), frame.height()), (16, 8));
    assert_eq!(frame.y_stride, 16);
}

#[test]
fn a_plain_ycbcr_frame_matches_a_pooled_one() {
    let pool = YCbCrPool::new(6, 4, Subsampling::S422);
    assert_eq!(*pool.get(), YCbCrFrame::new(6, 4, Subsampling::S422));
    let text = format!("{:?}", YCbCrFrame::new(6, 4, Subsampling::S422));
    assert!(text.contains("width: 6") && !text.contains("[0"), "{text}");
}

#[test]
fn bad_ycbcr_sizes_are_refused() {
    assert!(catch_unwind(|| YCbCrPool::new(0, 4, Subsampling::S420)).is_err());
    assert!(catch_unwind(|| YCbCrPool::new(u32::MAX, u32::MAX, Subsampling::S444)).is_err());
    assert!(catch_unwind(|| YCbCrFrame::new(4, 0, Subsampling::S422)).is_err());
    assert!(catch_unwind(|| YCbCrPool::builder(0, 0, Subsampling::S420).build()).is_err());
}

#[test]
fn image_pools_have_debug_forms() {
    let rgba = RgbaPool::new(2, 3);
    assert!(format!("{rgba:?}").contains("dimensions: (2, 3)"));
    let ycbcr = YCbCrPool::new(2, 3, Subsampling::S420);
    assert!(format!("{ycbcr:?}").contains("S420"));
}

// === Reset policies ===

#[test]
fn under_reset_keep_a_frame_keeps_its_contents() {
    let pool = RgbaPool::builder(4, 4)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    assert_eq!(pool.reset(), Reset::Keep);
    pool.with(|frame| frame.put_pixel(1, 2, Rgba([9, 8, 7, 6])));
    let frame = pool.get();
    assert_eq!(pool.stats().reused, 1);
    assert_eq!(
        frame.get_pixel(1, 2),
        &Rgba([9, 8, 7, 6]),
        "kept, as in Go's bp"
    );

    let pool = YCbCrPool::builder(4, 4, Subsampling::S420)
        .reset(Reset::Keep)
        .build();
    pool.with(|frame| frame.cr[3] = 77);
    assert_eq!(pool.get().cr[3], 77);
}

#[test]
fn under_reset_zero_only_a_written_frame_is_zeroed() {
    let pool = RgbaPool::builder(4, 4).manual_sweep().build();
    let mut frame = pool.get();
    assert!(!Pooled::is_written(&frame));
    assert_eq!(frame.get_pixel(0, 0), &Rgba([0; 4])); // a read
    assert!(!Pooled::is_written(&frame));
    frame.put_pixel(3, 3, Rgba([1; 4])); // a write
    assert!(Pooled::is_written(&frame));
    drop(frame);

    let frame = pool.get();
    assert_eq!(pool.stats().reused, 1);
    assert!(!Pooled::is_written(&frame), "a returned frame starts clean");
    assert!(frame.iter().all(|&b| b == 0));
}

/// 512 x 512 RGBA is 1 MiB, the size from which a written frame is
/// replaced rather than zeroed in place.
const LARGE: (u32, u32) = (512, 512);

#[test]
fn under_reset_zero_a_large_written_frame_is_replaced_by_a_zeroed_one() {
    let pool = RgbaPool::builder(LARGE.0, LARGE.1).manual_sweep().build();
    let mut frame = pool.get();
    assert!(frame.iter().all(|&b| b == 0), "a new frame starts zeroed");
    frame.fill(0xAB);
    drop(frame);
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.idle), (1, 0), "dropped, not zeroed");

    let mut frame = pool.get();
    assert!(frame.iter().all(|&b| b == 0), "the picture leaked");
    frame.put_pixel(LARGE.0 - 1, LARGE.1 - 1, Rgba([1; 4])); // a partial write
    drop(frame);
    assert!(pool.get().iter().all(|&b| b == 0), "the pixel leaked");
    let stats = pool.stats();
    assert_eq!((stats.created, stats.reused), (3, 0));
}

#[test]
fn under_reset_zero_a_large_frame_only_read_is_reused() {
    let pool = RgbaPool::builder(LARGE.0, LARGE.1).manual_sweep().build();
    let frame = pool.get();
    let ptr = frame.as_raw().as_ptr();
    assert_eq!(frame.get_pixel(7, 7), &Rgba([0; 4]));
    drop(frame);
    let frame = pool.get();
    assert_eq!(frame.as_raw().as_ptr(), ptr, "the same frame comes back");
    assert_eq!((pool.stats().created, pool.stats().reused), (1, 1));
}

#[test]
fn under_reset_zero_a_written_frame_just_under_1_mib_is_zeroed_in_place() {
    let pool = RgbaPool::builder(LARGE.0 - 1, LARGE.1)
        .manual_sweep()
        .build();
    let mut frame = pool.get();
    frame.fill(0xCD);
    let ptr = frame.as_raw().as_ptr();
    drop(frame);
    let frame = pool.get();
    assert_eq!(frame.as_raw().as_ptr(), ptr, "the same frame comes back");
    assert!(frame.iter().all(|&b| b == 0), "the picture leaked");
    assert_eq!(pool.stats().discarded, 0);
}

#[test]
fn under_reset_keep_a_large_written_frame_is_reused_as_it_was_left() {
    let pool = RgbaPool::builder(LARGE.0, LARGE.1)
        .reset(Reset::Keep)
        .manual_sweep()
        .build();
    pool.with(|frame| frame.fill(0x5A));
    let frame = pool.get();
    assert!(frame.iter().all(|&b| b == 0x5A), "kept, as in Go's bp");
    assert_eq!((pool.stats().reused, pool.stats().discarded), (1, 0));
}

#[test]
fn under_reset_zero_a_large_written_ycbcr_frame_comes_back_zeroed() {
    // 1024 x 1024 at 4:2:0: 1.5 MiB in three planes.
    let pool = YCbCrPool::builder(1024, 1024, Subsampling::S420)
        .manual_sweep()
        .build();
    for plane in 0..3 {
        pool.with(|frame| {
            frame.y_stride = 1; // restored on return, like a small frame's
            let plane = [&mut frame.y, &mut frame.cb, &mut frame.cr][plane].as_mut_slice();
            let last = plane.len() - 1;
            plane[last] = 0xEE;
        });
        let frame = pool.get();
        assert!(
            [&frame.y, &frame.cb, &frame.cr]
                .iter()
                .all(|plane| plane.iter().all(|&b| b == 0)),
            "plane {plane} leaked"
        );
        assert_eq!((frame.y_stride, frame.c_stride), (1024, 512));
    }
    assert_eq!(pool.stats().discarded, 3);

    // Read only: the frame stays in the pool.
    let before = pool.stats();
    drop(pool.get());
    let after = pool.stats();
    assert_eq!(after.created, before.created);
    assert_eq!(after.reused, before.reused + 1);
}

#[test]
fn rgba_pools_of_large_shapes_in_turn_hand_out_zeroed_frames() {
    let pools = RgbaPools::new();
    let shapes = [LARGE, (LARGE.0 * 2, LARGE.1), LARGE];
    for (i, &(w, h)) in shapes.iter().enumerate() {
        let mut frame = pools.get(w, h);
        assert_eq!(frame.dimensions(), (w, h));
        assert!(frame.iter().all(|&b| b == 0), "frame {i} held a picture");
        frame.fill(i as u8 + 1);
    }
    assert!(pools.get(LARGE.0, LARGE.1).iter().all(|&b| b == 0));
    assert_eq!(pools.stats().discarded, 3);
}

#[test]
fn an_rgba_frame_written_through_with_is_zeroed() {
    let pool = RgbaPool::builder(4, 4).manual_sweep().build();
    pool.with(|frame| frame.fill(5));
    assert!(pool.get().iter().all(|&b| b == 0));
}

#[test]
fn a_kept_frame_leaves_the_pool() {
    let pool = RgbaPool::builder(2, 2).manual_sweep().build();
    let frame: RgbaImage = Pooled::into_inner(pool.get());
    assert_eq!(frame.dimensions(), (2, 2));
    assert_eq!(pool.stats().idle, 0);
}

// === RgbaPools, YCbCrPools ===

#[test]
fn rgba_pools_keep_one_pool_per_shape() {
    let pools = RgbaPools::builder().manual_sweep().build();
    for _ in 0..3 {
        for (w, h) in [(8, 4), (4, 8), (16, 16)] {
            let frame = pools.get(w, h);
            assert_eq!(frame.dimensions(), (w, h));
            assert!(frame.iter().all(|&b| b == 0));
        }
    }
    assert_eq!(
        pools.shapes().collect::<Vec<_>>(),
        [(8, 4), (4, 8), (16, 16)]
    );
    let stats = pools.stats();
    assert_eq!((stats.created, stats.reused, stats.idle), (3, 6, 3));
    assert_eq!(pools.pool(8, 4).stats().created, 1);
}

#[test]
fn rgba_pools_sweep_and_clear_every_shape() {
    let pools = RgbaPools::builder().manual_sweep().build();
    drop((pools.get(2, 2), pools.get(3, 3)));
    pools.sweep();
    assert_eq!(pools.stats().idle, 2, "survives one sweep");
    pools.sweep();
    assert_eq!(pools.stats().trimmed, 2);
    drop((pools.get(2, 2), pools.get(3, 3)));
    let as_pool: &dyn Pool = &pools;
    as_pool.clear();
    assert_eq!(pools.stats().idle, 0);
}

#[test]
fn rgba_pools_take_the_reset_policy() {
    let zero = RgbaPools::new();
    zero.with(2, 2, |frame| frame.fill(3));
    assert!(zero.get(2, 2).iter().all(|&b| b == 0));

    let keep = RgbaPools::builder().reset(Reset::Keep).build();
    keep.with(2, 2, |frame| frame.fill(3));
    assert!(keep.get(2, 2).iter().all(|&b| b == 3));
    assert_eq!(keep.reset(), Reset::Keep);
}

#[test]
fn ycbcr_pools_keep_one_pool_per_shape_with_one_subsampling() {
    let pools = YCbCrPools::builder(Subsampling::S422)
        .manual_sweep()
        .build();
    assert_eq!(pools.subsampling(), Subsampling::S422);
    let frame = pools.get(6, 2);
    assert_eq!((frame.y.len(), frame.cb.len(), frame.c_stride), (12, 6, 3));
    drop(frame);
    pools.with(6, 2, |frame| frame.y.fill(1));
    pools.with(2, 6, |frame| frame.y.fill(1));
    assert!(pools.get(6, 2).y.iter().all(|&b| b == 0));
    let stats = pools.stats();
    assert_eq!((stats.created, stats.reused), (2, 2));
}

#[test]
fn shapes_can_be_added_from_many_threads_at_once() {
    let pools = RgbaPools::builder().manual_sweep().build();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let pools = &pools;
            s.spawn(move || {
                for i in 0..50u32 {
                    let (w, h) = (1 + (i + t) % 5, 1 + i % 3);
                    assert_eq!(pools.get(w, h).dimensions(), (w, h));
                }
            });
        }
    });
    let mut shapes: Vec<_> = pools.shapes().collect();
    let count = shapes.len();
    shapes.sort();
    shapes.dedup();
    assert_eq!(shapes.len(), count, "each shape has one pool");
    assert_eq!(count, 15);
}

#[test]
fn bad_shapes_panic_in_pools_of_any_shape_and_leave_them_usable() {
    let pools = RgbaPools::new();
    let msg = panic_message(|| drop(RgbaPools::new().get(0, 4)));
    assert_eq!(
        msg,
        "stashpool: a frame's width and height must be non-zero"
    );
    let msg = panic_message(|| drop(RgbaPools::new().get(u32::MAX, u32::MAX)));
    assert_eq!(msg, "stashpool: a frame must be at most isize::MAX bytes");
    assert!(catch_unwind(|| drop(YCbCrPools::new(Subsampling::S420).get(7, 0))).is_err());
    assert!(catch_unwind(std::panic::AssertUnwindSafe(|| drop(pools.get(0, 0)))).is_err());
    assert_eq!(pools.get(1, 1).dimensions(), (1, 1));
    assert_eq!(pools.shapes().count(), 1);
    assert!(format!("{pools:?}").contains("FramePools"));
}

#[test]
fn put_files_a_frame_under_its_shape_and_drops_one_of_a_shape_never_asked_for() {
    let pools = RgbaPools::builder().manual_sweep().build();
    pools.put(RgbaImage::new(0, 0)); // a shape no pool could hold: no panic
    pools.put(RgbaImage::new(3, 3));
    assert_eq!(pools.shapes().count(), 0, "put makes no pool");
    assert_eq!(pools.stats().idle, 0);

    drop(pools.get(3, 3));
    let mut frame = RgbaImage::new(3, 3);
    frame.put_pixel(1, 1, Rgba([9, 9, 9, 9]));
    pools.put(frame);
    assert_eq!(pools.stats().idle, 2);
    let (first, second) = (pools.get(3, 3), pools.get(3, 3));
    assert!(
        first.iter().chain(second.iter()).all(|&b| b == 0),
        "a frame put is zeroed as a returned one is"
    );
}

//! Exploration (scratch): L2 read bandwidth against the number of SMs
//! reading, HBM read orders, and the BF16 tensor probe with A from shared
//! memory (SS) or from registers (RS), sustained, with its clock.
//!
//!     cargo run --release -p gpu-bench --example scratch_probe -- OUTDIR
#![allow(unsafe_code)]

use gpu_sync::Device;
use gpu_sync::cuda_sys::result::{event, function, launch, memory, module, stream};
use gpu_sync::cuda_sys::{
    self as sys, BorrowedContext, BorrowedFunction, CUdevice_attribute, CUdeviceptr, CUstream_flags, OwnedStream,
};
use std::ffi::c_void;
use std::fmt::Write as _;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn launch(f: BorrowedFunction<'_>, grid: u32, block: u32, s: &OwnedStream, params: &mut [*mut c_void]) -> Res<()> {
    // SAFETY: each call site passes the kernel's exact parameters; every
    // buffer it touches is allocated in main with room for the kernel's
    // accesses and alive until main's end (after the stream is synchronized).
    unsafe { launch::launch_kernel(f, [grid, 1, 1], [block, 1, 1], 0, s, params) }?;
    Ok(())
}

fn d2h<T: Copy + Default>(src: CUdeviceptr, n: usize, s: &OwnedStream) -> Res<Vec<T>> {
    let mut v = vec![T::default(); n];
    // SAFETY: `v` holds n T; `src` is device memory of at least n T (callers).
    unsafe { memory::memcpy_dtoh_async(v.as_mut_ptr().cast(), src, n * size_of::<T>(), s) }?;
    stream::synchronize(s)?;
    Ok(v)
}

fn h2d<T: Copy>(dst: CUdeviceptr, v: &[T], s: &OwnedStream) -> Res<()> {
    // SAFETY: `dst` has room for v (callers); v alive until the sync.
    unsafe { memory::memcpy_htod_async(dst, v.as_ptr().cast(), std::mem::size_of_val(v), s) }?;
    stream::synchronize(s)?;
    Ok(())
}

fn zero(dst: CUdeviceptr, bytes: usize, s: &OwnedStream) -> Res<()> {
    // SAFETY: dst..dst+bytes is ours (callers).
    unsafe { memory::memset_d8_async(dst, 0, bytes, s) }?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Res<()> {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "scratch-out".into()));
    std::fs::create_dir_all(&out)?;
    let device = Device::get(0)?;
    let nsm = device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let drv = sys::installed().ok_or("no driver installed")?;
    // SAFETY: the primary context retained by `device` for all of main.
    let ctx = unsafe { BorrowedContext::borrow_raw(drv, device.raw_context()) };
    sys::result::context::set_current(drv, Some(ctx))?;
    let img1 = std::fs::read("scratch/l2p.fatbin")?;
    let img2 = std::fs::read("scratch/tc.fatbin")?;
    // SAFETY: fatbin images, alive during the calls.
    let m1 = unsafe { module::load_data(drv, img1.as_ptr().cast()) }?;
    // SAFETY: as above.
    let m2 = unsafe { module::load_data(drv, img2.as_ptr().cast()) }?;
    let fill = module::get_function(m1.as_borrowed(), c"l2p_fill")?;
    let scale = module::get_function(m1.as_borrowed(), c"l2p_scale")?;
    let order = module::get_function(m1.as_borrowed(), c"hbm_order")?;
    let wchunks = module::get_function(m1.as_borrowed(), c"warp_chunks")?;
    let ss = module::get_function(m2.as_borrowed(), c"tc_bf16_probe")?;
    let rs = module::get_function(m2.as_borrowed(), c"tc_bf16_rs_probe")?;
    let s = stream::create_with_priority(drv, CUstream_flags::CU_STREAM_NON_BLOCKING.0, 0)?;
    let (e0, e1) = (event::create(drv, 0)?, event::create(drv, 0)?);
    let mut rep = String::new();
    let only = std::env::args().nth(2).unwrap_or_default();

    // HBM: 4 GiB.
    let hbm_bytes: u64 = if matches!(only.as_str(), "hb" | "cp" | "cb") { 8 << 30 } else { 4 << 30 };
    let mut buf = memory::alloc(drv, hbm_bytes as usize)?;
    let mut words = hbm_bytes / 4;
    launch(fill, 4 * nsm, 256, &s, &mut [(&raw mut buf).cast(), (&raw mut words).cast()])?;
    stream::synchronize(&s)?;
    let mut acc = memory::alloc(drv, 8)?;
    let mut counts = memory::alloc(drv, 8)?;
    let mut sums = memory::alloc(drv, 64 * nsm as usize * 8)?;

    if only.is_empty() || only == "hbm" {
        writeln!(rep, "## HBM read orders, 4 GiB, 8 loads a thread\n\n| layout | blocks/SM x threads | TB/s median of 9 | min..max | sum ok |\n| --- | --- | --- | --- | --- |")?;
        let n4_all = hbm_bytes / 16;
        // sum of words 0..words-1 (u32 values i, wrapping u64)
        let expect = words * (words - 1) / 2;
        let names = ["grid-stride", "warp 4 KiB chunks", "block chunks", "two fronts", "nc evict_first"];
        for (bps, thr) in [(1u32, 512u32), (2, 512), (4, 256), (8, 256), (16, 256)] {
            for layout in 0..5u32 {
                let mut ts = Vec::new();
                let mut ok = true;
                for r in 0..10 {
                    zero(acc, 8, &s)?;
                    let (mut b, mut n4, mut l, mut a) = (buf, n4_all, layout, acc);
                    event::record(&e0, &s)?;
                    launch(order, bps * nsm, thr, &s, &mut [(&raw mut b).cast(), (&raw mut n4).cast(), (&raw mut l).cast(), (&raw mut a).cast()])?;
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    if r > 0 {
                        ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                    }
                    ok &= d2h::<u64>(acc, 1, &s)?[0] == expect;
                }
                let mut sorted = ts.clone();
                sorted.sort_by(f64::total_cmp);
                let bw = |t: f64| hbm_bytes as f64 / t / 1e12;
                let line = format!(
                    "| {} | {bps} x {thr} | {:.4} | {:.4}..{:.4} | {ok} |",
                    names[layout as usize],
                    bw(median(ts)),
                    bw(sorted[sorted.len() - 1]),
                    bw(sorted[0])
                );
                println!("{line}");
                writeln!(rep, "{line}")?;
            }
        }
    }

    if only == "cb" {
        // copy_bulk (the kernels crate's) in many grids, against hbm_copy's
        // best and the driver's copy, 2 GiB into the next 2 GiB of `buf`.
        let img3 = std::fs::read("kernels/fatbin/roofline.fatbin")?;
        // SAFETY: a fatbin image, alive during the call.
        let m3 = unsafe { module::load_data(drv, img3.as_ptr().cast()) }?;
        let hcopy = module::get_function(m3.as_borrowed(), c"hbm_copy")?;
        let cbulk = module::get_function(m3.as_borrowed(), c"copy_bulk")?;
        function::set_attribute(
            cbulk,
            gpu_sync::cuda_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            128 << 10,
        )?;
        let half: u64 = 2 << 30;
        let n4 = half / 16;
        writeln!(rep, "\n## copy_bulk in many grids, 2 GiB\n\n| copy | blocks/SM x threads | TB/s median of 15 | min..max | ok |\n| --- | --- | --- | --- | --- |")?;
        let mut cases: Vec<(String, u32, u32, u32, u32)> = vec![
            ("hbm_copy 2 loads, nc/cs, tiles".into(), 12, 0, 256, 0),
            ("hbm_copy 4 loads, nc/cs, tiles".into(), 13, 0, 256, 0),
            ("driver D2D".into(), 99, 0, 0, 0),
        ];
        for (stages, kib) in [(2u32, 32u32), (2, 16), (4, 16), (4, 8), (2, 8), (3, 32)] {
            for per_sm in [1u32, 2, 3, 8, 64, 512] {
                cases.push((format!("copy_bulk {stages} x {kib} KiB"), stages | kib << 8, per_sm, 128, stages * kib * 1024));
            }
        }
        for (name, v, per_sm, thr, smem) in cases {
            let (src, dst) = (buf, buf + half);
            let mut ts = Vec::new();
            for r in 0..16 {
                zero(dst, 64, &s)?;
                event::record(&e0, &s)?;
                let (mut a, mut b, mut n, mut vv) = (src, dst, n4, v);
                if v == 99 {
                    // SAFETY: both ranges inside `buf` (8 GiB), disjoint.
                    unsafe { memory::memcpy_dtod_async(dst, src, half as usize, &s) }?;
                } else if per_sm == 0 {
                    let tile: u64 = [2u64, 4, 8][(v % 3) as usize] * 256;
                    // SAFETY: hbm_copy(src, dst, n4, variant) over two disjoint 2 GiB views of `buf`.
                    unsafe { launch::launch_kernel(hcopy, [n4.div_ceil(tile) as u32, 1, 1], [256, 1, 1], 0, &s, &mut [(&raw mut a).cast(), (&raw mut b).cast(), (&raw mut n).cast(), (&raw mut vv).cast()]) }?;
                } else {
                    // SAFETY: copy_bulk(src, dst, n4, cfg) over the same views, its
                    // stages in the dynamic shared memory given (2+ stages).
                    unsafe { launch::launch_kernel(cbulk, [per_sm * nsm, 1, 1], [thr, 1, 1], smem, &s, &mut [(&raw mut a).cast(), (&raw mut b).cast(), (&raw mut n).cast(), (&raw mut vv).cast()]) }?;
                }
                event::record(&e1, &s)?;
                event::synchronize(&e1)?;
                if r > 0 {
                    ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                }
            }
            let words = (half / 4) as u32;
            let first: Vec<u32> = d2h(dst, 4, &s)?;
            let last: Vec<u32> = d2h(dst + half - 16, 4, &s)?;
            let mid: Vec<u32> = d2h(dst + half / 2 + 4096, 4, &s)?;
            let m0 = ((half / 2 + 4096) / 4) as u32;
            let ok = first == [0, 1, 2, 3] && last == [words - 4, words - 3, words - 2, words - 1] && mid == [m0, m0 + 1, m0 + 2, m0 + 3];
            let mut sorted = ts.clone();
            sorted.sort_by(f64::total_cmp);
            let bw = |t: f64| 2.0 * half as f64 / t / 1e12;
            let grid = if per_sm == 0 { "one block a tile".to_string() } else { format!("{per_sm} x {thr}") };
            let line = format!("| {name} | {grid} | {:.4} | {:.4}..{:.4} | {ok} |", bw(median(ts)), bw(sorted[sorted.len() - 1]), bw(sorted[0]));
            println!("{line}");
            writeln!(rep, "{line}")?;
        }
    }

    if only == "cp" {
        // Copy against the destination's placement: src = buf[0 .. 2 GiB),
        // dst = buf[2 GiB + off ..), off in bytes; hbm_copy (variant 13:
        // 4 loads, nc/cs, tiles, one block of 256 per tile) and the
        // driver's cuMemcpyDtoDAsync on the same views; variants 12 and 11
        // (2 and 8 loads) beside it.
        let img3 = std::fs::read("kernels/fatbin/roofline.fatbin")?;
        // SAFETY: a fatbin image, alive during the call.
        let m3 = unsafe { module::load_data(drv, img3.as_ptr().cast()) }?;
        let hcopy = module::get_function(m3.as_borrowed(), c"hbm_copy")?;
        let half: u64 = 2 << 30;
        writeln!(rep, "\n## Copy of 2 GiB against the destination offset\n\n| dst offset (bytes) | copy | variant | TB/s median of 15 | min..max | ok |\n| --- | --- | --- | --- | --- | --- |")?;
        for off in [0u64, 4096, 65536 + 4096, (1 << 20) + 12288, (32 << 20) + 8192, (3 << 30) - half] {
            let src = buf;
            let dst = buf + half + off;
            let n4 = half / 16;
            for (name, v) in [("hbm_copy", 13u32), ("hbm_copy", 12), ("hbm_copy", 11), ("driver D2D", 99)] {
                let mut ts = Vec::new();
                for r in 0..16 {
                    zero(dst, 64, &s)?;
                    event::record(&e0, &s)?;
                    if v == 99 {
                        // SAFETY: both ranges inside `buf` (8 GiB), disjoint.
                        unsafe { memory::memcpy_dtod_async(dst, src, half as usize, &s) }?;
                    } else {
                        let (mut a, mut b, mut n, mut vv) = (src, dst, n4, v);
                        let tile: u64 = [2u64, 4, 8][(v % 3) as usize] * 256;
                        let blocks = n4.div_ceil(tile) as u32;
                        // SAFETY: hbm_copy(src, dst, n4, variant) over the two
                        // disjoint 2 GiB views of `buf`.
                        unsafe {
                            launch::launch_kernel(hcopy, [blocks, 1, 1], [256, 1, 1], 0, &s, &mut [(&raw mut a).cast(), (&raw mut b).cast(), (&raw mut n).cast(), (&raw mut vv).cast()])
                        }?;
                    }
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    if r > 0 {
                        ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                    }
                }
                // the first and last words of the copy: src word i = i
                let first: Vec<u32> = d2h(dst, 4, &s)?;
                let last: Vec<u32> = d2h(dst + half - 16, 4, &s)?;
                let words = (half / 4) as u32;
                let ok = first == [0, 1, 2, 3] && last == [words - 4, words - 3, words - 2, words - 1];
                let mut sorted = ts.clone();
                sorted.sort_by(f64::total_cmp);
                let bw = |t: f64| 2.0 * half as f64 / t / 1e12;
                let line = format!("| {off} | {name} | {v} | {:.4} | {:.4}..{:.4} | {ok} |", bw(median(ts)), bw(sorted[sorted.len() - 1]), bw(sorted[0]));
                println!("{line}");
                writeln!(rep, "{line}")?;
            }
        }
    }

    if only == "hb" {
        let img3 = std::fs::read("kernels/fatbin/roofline.fatbin")?;
        // SAFETY: a fatbin image, alive during the call.
        let m3 = unsafe { module::load_data(drv, img3.as_ptr().cast()) }?;
        let hread = module::get_function(m3.as_borrowed(), c"hbm_read")?;
        let rbulk = module::get_function(m3.as_borrowed(), c"read_bulk")?;
        function::set_attribute(
            rbulk,
            gpu_sync::cuda_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            96 << 10,
        )?;
        writeln!(rep, "\n## HBM read, bulk engine, many grids\n\n| probe | MiB | blocks/SM x threads | TB/s median of 15 | min..max | ok |\n| --- | --- | --- | --- | --- | --- |")?;
        for mib in [4096u64, 8192] {
            let bytes = mib << 20;
            let words = bytes / 4;
            let expect = words * (words - 1) / 2;
            let n4 = bytes / 16;
            let mut cases: Vec<(&str, u32, u32, u32, u32)> = Vec::new(); // name, variant/cfg, per_sm, threads, smem
            for (per_sm, thr) in [(2u32, 512u32), (8, 128), (32, 128), (128, 128), (256, 128), (512, 128), (1024, 128), (512, 64), (2048, 64), (512, 256)] {
                cases.push(("hbm_read bulk 4 x 8 KiB", 24, per_sm, thr, 32 << 10));
            }
            for (cfg, smem) in [(2u32 | 32 << 8, 64u32 << 10), (2 | 16 << 8, 32 << 10), (4 | 8 << 8, 32 << 10), (2 | 8 << 8, 16 << 10)] {
                for (per_sm, thr) in [(1u32, 512u32), (2, 512), (2, 128), (8, 128), (64, 128), (512, 128)] {
                    cases.push(("read_bulk", cfg, per_sm, thr, smem));
                }
            }
            for (name, v, per_sm, thr, smem) in cases {
                let mut ts = Vec::new();
                let mut ok = true;
                for r in 0..16 {
                    zero(acc, 8, &s)?;
                    let (mut b, mut n, mut vv, mut a, mut ws4) = (buf, n4, v, acc, n4);
                    event::record(&e0, &s)?;
                    let grid = [per_sm * nsm, 1, 1];
                    // SAFETY: hbm_read(in, n4, variant, out) / read_bulk(in, ws4, n, cfg, out)
                    // over `buf` (8 GiB, filled; n4 uint4 <= its size), `acc` one u64;
                    // the bulk stages in the dynamic shared memory given.
                    unsafe {
                        if name == "read_bulk" {
                            launch::launch_kernel(rbulk, grid, [thr, 1, 1], smem, &s, &mut [(&raw mut b).cast(), (&raw mut ws4).cast(), (&raw mut n).cast(), (&raw mut vv).cast(), (&raw mut a).cast()])
                        } else {
                            launch::launch_kernel(hread, grid, [thr, 1, 1], smem, &s, &mut [(&raw mut b).cast(), (&raw mut n).cast(), (&raw mut vv).cast(), (&raw mut a).cast()])
                        }
                    }?;
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    if r > 0 {
                        ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                    }
                    ok &= d2h::<u64>(acc, 1, &s)?[0] == expect;
                }
                let mut sorted = ts.clone();
                sorted.sort_by(f64::total_cmp);
                let bw = |t: f64| bytes as f64 / t / 1e12;
                let label = if name == "read_bulk" { format!("read_bulk {} x {} KiB", v & 0xff, v >> 8) } else { name.to_string() };
                let line = format!("| {label} | {mib} | {per_sm} x {thr} | {:.4} | {:.4}..{:.4} | {ok} |", bw(median(ts)), bw(sorted[sorted.len() - 1]), bw(sorted[0]));
                println!("{line}");
                writeln!(rep, "{line}")?;
            }
        }
    }

    if only.is_empty() || only == "wc" {
        writeln!(rep, "\n## Warp chunks (a warp reads its chunk contiguously, 512 B a load instruction)\n\n| set | chunk KiB | variant | blocks/SM x threads | TB/s median of 9 | min..max | sum ok |\n| --- | --- | --- | --- | --- | --- | --- |")?;
        let vnames = ["8 loads cg", "8 loads nc", "16 loads cg", "16 loads nc", "4 loads cg"];
        let mut cases: Vec<(u64, u64, u32, u32, u32)> = Vec::new();
        for chunk_kib in [4u64, 8, 16, 32, 64, 128] {
            for variant in [0u32, 1, 2, 4] {
                if variant == 2 && chunk_kib < 8 {
                    continue;
                }
                for (bps, thr) in [(4u32, 256u32), (8, 256), (16, 256), (2, 512)] {
                    cases.push((hbm_bytes, chunk_kib, variant, bps, thr));
                }
            }
        }
        for set in [2u64 << 20, 12 << 20, 24 << 20] {
            for chunk_kib in [4u64, 16] {
                for variant in [0u32, 2, 4] {
                    if variant == 2 && chunk_kib < 8 {
                        continue;
                    }
                    for (bps, thr) in [(2u32, 512u32), (4, 256), (8, 256)] {
                        cases.push((set, chunk_kib, variant, bps, thr));
                    }
                }
            }
        }
        for (set, chunk_kib, variant, bps, thr) in cases {
            let ws4 = set / 16;
            let chunk4 = chunk_kib * 1024 / 16;
            let passes = ((1u64 << 30) / set).max(1);
            let nchunks = passes * ws4 / chunk4;
            let set_words = set / 4;
            let expect = (set_words * (set_words - 1) / 2).wrapping_mul(passes);
            let mut ts = Vec::new();
            let mut ok = true;
            for r in 0..10 {
                zero(acc, 8, &s)?;
                let (mut b, mut w4, mut nc, mut c4, mut v, mut a) = (buf, ws4, nchunks, chunk4, variant, acc);
                event::record(&e0, &s)?;
                launch(wchunks, bps * nsm, thr, &s, &mut [(&raw mut b).cast(), (&raw mut w4).cast(), (&raw mut nc).cast(), (&raw mut c4).cast(), (&raw mut v).cast(), (&raw mut a).cast()])?;
                event::record(&e1, &s)?;
                event::synchronize(&e1)?;
                if r > 0 {
                    ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                }
                ok &= d2h::<u64>(acc, 1, &s)?[0] == expect;
            }
            let mut sorted = ts.clone();
            sorted.sort_by(f64::total_cmp);
            let bytes = (passes * set) as f64;
            let bw = |t: f64| bytes / t / 1e12;
            let line = format!(
                "| {} MiB | {chunk_kib} | {} | {bps} x {thr} | {:.4} | {:.4}..{:.4} | {ok} |",
                set >> 20,
                vnames[variant as usize],
                bw(median(ts)),
                bw(sorted[sorted.len() - 1]),
                bw(sorted[0])
            );
            println!("{line}");
            writeln!(rep, "{line}")?;
        }
    }

    if only.is_empty() || only == "l2" {
        writeln!(rep, "\n## L2 read against SMs reading (2 blocks of 512 a SM, 8 loads a thread, .cg)\n\n| set | SMs | TB/s | GB/s a SM | ok |\n| --- | --- | --- | --- | --- |")?;
        for set in [512u64 << 10, 2 << 20, 24 << 20] {
            let ws4 = (set / 16) as u32;
            for active in [1u32, 2, 4, 8, 16, 24, 33, 48, 66, 99, nsm] {
                let blocks = 2 * nsm;
                let threads = 512u32;
                let steps = ((256u64 << 20) / (blocks as u64 * threads as u64 * 8 * 16)).max(8) as u32;
                let mut ts = Vec::new();
                let mut ran = 0u32;
                let mut ok = true;
                for r in 0..6 {
                    zero(counts, 8, &s)?;
                    zero(sums, blocks as usize * 8, &s)?;
                    let (mut b, mut w, mut st, mut ac, mut su, mut co) = (buf, ws4, steps, active, sums, counts);
                    event::record(&e0, &s)?;
                    launch(scale, blocks, threads, &s, &mut [(&raw mut b).cast(), (&raw mut w).cast(), (&raw mut st).cast(), (&raw mut ac).cast(), (&raw mut su).cast(), (&raw mut co).cast()])?;
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    ran = d2h::<u32>(counts, 1, &s)?[0];
                    if r > 0 {
                        ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                    }
                    if r == 0 {
                        // Each block that ran reads words of uint4 p: sum 16p + 6 per load,
                        // summed over its loads; check only that the total is a sum of
                        // `ran * threads * 8 * steps` loads' worth (cheap bound) — the
                        // exact check is the l2_partitions example's.
                        let got: Vec<u64> = d2h(sums, blocks as usize, &s)?;
                        ok = got.iter().filter(|&&x| x != 0).count() as u32 == ran;
                    }
                }
                let bytes = ran as f64 * threads as f64 * 8.0 * 16.0 * steps as f64;
                let t = median(ts);
                let line = format!(
                    "| {} KiB | {active} ({ran} blocks) | {:.2} | {:.1} | {ok} |",
                    set >> 10,
                    bytes / t / 1e12,
                    bytes / t / 1e9 / active.min(nsm) as f64
                );
                println!("{line}");
                writeln!(rep, "{line}")?;
            }
        }
    }

    if only.is_empty() || only == "tc" {
        // Random bf16 in [-1, 1).
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            (f.to_bits() >> 16) as u16
        };
        let av: Vec<u16> = (0..64 * 64).map(|_| rnd()).collect();
        let bv: Vec<u16> = (0..256 * 64).map(|_| rnd()).collect();
        let da = memory::alloc(drv, av.len() * 2)?;
        let db = memory::alloc(drv, bv.len() * 2)?;
        h2d(da, &av, &s)?;
        h2d(db, &bv, &s)?;
        let dout = memory::alloc(drv, 256 * 1024 * 4)?;
        let dclk = memory::alloc(drv, 16)?;
        writeln!(rep, "\n## BF16 wgmma m64n256k16, 132 blocks x 2 warpgroups x 4000 x 4, random operands\n\n| round | variant | TFLOP/s (median of batches) | clock MHz (median) | TFLOP/s per GHz |\n| --- | --- | --- | --- | --- |")?;
        let iters = 4000u32;
        let flops = nsm as f64 * 2.0 * iters as f64 * 4.0 * 2.0 * 64.0 * 256.0 * 16.0;
        for round in 0..3 {
            for (name, f) in [("SS (A, B in shared)", ss), ("RS (A in registers)", rs)] {
                let t_end = std::time::Instant::now() + std::time::Duration::from_secs(3);
                let mut rates = Vec::new();
                let mut mhz = Vec::new();
                while std::time::Instant::now() < t_end {
                    let (mut a, mut b, mut it, mut st, mut o, mut c) = (da, db, iters, 0u32, dout, dclk);
                    event::record(&e0, &s)?;
                    launch(f, nsm, 256, &s, &mut [(&raw mut a).cast(), (&raw mut b).cast(), (&raw mut it).cast(), (&raw mut st).cast(), (&raw mut o).cast(), (&raw mut c).cast()])?;
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    let t = event::elapsed_time(&e0, &e1)? as f64 * 1e-3;
                    let clk: Vec<u64> = d2h(dclk, 2, &s)?;
                    rates.push(flops / t / 1e12);
                    mhz.push(clk[0] as f64 / clk[1] as f64 * 1e3);
                }
                let (r, m) = (median(rates), median(mhz));
                let line = format!("| {round} | {name} | {r:.1} | {m:.0} | {:.1} |", r / m * 1e3);
                println!("{line}");
                writeln!(rep, "{line}")?;
            }
        }
    }
    std::fs::write(out.join("report.md"), rep)?;
    Ok(())
}

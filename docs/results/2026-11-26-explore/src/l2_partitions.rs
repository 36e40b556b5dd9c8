//! Exploration (scratch): each SM's L2 hit latency line by line, the SMs
//! grouped by which lines they reach fast, and the read bandwidth of lines
//! only in the reader's fast group against every line.
//!
//!     cargo run --release -p gpu-bench --features kernels --example l2_partitions -- OUTDIR
#![allow(unsafe_code)]

use gpu_sync::cuda_sys::result::{event, launch, memory, module, stream};
use gpu_sync::cuda_sys::{self as sys, BorrowedContext, BorrowedFunction, CUdeviceptr, CUdevice_attribute, CUstream_flags, OwnedStream};
use gpu_sync::Device;
use std::ffi::c_void;
use std::fmt::Write as _;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const U: u64 = 8;
const LINE: u64 = 128;
const MAX_LINES: u32 = 40 * 1024 * 1024 / 128;
const SAMPLE: u32 = 2048;
const R: f64 = 6.0;

struct K<'m> {
    fill: BorrowedFunction<'m>,
    lat: BorrowedFunction<'m>,
    read: BorrowedFunction<'m>,
    plain: BorrowedFunction<'m>,
}

fn launch(f: BorrowedFunction<'_>, grid: u32, block: u32, s: &OwnedStream, params: &mut [*mut c_void]) -> Res<()> {
    // SAFETY: each call site passes the kernel's exact parameters; every
    // buffer it touches is allocated below with the sizes argued there and
    // alive until main's end (after the stream is synchronized).
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

/// Otsu threshold over values.
fn otsu(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let total: f64 = s.iter().sum();
    let (mut best, mut thr, mut acc) = (0.0, s[0], 0.0);
    for i in 0..s.len() - 1 {
        acc += s[i];
        let w0 = (i + 1) as f64 / n;
        let m0 = acc / (i + 1) as f64;
        let m1 = (total - acc) / (n - (i + 1) as f64);
        let b = w0 * (1.0 - w0) * (m0 - m1).powi(2);
        if b > best {
            best = b;
            thr = (s[i] + s[i + 1]) / 2.0;
        }
    }
    thr
}

fn main() -> Res<()> {
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "l2p-out".into()));
    std::fs::create_dir_all(&out)?;
    let device = Device::get(0)?;
    let nsm = device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let drv = sys::installed().ok_or("no driver installed")?;
    // SAFETY: the primary context retained by `device` for all of main.
    let ctx = unsafe { BorrowedContext::borrow_raw(drv, device.raw_context()) };
    sys::result::context::set_current(drv, Some(ctx))?;
    let image = std::fs::read("scratch/l2p.fatbin")?;
    // SAFETY: a fatbin image, alive during the call.
    let m = unsafe { module::load_data(drv, image.as_ptr().cast()) }?;
    let k = K {
        fill: module::get_function(m.as_borrowed(), c"l2p_fill")?,
        lat: module::get_function(m.as_borrowed(), c"l2p_lat")?,
        read: module::get_function(m.as_borrowed(), c"l2p_read")?,
        plain: module::get_function(m.as_borrowed(), c"l2p_plain")?,
    };
    let s = stream::create_with_priority(drv, CUstream_flags::CU_STREAM_NON_BLOCKING.0, 0)?;
    let words = MAX_LINES as u64 * 32;
    let mut buf = memory::alloc(drv, (words * 4) as usize)?;
    let mut n = words;
    launch(k.fill, 4 * nsm, 256, &s, &mut [(&raw mut buf).cast(), (&raw mut n).cast()])?;
    let mut claim = memory::alloc(drv, 8)?;
    let mut lat = memory::alloc(drv, MAX_LINES as usize * 4)?;
    let mut report = String::new();

    // 1. Every SM, the first SAMPLE lines.
    let mut lat_sm: Vec<Vec<u32>> = Vec::new();
    for sm in 0..nsm {
        let mut got = None;
        for tries in 0..8 {
            zero(claim, 8, &s)?;
            let (mut first, mut count, mut off, mut target, mut z) = (0u32, SAMPLE, 0u32, sm, 0u32);
            launch(
                k.lat,
                (4 + 4 * tries) * nsm,
                32,
                &s,
                &mut [
                    (&raw mut buf).cast(),
                    (&raw mut first).cast(),
                    (&raw mut count).cast(),
                    (&raw mut off).cast(),
                    (&raw mut target).cast(),
                    (&raw mut claim).cast(),
                    (&raw mut lat).cast(),
                    (&raw mut z).cast(),
                ],
            )?;
            let c: Vec<u32> = d2h(claim, 1, &s)?;
            if c[0] == 1 {
                got = Some(d2h::<u32>(lat, SAMPLE as usize, &s)?);
                break;
            }
        }
        lat_sm.push(got.ok_or(format!("no block landed on SM {sm}"))?);
    }
    // 2. SM 0, every line; and sector 2 of the first 8192 lines.
    let full = |target: u32, off: u32, count: u32| -> Res<Vec<u32>> {
        zero(claim, 8, &s)?;
        let (mut first, mut count, mut off, mut target, mut z) = (0u32, count, off, target, 0u32);
        let mut buf = buf;
        let mut claim = claim;
        let mut lat = lat;
        launch(
            k.lat,
            16 * nsm,
            32,
            &s,
            &mut [
                (&raw mut buf).cast(),
                (&raw mut first).cast(),
                (&raw mut count).cast(),
                (&raw mut off).cast(),
                (&raw mut target).cast(),
                (&raw mut claim).cast(),
                (&raw mut lat).cast(),
                (&raw mut z).cast(),
            ],
        )?;
        let c: Vec<u32> = d2h(claim, 1, &s)?;
        if c[0] != 1 {
            return Err("no block on the target SM".into());
        }
        d2h::<u32>(lat, count as usize, &s)
    };
    let t0 = std::time::Instant::now();
    let lat0 = full(0, 0, MAX_LINES)?;
    let map_s = t0.elapsed().as_secs_f64();
    let lat0_sec2 = full(0, 16, 8192)?;
    let per_load: Vec<f64> = lat0.iter().map(|&c| c as f64 / R).collect();
    let thr = otsu(&per_load);
    let near0: Vec<bool> = per_load.iter().map(|&x| x < thr).collect();
    let nnear = near0.iter().filter(|&&b| b).count();
    writeln!(report, "SMs {nsm}; full map of {MAX_LINES} lines from SM 0 took {map_s:.2} s")?;
    writeln!(report, "SM 0: Otsu threshold {thr:.1} cycles/load; {nnear} of {MAX_LINES} lines below")?;
    // histogram
    let mut hist = std::collections::BTreeMap::new();
    for &x in &per_load {
        *hist.entry((x / 10.0) as u32 * 10).or_insert(0u32) += 1;
    }
    writeln!(report, "SM 0 per-load latency histogram (cycles: lines): {hist:?}")?;
    let sec_agree = (0..8192).filter(|&i| ((lat0_sec2[i] as f64 / R) < thr) == near0[i]).count();
    writeln!(report, "sector 2 vs sector 0 class agreement over 8192 lines: {sec_agree}")?;
    // runs of equal class
    let mut runs = Vec::new();
    let mut cur = 1;
    for i in 1..4096 {
        if near0[i] == near0[i - 1] {
            cur += 1
        } else {
            runs.push(cur);
            cur = 1
        }
    }
    writeln!(report, "first runs of equal class (lines): {:?}", &runs[..runs.len().min(64)])?;
    let bits: String = (0..512).map(|i| if near0[i] { '0' } else { '1' }).collect();
    writeln!(report, "class of lines 0..512 (0 = near SM 0): {bits}")?;
    // group SMs
    let mut group = vec![0u32; 256];
    writeln!(report, "\n| SM | mean on SM0-near lines | mean on SM0-far lines | group | agreement |")?;
    writeln!(report, "| --- | --- | --- | --- | --- |")?;
    let mut agree_min = 1.0f64;
    for (sm, l) in lat_sm.iter().enumerate() {
        let (mut a, mut na, mut b, mut nb) = (0.0, 0, 0.0, 0);
        for i in 0..SAMPLE as usize {
            let x = l[i] as f64 / R;
            if near0[i] {
                a += x;
                na += 1
            } else {
                b += x;
                nb += 1
            }
        }
        let (ma, mb) = (a / na as f64, b / nb as f64);
        let g = u32::from(ma > mb);
        group[sm] = g;
        let thr_sm = otsu(&l.iter().map(|&c| c as f64 / R).collect::<Vec<_>>());
        let agree = (0..SAMPLE as usize)
            .filter(|&i| ((l[i] as f64 / R) < thr_sm) == (near0[i] == (g == 0)))
            .count() as f64
            / SAMPLE as f64;
        agree_min = agree_min.min(agree);
        writeln!(report, "| {sm} | {ma:.1} | {mb:.1} | {g} | {agree:.3} |")?;
    }
    writeln!(report, "lowest agreement: {agree_min:.3}; group 1 SMs: {}", group[..nsm as usize].iter().filter(|&&g| g == 1).count())?;
    let mut raw = Vec::new();
    for l in &lat_sm {
        for &x in l {
            raw.extend_from_slice(&x.to_le_bytes());
        }
    }
    std::fs::write(out.join("lat_sm.u32"), raw)?;
    std::fs::write(out.join("lat0.u32"), lat0.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())?;
    print!("{report}");

    // 3. Bandwidth.
    let mut d_group = memory::alloc(drv, 256 * 4)?;
    h2d(d_group, &group, &s)?;
    let maxb = 64 * nsm as usize;
    let mut sums = memory::alloc(drv, maxb * 8)?;
    let mut groups = memory::alloc(drv, maxb * 4)?;
    let mut d_lists = memory::alloc(drv, 2 * MAX_LINES as usize * 4)?;
    let mut d_offs = memory::alloc(drv, 16)?;
    let (e0, e1) = (event::create(drv, 0)?, event::create(drv, 0)?);
    let mut table = String::new();
    writeln!(table, "\n| set MiB | mode | blocks/SM x threads | TB/s (median of 5) | checked |")?;
    writeln!(table, "| --- | --- | --- | --- | --- |")?;
    let mut csv = String::from("set_mib,mode,bps,threads,tbs,ok\n");
    for set_mib in [2u64, 4, 8, 16, 24, 32, 40] {
        let wl = (set_mib * 1024 * 1024 / LINE) as u32;
        let l0: Vec<u32> = (0..wl).filter(|&i| near0[i as usize]).collect();
        let l1: Vec<u32> = (0..wl).filter(|&i| !near0[i as usize]).collect();
        let all: Vec<u32> = (0..wl).collect();
        let mut lists = l0.clone();
        lists.extend(&l1);
        lists.extend(&all);
        let offs = [0u32, l0.len() as u32, (l0.len() + l1.len()) as u32, lists.len() as u32];
        h2d(d_lists, &lists, &s)?;
        h2d(d_offs, &offs, &s)?;
        let lists_of = [&l0, &l1, &all];
        for (bps, threads) in [(1u32, 512u32), (2, 512), (2, 256), (4, 256), (8, 128)] {
            let blocks = bps * nsm;
            let per_step = blocks as u64 * threads as u64 * U * 16;
            let mut steps = ((1u64 << 30) / per_step).max(1) as u32;
            for mode in 0..4u32 {
                let run = || -> Res<()> {
                    let (mut buf, mut d_lists, mut d_offs, mut d_group, mut steps, mut sums, mut groups) =
                        (buf, d_lists, d_offs, d_group, steps, sums, groups);
                    if mode < 3 {
                        let mut mode = mode;
                        launch(
                            k.read,
                            blocks,
                            threads,
                            &s,
                            &mut [
                                (&raw mut buf).cast(),
                                (&raw mut d_lists).cast(),
                                (&raw mut d_offs).cast(),
                                (&raw mut d_group).cast(),
                                (&raw mut mode).cast(),
                                (&raw mut steps).cast(),
                                (&raw mut sums).cast(),
                                (&raw mut groups).cast(),
                            ],
                        )
                    } else {
                        let mut ws4 = wl * 8;
                        launch(
                            k.plain,
                            blocks,
                            threads,
                            &s,
                            &mut [(&raw mut buf).cast(), (&raw mut ws4).cast(), (&raw mut steps).cast(), (&raw mut sums).cast()],
                        )
                    }
                };
                zero(sums, maxb * 8, &s)?;
                run()?;
                stream::synchronize(&s)?;
                // check
                let got: Vec<u64> = d2h(sums, blocks as usize, &s)?;
                let ok = if mode < 3 {
                    let gs: Vec<u32> = d2h(groups, blocks as usize, &s)?;
                    let warps = threads / 32;
                    (0..blocks).all(|b| {
                        let g = gs[b as usize];
                        let li = if mode == 0 { g } else if mode == 1 { 1 - g } else { 2 } as usize;
                        let list = lists_of[li];
                        let mm = list.len() as u64;
                        let start = (b as u64 * 0x9E37_79B1) % mm;
                        let st = (warps as u64 * U * 4) % mm;
                        let mut sum = 0u64;
                        for w in 0..warps as u64 {
                            for u in 0..U {
                                for slot in 0..4u64 {
                                    let mut p = (start + (w * U + u) * 4 + slot) % mm;
                                    for _ in 0..steps {
                                        sum = sum.wrapping_add(1024 * list[p as usize] as u64 + 496);
                                        p += st;
                                        if p >= mm {
                                            p -= mm;
                                        }
                                    }
                                }
                            }
                        }
                        sum == got[b as usize]
                    })
                } else {
                    let t = blocks as u64 * threads as u64;
                    let ws4 = wl as u64 * 8;
                    let st = (t * U) % ws4;
                    let mut sum = 0u64;
                    for th in 0..t {
                        for u in 0..U {
                            let mut p = (u * t + th) % ws4;
                            for _ in 0..steps {
                                sum = sum.wrapping_add(16 * p + 6);
                                p += st;
                                if p >= ws4 {
                                    p -= ws4;
                                }
                            }
                        }
                    }
                    sum == got.iter().fold(0u64, |a, &x| a.wrapping_add(x))
                };
                let mut ts = Vec::new();
                for _ in 0..5 {
                    event::record(&e0, &s)?;
                    run()?;
                    event::record(&e1, &s)?;
                    event::synchronize(&e1)?;
                    ts.push(event::elapsed_time(&e0, &e1)? as f64 * 1e-3);
                }
                ts.sort_by(f64::total_cmp);
                let bytes = per_step as f64 * steps as f64;
                let tbs = bytes / ts[2] / 1e12;
                let name = ["near", "far", "all (lists)", "plain grid-stride"][mode as usize];
                writeln!(table, "| {set_mib} | {name} | {bps} x {threads} | {tbs:.2} | {ok} |")?;
                writeln!(csv, "{set_mib},{name},{bps},{threads},{tbs:.3},{ok}")?;
                println!("{set_mib} MiB {name} {bps}x{threads}: {tbs:.2} TB/s ok={ok}");
            }
        }
    }
    print!("{table}");
    report.push_str(&table);
    std::fs::write(out.join("report.md"), report)?;
    std::fs::write(out.join("bw.csv"), csv)?;
    Ok(())
}

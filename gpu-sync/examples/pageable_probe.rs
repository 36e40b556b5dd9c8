//! Where the time of a pageable copy goes: gpu-sync's `upload_pageable` /
//! `download_pageable` / `to_vec` beside the raw driver call on the same
//! stream and the same host memory, and the same copy from host memory in
//! other states (touched and reused, never touched, freshly allocated,
//! 2 MiB-aligned with transparent huge pages), plus the host's own memcpy
//! rate and a copy staged by hand through two pinned buffers. Each row gives
//! host wall time (`Instant` around the whole call, synchronization
//! included) and device time (events recorded before and after the call on
//! the stream).
//!
//! `cargo run --release -p gpu-sync --example pageable_probe -- [MAX_MIB]`
//! (GPU only; prints a tab-separated table). The figures and the method are
//! in docs/results/2026-11-25-pageable.md; `gpu-bench bandwidth` stays the
//! benchmark.
#![allow(unsafe_code)]

use gpu_sync::cuda_sys::result::memory::{memcpy_dtoh_async, memcpy_htod_async};
use gpu_sync::{Device, DeviceBuffer, ForeignUses, HostAllocFlags, PinnedBuffer, Stream, TimingEvent};
use std::alloc::{Layout, alloc, dealloc};
use std::ffi::c_void;
use std::time::Instant;

unsafe extern "C" {
    fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
}
const MADV_HUGEPAGE: i32 = 14;

/// Host memory aligned to 2 MiB, advised for transparent huge pages, and
/// touched (every byte written).
struct Huge {
    ptr: *mut u32,
    layout: Layout,
    n: usize,
}

impl Huge {
    fn new(n: usize) -> Huge {
        let layout = Layout::from_size_align((n * 4).max(1), 2 << 20).expect("layout");
        // SAFETY: a non-zero size.
        let ptr = unsafe { alloc(layout) }.cast::<u32>();
        assert!(!ptr.is_null(), "allocation of {} bytes failed", n * 4);
        // SAFETY: `ptr..ptr + size` is the allocation just made; advice only.
        let rc = unsafe { madvise(ptr.cast(), layout.size(), MADV_HUGEPAGE) };
        if rc != 0 {
            eprintln!("madvise(MADV_HUGEPAGE) returned {rc}");
        }
        // SAFETY: writes `n` u32 inside the allocation.
        unsafe { std::slice::from_raw_parts_mut(ptr, n) }.fill(7);
        Huge { ptr, layout, n }
    }
    fn as_slice(&self) -> &[u32] {
        // SAFETY: `n` initialized u32 owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.n) }
    }
}

impl Drop for Huge {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr.cast(), self.layout) };
    }
}

const THREADS: usize = 4;

/// `dst.copy_from_slice(src)` split over `t` scoped threads.
fn par_copy(dst: &mut [u32], src: &[u32], t: usize) {
    let per = dst.len().div_ceil(t).max(1);
    std::thread::scope(|sc| {
        for (d, s) in dst.chunks_mut(per).zip(src.chunks(per)) {
            sc.spawn(move || d.copy_from_slice(s));
        }
    });
}

struct Row {
    wall: Vec<f64>,
    dev: Vec<f64>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

/// Times `f` `reps` times after two warm-up runs: wall time around the call
/// and events recorded before and after it on `s`.
fn time(
    s: &Stream,
    e0: &TimingEvent,
    e1: &TimingEvent,
    reps: usize,
    mut f: impl FnMut() -> gpu_sync::Result<()>,
) -> gpu_sync::Result<Row> {
    for _ in 0..2 {
        f()?;
    }
    s.synchronize()?;
    let mut row = Row { wall: Vec::new(), dev: Vec::new() };
    for _ in 0..reps {
        e0.record(s)?;
        let t = Instant::now();
        f()?;
        let w = t.elapsed().as_secs_f64();
        e1.record(s)?;
        e1.synchronize()?;
        row.wall.push(w);
        row.dev.push(e0.elapsed(e1)?.as_secs_f64());
    }
    Ok(row)
}

fn print(name: &str, bytes: usize, mut r: Row) {
    let gb = bytes as f64 / 1e9;
    let n = r.wall.len();
    let best = r.wall.iter().cloned().fold(f64::INFINITY, f64::min);
    let (w, d) = (median(&mut r.wall), median(&mut r.dev));
    println!("{name}\t{}\t{:.2}\t{:.2}\t{:.2}\t{n}", bytes >> 20, gb / w, gb / best, gb / d);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let max_mib: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(1024);
    // `PROBE_ROWS=final`: only gpu-sync's calls and the raw driver rows.
    let all = std::env::var("PROBE_ROWS").map_or(true, |v| v != "final");
    gpu_sync::select_driver()?;
    let dev = Device::get(0)?;
    let s = Stream::new(&dev)?;
    let (e0, e1) = (TimingEvent::new(&dev)?, TimingEvent::new(&dev)?);
    println!("# {} · driver {}", dev.name()?, dev.driver_version());
    println!("variant\tMiB\twall_median_GBps\twall_best_GBps\tevent_median_GBps\treps");
    let mut size = 1usize << 20;
    while size <= max_mib << 20 {
        let n = size / 4;
        let reps = ((2usize << 30) / size).clamp(5, 40);
        let src = vec![7u32; n]; // touched (every page written), reused
        let mut out = vec![1u32; n]; // touched, reused
        let untouched = vec![0u32; n]; // calloc: zero pages, never written
        let huge = if all { Huge::new(n) } else { Huge::new(0) };
        let mut d = DeviceBuffer::<u32>::zeroed(&s, n)?;
        s.synchronize()?;

        if all {
            // Host memcpy, one thread, touched to touched.
            let mut h = Row { wall: Vec::new(), dev: Vec::new() };
            for _ in 0..reps + 2 {
                let t = Instant::now();
                out.copy_from_slice(std::hint::black_box(&src));
                h.wall.push(t.elapsed().as_secs_f64());
                h.dev.push(f64::NAN);
            }
            h.wall.drain(..2);
            print("host memcpy 1 thread", size, h);
            let mut h = Row { wall: Vec::new(), dev: Vec::new() };
            for _ in 0..reps + 2 {
                let t = Instant::now();
                par_copy(&mut out, std::hint::black_box(&src), THREADS);
                h.wall.push(t.elapsed().as_secs_f64());
                h.dev.push(f64::NAN);
            }
            h.wall.drain(..2);
            print(&format!("host memcpy {THREADS} threads"), size, h);
        }

        // H2D.
        print(
            "H2D gpu-sync upload_pageable, touched Vec",
            size,
            time(&s, &e0, &e1, reps, || s.upload_pageable(&src, &mut d))?,
        );
        print(
            "H2D raw cuMemcpyHtoDAsync+cuStreamSynchronize, touched Vec",
            size,
            time(&s, &e0, &e1, reps, || {
                let mut uses = ForeignUses::new();
                let dptr = uses.output(&mut d);
                let (p, b) = (src.as_ptr(), size);
                // SAFETY: `src` outlives the copy: the stream is synchronized
                // below before `src` can be touched; `dptr` is `b` bytes of `d`,
                // declared as written.
                unsafe {
                    s.launch_foreign("raw pageable HtoD", uses, |raw| {
                        Ok(memcpy_htod_async(dptr, p.cast(), b, raw)?)
                    })?;
                }
                s.synchronize().map(|_| ())
            })?,
        );
        print(
            "H2D gpu-sync upload_pageable, untouched Vec (zero pages)",
            size,
            time(&s, &e0, &e1, reps, || s.upload_pageable(&untouched, &mut d))?,
        );
        if all {
            print(
                "H2D gpu-sync upload_pageable, 2MiB-aligned THP touched",
                size,
                time(&s, &e0, &e1, reps, || s.upload_pageable(huge.as_slice(), &mut d))?,
            );
        }
        print(
            "H2D gpu-sync from_slice (alloc+copy), touched Vec",
            size,
            time(&s, &e0, &e1, reps, || DeviceBuffer::from_slice(&s, &src).map(drop))?,
        );
        if all {
            // A fresh Vec each time: allocated and filled (first touch) outside the
            // timed call, so the copy reads memory just written (cache-warm for
            // small sizes).
            {
                let mut r = Row { wall: Vec::new(), dev: Vec::new() };
                for i in 0..reps + 2 {
                    let fresh = vec![7u32; n];
                    e0.record(&s)?;
                    let t = Instant::now();
                    s.upload_pageable(&fresh, &mut d)?;
                    let w = t.elapsed().as_secs_f64();
                    e1.record(&s)?;
                    e1.synchronize()?;
                    if i >= 2 {
                        r.wall.push(w);
                        r.dev.push(e0.elapsed(&e1)?.as_secs_f64());
                    }
                }
                print("H2D gpu-sync upload_pageable, fresh Vec each call", size, r);
            }
            // Staged by hand: two pinned chunks, host memcpy of chunk i+1 while
            // chunk i's DMA runs (as_mut_slice waits for the upload reading it).
            for chunk_mib in [2usize, 8] {
                let c = ((chunk_mib << 20) / 4).min(n);
                let mut pins = [
                    PinnedBuffer::<u32>::new(&dev, c, HostAllocFlags::empty())?,
                    PinnedBuffer::<u32>::new(&dev, c, HostAllocFlags::empty())?,
                ];
                let r = time(&s, &e0, &e1, reps, || {
                    let mut off = 0;
                    let mut i = 0;
                    while off < n {
                        let len = c.min(n - off);
                        let pin = &mut pins[i % 2];
                        pin.as_mut_slice()?[..len].copy_from_slice(&src[off..off + len]);
                        let mut view = d.slice_mut(off..off + len)?;
                        s.upload_range(pin, ..len, &mut view)?;
                        off += len;
                        i += 1;
                    }
                    s.synchronize().map(|_| ())
                })?;
                print(&format!("H2D staged by hand, 2 pinned {chunk_mib} MiB chunks, 1 thread"), size, r);
            }

            // The same, each chunk's memcpy split over THREADS threads.
            {
                let c = ((32usize << 20) / 4).min(n);
                let mut pins = [
                    PinnedBuffer::<u32>::new(&dev, c, HostAllocFlags::empty())?,
                    PinnedBuffer::<u32>::new(&dev, c, HostAllocFlags::empty())?,
                ];
                let r = time(&s, &e0, &e1, reps, || {
                    let mut off = 0;
                    let mut i = 0;
                    while off < n {
                        let len = c.min(n - off);
                        let pin = &mut pins[i % 2];
                        par_copy(&mut pin.as_mut_slice()?[..len], &src[off..off + len], THREADS);
                        let mut view = d.slice_mut(off..off + len)?;
                        s.upload_range(pin, ..len, &mut view)?;
                        off += len;
                        i += 1;
                    }
                    s.synchronize().map(|_| ())
                })?;
                print(&format!("H2D staged by hand, 2 pinned 32 MiB chunks, {THREADS} threads"), size, r);
            }
        }

        // D2H.
        print(
            "D2H gpu-sync download_pageable, touched Vec",
            size,
            time(&s, &e0, &e1, reps, || s.download_pageable(&d, &mut out))?,
        );
        print(
            "D2H raw cuMemcpyDtoHAsync+cuStreamSynchronize, touched Vec",
            size,
            time(&s, &e0, &e1, reps, || {
                let mut uses = ForeignUses::new();
                let dptr = uses.input(&d);
                let (p, b) = (out.as_mut_ptr(), size);
                // SAFETY: `out` is not touched until the stream is synchronized
                // below; `dptr` is `b` bytes of `d`, declared as read.
                unsafe {
                    s.launch_foreign("raw pageable DtoH", uses, |raw| {
                        Ok(memcpy_dtoh_async(p.cast(), dptr, b, raw)?)
                    })?;
                }
                s.synchronize().map(|_| ())
            })?,
        );
        print("D2H gpu-sync to_vec (fresh Vec)", size, time(&s, &e0, &e1, reps, || s.to_vec(&d).map(drop))?);
        drop(huge);
        size *= 4;
    }
    Ok(())
}

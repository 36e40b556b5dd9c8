//! `gpu-bench overlap`: host-to-device copies on a copy stream overlapping
//! compute on the timing stream, through gpu-sync's [`Prefetcher`] — and the
//! same loop with pageable memory, where each copy blocks the host.
//!
//! Per chunk, the compute reads the chunk (a copy kernel, so the tracker
//! orders it after the upload) and then spins for as long as that chunk's
//! copy took, so copy and compute are balanced and perfect overlap halves
//! the serial time. Figures (device events around the whole loop, median
//! over samples):
//! - copies alone (the prefetcher's path: staging fill + upload) and
//!   compute alone;
//! - serial (one stream: upload, then compute, chunk after chunk);
//! - the prefetcher with pinned staging; the same order with pageable
//!   uploads;
//! - ideal = max(copies, compute) + min(copies, compute) / chunks (the
//!   first chunk's copy cannot overlap anything); efficiency = ideal /
//!   achieved.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, Mode, Record, Report};
use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Prefetcher, Stream};

/// Runs the comparison.
///
/// # Errors
/// A driver error; [`Failure::Usage`] for a chunk not a multiple of 16 bytes.
pub fn run(ctx: &Ctx, chunk_mib: usize, chunks: usize) -> Result<Report, Failure> {
    let (chunk_bytes, n) =
        if ctx.quick { (256usize << 10, 4usize) } else { (chunk_mib.max(1) << 20, chunks.max(2)) };
    let cw = chunk_bytes / 4;
    let mut report = ctx.report("Overlap: copies and compute with the prefetcher")?;
    let dev = ctx.device.clone();
    let stream = Stream::new(&dev)?;
    let mut timer = ctx.timer(&stream)?;
    let mhz = timer.clock().map_or(report.device.sm_clock_mhz, |c| c.steady_mhz);
    let k = &ctx.kernels;
    let host: Vec<u32> = (0..cw * n).map(|i| i as u32 ^ 0x9e37_79b9).collect();
    let mut out = DeviceBuffer::<u32>::zeroed(&stream, cw * n)?;
    let mut spin_out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut pf = Prefetcher::<u32>::new(&dev, cw)?;
    let label = format!("{} x {}", n, format_value(chunk_bytes as f64, Unit::Bytes));
    let bench = |name: &str| {
        Bench::new(name)
            .param("chunks", &label)
            .bytes((chunk_bytes * n) as u64)
            .modes(&[Mode::Hot])
            .settings(ctx.settings)
    };
    let median = |r: &Record| r.mode(Mode::Hot).map_or(f64::NAN, |m| m.median());

    ctx.progress.step("overlap: copies alone");
    let copies = bench("copies alone (prefetcher path)").run_on(&mut timer, None, |s| {
        pf.copy_stream().wait_stream(s)?;
        pf.for_each(host.chunks(cw), |_, _| Ok(()))?;
        s.wait_stream(pf.copy_stream())
    })?;
    let t_copy = median(&copies);
    let cycles = Ctx::cycles(t_copy / n as f64, mhz);

    let mut chunk_dev = DeviceBuffer::<u32>::zeroed(&stream, cw)?;
    ctx.progress.step("overlap: compute alone");
    let compute = bench("compute alone").run_on(&mut timer, None, |s| {
        for i in 0..n {
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(s, &chunk_dev, &mut dst)?;
            k.spin(s, cycles, &mut spin_out)?;
        }
        Ok(())
    })?;
    let t_compute = median(&compute);

    ctx.progress.step("overlap: serial");
    let staging = PinnedBuffer::<u32>::from_slice(&dev, &host[..cw], HostAllocFlags::empty())?;
    let serial = bench("serial (one stream)").run_on(&mut timer, None, |s| {
        for i in 0..n {
            s.upload(&staging, &mut chunk_dev)?;
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(s, &chunk_dev, &mut dst)?;
            k.spin(s, cycles, &mut spin_out)?;
        }
        Ok(())
    })?;

    ctx.progress.step("overlap: prefetcher, pinned");
    let pinned = bench("prefetcher, pinned staging").run_on(&mut timer, None, |s| {
        pf.copy_stream().wait_stream(s)?;
        pf.for_each(host.chunks(cw), |i, view| {
            let mut dst = out.slice_mut(i * cw..i * cw + view.len())?;
            k.copy(s, &view, &mut dst)?;
            k.spin(s, cycles, &mut spin_out)
        })?;
        s.wait_stream(pf.copy_stream())
    })?;
    let got = stream.to_vec(&out)?;
    if got != host {
        return Err(Failure::Check("overlap: the chunks computed on differ from the host data".into()));
    }

    ctx.progress.step("overlap: pageable");
    let copy_stream = Stream::new(&dev)?;
    let mut slots = [DeviceBuffer::<u32>::zeroed(&stream, cw)?, DeviceBuffer::<u32>::zeroed(&stream, cw)?];
    let pageable = bench("same loop, pageable uploads").run_on(&mut timer, None, |s| {
        copy_stream.wait_stream(s)?;
        copy_stream.upload_pageable(&host[..cw], &mut slots[0])?;
        for i in 0..n {
            if i + 1 < n {
                let next = &host[(i + 1) * cw..(i + 2) * cw];
                copy_stream.upload_pageable(next, &mut slots[(i + 1) % 2])?;
            }
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(s, &slots[i % 2], &mut dst)?;
            k.spin(s, cycles, &mut spin_out)?;
        }
        s.wait_stream(&copy_stream)
    })?;

    let ideal = t_copy.max(t_compute) + t_copy.min(t_compute) / n as f64;
    let t_serial = median(&serial);
    for mut r in [copies, compute, serial, pinned, pageable] {
        let achieved = median(&r);
        if r.name.starts_with("prefetcher") || r.name.starts_with("same loop") {
            r.counters.push(Counter::new("ideal (pipelined)", ideal, Unit::Seconds));
            r.counters.push(Counter::new("efficiency ideal / achieved", ideal / achieved, Unit::Fraction));
            r.counters.push(Counter::new("time saved vs serial", 1.0 - achieved / t_serial, Unit::Fraction));
        }
        report.records.push(r);
    }
    finish_report(&mut report, &timer);
    report.notes.push(format!(
        "compute per chunk: a copy kernel reading the chunk, then a spin of {cycles} cycles (the measured per-chunk copy time at {mhz:.0} MHz)"
    ));
    report.notes.push("pinned: the next chunk's upload is queued before the current chunk's compute, on another stream; pageable: the same order, but each upload blocks the host until it is done".into());
    Ok(report)
}

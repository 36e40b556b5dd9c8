//! `gpu-bench overlap`: host-to-device copies on a copy stream overlapping
//! compute on the timing stream, through gpu-sync's [`Prefetcher`] — and the
//! same loop with pageable memory, where each copy blocks the host.
//!
//! Every figure is device time (events around a loop over all chunks,
//! median over samples), and copy and compute are measured the way the
//! pipelined loop runs them:
//! - **copy alone**: the H2D DMA of each chunk from pinned memory (the copy
//!   engine, `cuMemcpyHtoDAsync`), one stream;
//! - **compute alone**: per chunk, a copy kernel reading the chunk (so the
//!   tracker orders it after the upload) and a spin as long as one chunk's
//!   measured DMA, so copy and compute are balanced;
//! - **serial**: both in one stream, chunk after chunk;
//! - **achieved**: the prefetcher's fill-in-place path
//!   ([`Prefetcher::for_each_filled`]): the producer writes the chunk into
//!   pinned staging (in the timed runs it writes one element, a tag: the
//!   data were written, and checked, once before timing; a producer's own
//!   fill time is its cost, not the pipeline's), the next chunk's upload
//!   is queued before the current chunk's compute, on the copy stream;
//! - **pageable**: the same order with pageable uploads, which block the
//!   host until done, so nothing overlaps;
//! - ideal = chunks × max(copy, compute) + min(copy, compute) per chunk
//!   (the first upload and the last compute cannot overlap anything);
//!   efficiency = ideal / achieved.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, Mode, Record, Report};
use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Prefetcher, Stream};

/// Runs the comparison.
///
/// # Errors
/// A driver error; [`Failure::Check`] when the chunks the prefetcher
/// handed to compute differ from what the producer wrote.
pub fn run(ctx: &Ctx, chunk_bytes: Option<usize>, chunks: Option<usize>) -> Result<Report, Failure> {
    // `--quick` and the simulator set the defaults; explicit values win.
    let small = ctx.quick || ctx.sim;
    let chunk_bytes = chunk_bytes.unwrap_or(if small { 256usize << 10 } else { 32 << 20 });
    let n = chunks.unwrap_or(if small { 4 } else { 16 });
    let total = chunk_bytes as u64 * n as u64;
    // The host source and the device output of every chunk, and the
    // prefetcher's two pinned stages and device chunks.
    crate::args::fits(
        &format!("overlap --chunk-mib {} --chunks {n}", chunk_bytes as f64 / f64::from(1u32 << 20)),
        &ctx.device,
        total + 2 * chunk_bytes as u64,
        total + 2 * chunk_bytes as u64,
    )?;
    let cw = chunk_bytes / 4;
    let mut report = ctx.report("Overlap: copies and compute with the prefetcher")?;
    let dev = ctx.device.clone();
    let stream = Stream::new(&dev)?;
    let mut timer = ctx.timer(&stream)?;
    let mhz = timer.clock().map_or(report.device.sm_clock_mhz, |c| c.steady_mhz);
    let k = &ctx.kernels;
    let value = |i: usize, j: usize| (i * cw + j) as u32 ^ 0x9e37_79b9;
    let host: Vec<u32> = (0..cw * n).map(|x| value(x / cw, x % cw)).collect();
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

    ctx.progress.step("overlap: copy alone (pinned DMA)");
    let staging = PinnedBuffer::<u32>::from_slice(&dev, &host[..cw], HostAllocFlags::empty())?;
    let mut chunk_dev = DeviceBuffer::<u32>::zeroed(&stream, cw)?;
    let copies = bench("copy alone (H2D DMA, pinned)").run_on(&mut timer, None, |s| {
        for _ in 0..n {
            s.upload(&staging, &mut chunk_dev)?;
        }
        Ok(())
    })?;
    let t_copy = median(&copies) / n as f64;
    let cycles = Ctx::cycles(t_copy, mhz);

    ctx.progress.step("overlap: compute alone");
    let compute = bench("compute alone").run_on(&mut timer, None, |s| {
        for i in 0..n {
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(s, &chunk_dev, &mut dst)?;
            k.spin(s, cycles, &mut spin_out)?;
        }
        Ok(())
    })?;
    let t_compute = median(&compute) / n as f64;

    ctx.progress.step("overlap: serial");
    let serial = bench("serial (one stream)").run_on(&mut timer, None, |s| {
        for i in 0..n {
            s.upload(&staging, &mut chunk_dev)?;
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(s, &chunk_dev, &mut dst)?;
            k.spin(s, cycles, &mut spin_out)?;
        }
        Ok(())
    })?;

    // One untimed run with the whole data written by the producer: the
    // chunks computed on must be exactly what it wrote.
    pf.copy_stream().wait_stream(&stream)?;
    pf.for_each_filled(
        n,
        |i, st| {
            st.copy_from_slice(&host[i * cw..(i + 1) * cw]);
            Ok(cw)
        },
        |i, view| {
            let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
            k.copy(&stream, &view, &mut dst)
        },
    )?;
    stream.wait_stream(pf.copy_stream())?;
    if stream.to_vec(&out)? != host {
        return Err(Failure::Check(
            "overlap: the chunks computed on differ from what the producer wrote".into(),
        ));
    }

    ctx.progress.step("overlap: prefetcher, pinned");
    let pinned = bench("prefetcher (fill in place, pinned)").run_on(&mut timer, None, |s| {
        pf.copy_stream().wait_stream(s)?;
        pf.for_each_filled(
            n,
            |i, st| {
                if let Some(x) = st.first_mut() {
                    *x = value(i, 0);
                }
                Ok(cw)
            },
            |i, view| {
                let mut dst = out.slice_mut(i * cw..(i + 1) * cw)?;
                k.copy(s, &view, &mut dst)?;
                k.spin(s, cycles, &mut spin_out)
            },
        )?;
        s.wait_stream(pf.copy_stream())
    })?;
    let got = stream.to_vec(&out)?;
    if (0..n).any(|i| got[i * cw] != value(i, 0)) {
        return Err(Failure::Check("overlap: a timed chunk's tag did not reach its compute".into()));
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

    let ideal = n as f64 * t_copy.max(t_compute) + t_copy.min(t_compute);
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
        "per chunk: copy {} (H2D DMA from pinned memory), compute {} (a copy kernel reading the chunk, then a spin of {cycles} cycles = one chunk's DMA at {mhz:.0} MHz)",
        format_value(t_copy, Unit::Seconds),
        format_value(t_compute, Unit::Seconds)
    ));
    report.notes.push(format!("ideal = {n} x max(copy, compute) + min(copy, compute): the first upload and the last compute cannot overlap; efficiency = ideal / achieved"));
    report.notes.push("prefetcher: the producer writes each chunk into pinned staging (timed runs write a one-element tag; the full data were written and checked once untimed), the next chunk's upload is queued on the copy stream before the current chunk's compute; pageable: the same order, but each upload blocks the host until it is done, so nothing overlaps".into());
    Ok(report)
}

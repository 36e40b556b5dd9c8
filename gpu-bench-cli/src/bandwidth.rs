//! `gpu-bench bandwidth`: host↔device transfer rates — H2D, D2H and both
//! directions at once; pinned against pageable memory; the copy engine
//! (`cuMemcpyAsync`) against an SM copy kernel reading mapped pinned
//! memory — for sizes from 4 KiB up by 4× to `--max-mib`, with the PCIe
//! link's theoretical rate (sysfs) in the header.
//!
//! Unsafe code: the SM copy reads mapped host memory outside the tracker
//! (see `kernels::BenchKernels::copy_mapped`).
#![allow(unsafe_code)]

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, Mode, Record, Report, Settings};
use gpu_sync::{DeviceBuffer, HostAllocFlags, Pending, PinnedBuffer, Polled, Stream};

/// The pinned buffer back from a previous download (each sample's end event
/// was waited, so the poll finds it complete), or the fresh one.
fn reclaim(
    fresh: &mut Option<PinnedBuffer<u32>>,
    pending: &mut Option<Pending<PinnedBuffer<u32>>>,
) -> gpu_sync::Result<PinnedBuffer<u32>> {
    if let Some(b) = fresh.take() {
        return Ok(b);
    }
    match pending.take() {
        Some(p) => match p.poll()? {
            Polled::Ready(b) => Ok(b),
            Polled::Waiting(p) => p.wait(),
        },
        None => Err(gpu_sync::Error::InvalidArgument("no download buffer".into())),
    }
}

/// Runs every size.
///
/// # Errors
/// A driver error.
pub fn run(ctx: &Ctx, max_mib: Option<usize>) -> Result<Report, Failure> {
    // `--quick` and the simulator set the default; an explicit size wins.
    let max = match max_mib {
        Some(m) => m << 20,
        None if ctx.quick || ctx.sim => 1 << 20,
        None => 1024 << 20,
    };
    // Pinned and pageable host copies of the largest size, and two device
    // buffers of it.
    crate::args::fits(
        &format!("bandwidth --max-mib {}", max >> 20),
        &ctx.device,
        3 * max as u64,
        2 * max as u64,
    )?;
    let mut report = ctx.report("Bandwidth: host <-> device")?;
    let dev = ctx.device.clone();
    let stream = Stream::new(&dev)?;
    let other = Stream::new(&dev)?;
    let mut timer = ctx.timer(&stream)?;
    let mut sizes = vec![4usize << 10];
    while sizes.last().is_some_and(|&s| s * 4 <= max) {
        sizes.push(sizes[sizes.len() - 1] * 4);
    }
    let settings: Settings = if ctx.quick {
        ctx.settings
    } else {
        ctx.settings
            .min_time_s(ctx.settings.min_time_s.min(0.1))
            .max_noise_pct(ctx.settings.max_noise_pct.max(1.0))
            .timeout_s(ctx.settings.timeout_s.min(3.0))
    };
    let mut peak: Vec<(String, f64)> = Vec::new();
    for &bytes in &sizes {
        let n = bytes / 4;
        let label = format_value(bytes as f64, Unit::Bytes);
        ctx.progress.step(format!("bandwidth: {label}"));
        let up = PinnedBuffer::<u32>::new(&dev, n, HostAllocFlags::empty())?;
        let mut down = Some(PinnedBuffer::<u32>::new(&dev, n, HostAllocFlags::empty())?);
        let mut pending: Option<Pending<PinnedBuffer<u32>>> = None;
        let mapped = PinnedBuffer::<u32>::new(&dev, n, HostAllocFlags::DEVICE_MAP)?;
        let pageable = vec![7u32; n];
        let mut pageable_out = vec![0u32; n];
        let mut d = DeviceBuffer::<u32>::zeroed(&stream, n)?;
        let d2 = DeviceBuffer::<u32>::zeroed(&stream, n)?;
        let bench = |name: &str, b: u64| {
            Bench::new(name).param("size", &label).bytes(b).modes(&[Mode::Hot]).settings(settings)
        };
        let mut recs: Vec<Record> = Vec::new();
        recs.push(
            bench("H2D pinned (copy engine)", bytes as u64)
                .run_on(&mut timer, None, |s| s.upload(&up, &mut d))?,
        );
        recs.push(bench("D2H pinned (copy engine)", bytes as u64).run_on(&mut timer, None, |s| {
            let b = reclaim(&mut down, &mut pending)?;
            pending = Some(s.download(&d, b)?);
            Ok(())
        })?);
        recs.push(bench("H2D + D2H at once, pinned", 2 * bytes as u64).run_on(&mut timer, None, |s| {
            other.wait_stream(s)?;
            s.upload(&up, &mut d)?;
            let b = reclaim(&mut down, &mut pending)?;
            pending = Some(other.download(&d2, b)?);
            s.wait_stream(&other)
        })?);
        recs.push(
            bench("H2D pageable", bytes as u64)
                .run_on(&mut timer, None, |s| s.upload_pageable(&pageable, &mut d))?,
        );
        recs.push(
            bench("D2H pageable", bytes as u64)
                .run_on(&mut timer, None, |s| s.download_pageable(&d, &mut pageable_out))?,
        );
        if n % 4 == 0 {
            recs.push(bench("H2D SM copy from mapped pinned", bytes as u64).run_on(
                &mut timer,
                None,
                |s| {
                    // SAFETY: `mapped` lives until after this loop iteration's
                    // records are taken, and every sample waits for its end
                    // event (so for this launch) before the next starts; the
                    // host never writes `mapped`.
                    unsafe { ctx.bench.copy_mapped(s, &mapped, &mut d) }
                },
            )?);
        }
        stream.synchronize()?;
        other.synchronize()?;
        drop(pending.take());
        for r in recs {
            if let Some(bw) =
                r.mode(Mode::Hot).and_then(|m| m.counters.iter().find(|c| c.name == "bandwidth"))
            {
                match peak.iter_mut().find(|p| p.0 == r.name) {
                    Some(p) => p.1 = p.1.max(bw.value),
                    None => peak.push((r.name.clone(), bw.value)),
                }
            }
            report.records.push(r);
        }
    }
    let pcie = report.device.pcie.clone();
    for (name, bw) in peak {
        let mut r = Record::new(format!("peak: {name}"), &[]);
        r.counters.push(Counter::new("peak bandwidth", bw, Unit::BytesPerSecond));
        if let Some(p) = &pcie {
            let per_direction = if name.contains("at once") { 2.0 } else { 1.0 };
            r.counters.push(Counter::new(
                "of PCIe theoretical",
                bw / (per_direction * p.theoretical_gbs * 1e9),
                Unit::Fraction,
            ));
        }
        report.records.push(r);
    }
    finish_report(&mut report, &timer);
    report
        .notes
        .push("GB/s = bytes / median event time; both-directions rows count the bytes of both copies".into());
    report.notes.push("pageable copies are synchronous (the stream is synchronized inside the call), so their event span includes the host's wait".into());
    if pcie.is_none() {
        report.notes.push("PCIe link not known (no sysfs entry for the device)".into());
    }
    Ok(report)
}

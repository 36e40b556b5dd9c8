//! `gpu-bench roofline`: the memory side of the roofline — HBM bandwidth
//! measured with streaming kernels of 16-byte loads on the gpu-bench
//! engine (hot mode, the engine's stopping rule), each probe's result
//! checked against the CPU reference so a fast wrong kernel cannot pass.
//!
//! Probes (bytes from the kernels' cost models: each input read once, each
//! output written once):
//! - `read`: `read_sum_u32x4` over one array — the HBM read ceiling;
//! - `copy`: `copy_u32x4` from one array to another (read + write);
//! - `triad`: `triad_f32`, a = b + s·c (two reads, one write).
//!
//! Arrays default to 1 GiB each, many times the L2 (50–60 MB on Hopper), so
//! repeated runs stream from HBM.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit};
use gpu_bench::{Bench, Mode, Record, Report};
use gpu_sync::{DeviceBuffer, Stream};
use kernels::{cost, reference};

/// Sum of `pattern(seed, i)` for `i < n`, wrapping, computed on all cores.
pub fn pattern_sum(seed: u32, n: u64) -> u64 {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64) as u64;
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (lo, hi) = (t * chunk, ((t + 1) * chunk).min(n));
                    (lo..hi).fold(0u64, |acc, i| acc.wrapping_add(u64::from(reference::pattern(seed, i))))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).fold(0u64, u64::wrapping_add)
    })
}

/// The one probe runner: times `work` in hot mode with the probe's cost;
/// [`checked`] then records the result check.
fn probe(
    ctx: &Ctx,
    timer: &mut gpu_bench::Timer,
    (name, kernel): (&str, &str),
    c: cost::Cost,
    theoretical_gbs: f64,
    work: impl FnMut(&Stream) -> gpu_sync::Result<()>,
) -> Result<Record, Failure> {
    ctx.progress.step(format!("roofline: {name}"));
    let mut r = Bench::new(name)
        .param("kernel", kernel)
        .bytes(c.bytes())
        .modes(&[Mode::Hot])
        .settings(ctx.settings)
        .run_on(timer, None, work)?;
    if let Some(bw) =
        r.mode(Mode::Hot).and_then(|m| m.counters.iter().find(|c| c.name == "bandwidth")).cloned()
    {
        r.counters.push(Counter::new("of theoretical", bw.value / (theoretical_gbs * 1e9), Unit::Fraction));
    }
    Ok(r)
}

/// Records that `r`'s result was checked, and how.
fn checked(mut r: Record, what: Result<String, Failure>) -> Result<Record, Failure> {
    r.counters.push(Counter::new(format!("check passed: {}", what?), 1.0, Unit::Count));
    Ok(r)
}

/// Runs every probe.
///
/// # Errors
/// [`Failure::Check`] when a kernel's result is wrong; a driver error.
pub fn run(ctx: &Ctx, array_mib: usize) -> Result<Report, Failure> {
    let array_bytes = if ctx.quick {
        4 << 20
    } else {
        array_mib.checked_mul(1 << 20).ok_or_else(|| Failure::Usage("--array-mib is too large".into()))?
    };
    let words = (array_bytes / 16) * 4;
    if words == 0 {
        return Err(Failure::Usage(format!("an array of {array_bytes} bytes holds no 16-byte element")));
    }
    let mut report = ctx.report("Roofline: memory ceilings")?;
    let theo = report.device.theoretical_bandwidth_gbs;
    let stream = Stream::new(&ctx.device)?;
    let mut timer = ctx.timer(&stream)?;
    let k = &ctx.kernels;
    let seed = 0x5eed_2026u32;
    let n4 = words as u64 / 4;

    let mut src = DeviceBuffer::<u32>::alloc(&stream, words)?;
    k.fill_pattern(&stream, &mut src, seed)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    ctx.progress.step("roofline: reference sum on the host");
    let expected = pattern_sum(seed, words as u64);
    let rec = probe(ctx, &mut timer, ("read", "read_sum_u32x4"), cost::read_sum_u32x4(n4), theo, |s| {
        k.read_sum(s, &src, &mut sum)
    })?;
    let rec = checked(
        rec,
        (|| {
            stream.fill_bytes(&mut sum, 0)?;
            k.read_sum(&stream, &src, &mut sum)?;
            let got = stream.to_vec(&sum)?[0];
            if got != expected {
                return Err(Failure::Check(format!(
                    "read: device sum {got:#x}, CPU reference {expected:#x}"
                )));
            }
            Ok(format!("sum = CPU reference {expected:#x}"))
        })(),
    )?;
    report.records.push(rec);

    let mut dst = DeviceBuffer::<u32>::alloc(&stream, words)?;
    stream.fill_bytes(&mut dst, 0xff)?;
    let rec = probe(ctx, &mut timer, ("copy", "copy_u32x4"), cost::copy_u32x4(n4), theo, |s| {
        k.copy(s, &src, &mut dst)
    })?;
    let rec = checked(
        rec,
        (|| {
            let mut bad = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
            k.check_pattern(&stream, &dst, seed, &mut bad)?;
            let mismatches = stream.to_vec(&bad)?[0];
            if mismatches != 0 {
                return Err(Failure::Check(format!(
                    "copy: {mismatches} of {words} words differ from the source"
                )));
            }
            Ok("every word matches the pattern (poisoned before)".into())
        })(),
    )?;
    report.records.push(rec);
    drop((src, dst, sum));

    let host_b: Vec<f32> = (0..words).map(|i| (i % 1021) as f32 * 0.25).collect();
    let host_c: Vec<f32> = (0..words).map(|i| ((i * 7) % 1009) as f32 - 500.0).collect();
    let b = DeviceBuffer::from_slice(&stream, &host_b)?;
    let c = DeviceBuffer::from_slice(&stream, &host_c)?;
    let mut a = DeviceBuffer::<f32>::alloc(&stream, words)?;
    stream.fill_bytes(&mut a, 0xff)?;
    let scalar = 3.0f32;
    let rec = probe(ctx, &mut timer, ("triad", "triad_f32"), cost::triad_f32(words as u64), theo, |s| {
        k.triad(s, &mut a, &b, &c, scalar)
    })?;
    let rec = checked(
        rec,
        (|| {
            let got = stream.to_vec(&a)?;
            let mut want = vec![0f32; words];
            reference::triad_f32(&mut want, &host_b, &host_c, scalar);
            if let Some(i) = (0..words).find(|&i| got[i].to_bits() != want[i].to_bits()) {
                return Err(Failure::Check(format!(
                    "triad: a[{i}] = {} but the reference gives {}",
                    got[i], want[i]
                )));
            }
            Ok("every result bit-equal to the CPU reference".into())
        })(),
    )?;
    report.records.push(rec);
    finish_report(&mut report, &timer);
    report.notes.push(format!(
        "arrays of {:.1} MiB; bytes count each input read once and each output written once (cost models); GB/s = bytes / median; `of theoretical` against {theo:.0} GB/s (memory clock x bus)",
        (words * 4) as f64 / (1u64 << 20) as f64
    ));
    Ok(report)
}

//! Phase 5: the intensity sweeps (mixbench-style), one per precision (FP32
//! over 11 points, FP64 and FP16x2 over 5 short ones each), each with its
//! empirical ridge and held against its own FMA ceiling.

use super::*;

/// The precisions swept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Precision {
    F32,
    F64,
    F16x2,
}

impl Precision {
    fn name(self) -> &'static str {
        match self {
            Precision::F32 => "FP32",
            Precision::F64 => "FP64",
            Precision::F16x2 => "FP16",
        }
    }
}

pub(super) fn run(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    for prec in [Precision::F32, Precision::F64, Precision::F16x2] {
        let points = match prec {
            Precision::F32 => sweep_f32(run)?,
            Precision::F64 => sweep_f64(run)?,
            Precision::F16x2 => sweep_f16x2(run)?,
        };
        let (array, _) = arrays(run, prec);
        record(report, prec, array, points);
    }
    Ok(())
}

/// Bytes of each array of `prec`'s sweep and the FMAs per element swept.
fn arrays<'a>(run: &'a Run<'_>, prec: Precision) -> (usize, &'a [u32]) {
    match prec {
        Precision::F32 => (run.sizes.intensity_array, &run.sizes.fmas),
        Precision::F64 => (run.sizes.short_sweep_array, &run.sizes.fmas_f64),
        Precision::F16x2 => (run.sizes.short_sweep_array, &run.sizes.fmas_f16x2),
    }
}

/// Adds `prec`'s sweep, its ridge and a note to the report.
fn record(report: &mut RooflineReport, prec: Precision, array: usize, points: Vec<SweepPoint>) {
    let best_bw = points.iter().filter_map(|p| p.y2).fold(0.0, f64::max);
    let best_flops = points.iter().map(|p| p.y).fold(0.0, f64::max);
    let ridge = if best_bw > 0.0 { best_flops / best_bw } else { f64::NAN };
    let name = prec.name();
    let mib = array >> 20;
    let size = if mib > 0 { format!("{mib} MiB") } else { format!("{} KiB", array >> 10) };
    report.notes.push(format!(
        "intensity sweep ({name}, {size} arrays): best {}B/s and {}FLOP/s; empirical ridge {ridge:.1} FLOP/byte",
        rl::si(best_bw),
        rl::si(best_flops)
    ));
    report.sweeps.push(Sweep {
        name: format!("{name} intensity sweep (empirical ridge {ridge:.1} FLOP/B)"),
        x_label: "FLOP/byte".into(),
        y_label: "FLOP/s".into(),
        points,
        plateaus: Vec::new(),
        on_roofline: true,
        ceiling: Some(format!("{name} FMA")),
        ridge: ridge.is_finite().then_some(ridge),
    });
}

fn sweep_f32(run: &mut Run<'_>) -> Result<Vec<SweepPoint>, Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, .. } = run;
    let (ctx, timer, stream, probes, sms, sizes) = (*ctx, timer, &*stream, &*probes, *sms, &*sizes);
    let n = sizes.intensity_array / 4 / 4 * 4;
    let host: Vec<f32> = (0..n).map(|i| ((i % 997) as f32) / 997.0 - 0.25).collect();
    let input = DeviceBuffer::from_slice(stream, &host)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, n)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    let mut points = Vec::new();
    for &fmas in &sizes.fmas {
        stream.fill_bytes(&mut out, 0xff)?;
        let (t, _) = time(ctx, timer, "intensity", |s| probes.intensity(s, g, &input, &mut out, fmas))?;
        // Check every element for short chains, a spread sample for long ones.
        let got = stream.to_vec(&out)?;
        let step = if fmas <= 4 { 1 } else { (n / 4096).max(1) };
        for i in (0..n).step_by(step) {
            let mut w = [0f32];
            reference::probes::intensity_f32(&host[i..=i], &mut w, fmas);
            if got[i].to_bits() != w[0].to_bits() {
                return Err(Failure::Check(format!(
                    "intensity sweep at {fmas} FMAs: out[{i}] = {} but the reference gives {}",
                    got[i], w[0]
                )));
            }
        }
        let c = cost::intensity_f32((n / 4) as u64, u64::from(fmas));
        points.push(SweepPoint { x: c.intensity(), y: c.flops as f64 / t, y2: Some(c.bytes() as f64 / t) });
    }
    Ok(points)
}

/// The FP64 sweep: few points, short kernels (`SHORT_POINT_S` of measured
/// time each), so that it adds about 1.5 s to the main job on an H100.
fn sweep_f64(run: &mut Run<'_>) -> Result<Vec<SweepPoint>, Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, .. } = run;
    let (ctx, timer, stream, probes, sms, sizes) = (*ctx, timer, &*stream, &*probes, *sms, &*sizes);
    let n = sizes.short_sweep_array / 8 / 2 * 2;
    let host: Vec<f64> = (0..n).map(|i| ((i % 991) as f64) / 991.0 - 0.25).collect();
    let input = DeviceBuffer::from_slice(stream, &host)?;
    let mut out = DeviceBuffer::<f64>::alloc(stream, n)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    let mut points = Vec::new();
    for &fmas in &sizes.fmas_f64 {
        stream.fill_bytes(&mut out, 0xff)?;
        let (t, _) = time_short(ctx, timer, "intensity FP64", sizes.short_point_s, |s| {
            probes.intensity_f64(s, g, &input, &mut out, fmas)
        })?;
        // A spread sample of 4096 elements (every element when fewer).
        let got = stream.to_vec(&out)?;
        for i in (0..n).step_by((n / 4096).max(1)) {
            let mut w = [0f64];
            reference::probes::intensity_f64(&host[i..=i], &mut w, fmas);
            if got[i].to_bits() != w[0].to_bits() {
                return Err(Failure::Check(format!(
                    "FP64 intensity sweep at {fmas} FMAs: out[{i}] = {} but the reference gives {}",
                    got[i], w[0]
                )));
            }
        }
        let c = cost::intensity_f64((n / 2) as u64, u64::from(fmas));
        points.push(SweepPoint { x: c.intensity(), y: c.flops as f64 / t, y2: Some(c.bytes() as f64 / t) });
    }
    Ok(points)
}

/// The FP16x2 sweep, as short as the FP64 one: half2 words of random f16
/// values (magnitudes 2^-5 to 2), checked bit for bit on a sample.
fn sweep_f16x2(run: &mut Run<'_>) -> Result<Vec<SweepPoint>, Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, .. } = run;
    let (ctx, timer, stream, probes, sms, sizes) = (*ctx, timer, &*stream, &*probes, *sms, &*sizes);
    // 64 KiB of random halves (512 rows of 128 bytes), repeated over the
    // array: generating 128 MiB of them would cost the main job ~0.3 s.
    let tile: Vec<u32> = reference::probes::TcFormat::F16
        .random(512, 0x16f1_6000 + std::process::id() % 1024)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let n = (sizes.short_sweep_array / 16).max(1) * 4;
    let host: Vec<u32> = tile.iter().copied().cycle().take(n).collect();
    let input = DeviceBuffer::from_slice(stream, &host)?;
    let mut out = DeviceBuffer::<u32>::alloc(stream, n)?;
    let g = Grid { blocks: sms * 8, threads: 256 };
    let mut points = Vec::new();
    for &fmas in &sizes.fmas_f16x2 {
        stream.fill_bytes(&mut out, 0xff)?;
        let (t, _) = time_short(ctx, timer, "intensity FP16x2", sizes.short_point_s, |s| {
            probes.intensity_f16x2(s, g, &input, &mut out, fmas)
        })?;
        let got = stream.to_vec(&out)?;
        for i in (0..n).step_by((n / 4096).max(1)) {
            let mut w = [0u32];
            reference::probes::intensity_f16x2(&host[i..=i], &mut w, fmas);
            if got[i] != w[0] {
                return Err(Failure::Check(format!(
                    "FP16x2 intensity sweep at {fmas} FMAs: word {i} = {:#010x} but the reference gives {:#010x}",
                    got[i], w[0]
                )));
            }
        }
        let c = cost::intensity_f16x2((n / 4) as u64, u64::from(fmas));
        points.push(SweepPoint { x: c.intensity(), y: c.flops as f64 / t, y2: Some(c.bytes() as f64 / t) });
    }
    Ok(points)
}

//! Phase 5: the intensity sweep (mixbench-style, FP32) and its ridge.

use super::*;
pub(super) fn run(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
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
    let best_bw = points.iter().filter_map(|p| p.y2).fold(0.0, f64::max);
    let best_flops = points.iter().map(|p| p.y).fold(0.0, f64::max);
    let ridge = if best_bw > 0.0 { best_flops / best_bw } else { f64::NAN };
    report.notes.push(format!(
        "intensity sweep (FP32, {} MiB arrays): best {}B/s and {}FLOP/s; empirical ridge {ridge:.1} FLOP/byte",
        sizes.intensity_array >> 20,
        rl::si(best_bw),
        rl::si(best_flops)
    ));
    report.sweeps.push(Sweep {
        name: format!("FP32 intensity sweep (empirical ridge {ridge:.1} FLOP/B)"),
        x_label: "FLOP/byte".into(),
        y_label: "FLOP/s".into(),
        points,
        plateaus: Vec::new(),
        on_roofline: true,
    });
    Ok(())
}

//! Phase 6: every kernel of the `kernels` crate placed under the roofs,
//! and the launch floors of part 1.

use super::*;

pub(super) fn run(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let Run { ctx, timer, stream, sizes, .. } = run;
    let (ctx, timer, stream, sizes) = (*ctx, timer, &*stream, &*sizes);
    let k = &ctx.kernels;
    let n = sizes.place / 4 / 4 * 4;
    let mib = sizes.place >> 20;
    let host_x: Vec<f32> = (0..n).map(|i| (i % 1013) as f32 * 0.5 - 7.0).collect();
    let host_y: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * 0.25 + 1.0).collect();
    let x = DeviceBuffer::from_slice(stream, &host_x)?;
    let y = DeviceBuffer::from_slice(stream, &host_y)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, n)?;
    let level = MemoryLevel::Hbm;
    let place = |report: &mut RooflineReport, name: String, c: cost::Cost, t: f64| -> Result<(), Failure> {
        let p = rl::place(
            report,
            &PlaceRequest {
                name: &name,
                flops: c.flops,
                bytes: c.bytes(),
                seconds: t,
                level,
                compute: "FP32 FMA",
            },
        )
        .map_err(rl_err)?;
        report.placements.push(p);
        Ok(())
    };
    let bits_equal = |got: &[f32], want: &[f32], what: &str| -> Result<(), Failure> {
        match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
            Some(i) => Err(Failure::Check(format!(
                "{what}: out[{i}] = {} but the reference gives {}",
                got[i], want[i]
            ))),
            None => Ok(()),
        }
    };

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "scale_f32", |s| k.scale(s, &x, &mut out, 1.5))?;
    let mut want = vec![0f32; n];
    reference::scale_f32(&host_x, &mut want, 1.5);
    bits_equal(&stream.to_vec(&out)?, &want, "scale_f32")?;
    place(report, format!("elementwise scale_f32 ({mib} MiB arrays)"), cost::scale_f32(n as u64), t)?;

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "add_f32", |s| k.add(s, &x, &y, &mut out))?;
    reference::add_f32(&host_x, &host_y, &mut want);
    bits_equal(&stream.to_vec(&out)?, &want, "add_f32")?;
    place(report, format!("elementwise add_f32 ({mib} MiB arrays)"), cost::add_f32(n as u64), t)?;

    stream.fill_bytes(&mut out, 0xff)?;
    let (t, _) = time(ctx, timer, "triad_f32", |s| k.triad(s, &mut out, &x, &y, 3.0))?;
    reference::triad_f32(&mut want, &host_x, &host_y, 3.0);
    bits_equal(&stream.to_vec(&out)?, &want, "triad_f32")?;
    place(report, format!("elementwise triad_f32 ({mib} MiB arrays)"), cost::triad_f32(n as u64), t)?;
    drop((x, y, out, want));

    let seed = 77u32;
    let mut a = DeviceBuffer::<u32>::alloc(stream, n)?;
    let mut b = DeviceBuffer::<u32>::alloc(stream, n)?;
    let (t, _) = time(ctx, timer, "fill_pattern_u32", |s| k.fill_pattern(s, &mut a, seed))?;
    check_pattern(ctx, stream, &a, seed, "fill_pattern_u32")?;
    place(report, format!("fill_pattern_u32 ({mib} MiB)"), cost::fill_pattern_u32(n as u64), t)?;
    let mut bad = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let (t, _) = time(ctx, timer, "check_pattern_u32", |s| k.check_pattern(s, &a, seed, &mut bad))?;
    place(report, format!("check_pattern_u32 ({mib} MiB)"), cost::check_pattern_u32(n as u64), t)?;
    stream.fill_bytes(&mut b, 0xff)?;
    let (t, _) = time(ctx, timer, "copy_u32x4", |s| k.copy(s, &a, &mut b))?;
    check_pattern(ctx, stream, &b, seed, "copy_u32x4")?;
    place(report, format!("elementwise copy_u32x4 ({mib} MiB arrays)"), cost::copy_u32x4((n / 4) as u64), t)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(stream, 1)?;
    let (t, _) = time(ctx, timer, "read_sum_u32x4", |s| k.read_sum(s, &a, &mut sum))?;
    place(report, format!("read_sum_u32x4 ({mib} MiB)"), cost::read_sum_u32x4((n / 4) as u64), t)?;
    let mut c = DeviceBuffer::<u32>::alloc(stream, n)?;
    let (t, _) = time(ctx, timer, "mix_u32", |s| k.mix(s, &a, &b, &mut c, 5))?;
    let got = stream.to_vec(&c)?;
    if let Some(i) = (0..n).step_by(97).find(|&i| {
        got[i] != reference::mix(reference::pattern(seed, i as u64), reference::pattern(seed, i as u64), 5)
    }) {
        return Err(Failure::Check(format!("mix_u32: out[{i}] differs from the CPU reference")));
    }
    place(report, format!("elementwise mix_u32 ({mib} MiB arrays)"), cost::mix_u32(n as u64), t)?;
    let (t, _) = time(ctx, timer, "bump_u32", |s| k.bump(s, &mut c, 1))?;
    place(report, format!("elementwise bump_u32 ({mib} MiB)"), cost::bump_u32(n as u64), t)?;
    // The floors of part 1: what a tiny kernel can never beat.
    let small = DeviceBuffer::<f32>::zeroed(stream, 1024)?;
    let mut small_out = DeviceBuffer::<f32>::zeroed(stream, 1024)?;
    let r = Bench::new("launch floor")
        .modes(&[Mode::Hot, Mode::Batch])
        .settings(probe_settings(&ctx.settings))
        .run_on(timer, None, |s| k.scale(s, &small, &mut small_out, 2.0))?;
    let us = |m: Mode| r.mode(m).map_or("–".to_owned(), |x| format!("{:.2} µs", x.median() * 1e6));
    report.notes.push(format!(
        "floors: a 1024-element scale_f32 takes {} a launch back to back (hot) and {} queued behind the spin \
         gate (batch): no kernel runs faster than this, however little it does",
        us(Mode::Hot),
        us(Mode::Batch)
    ));
    report.notes.push(
        "placed kernels: each result checked against its CPU reference (mix_u32 on every 97th element; \
         check_pattern_u32, read_sum_u32x4 and bump_u32 run after the kernels they check, unchecked themselves)"
            .into(),
    );
    Ok(())
}

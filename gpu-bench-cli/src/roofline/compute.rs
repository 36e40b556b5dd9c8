//! Phases 2 and 3: the FMA ceilings per precision and the tensor-core
//! ceilings, each against the peak at the SM clock measured in the probe.

use super::*;
pub(super) fn fma(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let Run { ctx, timer, stream, probes, sms, sizes, .. } = run;
    let (ctx, timer, stream, probes, sms, sizes) = (*ctx, timer, &*stream, &*probes, *sms, &*sizes);
    let g = Grid { blocks: sms * 8, threads: 256 };
    let slots = g.total() as usize;
    let mut clk = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    let seed = 0.3125f64 + f64::from(std::process::id() % 64) / 1024.0; // run-time seed
    for prec in FmaPrecision::ALL {
        let mut out64 =
            DeviceBuffer::<f64>::zeroed(stream, if prec == FmaPrecision::F64 { slots } else { 0 })?;
        let mut out32 =
            DeviceBuffer::<f32>::zeroed(stream, if prec == FmaPrecision::F64 { 0 } else { slots })?;
        let name = format!("{} FMA", prec.name());
        // The check: a short run that stores, against the CPU reference.
        let check_grid = Grid { blocks: 2, threads: 256 };
        let n_check = check_grid.total() as usize;
        let check_iters = 3;
        let mut c64 =
            DeviceBuffer::<f64>::alloc(stream, if prec == FmaPrecision::F64 { n_check } else { 0 })?;
        let mut c32 =
            DeviceBuffer::<f32>::alloc(stream, if prec == FmaPrecision::F64 { 0 } else { n_check })?;
        stream.fill_bytes(&mut c64, 0xff)?;
        stream.fill_bytes(&mut c32, 0xff)?;
        let check = if prec == FmaPrecision::F64 {
            probes.fma(stream, check_grid, prec, seed, check_iters, true, FmaOut::F64(&mut c64), &mut clk)?;
            let got = stream.to_vec(&c64)?;
            let mut want = vec![0f64; n_check];
            reference::probes::fma_f64(seed, check_iters, &mut want);
            got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits()).map(|i| (i, got[i], want[i]))
        } else {
            probes.fma(stream, check_grid, prec, seed, check_iters, true, FmaOut::F32(&mut c32), &mut clk)?;
            let got = stream.to_vec(&c32)?;
            let mut want = vec![0f32; n_check];
            match prec {
                FmaPrecision::F32 => reference::probes::fma_f32(seed as f32, check_iters, &mut want),
                FmaPrecision::F16x2 => reference::probes::fma_half2(
                    reference::probes::Half::F16,
                    seed as f32,
                    check_iters,
                    &mut want,
                ),
                _ => reference::probes::fma_half2(
                    reference::probes::Half::Bf16,
                    seed as f32,
                    check_iters,
                    &mut want,
                ),
            }
            got.iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits())
                .map(|i| (i, f64::from(got[i]), f64::from(want[i])))
        };
        if let Some((i, g, w)) = check {
            return Err(Failure::Check(format!("{name}: slot {i} = {g} but the CPU reference gives {w}")));
        }
        let iters = sizes.fma_iters;
        let (t, noise) = time(ctx, timer, &name, |s| {
            let out =
                if prec == FmaPrecision::F64 { FmaOut::F64(&mut out64) } else { FmaOut::F32(&mut out32) };
            probes.fma(s, g, prec, seed, iters, false, out, &mut clk)
        })?;
        let v = stream.to_vec(&clk)?;
        let clock_mhz = if v[1] > 0 { Some(v[0] as f64 / v[1] as f64 * 1e3) } else { None };
        let flops = cost::fma_probe(slots as u64, u64::from(iters), prec.lanes()).flops as f64;
        let mut ce = ceiling(
            &name,
            CeilingKind::Compute,
            flops / t,
            noise,
            prec.kernel().name(),
            format!(
                "{} chains x {} steps x {iters} per slot, {} slots",
                cost::FMA_CHAINS,
                cost::FMA_INNER,
                slots
            ),
            format!("{n_check} slots bit-equal to the CPU reference (stored under a run-time flag)"),
        );
        ce.sm_clock_mhz = clock_mhz;
        ce.peak_at_clock = clock_mhz.and_then(|m| rl::fma_peak(&report.device, prec.name(), m));
        ce.datasheet = rl::fma_peak(&report.device, prec.name(), report.device.sm_clock_mhz);
        // Only FP32 is drawn as a roof with FP64: the 16-bit FMA roofs sit
        // above FP32 and the tensor roofs far above; all are in the table.
        ce.roof = matches!(prec, FmaPrecision::F32 | FmaPrecision::F64);
        report.ceilings.push(ce);
    }
    Ok(())
}

pub(super) fn tensor(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let Run { ctx, timer, stream, sms, sizes, .. } = run;
    let (ctx, timer, stream, sms, sizes) = (*ctx, timer, &*stream, *sms, &*sizes);
    use reference::probes::TcFormat;
    let probes = match TensorKernels::load(&ctx.device) {
        Ok(p) => p,
        Err(e) => {
            report
                .notes
                .push(format!("tensor ceilings not measured: the sm_90a module does not load here ({e})"));
            return Ok(());
        }
    };
    let words = |bytes: &[u8]| -> Vec<u32> {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    };
    let mut clk = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, cost::TC_OUT_ELEMS as usize)?;
    for (i, (format, prec, k)) in
        [(TcFormat::Bf16, "BF16", 16u64), (TcFormat::F16, "FP16", 16), (TcFormat::E4m3, "FP8", 32)]
            .into_iter()
            .enumerate()
    {
        let name = format!("{prec} tensor");
        let seed = 0x7e45_0000 + i as u32 * 2 + std::process::id() % 1024 * 8;
        let (ha, hb) = (format.random(64, seed), format.random(256, seed + 1));
        let a = DeviceBuffer::from_slice(stream, &words(&ha))?;
        let b = DeviceBuffer::from_slice(stream, &words(&hb))?;
        // The check: two iterations from one block, against the CPU.
        stream.fill_bytes(&mut out, 0xff)?;
        probes.probe(
            stream,
            Grid { blocks: 1, threads: 128 },
            format,
            &a,
            &b,
            2,
            true,
            &mut out,
            &mut clk,
        )?;
        let got = stream.to_vec(&out)?;
        let want = reference::probes::tensor(format, &ha, &hb, 2);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, |m, e| if e.is_nan() || m.is_nan() { f32::NAN } else { m.max(e) });
        // FP8 wgmma accumulates with fewer bits than f32: a wider band.
        let tolerance = if format == TcFormat::E4m3 { 5e-3 } else { 1e-3 };
        if worst.is_nan() || worst > tolerance * scale {
            return Err(Failure::Check(format!(
                "{name}: max |error| {worst} against the CPU reference's max {scale}"
            )));
        }
        let g = Grid { blocks: sms, threads: 256 };
        let iters = if k == 32 { sizes.tc_iters / 2 } else { sizes.tc_iters }.max(1);
        let (t, noise) = time(ctx, timer, &name, |s| {
            probes.probe(s, g, format, &a, &b, iters, false, &mut out, &mut clk)
        })?;
        let v = stream.to_vec(&clk)?;
        let clock_mhz = if v[1] > 0 { Some(v[0] as f64 / v[1] as f64 * 1e3) } else { None };
        let flops = cost::tensor_probe(u64::from(sms), 2, u64::from(iters), k).flops as f64;
        let mut ce = ceiling(
            &name,
            CeilingKind::Compute,
            flops / t,
            noise,
            match format {
                TcFormat::Bf16 => "tc_bf16_probe",
                TcFormat::F16 => "tc_f16_probe",
                TcFormat::E4m3 => "tc_e4m3_probe",
            },
            format!(
                "wgmma m64n256k{k}, A and B in shared memory, random operands, {sms} blocks x 2 warpgroups x {iters} x 4"
            ),
            format!("64x256 result within {tolerance:e} of the CPU reference ({worst:.2e} of {scale:.3})"),
        );
        ce.sm_clock_mhz = clock_mhz;
        ce.peak_at_clock = clock_mhz.and_then(|m| rl::tensor_peak(&report.device, prec, m));
        ce.datasheet = rl::tensor_peak(&report.device, prec, report.device.sm_clock_mhz);
        ce.roof = format != TcFormat::F16;
        report.ceilings.push(ce);
    }
    Ok(())
}

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
        let mut log = ClockLog::new(stream)?;
        let (t, noise) = time(ctx, timer, &name, |s| {
            let out =
                if prec == FmaPrecision::F64 { FmaOut::F64(&mut out64) } else { FmaOut::F32(&mut out32) };
            probes.fma(s, g, prec, seed, iters, false, out, &mut clk)?;
            log.keep(s, &clk)
        })?;
        let clock_mhz = log.median_mhz(stream)?;
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
        // FP64, FP32 and FP16 are drawn as roofs (each has its intensity
        // sweep); BF16 FMA equals FP16 and is in the table only.
        ce.roof = matches!(prec, FmaPrecision::F32 | FmaPrecision::F64 | FmaPrecision::F16x2);
        report.ceilings.push(ce);
    }
    Ok(())
}

/// Launches kept in a [`ClockLog`] (a ring: the newest, when more ran).
const CLOCK_SLOTS: usize = 4096;

/// The SM clock of every timed launch of a probe. Each launch writes its
/// block 0's `[SM cycles, %globaltimer ns]` to the probe's `clk`; a 16-byte
/// device copy queued right after it keeps that pair, so the clock a
/// ceiling is held against is the median over the same launches whose
/// median time it reports. (The last launch's clock alone was not: under
/// tensor load the clock drifts between launches, and one H100 run read a
/// BF16 ceiling at 101.4 % of the peak at its last launch's clock.) The copy
/// lies inside each timed region; its cost was not timed on its own, but the
/// FMA ceilings read 98.3–99.8 % of peak without it and 98.2–99.8 % with it
/// on the same H100 (docs/results/2026-11-25-h100-c/).
struct ClockLog {
    log: DeviceBuffer<u64>,
    kept: usize,
}

impl ClockLog {
    fn new(stream: &Stream) -> gpu_sync::Result<ClockLog> {
        Ok(ClockLog { log: DeviceBuffer::zeroed(stream, 2 * CLOCK_SLOTS)?, kept: 0 })
    }

    /// Queues the copy of this launch's clock pair (`Stream::copy`).
    fn keep(&mut self, s: &Stream, clk: &DeviceBuffer<u64>) -> gpu_sync::Result<()> {
        let i = self.kept % CLOCK_SLOTS;
        s.copy(clk, &mut self.log.slice_mut(2 * i..2 * i + 2)?)?;
        self.kept += 1;
        Ok(())
    }

    /// The median SM clock over the launches kept, MHz; `None` when no
    /// launch measured any time.
    fn median_mhz(&self, stream: &Stream) -> gpu_sync::Result<Option<f64>> {
        let v = stream.to_vec(&self.log)?;
        let mhz: Vec<f64> = v
            .chunks_exact(2)
            .take(self.kept.min(CLOCK_SLOTS))
            .filter(|p| p[1] > 0)
            .map(|p| p[0] as f64 / p[1] as f64 * 1e3)
            .collect();
        Ok((!mhz.is_empty()).then(|| gpu_bench::stats::median(&mhz)))
    }
}

/// The tensor-core probes of one path.
enum TensorProbes {
    /// `wgmma` (sm_90a): 64x256 tiles in shared memory, 2 warpgroups a block.
    Wgmma(TensorKernels),
    /// `mma.sync` (sm_80 and newer): 32x32 warp tiles in registers.
    Mma(MmaKernels),
}

impl TensorProbes {
    /// Rows of 128 bytes of the A and B operands.
    fn rows(&self) -> (usize, usize) {
        match self {
            TensorProbes::Wgmma(_) => (64, 256),
            TensorProbes::Mma(_) => (8, 8),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn probe(
        &self,
        stream: &Stream,
        grid: Grid,
        format: reference::probes::TcFormat,
        a: &DeviceBuffer<u32>,
        b: &DeviceBuffer<u32>,
        iters: u32,
        store: bool,
        out: &mut DeviceBuffer<f32>,
        clk: &mut DeviceBuffer<u64>,
    ) -> gpu_sync::Result<()> {
        match self {
            TensorProbes::Wgmma(p) => p.probe(stream, grid, format, a, b, iters, store, out, clk),
            TensorProbes::Mma(p) => p.probe(stream, grid, format, a, b, iters, store, out, clk),
        }
    }
}

/// Which tensor path this run takes, and why (for the report).
fn tensor_probes(run: &Run<'_>, report: &mut RooflineReport) -> Result<(TensorProbes, String), Failure> {
    let cc = report.device.compute_capability;
    let mma = |why: String| -> Result<(TensorProbes, String), Failure> {
        Ok((TensorProbes::Mma(MmaKernels::load(&run.ctx.device)?), format!("mma.sync ({why})")))
    };
    match run.tensor_path {
        TensorPath::Mma => mma("forced by --tensor-path mma".into()),
        TensorPath::Wgmma => Ok((
            TensorProbes::Wgmma(TensorKernels::load(&run.ctx.device)?),
            "wgmma (forced by --tensor-path wgmma)".into(),
        )),
        TensorPath::Auto if cc.0 == 9 && cc.1 == 0 => match TensorKernels::load(&run.ctx.device) {
            Ok(p) => Ok((TensorProbes::Wgmma(p), "wgmma (sm_90)".into())),
            Err(e) => mma(format!("the sm_90a wgmma module does not load here: {e}")),
        },
        TensorPath::Auto => mma(format!("sm_{}{} has no wgmma", cc.0, cc.1)),
    }
}

pub(super) fn tensor(run: &mut Run<'_>, report: &mut RooflineReport) -> Result<(), Failure> {
    let (probes, path) = match tensor_probes(run, report) {
        Ok(p) => p,
        Err(e) => {
            report.notes.push(format!("tensor ceilings not measured: no tensor probe loads here ({e})"));
            return Ok(());
        }
    };
    eprintln!("roofline: tensor path {path}");
    report.tensor_path = Some(path.clone());
    let Run { ctx, timer, stream, sms, sizes, .. } = run;
    let (ctx, timer, stream, sms, sizes) = (*ctx, timer, &*stream, *sms, &*sizes);
    use reference::probes::TcFormat;
    let words = |bytes: &[u8]| -> Vec<u32> {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    };
    let is_mma = matches!(probes, TensorProbes::Mma(_));
    let out_len = if is_mma { cost::MMA_OUT_ELEMS } else { cost::TC_OUT_ELEMS } as usize;
    let (rows_a, rows_b) = probes.rows();
    let mut clk = DeviceBuffer::<u64>::zeroed(stream, 2)?;
    let mut out = DeviceBuffer::<f32>::alloc(stream, out_len)?;
    for (i, (format, prec, k)) in
        [(TcFormat::Bf16, "BF16", 16u64), (TcFormat::F16, "FP16", 16), (TcFormat::E4m3, "FP8", 32)]
            .into_iter()
            .enumerate()
    {
        if let TensorProbes::Mma(p) = &probes
            && !p.supports(format)
        {
            report.notes.push(format!(
                "{prec} tensor not measured: FP8 mma.sync runs on sm_90 and newer in this build (sm_89 would \
                 run the sm_80 code, which has none)"
            ));
            continue;
        }
        let name = format!("{prec} tensor");
        let seed = 0x7e45_0000 + i as u32 * 2 + std::process::id() % 1024 * 8;
        let (ha, hb) = (format.random(rows_a, seed), format.random(rows_b, seed + 1));
        let a = DeviceBuffer::from_slice(stream, &words(&ha))?;
        let b = DeviceBuffer::from_slice(stream, &words(&hb))?;
        // The check: two iterations from one block, against the CPU.
        stream.fill_bytes(&mut out, 0xff)?;
        let check_grid = Grid { blocks: 1, threads: 128 };
        probes.probe(stream, check_grid, format, &a, &b, 2, true, &mut out, &mut clk)?;
        let got = stream.to_vec(&out)?;
        let want = if is_mma {
            reference::probes::mma(format, &ha, &hb, 2)
        } else {
            reference::probes::tensor(format, &ha, &hb, 2)
        };
        let (worst, scale) = reference::worst_abs_error(&got, &want);
        // FP8 accumulates with fewer bits than f32 (wgmma): a wider band.
        let tolerance = if format == TcFormat::E4m3 { 5e-3 } else { 1e-3 };
        if worst.is_nan() || worst > tolerance * scale {
            return Err(Failure::Check(format!(
                "{name} ({path}): max |error| {worst} against the CPU reference's max {scale}"
            )));
        }
        // wgmma: one block of 2 warpgroups per SM; mma.sync: 4 blocks of 8
        // warps per SM (64 registers a thread), 8 accumulators a warp.
        let (g, iters, flops, kernel, config, result) = if is_mma {
            let g = Grid { blocks: sms * 4, threads: 256 };
            let iters = if k == 32 { sizes.mma_iters / 2 } else { sizes.mma_iters }.max(1);
            let warps = g.total() / 32;
            let instr = if k == 32 { "m16n8k32" } else { "m16n8k16" };
            (
                g,
                iters,
                cost::mma_probe(warps, u64::from(iters), k).flops as f64,
                match format {
                    TcFormat::Bf16 => "mma_bf16_probe",
                    TcFormat::F16 => "mma_f16_probe",
                    TcFormat::E4m3 => "mma_e4m3_probe",
                },
                format!(
                    "mma.sync {instr}, A and B in registers, random operands, {} blocks x 8 warps x {iters} x 8",
                    g.blocks
                ),
                "32x32",
            )
        } else {
            let g = Grid { blocks: sms, threads: 256 };
            let iters = if k == 32 { sizes.tc_iters / 2 } else { sizes.tc_iters }.max(1);
            (
                g,
                iters,
                cost::tensor_probe(u64::from(sms), 2, u64::from(iters), k).flops as f64,
                match format {
                    TcFormat::Bf16 => "tc_bf16_probe",
                    TcFormat::F16 => "tc_f16_probe",
                    TcFormat::E4m3 => "tc_e4m3_probe",
                },
                format!(
                    "wgmma m64n256k{k}, A and B in shared memory, random operands, {sms} blocks x 2 warpgroups x {iters} x 4"
                ),
                "64x256",
            )
        };
        let mut log = ClockLog::new(stream)?;
        let (t, noise) = time(ctx, timer, &name, |s| {
            probes.probe(s, g, format, &a, &b, iters, false, &mut out, &mut clk)?;
            log.keep(s, &clk)
        })?;
        let clock_mhz = log.median_mhz(stream)?;
        let mut ce = ceiling(
            &name,
            CeilingKind::Compute,
            flops / t,
            noise,
            kernel,
            config,
            format!("{result} result within {tolerance:e} of the CPU reference ({worst:.2e} of {scale:.3})"),
        );
        ce.sm_clock_mhz = clock_mhz;
        // The peak is the dense tensor rate of the GPU (wgmma's on sm_90):
        // an mma.sync ceiling below it is what that path reaches.
        ce.peak_at_clock = clock_mhz.and_then(|m| rl::tensor_peak(&report.device, prec, m));
        ce.datasheet = rl::tensor_peak(&report.device, prec, report.device.sm_clock_mhz);
        ce.roof = format != TcFormat::F16;
        report.ceilings.push(ce);
    }
    report.notes.push(format!("tensor ceilings measured with {path}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock is the median over every launch kept, not the last one's,
    /// and a launch that measured no time is left out.
    #[test]
    fn the_clock_is_the_median_over_the_launches_kept() {
        let _s = gpu_sync::sim::session(0).expect("cuda-sim");
        let device = gpu_sync::Device::get(0).expect("device");
        let stream = Stream::new(&device).expect("stream");
        let mut log = ClockLog::new(&stream).expect("log");
        assert_eq!(log.median_mhz(&stream).expect("read"), None);
        // [cycles, ns] per launch: 1980, 1600, 1700 MHz, then one with no
        // time, then 1650 MHz last.
        for pair in [[1980u64, 1000], [1600, 1000], [1700, 1000], [5, 0], [1650, 1000]] {
            let clk = DeviceBuffer::from_slice(&stream, &pair).expect("clk");
            log.keep(&stream, &clk).expect("keep");
        }
        let mhz = log.median_mhz(&stream).expect("read").expect("some clock");
        assert!((mhz - 1675.0).abs() < 1e-9, "{mhz}");
    }
}

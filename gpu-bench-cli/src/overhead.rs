//! Host cost of launching: the raw driver (`cuLaunchKernel` through
//! cuda-sys) against gpu-sync's tracked launch, and a cross-stream handoff
//! (raw `cuEventRecord` + `cuStreamWaitEvent` against gpu-sync's automatic
//! wait).
//!
//! Method: variants alternate batch by batch so drift hits all alike. A batch
//! times `per_batch` submissions with the host clock; the stream is then
//! synchronized outside the timed region, so the driver's queue never fills.
//! The figure per batch is host nanoseconds per submission; the report gives
//! medians over batches and the ratio of medians with a bootstrap 95 %
//! confidence interval.
//!
//! Unsafe code: the raw variants call the driver directly, as a program
//! without gpu-sync would.
#![allow(unsafe_code)]

use crate::common::{Ctx, Failure};
use gpu_bench::Report;
use gpu_bench::record::{Counter, Record, Unit};
use gpu_bench::stats::{Summary, ratio_ci};
use gpu_sync::cuda_sys::{self, CUfunction, CUresult};
use gpu_sync::{DeviceBuffer, LaunchConfig, Result, Stream, SyncEvent};
use kernels::{AddSig, ScaleSig};
use std::ffi::c_void;
use std::time::Instant;

fn check(call: &'static str, r: CUresult) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(gpu_sync::Error::Driver { call, error: cuda_sys::CuError(r) })
    }
}

fn missing(call: &'static str) -> gpu_sync::Error {
    gpu_sync::Error::Unsupported { call, needs: "any".into(), have: "a driver without it".into() }
}

/// Runs the comparison.
///
/// # Errors
/// A driver error.
pub fn run(ctx: &Ctx, batches: usize, per_batch: usize) -> std::result::Result<Report, Failure> {
    let (batches, per_batch) = if ctx.quick { (5, 20) } else { (batches, per_batch) };
    let mut report = ctx.report("Host cost per submission")?;
    let samples = measure(ctx, batches, per_batch)?;
    let names = ["raw launch", "gpu-sync launch", "raw handoff", "gpu-sync handoff"];
    let whats = [
        "cuLaunchKernel of add_f32 (3 buffers)",
        "Kernel::launch of add_f32 with 3 tracked buffers",
        "A: launch, record; B: wait, launch, record",
        "A: launch writing z; B: launch reading z (automatic waits)",
    ];
    for i in 0..4 {
        let sum = Summary::of(&samples[i]).unwrap_or_else(Summary::empty);
        let mut r = Record::new(names[i], &[("submission", whats[i].to_owned())]);
        r.counters.push(
            Counter::new("median per submission", sum.median * 1e-9, Unit::Seconds)
                .with_noise(sum.median_noise()),
        );
        r.counters.push(Counter::new("IQR", sum.iqr() * 1e-9, Unit::Seconds));
        r.counters.push(Counter::new("batches", sum.n as f64, Unit::Count));
        report.records.push(r);
    }
    for (v, b, target) in [(1usize, 0usize, Some(1.05)), (3, 2, None)] {
        let (ratio, ci) = ratio_ci(&samples[v], &samples[b], 1000);
        let mut r = Record::new(format!("{} / {}", names[v], names[b]), &[]);
        r.counters.push(Counter::new("ratio of medians", ratio, Unit::Ratio));
        r.counters.push(Counter::new("95% CI low", ci.0, Unit::Ratio));
        r.counters.push(Counter::new("95% CI high", ci.1, Unit::Ratio));
        if let Some(t) = target {
            r.counters.push(Counter::new("target (at most)", t, Unit::Ratio));
        }
        report.records.push(r);
    }
    report.notes.push(format!(
        "{batches} batches of {per_batch} submissions per variant, interleaved batch by batch; host clock per batch, the stream synchronized outside the timed region"
    ));
    Ok(report)
}

fn measure(ctx: &Ctx, batches: usize, per_batch: usize) -> Result<[Vec<f64>; 4]> {
    let device = &ctx.device;
    let progress = |m: &str| ctx.progress.step(m);
    let drv = cuda_sys::driver()?;
    let launch = drv.cuLaunchKernel.ok_or_else(|| missing("cuLaunchKernel"))?;
    let record = drv.cuEventRecord.ok_or_else(|| missing("cuEventRecord"))?;
    let wait = drv.cuStreamWaitEvent.ok_or_else(|| missing("cuStreamWaitEvent"))?;
    let module = gpu_sync::Module::load(device, kernels::ModuleId::Elementwise.fatbin())?;
    // SAFETY: `add_f32` and `scale_f32` are elementwise.cu's kernels with
    // exactly these parameter lists (kernels/tests/signatures.rs); each
    // touches `n` elements of its buffers, and every launch below passes
    // buffers of `n` elements with that `n`.
    let (add_k, scale_k) =
        unsafe { (module.kernel::<AddSig>("add_f32")?, module.kernel::<ScaleSig>("scale_f32")?) };
    let (sa, sb) = (Stream::new(device)?, Stream::new(device)?);
    let n = 256usize;
    let x = DeviceBuffer::from_slice(&sa, &vec![1.0f32; n])?;
    let y = DeviceBuffer::from_slice(&sa, &vec![2.0f32; n])?;
    let mut out = DeviceBuffer::<f32>::zeroed(&sa, n)?;
    let mut z = DeviceBuffer::<f32>::zeroed(&sa, n)?;
    sa.synchronize()?;
    let cfg_l = LaunchConfig::for_elements(n as u64, 256);
    let (ev_a, ev_b) = (SyncEvent::new(device)?, SyncEvent::new(device)?);

    // Raw launches, as a program without gpu-sync makes them: one slot per
    // parameter, a pointer to each slot.
    let add = add_k.as_raw();
    let scale = scale_k.as_raw();
    let raw_launch = |s: &Stream, f: CUfunction, slots: &mut [u64; 4]| -> Result<()> {
        let mut params = slots.each_mut().map(|v| (v as *mut u64).cast::<c_void>());
        // SAFETY: `f` is add_f32 (const float*, const float*, float*, u64) or
        // scale_f32 (const float*, float*, float, u64) from a module kept
        // loaded by `module`; the callers fill the four slots with those
        // arguments (device addresses of live buffers of `n` floats,
        // synchronized before any is dropped; the float in the low bytes of
        // its slot); the driver copies the parameters during the call.
        let r = unsafe {
            launch(
                f,
                cfg_l.grid.x,
                1,
                1,
                cfg_l.block.x,
                1,
                1,
                0,
                s.as_raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check("cuLaunchKernel", r)
    };
    let raw_add = |s: &Stream, out: &DeviceBuffer<f32>| {
        raw_launch(s, add, &mut [x.as_raw(), y.as_raw(), out.as_raw(), n as u64])
    };
    let raw_scale = |s: &Stream, input: u64, output: u64| {
        raw_launch(s, scale, &mut [input, output, u64::from(1.5f32.to_bits()), n as u64])
    };

    let mut samples: [Vec<f64>; 4] = Default::default();
    let per = per_batch.max(1);
    for batch in 0..batches.max(1) {
        if batch % 50 == 0 {
            progress(&format!("overhead: batch {batch} of {batches}"));
        }
        // 1. raw launch, one stream, 3 buffers.
        let t = Instant::now();
        for _ in 0..per {
            raw_add(&sa, &out)?;
        }
        samples[0].push(t.elapsed().as_nanos() as f64 / per as f64);
        sa.synchronize()?;
        // 2. gpu-sync launch, one stream, 3 tracked buffers.
        let t = Instant::now();
        for _ in 0..per {
            add_k.launch(&sa, cfg_l, (&x, &y, &mut out, n as u64))?;
        }
        samples[1].push(t.elapsed().as_nanos() as f64 / per as f64);
        sa.synchronize()?;
        // 3. raw handoff: A writes z, B reads z (and the next write on A waits
        //    for B's read), with explicit events as correct raw code must.
        let t = Instant::now();
        for i in 0..per {
            // SAFETY: live events and streams of this device; flags 0.
            unsafe {
                if i > 0 || batch > 0 {
                    check("cuStreamWaitEvent", wait(sa.as_raw(), ev_b.as_raw(), 0))?;
                }
            }
            raw_scale(&sa, x.as_raw(), z.as_raw())?;
            // SAFETY: as above.
            unsafe {
                check("cuEventRecord", record(ev_a.as_raw(), sa.as_raw()))?;
                check("cuStreamWaitEvent", wait(sb.as_raw(), ev_a.as_raw(), 0))?;
            }
            raw_scale(&sb, z.as_raw(), out.as_raw())?;
            // SAFETY: as above.
            unsafe { check("cuEventRecord", record(ev_b.as_raw(), sb.as_raw()))? };
        }
        samples[2].push(t.elapsed().as_nanos() as f64 / per as f64);
        sa.synchronize()?;
        sb.synchronize()?;
        // 4. gpu-sync handoff: the same program with no explicit waits.
        let t = Instant::now();
        for _ in 0..per {
            scale_k.launch(&sa, cfg_l, (&x, &mut z, 1.5f32, n as u64))?;
            scale_k.launch(&sb, cfg_l, (&z, &mut out, 1.5f32, n as u64))?;
        }
        samples[3].push(t.elapsed().as_nanos() as f64 / per as f64);
        sa.synchronize()?;
        sb.synchronize()?;
    }
    let _ = (&mut z, &ev_a);
    Ok(samples)
}

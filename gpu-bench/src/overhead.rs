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
//! without gpu-sync would; the tracked variants declare `add_f32` and
//! `scale_f32` as typed kernels (`gpu_sync::Module::kernel`).
#![allow(unsafe_code)]

use crate::info::{DeviceInfo, device_info};
use crate::stats::{Summary, sig4};
use gpu_sync::cuda_sys::{self, CUfunction, CUresult};
use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Result, Stream, SyncEvent};
use serde::Serialize;
use std::ffi::c_void;
use std::time::Instant;

/// How many submissions to time.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OverheadConfig {
    /// Batches per variant.
    pub batches: usize,
    /// Submissions per batch.
    pub per_batch: usize,
    /// Elements each launch touches (small: the kernels' own run time is not
    /// what is measured).
    pub elements: usize,
}

impl Default for OverheadConfig {
    fn default() -> Self {
        OverheadConfig { batches: 200, per_batch: 200, elements: 256 }
    }
}

/// One variant's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    /// Name.
    pub name: String,
    /// What one submission is.
    pub what: String,
    /// Host nanoseconds per submission, one value per batch, summarized.
    pub ns: Summary,
}

/// A comparison of a variant with its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// Variant name.
    pub variant: String,
    /// Baseline name.
    pub baseline: String,
    /// Ratio of medians.
    pub ratio: f64,
    /// Bootstrap 95 % interval of the ratio of medians.
    pub ci95: (f64, f64),
    /// The target the ratio is held to.
    pub target: Option<f64>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct OverheadReport {
    /// JSON layout version.
    pub schema_version: u32,
    /// UTC date.
    pub date: String,
    /// The command that produced it.
    pub command: String,
    /// The device.
    pub device: DeviceInfo,
    /// What was asked.
    pub config: OverheadConfig,
    /// Each variant.
    pub variants: Vec<Variant>,
    /// Ratios against the raw baselines.
    pub ratios: Vec<Ratio>,
}

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
pub fn run(device: &Device, cfg: &OverheadConfig, progress: &mut dyn FnMut(&str)) -> Result<OverheadReport> {
    let drv = cuda_sys::driver()?;
    let launch = drv.cuLaunchKernel.ok_or_else(|| missing("cuLaunchKernel"))?;
    let record = drv.cuEventRecord.ok_or_else(|| missing("cuEventRecord"))?;
    let wait = drv.cuStreamWaitEvent.ok_or_else(|| missing("cuStreamWaitEvent"))?;
    let info = device_info(device)?;
    let module = gpu_sync::Module::load(device, kernels::Module::Elementwise.fatbin())?;
    // SAFETY: `add_f32(const float* x, const float* y, float* out, u64 n)`
    // in kernels/cu/elementwise.cu: 1. the signature, with `n` a `Len`;
    // 2. reads `x`, `y`, stores to `out`; 3. touches `x[i]`, `y[i]`,
    // `out[i]` for `i < n` only, and gpu-sync checks `n` against each view;
    // its grid-stride loop indexes by `blockIdx.x`/`threadIdx.x` alone, so
    // it is race-free in a 1-D grid — the kernel stays inside this function
    // and every launch below uses `cfg_l` (`LaunchConfig::for_elements`:
    // 1-D); 4. it touches nothing else.
    let add = unsafe { module.kernel::<kernels::AddSig>(kernels::Kernel::AddF32.name()) }?;
    // SAFETY: `scale_f32(const float* in, float* out, float a, u64 n)`, the
    // same file: as `add_f32`, with `in` read and `out` stored to.
    let scale = unsafe { module.kernel::<kernels::ScaleSig>(kernels::Kernel::ScaleF32.name()) }?;
    let (sa, sb) = (Stream::new(device)?, Stream::new(device)?);
    let n = cfg.elements.max(1);
    let x = DeviceBuffer::from_slice(&sa, &vec![1.0f32; n])?;
    let y = DeviceBuffer::from_slice(&sa, &vec![2.0f32; n])?;
    let mut out = DeviceBuffer::<f32>::zeroed(&sa, n)?;
    let mut z = DeviceBuffer::<f32>::zeroed(&sa, n)?;
    sa.synchronize()?;
    let cfg_l = LaunchConfig::for_elements(n as u64, 256);
    let (ev_a, ev_b) = (SyncEvent::new(device)?, SyncEvent::new(device)?);

    // Raw launches, as a program without gpu-sync makes them: one slot per
    // parameter, a pointer to each slot.
    let (add_raw, scale_raw) = (add.as_raw(), scale.as_raw());
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
        raw_launch(s, add_raw, &mut [x.as_raw(), y.as_raw(), out.as_raw(), n as u64])
    };
    let raw_scale = |s: &Stream, input: u64, output: u64| {
        raw_launch(s, scale_raw, &mut [input, output, u64::from(1.5f32.to_bits()), n as u64])
    };

    let mut samples: [Vec<f64>; 4] = Default::default();
    let names = ["raw launch", "gpu-sync launch", "raw handoff", "gpu-sync handoff"];
    let per = cfg.per_batch.max(1);
    for batch in 0..cfg.batches.max(1) {
        if batch % 50 == 0 {
            progress(&format!("overhead: batch {batch} of {}", cfg.batches));
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
            add.launch(&sa, cfg_l, (&x, &y, &mut out, n as u64))?;
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
            scale.launch(&sa, cfg_l, (&x, &mut z, 1.5f32, n as u64))?;
            scale.launch(&sb, cfg_l, (&z, &mut out, 1.5f32, n as u64))?;
        }
        samples[3].push(t.elapsed().as_nanos() as f64 / per as f64);
        sa.synchronize()?;
        sb.synchronize()?;
    }
    let whats = [
        "cuLaunchKernel of add_f32 (3 buffers)",
        "Kernel::launch of add_f32 with 3 tracked buffers",
        "A: launch, record; B: wait, launch, record (per iteration)",
        "A: launch writing z; B: launch reading z (automatic waits)",
    ];
    let variants: Vec<Variant> = (0..4)
        .map(|i| Variant {
            name: names[i].into(),
            what: whats[i].into(),
            ns: Summary::of(&samples[i]).unwrap_or(Summary {
                n: 0,
                median: f64::NAN,
                q1: f64::NAN,
                q3: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                mean: f64::NAN,
                stdev: f64::NAN,
            }),
        })
        .collect();
    let ratios = vec![
        ratio(names[1], names[0], &samples[1], &samples[0], Some(1.05)),
        ratio(names[3], names[2], &samples[3], &samples[2], None),
    ];
    let _ = (&mut z, &ev_a);
    Ok(OverheadReport {
        schema_version: crate::report::SCHEMA_VERSION,
        date: crate::report::utc_date(),
        command: crate::report::command_line(),
        device: info,
        config: *cfg,
        variants,
        ratios,
    })
}

fn median(v: &[f64]) -> f64 {
    Summary::of(v).map_or(f64::NAN, |s| s.median)
}

/// Ratio of medians with a bootstrap 95 % interval (1000 resamples).
pub fn ratio(variant: &str, baseline: &str, a: &[f64], b: &[f64], target: Option<f64>) -> Ratio {
    let r = median(a) / median(b);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |len: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % len.max(1) as u64) as usize
    };
    let mut rs: Vec<f64> = (0..1000)
        .map(|_| {
            let ra: Vec<f64> = (0..a.len()).map(|_| a[next(a.len())]).collect();
            let rb: Vec<f64> = (0..b.len()).map(|_| b[next(b.len())]).collect();
            median(&ra) / median(&rb)
        })
        .filter(|x| x.is_finite())
        .collect();
    rs.sort_by(f64::total_cmp);
    let ci = if rs.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        (crate::stats::quantile_sorted(&rs, 0.025), crate::stats::quantile_sorted(&rs, 0.975))
    };
    Ratio { variant: variant.into(), baseline: baseline.into(), ratio: r, ci95: ci, target }
}

impl OverheadReport {
    /// The report as markdown.
    pub fn to_markdown(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .variants
            .iter()
            .map(|v| {
                vec![
                    v.name.clone(),
                    format!("{} ns", sig4(v.ns.median)),
                    format!("{} ns", sig4(v.ns.iqr())),
                    format!("{} ns", sig4(v.ns.min)),
                    v.ns.n.to_string(),
                    v.what.clone(),
                ]
            })
            .collect();
        let mut out = format!(
            "# Host cost per submission\n\n{} · CUDA {} · {}\n\n`{}`\n\n{} batches of {} submissions per variant, interleaved; host clock per batch.\n\n",
            self.device.name,
            self.device.driver_cuda_version,
            self.date,
            self.command,
            self.config.batches,
            self.config.per_batch
        );
        out.push_str(&crate::report::table(
            &["variant", "median", "IQR", "min", "batches", "one submission"],
            &rows,
        ));
        out.push('\n');
        let rrows: Vec<Vec<String>> = self
            .ratios
            .iter()
            .map(|r| {
                let verdict = match r.target {
                    Some(t) if r.ratio <= t => format!("meets ≤ {t}"),
                    Some(t) => format!("MISSES ≤ {t}"),
                    None => "—".into(),
                };
                vec![
                    format!("{} / {}", r.variant, r.baseline),
                    format!("{:.3}", r.ratio),
                    format!("[{:.3}, {:.3}]", r.ci95.0, r.ci95.1),
                    verdict,
                ]
            })
            .collect();
        out.push_str(&crate::report::table(&["ratio of medians", "value", "95% CI", "target"], &rrows));
        out
    }
}

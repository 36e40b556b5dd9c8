//! Where batch mode's time above the kernel goes (issue 26): batch reads a
//! stream's per-run mean of back-to-back runs, Nsight Compute one kernel's
//! duration. For truth's memory kernels at 1 Ki, 32 Mi and 256 Mi elements
//! this prints batch mode's median, then, from CUPTI's kernel records of
//! 200 back-to-back launches (the GPU's own start and end of each kernel),
//! the median duration, the median gap from one kernel's end to the next
//! one's start, and the median pace (start to start).
//!
//!     cargo run --release -p gpu-bench --features kernels --example batch_gaps
//!
//! If batch ≈ pace and the duration ≈ ncu's, batch − ncu is the gap: time
//! the GPU spends between two kernels of one stream, which a per-kernel
//! duration does not hold. CUPTI's concurrent kernel records add code to
//! each block (see `ActivityKind::Kernel`), so the durations here may read
//! a little above ncu's; the gaps are the front end's. Without a GPU it
//! runs on the simulator, whose kernels follow one another with no gap.
use gpu_bench::{Bench, Mode, Settings, Timer};
use gpu_sync::cuda_sys::cupti::{ActivityKind, activity};
use gpu_sync::{Device, DeviceBuffer, Stream};

/// Back-to-back launches whose records are read.
const LAUNCHES: usize = 200;

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let k = kernels::Kernels::load(&device)?;
    let sim = gpu_sync::select_driver()?.is_sim();
    let max: usize = if sim { 1 << 20 } else { 1 << 28 };
    let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; max])?;
    let mut y = DeviceBuffer::<f32>::zeroed(&stream, max)?;
    let src = DeviceBuffer::from_slice(&stream, &vec![7u32; max])?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&stream, max)?;
    let mut sum = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut timer = Timer::new(&stream, Some(gpu_bench::instruments::load(&device)?))?;
    let sizes: Vec<(usize, &str)> = [(1 << 10, "1 Ki"), (1 << 25, "32 Mi"), (1 << 28, "256 Mi")]
        .into_iter()
        .filter(|(n, _)| *n <= max)
        .collect();
    // Batch mode first, before CUPTI is touched in the process (as truth).
    let mut rows = Vec::new();
    for &(n, label) in &sizes {
        for kernel in ["scale_f32", "copy_u32x4", "read_sum_u32x4"] {
            let (xv, sv) = (x.slice(..n)?, src.slice(..n)?);
            let mut run = |s: &Stream| match kernel {
                "scale_f32" => k.scale(s, &xv, &mut y.slice_mut(..n)?, 2.0),
                "copy_u32x4" => k.copy(s, &sv, &mut dst.slice_mut(..n)?),
                _ => k.read_sum(s, &sv, &mut sum),
            };
            let rec = Bench::new(kernel)
                .modes(&[Mode::Batch])
                .settings(Settings::default())
                .run_on(&mut timer, None, &mut run)?;
            let batch = rec.mode(Mode::Batch).map_or(f64::NAN, |m| m.summary.median);
            rows.push((kernel, label, n, batch));
        }
    }
    println!(
        "{:<26} {:>10} {:>12} {:>10} {:>10} {:>14}",
        "kernel, elements (µs)", "batch", "CUPTI dur.", "gap", "pace", "batch − dur."
    );
    let cupti = activity()?;
    let ids = cupti.stream_records(device.raw_context(), stream.as_raw())?;
    for (kernel, label, n, batch) in rows {
        let (xv, sv) = (x.slice(..n)?, src.slice(..n)?);
        let mut run = |s: &Stream| match kernel {
            "scale_f32" => k.scale(s, &xv, &mut y.slice_mut(..n)?, 2.0),
            "copy_u32x4" => k.copy(s, &sv, &mut dst.slice_mut(..n)?),
            _ => k.read_sum(s, &sv, &mut sum),
        };
        // A few untimed runs first, then the timed ones back to back.
        (0..10).try_for_each(|_| run(&stream))?;
        stream.synchronize()?;
        let consumer = cupti.consumer(&[ActivityKind::Kernel])?;
        (0..LAUNCHES).try_for_each(|_| run(&stream))?;
        stream.synchronize()?;
        let mut recs = ids.select(consumer.take()?);
        drop(consumer);
        recs.sort_by_key(|r| r.start_ns);
        let mut dur: Vec<f64> = recs.iter().map(|r| r.duration_ns() as f64).collect();
        let mut gap: Vec<f64> = recs.windows(2).map(|w| w[1].start_ns as f64 - w[0].end_ns as f64).collect();
        let mut pace: Vec<f64> =
            recs.windows(2).map(|w| w[1].start_ns as f64 - w[0].start_ns as f64).collect();
        let d = median(&mut dur) / 1e3;
        println!(
            "{:<26} {:>10.3} {:>12.3} {:>10.3} {:>10.3} {:>14.3}   ({} records)",
            format!("{kernel} {label}"),
            batch * 1e6,
            d,
            median(&mut gap) / 1e3,
            median(&mut pace) / 1e3,
            batch * 1e6 - d,
            recs.len()
        );
    }
    Ok(())
}

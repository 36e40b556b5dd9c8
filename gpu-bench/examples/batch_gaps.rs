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
use gpu_bench::stats::median;
use gpu_bench::{Bench, Mode, Settings, Timer};
use gpu_sync::cuda_sys::cupti::{ActivityKind, activity};
use gpu_sync::{Device, DeviceBuffer, Stream};

/// Back-to-back launches whose records are read.
const LAUNCHES: usize = 200;

/// The kernels, by name.
const KERNELS: [&str; 3] = ["scale_f32", "copy_u32x4", "read_sum_u32x4"];

/// The buffers the kernels read and write.
struct Buffers {
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    src: DeviceBuffer<u32>,
    dst: DeviceBuffer<u32>,
    sum: DeviceBuffer<u64>,
}

impl Buffers {
    /// One run of `kernel` (one of [`KERNELS`]) over `n` elements.
    fn run(&mut self, k: &kernels::Kernels, kernel: &str, s: &Stream, n: usize) -> gpu_sync::Result<()> {
        match kernel {
            "scale_f32" => k.scale(s, &self.x.slice(..n)?, &mut self.y.slice_mut(..n)?, 2.0),
            "copy_u32x4" => k.copy(s, &self.src.slice(..n)?, &mut self.dst.slice_mut(..n)?),
            _ => k.read_sum(s, &self.src.slice(..n)?, &mut self.sum),
        }
    }
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
    let mut b = Buffers {
        x: DeviceBuffer::from_slice(&stream, &vec![1.0f32; max])?,
        y: DeviceBuffer::<f32>::zeroed(&stream, max)?,
        src: DeviceBuffer::from_slice(&stream, &vec![7u32; max])?,
        dst: DeviceBuffer::<u32>::zeroed(&stream, max)?,
        sum: DeviceBuffer::<u64>::zeroed(&stream, 1)?,
    };
    let mut timer = Timer::new(&stream, Some(gpu_bench::instruments::load(&device)?))?;
    let sizes: Vec<(usize, &str)> = [(1 << 10, "1 Ki"), (1 << 25, "32 Mi"), (1 << 28, "256 Mi")]
        .into_iter()
        .filter(|(n, _)| *n <= max)
        .collect();
    // Batch mode first, before CUPTI is touched in the process (as truth).
    let mut rows = Vec::new();
    for &(n, label) in &sizes {
        for kernel in KERNELS {
            let mut run = |s: &Stream| b.run(&k, kernel, s, n);
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
        let mut run = |s: &Stream| b.run(&k, kernel, s, n);
        // A few untimed runs first, then the timed ones back to back.
        (0..10).try_for_each(|_| run(&stream))?;
        stream.synchronize()?;
        let consumer = cupti.consumer(&[ActivityKind::Kernel])?;
        (0..LAUNCHES).try_for_each(|_| run(&stream))?;
        stream.synchronize()?;
        let mut recs = ids.select(consumer.take()?);
        drop(consumer);
        recs.sort_by_key(|r| r.start_ns);
        let dur: Vec<f64> = recs.iter().map(|r| r.duration_ns() as f64).collect();
        let gap: Vec<f64> = recs.windows(2).map(|w| w[1].start_ns as f64 - w[0].end_ns as f64).collect();
        let pace: Vec<f64> = recs.windows(2).map(|w| w[1].start_ns as f64 - w[0].start_ns as f64).collect();
        let med = |v: &[f64]| if v.is_empty() { f64::NAN } else { median(v) };
        let d = med(&dur) / 1e3;
        println!(
            "{:<26} {:>10.3} {:>12.3} {:>10.3} {:>10.3} {:>14.3}   ({} records)",
            format!("{kernel} {label}"),
            batch * 1e6,
            d,
            med(&gap) / 1e3,
            med(&pace) / 1e3,
            batch * 1e6 - d,
            recs.len()
        );
    }
    Ok(())
}

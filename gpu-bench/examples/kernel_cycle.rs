//! Kernel mode's readings of two small kernels, launch by launch (issue 26):
//! `truth`'s empty spin (one cycle) and `scale_f32` over 1 Ki, on CUPTI's
//! range profiler, through gpu-sync's launch path, in a fresh process —
//! first with nothing run before, then again after the event modes (hot,
//! batch, graph) have run on the same kernels, as `truth` runs them.
//!
//!     cargo run --release -p gpu-bench --features kernels --example kernel_cycle
//!
//! Per kernel and phase: the lower and upper level the readings sit on (a
//! reading is upper when it lies more than 64 ns above the minimum), the
//! share on the upper one, how often a reading is on the level of the one
//! 4 and 8 launches before, and the median. `truth` on an H200 read both
//! kernels on two levels in an 8-launch cycle; a raw `cuLaunchKernel` probe
//! in a fresh process read one level (`docs/results/scripts/idle_gap_probe.cu
//! … cycle`). Without a GPU it runs on the simulator, whose times are exact.
use gpu_bench::{Bench, KernelRecords, Mode, Settings, Timer};
use gpu_sync::{Device, DeviceBuffer, Stream};

/// Levels, share, agreement at lags 4 and 8, median (ns) of `samples` (s).
fn cycle(samples: &[f64]) -> String {
    let ns: Vec<f64> = samples.iter().map(|s| s * 1e9).collect();
    let floor = ns.iter().copied().fold(f64::INFINITY, f64::min);
    let up: Vec<bool> = ns.iter().map(|&x| x > floor + 64.0).collect();
    let (hi, lo): (Vec<f64>, Vec<f64>) = ns.iter().partition(|&&x| x > floor + 64.0);
    let same = |k: usize| {
        let n = up.len().saturating_sub(k).max(1);
        (k..up.len()).filter(|&i| up[i] == up[i - k]).count() as f64 / n as f64
    };
    let med = |v: &[f64]| if v.is_empty() { f64::NAN } else { gpu_bench::stats::median(v) };
    format!(
        "{:>6.0} {:>6.0} {:>6.2} {:>6.2} {:>6.2} {:>7.0} {:>6}",
        med(&lo),
        med(&hi),
        hi.len() as f64 / ns.len().max(1) as f64,
        same(4),
        same(8),
        med(&ns),
        ns.len()
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let k = kernels::Kernels::load(&device)?;
    let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; 1024])?;
    let mut y = DeviceBuffer::<f32>::zeroed(&stream, 1024)?;
    let mut out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
    let mut timer = Timer::new(&stream, Some(gpu_bench::instruments::load(&device)?))?;
    timer.set_kernel_records(KernelRecords::Profiler);
    let settings = Settings::default();
    println!(
        "{:<40} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6}",
        "kernel, phase (ns)", "lower", "upper", "share", "same4", "same8", "median", "n"
    );
    for phase in ["fresh", "after the event modes"] {
        for name in ["spin_cycles 1 cycle", "scale_f32 1 Ki"] {
            let mut run = |s: &Stream| {
                if name.starts_with("spin") { k.spin(s, 1, &mut out) } else { k.scale(s, &x, &mut y, 2.0) }
            };
            if phase != "fresh" {
                Bench::new(name)
                    .modes(&[Mode::Hot, Mode::Batch, Mode::Graph])
                    .settings(settings)
                    .run_on(&mut timer, None, &mut run)?;
            }
            let rec = Bench::new(name)
                .modes(&[Mode::Kernel])
                .settings(settings)
                .run_on(&mut timer, None, &mut run)?;
            let samples = rec.mode(Mode::Kernel).map(|m| m.samples.clone()).unwrap_or_default();
            println!("{:<40} {}", format!("{name}, {phase}"), cycle(&samples));
        }
    }
    Ok(())
}

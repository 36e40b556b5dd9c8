//! Profile chosen steps of a loop: a schedule (skip 1, wait 1, warm up 1,
//! record 3, once), host ranges around each step, and the cycle's trace
//! written as Chrome JSON (open it in ui.perfetto.dev), an SVG, and the
//! op table on stdout.
//!
//!     cargo run -p gpu-bench --example profile_a_loop [-- OUT_DIR]
//!
//! OUT_DIR defaults to `profile-out/` in the build's target folder (beside
//! the example's binary, `target/debug/profile-out/`), never the directory
//! it was started in.
//!
//! Without a GPU driver it runs on the simulator (times are simulated).
use gpu_bench::profile::{self, Backend, Column, Profiler, Schedule};
use gpu_sync::{Device, DeviceBuffer, Stream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    let out = match std::env::args_os().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => default_out()?,
    };
    std::fs::create_dir_all(&out)?;
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let k = kernels::Kernels::load(&device)?;
    let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; 1 << 16])?;
    let mut y = DeviceBuffer::<f32>::zeroed(&stream, 1 << 16)?;
    let mut z = DeviceBuffer::<f32>::zeroed(&stream, 1 << 16)?;
    let mut written = Vec::new();
    let mut p = Profiler::new(&device)
        .backend(Backend::Auto)
        .schedule(Schedule::new(1, 1, 3, 1).skip_first(1))
        .on_trace_ready(|t| {
            let name = format!("steps-{}", t.steps.map_or(0, |s| s.0));
            let files = [
                (out.join(format!("{name}.json")), t.chrome_json()),
                (out.join(format!("{name}.svg")), t.svg("profile_a_loop")),
            ];
            for (path, text) in files {
                match std::fs::write(&path, text) {
                    Ok(()) => written.push(path),
                    Err(e) => eprintln!("{}: {e}", path.display()),
                }
            }
            print!("{}", t.key_averages().sort_by(Column::DeviceSelf).markdown());
        });
    p.start()?;
    for step in 0..8 {
        profile::scope(format!("step {step}"), || -> gpu_sync::Result<()> {
            let _f = profile::range("forward");
            k.scale(&stream, &x, &mut y, 2.0)?;
            k.scale(&stream, &y, &mut z, 0.5)
        })?;
        p.step()?;
    }
    p.finish()?;
    drop(p);
    for w in &written {
        println!("wrote {}", w.display());
    }
    Ok(())
}

/// `profile-out/` in the target folder of this build: the binary is
/// `target/<profile>/examples/profile_a_loop`, so two levels up.
fn default_out() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    match exe.parent().and_then(std::path::Path::parent) {
        Some(profile_dir) => Ok(profile_dir.join("profile-out")),
        None => Err(std::io::Error::other(format!("{}: no target folder above the binary", exe.display()))),
    }
}

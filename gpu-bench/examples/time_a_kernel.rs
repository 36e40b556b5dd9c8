//! Time your own kernel with gpu-bench as a library, and print a table.
//!
//!     cargo run -p gpu-bench --example time_a_kernel [-- my_kernels.fatbin]
//!
//! The image (PTX, cubin or fatbin) must define `scale_f32(const float* in,
//! float* out, float a, unsigned long long n)`; without an argument the
//! workspace's own elementwise fatbin stands in. Without a GPU driver it
//! runs on the simulator (cuda-sim), and the times are simulated.
use gpu_bench::{Bench, Compare, Mode, Settings, render};
use gpu_sync::{Device, DeviceBuffer, In, Len, Module, Out, Stream};

/// The driver `GPU_SYNC_DRIVER` names (`sim`, `cuda`, or unset: the real one
/// if it loads, else the simulator, with the kernels' CPU versions
/// registered). Returns whether times are simulated.
fn pick_driver() -> Result<bool, Box<dyn std::error::Error>> {
    let simulated = gpu_sync::select_driver()?.is_sim();
    if simulated {
        kernels::register_sim_kernels();
    }
    Ok(simulated)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let simulated = pick_driver()?;
    let image = match std::env::args().nth(1) {
        Some(path) => std::fs::read(path)?,
        None => kernels::ModuleId::Elementwise.fatbin().to_vec(),
    };
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let module = Module::load(&device, &image)?;
    // SAFETY: scale_f32 reads `in[i]` and writes `out[i]` only for i < n,
    // in a grid-stride loop (any launch shape); `n` is a `Len`, which
    // every launch checks against both views.
    let scale = unsafe { module.kernel::<(In<f32>, Out<f32>, f32, Len)>("scale_f32")? };
    let settings = if simulated { Settings::quick() } else { Settings::default() };
    let mut records = Vec::new();
    for n in [1usize << 16, 1 << 22] {
        let x = DeviceBuffer::from_slice(&stream, &vec![1.0f32; n])?;
        let mut y = DeviceBuffer::<f32>::zeroed(&stream, n)?;
        let cfg = gpu_sync::LaunchConfig::for_elements(n as u64, 256);
        let bytes = 8 * n as u64; // read 4 + write 4 per element
        let bench = |name: &str| Bench::new(name).param("n", n).bytes(bytes).settings(settings);
        let modes = [Mode::FirstCall, Mode::Cold, Mode::Hot, Mode::Graph];
        records.push(
            bench("my scale_f32")
                .flops(n as u64)
                .modes(&modes)
                .run(&stream, |s| scale.launch(s, cfg, (&x, &mut y, 2.0f32, n as u64)))?,
        );
        records.push(bench("cuMemcpyDtoD").modes(&[Mode::Hot]).run(&stream, |s| s.copy(&x, &mut y))?);
    }
    if simulated {
        println!("(no GPU driver: SIMULATED times from cuda-sim)\n");
    }
    println!("{}", render::records_markdown(&records, simulated));
    println!("{}", Compare::new(&records, "n", Mode::Hot).to_markdown());
    Ok(())
}

//! Your own kernel compiled at run time with NVRTC: CUDA C++ as a string,
//! declared `extern "C"` so the module knows it by its plain name, compile
//! options NVRTC accepts, the compiled image cached for the process. On the
//! simulator its CPU version, registered below, runs in its place (the
//! simulator loads NVRTC's PTX and checks the kernel's name against it).
//! Needs libnvrtc: `pip install nvidia-cuda-nvrtc==13.0.88` (or `cargo xtask
//! bindgen`, which installs it under target/cuda-wheels/), or set
//! `CUDA_SYS_LIBNVRTC`; without it the example says so and exits with
//! status 1, having compiled nothing.
use gpu_sync::nvrtc::Program;
use gpu_sync::{Device, DeviceBuffer, In, LaunchConfig, Len, Out, Stream, sim};
use std::process::ExitCode;

/// `saxpy(float a, const float* x, float* y, u64 n)`: y = a·x + y.
const SAXPY: &str = r#"
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"#;

/// The Rust signature: `y` is read and written, so it is an `Out`.
type Saxpy = (f32, In<f32>, Out<f32>, Len);

/// How [`run`] ended when nothing failed.
enum Outcome {
    /// Compiled, launched and checked.
    Ran,
    /// libnvrtc did not load: nothing was compiled.
    NoNvrtc(gpu_sync::Error),
}

fn main() -> ExitCode {
    match run() {
        Ok(Outcome::Ran) => ExitCode::SUCCESS,
        Ok(Outcome::NoNvrtc(e)) => {
            eprintln!("nvrtc_kernel: nothing compiled, NVRTC is not installed here: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("nvrtc_kernel: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<Outcome, Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        // One thread's work, run for every thread of the grid.
        sim::register_per_thread::<Saxpy>("saxpy", |t, (a, x, y, n)| {
            let i = t.global_x() as usize;
            if (i as u64) < n {
                y[i] += a * x[i];
            }
        });
    }
    let device = Device::get(0)?;
    let options = ["--use_fast_math", "-lineinfo"];
    let module = match Program::load(&device, SAXPY, &options) {
        Err(e @ gpu_sync::Error::NvrtcLoad(_)) => return Ok(Outcome::NoNvrtc(e)),
        other => other?,
    };
    // The second compile of the same source and options comes from the
    // process's cache: the same image, no second compile.
    let target = Program::target_for(&device)?;
    let (a, b) = (Program::compile(SAXPY, &options, target)?, Program::compile(SAXPY, &options, target)?);
    println!("compiled once: {}", std::sync::Arc::ptr_eq(&a, &b));
    // SAFETY: saxpy reads `x` and reads and writes `y` only at indices below
    // `n` (a `Len`, checked against both views at every launch), one element
    // per thread with a bounds check, and touches nothing else.
    let saxpy = unsafe { module.kernel::<Saxpy>("saxpy")? };

    let stream = Stream::new(&device)?;
    let n = 1 << 16;
    let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.5).collect();
    let dx = DeviceBuffer::from_slice(&stream, &x)?;
    let mut dy = DeviceBuffer::from_slice(&stream, &y0)?;
    saxpy.launch(&stream, LaunchConfig::for_elements(n as u64, 256), (3.0f32, &dx, &mut dy, n as u64))?;
    let got = stream.to_vec(&dy)?;
    let wrong = (0..n).filter(|&i| got[i] != 3.0 * x[i] + y0[i]).count();
    println!("saxpy of {n} elements on {}: {wrong} wrong", device.name()?);
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from 3x + y").into());
    }
    // Without extern "C" the kernel's name is mangled: asking for `saxpy`
    // fails, on the simulator as on a GPU.
    let mangled = Program::load(&device, &SAXPY.replace("extern \"C\" ", ""), &options)?;
    // SAFETY: nothing is launched: the lookup is what is shown.
    match unsafe { mangled.kernel::<Saxpy>("saxpy") } {
        Err(e) => println!("without extern \"C\": {e}"),
        Ok(_) => return Err("a kernel without extern \"C\" was found by its plain name".into()),
    }
    Ok(Outcome::Ran)
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator; CI installs the
    // pinned NVRTC wheel, so the source really compiles. Where the wheel
    // could not be installed the test says so and skips (run by hand, the
    // example exits 1).
    match run() {
        Ok(Outcome::Ran) => {}
        Ok(Outcome::NoNvrtc(e)) => eprintln!("skipped: nothing compiled, NVRTC is not installed here: {e}"),
        Err(e) => panic!("the example failed: {e}"),
    }
}

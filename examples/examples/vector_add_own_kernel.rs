//! Your own kernel: `vadd` from a PTX file built outside the workspace
//! (kernels/vadd.cu → kernels/vadd.ptx), loaded with `Module::load`. On the
//! simulator its CPU version, registered below, runs in its place.
use gpu_sync::{Device, DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream, sim};

/// `vadd(const float* x, const float* y, float* out, u64 n)`: `n` is a
/// [`Len`], which every launch checks against the three buffers.
type Vadd = (In<f32>, In<f32>, Out<f32>, Len);

/// The PTX text, NUL-terminated as `cuModuleLoadData` wants it.
const VADD_PTX: &str = concat!(include_str!("kernels/vadd.ptx"), "\0");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        // The CPU version of one thread, run for every thread of the grid
        // as the GPU does (so a grid too small for `n` fails here too):
        // slices for the pointers, reads and writes for the race oracle
        // follow from `Vadd`.
        sim::register_per_thread::<Vadd>("vadd", |t, (x, y, out, n)| {
            let i = t.global_x() as usize;
            if (i as u64) < n {
                out[i] = x[i] + y[i];
            }
        });
    }
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let module = Module::load(&device, VADD_PTX.as_bytes())?;
    // SAFETY: vadd.cu reads `x` and `y` and writes `out` only at indices
    // below `n` (a `Len`, so never past any of the three views), one
    // element per thread with a bounds check, and touches nothing else.
    let vadd = unsafe { module.kernel::<Vadd>("vadd")? };

    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
    let (dx, dy) = (DeviceBuffer::from_slice(&stream, &x)?, DeviceBuffer::from_slice(&stream, &y)?);
    let mut out = DeviceBuffer::<f32>::alloc(&stream, n)?;
    let grid = LaunchConfig::for_elements(n as u64, 256);
    vadd.launch(&stream, grid, (&dx, &dy, &mut out, n as u64))?;

    let got = stream.to_vec(&out)?;
    let wrong = got.iter().enumerate().filter(|&(i, v)| *v != x[i] + y[i]).count();
    println!("vadd of {n} elements: {wrong} wrong; out[999] = {}", got[999]);
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from x + y").into());
    }
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator.
    main().expect("the example failed");
}

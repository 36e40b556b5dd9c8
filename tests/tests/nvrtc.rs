//! Run-time compilation (`gpu_sync::nvrtc`). Every test needs libnvrtc:
//! `cargo xtask bindgen` installs the pinned wheel under target/cuda-wheels/
//! (found there automatically), or set `CUDA_SYS_LIBNVRTC`. A fresh CI
//! machine has neither, so they are ignored there; the GPU bundle runs them.
//! (That a missing libnvrtc is an error naming what to install is tested in
//! cuda-sys, without the library.)

use gpu_sync::nvrtc::{Program, Target};
use gpu_sync::{DeviceBuffer, Error, In, LaunchConfig, Out, Stream};
use sync_tests::ctx;

const VADD: &str = r#"
extern "C" __global__ void vadd(const float* x, const float* y, float* out, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        out[i] = x[i] + y[i];
    }
}
"#;

const SM90_PTX: Target = Target::Ptx { major: 9, minor: 0 };

#[test]
#[ignore = "needs libnvrtc (cargo xtask bindgen installs it, or set CUDA_SYS_LIBNVRTC)"]
fn compiles_to_ptx_with_the_entry_and_caches_it() {
    let image = Program::compile(VADD, &["-lineinfo"], SM90_PTX).expect("compile");
    let ptx = image.ptx().expect("PTX text");
    assert!(ptx.contains(".entry vadd("), "no vadd entry in:\n{ptx}");
    assert!(ptx.contains(".target sm_90"), "not compiled for compute_90:\n{ptx}");
    assert_eq!(image.bytes().last(), Some(&0), "PTX must be NUL-terminated for cuModuleLoadData");
    let again = Program::compile(VADD, &["-lineinfo"], SM90_PTX).expect("compile");
    assert!(std::sync::Arc::ptr_eq(&image, &again), "same source, options, target: from the cache");
    let other = Program::compile(VADD, &["--use_fast_math"], SM90_PTX).expect("compile");
    assert!(!std::sync::Arc::ptr_eq(&image, &other), "other options: compiled again");
    let cubin = Program::compile(VADD, &[], Target::Cubin { major: 9, minor: 0 }).expect("cubin");
    assert_eq!(&cubin.bytes()[..4], b"\x7fELF", "a cubin is an ELF image");
}

#[test]
#[ignore = "needs libnvrtc (cargo xtask bindgen installs it, or set CUDA_SYS_LIBNVRTC)"]
fn a_compile_error_returns_the_log() {
    let bad = "extern \"C\" __global__ void broken(float* x) { x[0] = undeclared_name; }";
    match Program::compile(bad, &[], SM90_PTX) {
        Err(Error::Nvrtc { call, result, log }) => {
            assert_eq!(call, "nvrtcCompileProgram");
            assert_eq!(result, "NVRTC_ERROR_COMPILATION");
            assert!(log.contains("undeclared_name"), "the log should name the error: {log}");
        }
        other => panic!("expected a compile error with its log, got {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compiles_and_runs_a_kernel_on_the_gpu() {
    let t = ctx(1);
    if t.sim() {
        return; // needs the real driver to run device code
    }
    let module = Program::load(&t.device, VADD, &["-lineinfo"]).expect("compile and load");
    // SAFETY: VADD reads `x`, `y` and writes `out` only below `n`; the launch
    // passes n = the buffers' common length.
    let vadd = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>, u64)>("vadd") }.expect("kernel");
    let stream = Stream::new(&t.device).unwrap();
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| (n - i) as f32).collect();
    let (dx, dy) =
        (DeviceBuffer::from_slice(&stream, &x).unwrap(), DeviceBuffer::from_slice(&stream, &y).unwrap());
    let mut out = DeviceBuffer::<f32>::zeroed(&stream, n).unwrap();
    vadd.launch(&stream, LaunchConfig::for_elements(n as u64, 256), (&dx, &dy, &mut out, n as u64)).unwrap();
    let got = stream.to_vec(&out).unwrap();
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(got, want);
    t.finish();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reports_a_compile_error_for_the_device_with_its_log() {
    let t = ctx(2);
    if t.sim() {
        return;
    }
    let bad = "extern \"C\" __global__ void k(int* p) { p[0] = 1 }"; // missing ';'
    match Program::load(&t.device, bad, &[]) {
        Err(e @ Error::Nvrtc { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("NVRTC_ERROR_COMPILATION") && msg.contains("expected"), "{msg}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

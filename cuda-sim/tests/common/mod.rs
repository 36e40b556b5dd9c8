//! Shared helpers of the cuda-sim integration tests: the installed table,
//! a call macro, test kernels and a per-test environment.
#![allow(dead_code, unreachable_pub)]

use cuda_sim::{KernelCall, KernelFault, KernelSpec, ParamSpec, Session, register_kernel};
pub use cuda_sys::*;
use std::ffi::c_void;
use std::sync::Once;

/// The simulator, installed process-wide.
pub fn d() -> &'static Driver {
    cuda_sim::install().expect("cuda-sim installs")
}

/// Calls a driver entry point: `cu!(cuMemAlloc(&mut p, 16))`.
#[macro_export]
macro_rules! cu {
    ($f:ident ( $($a:expr),* $(,)? )) => {{
        let f = $crate::common::d().$f.expect(stringify!($f));
        // The arguments are plain values the test builds (pointers to its own
        // buffers, handles); the call itself is what is unsafe.
        #[allow(clippy::macro_metavars_in_unsafe)]
        // SAFETY: the tests pass arguments that follow the CUDA contract of
        // each call (valid output slots, live buffers of the stated sizes).
        let r = unsafe { f($($a),*) };
        r
    }};
}

/// Asserts a driver call succeeds.
#[macro_export]
macro_rules! ck {
    ($f:ident ( $($a:expr),* $(,)? )) => {{
        let r = $crate::cu!($f($($a),*));
        assert_eq!(r, $crate::common::CUresult::CUDA_SUCCESS, "{} failed", stringify!($f));
    }};
}

pub const OK: CUresult = CUresult::CUDA_SUCCESS;

fn fill_u32(c: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let v: u32 = c.scalar(1)?;
    let n: u64 = c.scalar(2)?;
    c.write(0, &vec![v; n as usize])
}

fn add_u32(c: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let n: u64 = c.scalar(2)?;
    let a = c.read::<u32>(0, n as usize)?;
    let b = c.read::<u32>(1, n as usize)?;
    let out: Vec<u32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    c.write(1, &out)
}

fn spin(_: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    Ok(())
}

fn spin_ns(c: &KernelCall<'_>) -> u64 {
    let cycles: u64 = c.scalar(0).unwrap_or(0);
    cycles * 50 / 99 // cycles / 1.98 GHz
}

fn write_past_end(c: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let n: u64 = c.scalar(1)?;
    c.write_at(0, n, &[1u32])
}

fn write_through_read(c: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    c.write(0, &[1u32])
}

static FILL: [ParamSpec; 3] = [ParamSpec::write(), ParamSpec::scalar::<u32>(), ParamSpec::scalar::<u64>()];
static ADD: [ParamSpec; 3] = [ParamSpec::read(), ParamSpec::read_write(), ParamSpec::scalar::<u64>()];
static SPIN: [ParamSpec; 1] = [ParamSpec::scalar::<u64>()];
static PAST: [ParamSpec; 2] = [ParamSpec::write(), ParamSpec::scalar::<u64>()];
static RO: [ParamSpec; 1] = [ParamSpec::read()];

/// Registers the test kernels (once per process).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_kernel(KernelSpec { name: "sim_fill_u32", params: &FILL, run: fill_u32, duration: None });
        register_kernel(KernelSpec { name: "sim_add_u32", params: &ADD, run: add_u32, duration: None });
        register_kernel(KernelSpec { name: "sim_spin", params: &SPIN, run: spin, duration: Some(spin_ns) });
        register_kernel(KernelSpec {
            name: "sim_write_past_end",
            params: &PAST,
            run: write_past_end,
            duration: None,
        });
        register_kernel(KernelSpec {
            name: "sim_write_through_read",
            params: &RO,
            run: write_through_read,
            duration: None,
        });
    });
}

/// A PTX image the simulator accepts.
pub const PTX: &[u8] = b"  // cuda-sim test module\n.version 8.0\n\0";

/// A test's environment: its session, device 0's context current, a module.
pub struct Env {
    pub session: Session,
    pub ctx: CUcontext,
    pub module: CUmodule,
}

impl Env {
    /// A function of the module.
    pub fn function(&self, name: &str) -> CUfunction {
        let mut f: CUfunction = std::ptr::null_mut();
        let c = std::ffi::CString::new(name).unwrap();
        ck!(cuModuleGetFunction(&mut f, self.module, c.as_ptr()));
        f
    }

    /// A new stream.
    pub fn stream(&self, flags: u32) -> CUstream {
        let mut s: CUstream = std::ptr::null_mut();
        ck!(cuStreamCreateWithPriority(&mut s, flags, 0));
        s
    }

    /// A new event.
    pub fn event(&self, flags: u32) -> CUevent {
        let mut e: CUevent = std::ptr::null_mut();
        ck!(cuEventCreate(&mut e, flags));
        e
    }

    /// `n` bytes of device memory.
    pub fn alloc(&self, n: usize) -> CUdeviceptr {
        let mut p = 0;
        ck!(cuMemAlloc(&mut p, n));
        p
    }

    /// `n` bytes of pinned host memory.
    pub fn pinned(&self, n: usize, flags: u32) -> *mut u8 {
        let mut p: *mut c_void = std::ptr::null_mut();
        ck!(cuMemHostAlloc(&mut p, n, flags));
        p.cast()
    }

    /// Launches `f` with one block of one thread.
    pub fn launch(&self, f: CUfunction, stream: CUstream, args: &mut [*mut c_void]) -> CUresult {
        cu!(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, args.as_mut_ptr(), std::ptr::null_mut()))
    }

    /// `sim_fill_u32(ptr, v, n)` on `stream`.
    pub fn fill(&self, stream: CUstream, mut ptr: CUdeviceptr, mut v: u32, mut n: u64) {
        let f = self.function("sim_fill_u32");
        let mut args = [arg(&mut ptr), arg(&mut v), arg(&mut n)];
        assert_eq!(self.launch(f, stream, &mut args), OK);
    }

    /// `sim_add_u32(a, b, n)`: b += a.
    pub fn add(&self, stream: CUstream, mut a: CUdeviceptr, mut b: CUdeviceptr, mut n: u64) {
        let f = self.function("sim_add_u32");
        let mut args = [arg(&mut a), arg(&mut b), arg(&mut n)];
        assert_eq!(self.launch(f, stream, &mut args), OK);
    }

    /// Reads `n` u32 from device memory (pageable D2H on the legacy stream).
    pub fn read_u32(&self, ptr: CUdeviceptr, n: usize) -> Vec<u32> {
        let mut out = vec![0u32; n];
        ck!(cuMemcpyDtoHAsync(out.as_mut_ptr().cast(), ptr, n * 4, std::ptr::null_mut()));
        out
    }
}

/// A kernel parameter slot pointing at `v`.
pub fn arg<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// Sets up a session with `seed`, `cuInit`, device 0's primary context
/// current, and a module.
pub fn env(seed: u64) -> Env {
    register();
    let session = Session::new(seed);
    ck!(cuInit(0));
    let mut ctx: CUcontext = std::ptr::null_mut();
    ck!(cuDevicePrimaryCtxRetain(&mut ctx, 0));
    ck!(cuCtxSetCurrent(ctx));
    let mut module: CUmodule = std::ptr::null_mut();
    ck!(cuModuleLoadData(&mut module, PTX.as_ptr().cast()));
    Env { session, ctx, module }
}

/// Unloads the module and releases the context.
pub fn teardown(e: Env) {
    ck!(cuModuleUnload(e.module));
    ck!(cuDevicePrimaryCtxRelease(0));
    let live = e.session.live();
    assert!(live.is_empty(), "leaked: {live:?}");
}

/// A process-wide lock each test takes first: a context synchronization
/// completes every session's work (as on a GPU) and every session's host
/// learns of it, so a test running beside another could see races it
/// expects ordered away, or work it counts run by someone else.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

//! Shared helpers of the cuda-sim integration tests: the installed table,
//! test kernels and a per-test environment. Tests call the simulator through
//! cuda-sys's per-call layer (`cuda_sys::result`); `raw!` calls the table
//! directly, only for what that layer cannot express (null output slots,
//! handles the simulator must reject).
#![allow(dead_code, unreachable_pub, unused_imports)]

use cuda_sim::{KernelCall, KernelFault, KernelSpec, ParamSpec, Session, register_kernel};
pub use cuda_sys::result::{
    self as r, context, device, event, function, graph, init, launch, mem_pool, memory, module, primary_ctx,
    stream,
};
pub use cuda_sys::*;
use std::ffi::c_void;
use std::sync::Once;

/// The simulator, installed process-wide.
pub fn d() -> &'static Driver {
    cuda_sim::install().expect("cuda-sim installs")
}

/// Calls a driver entry point of the table directly, returning its
/// `CUresult`: `raw!(cuMemAlloc(null_mut(), 16))`. Only for arguments the
/// per-call layer cannot pass (null output slots, bogus handles).
#[macro_export]
macro_rules! raw {
    ($f:ident ( $($a:expr),* $(,)? )) => {{
        let f = $crate::common::d().$f.expect(stringify!($f));
        // The arguments are plain values the test builds (pointers to its own
        // buffers, handles); the call itself is what is unsafe.
        #[allow(clippy::macro_metavars_in_unsafe)]
        // SAFETY: the simulator checks every pointer for null and every
        // handle against its tables, so a bad argument is an error code;
        // non-null pointers the tests pass are valid for the call.
        let r = unsafe { f($($a),*) };
        r
    }};
}

/// The `CUresult` a per-call function reported: `CUDA_SUCCESS` for `Ok`.
/// Panics on an error that is not a driver code (`Unsupported`, `Refused`),
/// which no test of the simulator expects here.
#[track_caller]
pub fn code<T>(r: Result<T, DriverError>) -> CUresult {
    match r {
        Ok(_) => CUresult::CUDA_SUCCESS,
        Err(e) => e.result().unwrap_or_else(|| panic!("not a driver code: {e}")),
    }
}

/// Borrows a raw stream handle (the legacy or per-thread default stream, or
/// one the simulator must reject).
pub fn raw_stream(s: CUstream) -> BorrowedStream<'static> {
    // SAFETY: the simulator checks every stream handle it is given against
    // its tables; an unknown one is CUDA_ERROR_INVALID_HANDLE, never a
    // dereference.
    unsafe { Borrowed::borrow_raw(d(), s) }
}

/// Borrows a raw event handle the simulator must reject (or a destroyed one).
pub fn raw_event(e: CUevent) -> BorrowedEvent<'static> {
    // SAFETY: as for `raw_stream`: handles are looked up, never dereferenced.
    unsafe { Borrowed::borrow_raw(d(), e) }
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
    pub ctx: BorrowedContext<'static>,
    pub module: Option<OwnedModule>,
}

impl Env {
    /// The module.
    pub fn module(&self) -> BorrowedModule<'_> {
        self.module.as_ref().expect("not torn down").as_borrowed()
    }

    /// A function of the module.
    pub fn function(&self, name: &str) -> BorrowedFunction<'_> {
        let c = std::ffi::CString::new(name).unwrap();
        module::get_function(self.module(), &c).expect("cuModuleGetFunction")
    }

    /// A new stream.
    pub fn stream(&self, flags: u32) -> OwnedStream {
        stream::create_with_priority(d(), flags, 0).expect("cuStreamCreateWithPriority")
    }

    /// A new event.
    pub fn event(&self, flags: u32) -> OwnedEvent {
        event::create(d(), flags).expect("cuEventCreate")
    }

    /// `n` bytes of device memory.
    pub fn alloc(&self, n: usize) -> CUdeviceptr {
        memory::alloc(d(), n).expect("cuMemAlloc")
    }

    /// `n` bytes of pinned host memory.
    pub fn pinned(&self, n: usize, flags: u32) -> *mut u8 {
        memory::host_alloc(d(), n, flags).expect("cuMemHostAlloc").cast()
    }

    /// Launches `f` with one block of one thread.
    pub fn launch(
        &self,
        f: BorrowedFunction<'_>,
        stream: impl AsBorrowed<handle::kind::StreamKind>,
        args: &mut [*mut c_void],
    ) -> CUresult {
        // SAFETY: the simulator runs registered CPU kernels that read their
        // parameters through checked accessors (a missing or short one is a
        // launch error) and touch device memory only inside allocations.
        code(unsafe { launch::launch_kernel(f, [1, 1, 1], [1, 1, 1], 0, stream, args) })
    }

    /// `sim_fill_u32(ptr, v, n)` on `stream`.
    pub fn fill(
        &self,
        stream: impl AsBorrowed<handle::kind::StreamKind>,
        mut ptr: CUdeviceptr,
        mut v: u32,
        mut n: u64,
    ) {
        let f = self.function("sim_fill_u32");
        let mut args = [arg(&mut ptr), arg(&mut v), arg(&mut n)];
        assert_eq!(self.launch(f, stream, &mut args), OK);
    }

    /// `sim_add_u32(a, b, n)`: b += a.
    pub fn add(
        &self,
        stream: impl AsBorrowed<handle::kind::StreamKind>,
        mut a: CUdeviceptr,
        mut b: CUdeviceptr,
        mut n: u64,
    ) {
        let f = self.function("sim_add_u32");
        let mut args = [arg(&mut a), arg(&mut b), arg(&mut n)];
        assert_eq!(self.launch(f, stream, &mut args), OK);
    }

    /// Reads `n` u32 from device memory (pageable D2H on the legacy stream).
    pub fn read_u32(&self, ptr: CUdeviceptr, n: usize) -> Vec<u32> {
        let mut out = vec![0u32; n];
        // SAFETY: `out` is valid for `4n` bytes and a pageable copy completes
        // before the call returns; the simulator checks the device range.
        let r = unsafe {
            memory::memcpy_dtoh_async(out.as_mut_ptr().cast(), ptr, n * 4, BorrowedStream::null(d()))
        };
        r.expect("cuMemcpyDtoHAsync");
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
    init::init(d(), 0).expect("cuInit");
    let ctx = primary_ctx::retain(d(), 0).expect("cuDevicePrimaryCtxRetain");
    context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
    // SAFETY: a NUL-terminated PTX image.
    let module = unsafe { module::load_data(d(), PTX.as_ptr().cast()) }.expect("cuModuleLoadData");
    Env { session, ctx, module: Some(module) }
}

/// Unloads the module and releases the context.
pub fn teardown(mut e: Env) {
    if let Some(m) = e.module.take() {
        module::unload(m).expect("cuModuleUnload");
    }
    // SAFETY: the test dropped every handle of the context before its
    // teardown (the live counts below check it); the simulator's context
    // outlives a release anyway.
    unsafe { primary_ctx::release(d(), 0) }.expect("cuDevicePrimaryCtxRelease");
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

/// The raw-pointer calls of `cuda_sys::result::memory` in safe form, for
/// tests over the simulator only: it checks every device address against
/// its allocations (a bad one is an error code or a reported race, never a
/// wild access) and host pointers here are only the tests' own buffers or
/// `Env::pinned` memory. Planting use-after-free, double free and early
/// free bugs is the point of several tests.
pub mod sim {
    use super::*;
    use cuda_sys::handle::kind::StreamKind as Stream;

    /// `cuMemFreeAsync`.
    pub fn free_async(p: CUdeviceptr, s: impl AsBorrowed<Stream>) -> Result<(), DriverError> {
        // SAFETY: the simulator checks the address (module docs).
        unsafe { memory::free_async(p, s) }
    }

    /// `cuMemFree`.
    pub fn free(p: CUdeviceptr) -> Result<(), DriverError> {
        // SAFETY: as above.
        unsafe { memory::free(d(), p) }
    }

    /// `cuMemFreeHost`.
    pub fn free_host(h: *mut u8) -> Result<(), DriverError> {
        // SAFETY: the simulator checks the pointer against its pinned
        // allocations; it was made by `Env::pinned`.
        unsafe { memory::free_host(d(), h.cast()) }
    }

    /// `cuMemcpyHtoDAsync` from the test's host memory `src` (pinned from
    /// `Env::pinned`, or pageable and read during the call).
    pub fn htod(
        dst: CUdeviceptr,
        src: *const u8,
        bytes: usize,
        s: impl AsBorrowed<Stream>,
    ) -> Result<(), DriverError> {
        // SAFETY: the simulator checks the device range; `src` is the test's
        // own memory of at least `bytes`, kept until the copy ran.
        unsafe { memory::memcpy_htod_async(dst, src.cast(), bytes, s) }
    }

    /// `cuMemcpyDtoHAsync` into the test's host memory `dst`.
    pub fn dtoh(
        dst: *mut u8,
        src: CUdeviceptr,
        bytes: usize,
        s: impl AsBorrowed<Stream>,
    ) -> Result<(), DriverError> {
        // SAFETY: as for `htod`; the test reads `dst` only through the
        // simulator's checked host accessors or after synchronizing.
        unsafe { memory::memcpy_dtoh_async(dst.cast(), src, bytes, s) }
    }

    /// `cuMemcpyDtoDAsync`.
    pub fn dtod(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        s: impl AsBorrowed<Stream>,
    ) -> Result<(), DriverError> {
        // SAFETY: the simulator checks both device ranges.
        unsafe { memory::memcpy_dtod_async(dst, src, bytes, s) }
    }

    /// `cuMemsetD8Async`.
    pub fn memset8(dst: CUdeviceptr, v: u8, n: usize, s: impl AsBorrowed<Stream>) -> Result<(), DriverError> {
        // SAFETY: the simulator checks the device range.
        unsafe { memory::memset_d8_async(dst, v, n, s) }
    }

    /// `cuMemsetD32Async`.
    pub fn memset32(
        dst: CUdeviceptr,
        v: u32,
        n: usize,
        s: impl AsBorrowed<Stream>,
    ) -> Result<(), DriverError> {
        // SAFETY: the simulator checks the device range.
        unsafe { memory::memset_d32_async(dst, v, n, s) }
    }
}

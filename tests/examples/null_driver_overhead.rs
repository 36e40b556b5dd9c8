//! gpu-sync's own bookkeeping per tracked launch, without a GPU: a driver
//! table whose entry points do nothing (a launch returns at once), so the
//! time per `Kernel::launch` is gpu-sync's alone.
//!
//! `cargo run --release -p sync-tests --example null_driver_overhead`
//! (`N=…` sets the launches per round). For a count that does not depend on
//! the machine's load, run it under `valgrind --tool=callgrind` with two
//! values of N and divide the difference in instructions by the difference
//! in N. The real comparison against the driver is `gpu-bench overhead`.
//! `MODE=handoff`: a same-device handoff round trip (two streams);
//! `MODE=xhandoff`: a cross-device round trip (two null devices, peer
//! access on), as `gpu-bench p2p`'s handoff chains it.
#![allow(unsafe_code)]

use cuda_sys::*;
use gpu_sync::{DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const OK: CUresult = CUresult::CUDA_SUCCESS;

/// Writes `v` through an out-pointer of the driver API.
///
/// # Safety
/// 1. `p` must be valid for a write of one `T` (gpu-sync passes the address
///    of a local it owns for every out-parameter).
unsafe fn put<T>(p: *mut T, v: T) -> CUresult {
    // SAFETY: the caller guarantees `p` is valid for one write.
    unsafe { p.write(v) };
    OK
}

unsafe extern "C" fn init(_: c_uint) -> CUresult {
    OK
}
/// Devices the null driver reports: two for `MODE=xhandoff`, else one.
static DEVICES: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);

unsafe extern "C" fn count(n: *mut c_int) -> CUresult {
    // SAFETY: `n` is gpu-sync's out-pointer for the count, valid for one
    // write (see `put`); the count is 1 or 2, and gpu-sync asks only for
    // ordinals below it.
    unsafe { put(n, DEVICES.load(Ordering::Relaxed)) }
}
unsafe extern "C" fn get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    // SAFETY: `d` is gpu-sync's out-pointer for the device, valid for one
    // write (see `put`); the device handle is the ordinal itself.
    unsafe { put(d, ordinal) }
}
unsafe extern "C" fn retain(c: *mut CUcontext, d: CUdevice) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; the handle is an opaque token, one
    // per device.
    unsafe { put(c, (8 + 8 * d as usize) as CUcontext) }
}
unsafe extern "C" fn can_access_peer(can: *mut c_int, _: CUdevice, _: CUdevice) -> CUresult {
    // SAFETY: `can` is gpu-sync's out-pointer for the answer, valid for one
    // write (see `put`); every pair of null devices can reach each other.
    unsafe { put(can, 1) }
}
unsafe extern "C" fn enable_peer(_: CUcontext, _: c_uint) -> CUresult {
    OK
}
unsafe extern "C" fn pool_access(
    f: *mut CUmemAccess_flags,
    _: CUmemoryPool,
    _: *mut CUmemLocation,
) -> CUresult {
    // SAFETY: out-pointer from gpu-sync: the pool is open already, so
    // nothing is set.
    unsafe { put(f, CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE) }
}
/// `cuCtxSetCurrent` calls so far (the context switches a handoff makes).
static SWITCHES: AtomicU64 = AtomicU64::new(0);

/// The context `cuCtxSetCurrent` last made current (one thread drives the
/// null driver).
static CURRENT: AtomicU64 = AtomicU64::new(0);
/// `cuEventRecord` calls on a stream whose context was not current.
static FOREIGN_RECORDS: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn set_current(c: CUcontext) -> CUresult {
    SWITCHES.fetch_add(1, Ordering::Relaxed);
    CURRENT.store(c as u64, Ordering::Relaxed);
    OK
}
unsafe extern "C" fn attribute(v: *mut c_int, _: CUdevice_attribute, _: CUdevice) -> CUresult {
    // SAFETY: out-pointer from gpu-sync. Every limit is generous, and memory
    // pools are "supported".
    unsafe { put(v, 1 << 20) }
}
unsafe extern "C" fn priorities(least: *mut c_int, greatest: *mut c_int) -> CUresult {
    // SAFETY: out-pointers from gpu-sync.
    unsafe {
        put(least, 0);
        put(greatest, -5)
    }
}
unsafe extern "C" fn pool(p: *mut CUmemoryPool, _: CUdevice) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; an opaque token.
    unsafe { put(p, 8 as CUmemoryPool) }
}
unsafe extern "C" fn pool_set(_: CUmemoryPool, _: CUmemPool_attribute, _: *mut c_void) -> CUresult {
    OK
}
unsafe extern "C" fn stream_create(s: *mut CUstream, _: c_uint, _: c_int) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; an opaque token that names the
    // context current at its creation (the stream's, as the driver's).
    unsafe { put(s, (CURRENT.load(Ordering::Relaxed) << 8 | 16) as CUstream) }
}
unsafe extern "C" fn stream_any(_: CUstream) -> CUresult {
    OK
}
static NEXT_ADDRESS: AtomicU64 = AtomicU64::new(1 << 20);
unsafe extern "C" fn alloc_async(p: *mut CUdeviceptr, n: usize, _: CUstream) -> CUresult {
    let a = NEXT_ADDRESS.fetch_add((n as u64 + 255) & !255, Ordering::Relaxed);
    // SAFETY: out-pointer from gpu-sync. The address is never dereferenced:
    // every entry point that would touch it does nothing.
    unsafe { put(p, a) }
}
unsafe extern "C" fn free_async(_: CUdeviceptr, _: CUstream) -> CUresult {
    OK
}
unsafe extern "C" fn memset8(_: CUdeviceptr, _: u8, _: usize, _: CUstream) -> CUresult {
    OK
}
unsafe extern "C" fn module_load(m: *mut CUmodule, _: *const c_void) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; an opaque token.
    unsafe { put(m, 8 as CUmodule) }
}
unsafe extern "C" fn module_unload(_: CUmodule) -> CUresult {
    OK
}
unsafe extern "C" fn get_function(f: *mut CUfunction, _: CUmodule, _: *const c_char) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; an opaque token.
    unsafe { put(f, 8 as CUfunction) }
}
/// Every function attribute reads 0 (no dynamic shared memory, which the
/// example's launches do not ask for); declaring a kernel reads one.
unsafe extern "C" fn func_attribute(v: *mut c_int, _: CUfunction_attribute, _: CUfunction) -> CUresult {
    // SAFETY: out-pointer from gpu-sync.
    unsafe { put(v, 0) }
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn launch(
    _: CUfunction,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: c_uint,
    _: CUstream,
    _: *mut *mut c_void,
    _: *mut *mut c_void,
) -> CUresult {
    pollute();
    OK
}

/// Bytes the launch entry point reads, as a real driver's launch path
/// does, evicting part of the caller's working set from the L1 (`POLLUTE`,
/// in KiB; 0 by default).
static POLLUTE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();

fn pollute() {
    if let Some(v) = POLLUTE.get() {
        let mut acc = 0u64;
        for w in v.iter().step_by(8) {
            acc = acc.wrapping_add(*w);
        }
        std::hint::black_box(acc);
    }
}

unsafe extern "C" fn event_create(e: *mut CUevent, _: c_uint) -> CUresult {
    // SAFETY: out-pointer from gpu-sync; an opaque token.
    unsafe { put(e, 8 as CUevent) }
}
unsafe extern "C" fn event_any(_: CUevent) -> CUresult {
    OK
}
unsafe extern "C" fn event_record(_: CUevent, s: CUstream) -> CUresult {
    if s as u64 >> 8 != CURRENT.load(Ordering::Relaxed) {
        FOREIGN_RECORDS.fetch_add(1, Ordering::Relaxed);
    }
    OK
}
unsafe extern "C" fn stream_wait(_: CUstream, _: CUevent, _: c_uint) -> CUresult {
    OK
}

fn main() -> gpu_sync::Result<()> {
    let mut d = Driver::empty(13000, "null driver");
    d.cuInit = Some(init);
    d.cuDeviceGetCount = Some(count);
    d.cuDeviceGet = Some(get);
    d.cuDevicePrimaryCtxRetain = Some(retain);
    d.cuCtxSetCurrent = Some(set_current);
    d.cuDeviceGetAttribute = Some(attribute);
    d.cuCtxGetStreamPriorityRange = Some(priorities);
    d.cuDeviceGetDefaultMemPool = Some(pool);
    d.cuMemPoolSetAttribute = Some(pool_set);
    d.cuStreamCreateWithPriority = Some(stream_create);
    d.cuStreamSynchronize = Some(stream_any);
    d.cuStreamDestroy = Some(stream_any);
    d.cuMemAllocAsync = Some(alloc_async);
    d.cuMemFreeAsync = Some(free_async);
    d.cuMemsetD8Async = Some(memset8);
    d.cuModuleLoadData = Some(module_load);
    d.cuModuleUnload = Some(module_unload);
    d.cuModuleGetFunction = Some(get_function);
    d.cuFuncGetAttribute = Some(func_attribute);
    d.cuLaunchKernel = Some(launch);
    d.cuEventCreate = Some(event_create);
    d.cuEventDestroy = Some(event_any);
    d.cuEventRecord = Some(event_record);
    d.cuStreamWaitEvent = Some(stream_wait);
    d.cuDeviceCanAccessPeer = Some(can_access_peer);
    d.cuCtxEnablePeerAccess = Some(enable_peer);
    d.cuMemPoolGetAccess = Some(pool_access);
    let mode = std::env::var("MODE").unwrap_or_default();
    if mode == "xhandoff" {
        DEVICES.store(2, Ordering::Relaxed);
    }
    // SAFETY: every entry point above behaves as the driver documents for the
    // calls this program makes, except that no work is ever done: nothing
    // reads device memory or hands host memory to the "device".
    if let Err(e) = unsafe { install(d) } {
        eprintln!("{e}");
        std::process::exit(1);
    }
    let dev = gpu_sync::Device::get(0)?;
    let s = Stream::new(&dev)?;
    let m = Module::load(&dev, b"// null driver: no code\0")?;
    // SAFETY: the null driver runs no kernel at all (`launch` returns at
    // once), so no memory is ever accessed; the signature is add_f32's, with
    // its length a checked `Len`.
    let k = unsafe { m.kernel::<(In<f32>, In<f32>, Out<f32>, Len)>("add_f32") }?;
    let x = DeviceBuffer::<f32>::zeroed(&s, 256)?;
    let y = DeviceBuffer::<f32>::zeroed(&s, 256)?;
    let mut o = DeviceBuffer::<f32>::zeroed(&s, 256)?;
    let cfg = LaunchConfig::new(1, 256);
    let kib: usize = std::env::var("POLLUTE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    if kib > 0 {
        let _ = POLLUTE.set(vec![1u64; kib * 128]);
    }
    let raw = cuda_sys::driver().ok().and_then(|d| d.cuLaunchKernel);
    let n: u32 = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    if mode == "xhandoff" {
        // A cross-device handoff, as `gpu-bench p2p` chains it: z on
        // device 0, bumped on device 1's stream and on device 0's in turn
        // (device 1 reaches it through peer access).
        let dev1 = gpu_sync::Device::get(1)?;
        dev1.enable_peer_access(&dev)?;
        let s1 = Stream::new(&dev1)?;
        let m1 = Module::load(&dev1, b"// null driver: no code\0")?;
        let (b0, b1) =
            // SAFETY: the null driver runs no kernel (`launch` returns at
            // once), so the declared signature (a buffer and its checked
            // length, as bump_u32's) is never used to touch memory.
            unsafe { (m.kernel::<(Out<f32>, Len)>("bump_u32")?, m1.kernel::<(Out<f32>, Len)>("bump_u32")?) };
        let mut z = DeviceBuffer::<f32>::zeroed(&s, 64)?;
        let cfg = LaunchConfig::new(1, 64);
        for round in 0..3 {
            let (switches, foreign) =
                (SWITCHES.load(Ordering::Relaxed), FOREIGN_RECORDS.load(Ordering::Relaxed));
            let t = Instant::now();
            for _ in 0..n {
                b1.launch(&s1, cfg, (&mut z, 64u64))?;
                b0.launch(&s, cfg, (&mut z, 64u64))?;
            }
            let ns = t.elapsed().as_nanos() as f64 / f64::from(n.max(1));
            let per =
                |c: &AtomicU64, from: u64| (c.load(Ordering::Relaxed) - from) as f64 / f64::from(n.max(1));
            println!(
                "round {round}: {ns:.1} ns per gpu-sync cross-device round trip, {:.2} context switches, {:.2} \
                 events recorded on a stream of another context than the current one ({n} round trips)",
                per(&SWITCHES, switches),
                per(&FOREIGN_RECORDS, foreign)
            );
        }
        return Ok(());
    }
    if mode == "handoff" {
        // A cross-stream handoff: z written on s, read on s2, alternately.
        // SAFETY: as above (no kernel runs).
        let scale = unsafe { m.kernel::<(In<f32>, Out<f32>, f32, Len)>("scale_f32") }?;
        let s2 = Stream::new(&dev)?;
        let mut z = DeviceBuffer::<f32>::zeroed(&s, 256)?;
        for round in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                scale.launch(&s, cfg, (&x, &mut z, 1.5f32, 256u64))?;
                scale.launch(&s2, cfg, (&z, &mut o, 1.5f32, 256u64))?;
            }
            let ns = t.elapsed().as_nanos() as f64 / f64::from(n.max(1));
            println!("round {round}: {ns:.1} ns per gpu-sync handoff round trip ({n} round trips)");
        }
        return Ok(());
    }
    for round in 0..3 {
        let t = Instant::now();
        for _ in 0..n {
            k.launch(&s, cfg, (&x, &y, &mut o, 256u64))?;
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(n.max(1));
        let mut params = [std::ptr::null_mut::<c_void>(); 4];
        let t = Instant::now();
        for _ in 0..n {
            if let Some(f) = raw {
                // SAFETY: the null driver's launch reads nothing it is given.
                unsafe {
                    f(
                        k.as_raw(),
                        1,
                        1,
                        1,
                        256,
                        1,
                        1,
                        0,
                        s.as_raw(),
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
            }
        }
        let raw_ns = t.elapsed().as_nanos() as f64 / f64::from(n.max(1));
        println!(
            "round {round}: {ns:.1} ns per tracked launch, {raw_ns:.1} ns per raw call: {:.1} ns of gpu-sync bookkeeping ({n} launches)",
            ns - raw_ns
        );
    }
    Ok(())
}

//! The kernels of the p2p method, each with its raw-driver twin: the
//! workspace's `copy_u32x4` (the SM copy) and `bump_u32` (the handoff's
//! tiny kernel), loaded once per device. gpu-sync's typed launch and a raw
//! `cuLaunchKernel` (cuda-sys's per-call layer, as the overhead method makes
//! its raw launches) use the same `CUfunction` of the same loaded module,
//! the same grid and the same arguments, so the two differ only in what
//! submits them.
//!
//! Unsafe code: the kernels are declared here (their signatures are checked
//! against the driver) and kept private, so every launch is one of the few
//! below, each arguing its bounds; the raw launches hand the driver
//! gpu-sync's buffers by address, outside its tracking, and their callers
//! argue the ordering.
#![allow(unsafe_code)]

use gpu_sync::cuda_sys::result::launch;
use gpu_sync::cuda_sys::{Borrowed, BorrowedContext, BorrowedFunction, BorrowedStream, CUdeviceptr, Driver};
use gpu_sync::{AsDeviceSlice, Device, DeviceBuffer, Kernel, LaunchConfig, Result, Stream};
use kernels::{BumpSig, CopySig, DEFAULT_BLOCK, ModuleId, TILE_VECTORS};
use std::ffi::c_void;

/// The two kernels, loaded into one device.
pub(super) struct Twins {
    device: Device,
    copy: Kernel<CopySig>,
    bump: Kernel<BumpSig>,
}

/// One block of [`DEFAULT_BLOCK`] threads per tile of [`TILE_VECTORS`] ×
/// [`DEFAULT_BLOCK`] 16-byte vectors, as `kernels::Kernels` launches its
/// tiled kernels (the kernels stride over any rest).
fn tiles(vectors: u64) -> LaunchConfig {
    let tile = u64::from(TILE_VECTORS) * u64::from(DEFAULT_BLOCK);
    LaunchConfig::new(vectors.div_ceil(tile).clamp(1, i32::MAX as u64) as u32, DEFAULT_BLOCK)
}

fn dims(cfg: LaunchConfig) -> ([u32; 3], [u32; 3]) {
    ([cfg.grid.x, cfg.grid.y, cfg.grid.z], [cfg.block.x, cfg.block.y, cfg.block.z])
}

/// `stream`'s handle for the per-call layer, borrowed for as long as `stream`.
pub(super) fn borrow_stream<'s>(drv: &'static Driver, stream: &'s Stream) -> BorrowedStream<'s> {
    // SAFETY: gpu-sync makes every stream through the process-wide table
    // (`cuda_sys::installed()`, which is `drv`), and a `Stream` keeps its
    // `CUstream` alive until its last clone drops, so it outlives the borrow
    // of `stream` that bounds `'s`; streams may be used from any thread.
    unsafe { Borrowed::borrow_raw(drv, stream.as_raw()) }
}

/// `dev`'s primary context as a cuda-sys handle.
pub(super) fn context(drv: &'static Driver, dev: &Device) -> BorrowedContext<'static> {
    // SAFETY: gpu-sync retains every device's primary context for the life
    // of the process, through the process-wide table (`drv`), so the handle
    // stays valid.
    unsafe { Borrowed::borrow_raw(drv, dev.raw_context()) }
}

/// The process's driver table.
pub(super) fn driver() -> Result<&'static Driver> {
    gpu_sync::cuda_sys::installed()
        .ok_or_else(|| gpu_sync::Error::InvalidArgument("no CUDA driver in use".into()))
}

impl Twins {
    /// Loads the Stream and Elementwise modules into `device` and declares
    /// the two kernels.
    ///
    /// # Errors
    /// A driver error loading the modules; a signature the driver rejects.
    pub(super) fn load(device: &Device) -> Result<Twins> {
        let stream = gpu_sync::Module::load(device, ModuleId::Stream.fatbin())?;
        let elementwise = gpu_sync::Module::load(device, ModuleId::Elementwise.fatbin())?;
        // SAFETY: `copy_u32x4(const uint4* src, uint4* dst, u64 n4)` and
        // `bump_u32(unsigned* x, unsigned add, u64 n)` are stream.cu's and
        // elementwise.cu's kernels with exactly these parameter lists
        // (kernels/tests/signatures.rs, and the driver's check here):
        // (1, 2) `src` only read, `dst` only stored to, `x` read and written
        // in place, each as its view's element type (u32 words, four at a
        // time for the copy); (4) neither touches other memory or waits.
        // Point 3 (bounds, launch shape) is argued per launch by the methods
        // below, the only launch sites: the kernels stay private.
        let (copy, bump) =
            unsafe { (stream.kernel::<CopySig>("copy_u32x4")?, elementwise.kernel::<BumpSig>("bump_u32")?) };
        Ok(Twins { device: device.clone(), copy, bump })
    }

    /// The device the kernels are loaded into.
    pub(super) fn device(&self) -> &Device {
        &self.device
    }

    fn checked_copy<S: AsDeviceSlice<u32> + ?Sized, D: AsDeviceSlice<u32> + ?Sized>(
        src: &S,
        dst: &D,
    ) -> Result<u64> {
        let (n, m) = (src.device_len(), dst.device_len());
        if n != m || n % 4 != 0 || src.device_ptr() % 16 != 0 || dst.device_ptr() % 16 != 0 {
            return Err(gpu_sync::Error::InvalidArgument(format!(
                "copy_u32x4: {n} and {m} words at {:#x} and {:#x} (one length, a multiple of 4, \
                 16-byte aligned)",
                src.device_ptr(),
                dst.device_ptr()
            )));
        }
        Ok((n / 4) as u64)
    }

    /// gpu-sync's launch of `copy_u32x4` (`dst = src`) on `stream`, which
    /// must be on this device; the buffers may be on two devices.
    ///
    /// # Errors
    /// [`gpu_sync::Error::InvalidArgument`] for lengths or alignment the
    /// kernel cannot take; the launch's error.
    pub(super) fn copy(
        &self,
        stream: &Stream,
        src: &DeviceBuffer<u32>,
        dst: &mut DeviceBuffer<u32>,
    ) -> Result<()> {
        let n4 = Self::checked_copy(src, dst)?;
        // SAFETY (launch): uint4 `i` is copied for `i < n4` only: words
        // `4i..4i+4` of `src` and `dst`, which both have exactly `4 * n4`
        // words and start 16-byte aligned (checked above); a 1-D grid whose
        // tiles and grid-stride rest give each `i` one thread.
        self.copy.launch(stream, tiles(n4), (src, dst, n4))
    }

    /// The raw twin of [`Twins::copy`]: the same function, grid and
    /// arguments, by `cuLaunchKernel` on `stream` (a stream of this device).
    ///
    /// # Errors
    /// As [`Twins::copy`], from the driver.
    ///
    /// # Safety
    /// `src` and `dst` stay allocated until the launch completes, and no
    /// work unordered with it (by stream order or an event wait) touches
    /// `dst` or writes `src`.
    pub(super) unsafe fn raw_copy(
        &self,
        stream: BorrowedStream<'_>,
        src: &DeviceBuffer<u32>,
        dst: &DeviceBuffer<u32>,
    ) -> Result<()> {
        let n4 = Self::checked_copy(src, dst)?;
        let (grid, block) = dims(tiles(n4));
        let f = self.function(&self.copy)?;
        // SAFETY: (1) three 8-byte slots for `(const uint4*, uint4*, u64)`;
        // (2) bounds as in `copy` (checked above); liveness and ordering are
        // this function's obligations, passed on by its caller.
        unsafe { raw_launch(f, grid, block, stream, [src.as_raw(), dst.as_raw(), n4]) }
    }

    /// gpu-sync's launch of `bump_u32` (`x[i] += add`) on `stream` (of this
    /// device); `x` may be on another device.
    ///
    /// # Errors
    /// The launch's error.
    pub(super) fn bump(&self, stream: &Stream, x: &mut DeviceBuffer<u32>, add: u32) -> Result<()> {
        let n = x.len() as u64;
        // SAFETY (launch): `x[i] += add` for `i < n`, its length (a `Len`,
        // checked by gpu-sync too); the 1-D grid of 256-thread blocks (its
        // launch bounds) gives each element one thread, so the
        // read-modify-writes do not race.
        self.bump.launch(stream, tiles(n.div_ceil(4)), (x, add, n))
    }

    /// The raw twin of [`Twins::bump`] on `stream` (a stream of this
    /// device), `x` given by address and length.
    ///
    /// # Errors
    /// The driver's.
    ///
    /// # Safety
    /// `x` is the address of a live allocation of at least `n` `u32` words
    /// that outlives the launch, reachable from this device (its own, or a
    /// peer's with peer access on), and no work unordered with the launch
    /// touches it.
    pub(super) unsafe fn raw_bump(
        &self,
        stream: BorrowedStream<'_>,
        x: CUdeviceptr,
        n: u64,
        add: u32,
    ) -> Result<()> {
        let (grid, block) = dims(tiles(n.div_ceil(4)));
        let f = self.function(&self.bump)?;
        // SAFETY: (1) three 8-byte slots for `(unsigned*, unsigned, u64)`:
        // the `unsigned` is read from the low four bytes of its slot, which
        // hold it on the little-endian targets CUDA runs on; (2) `x[i]` for
        // `i < n`, one thread each (as in `bump`); liveness, reach and
        // ordering are this function's obligations, passed on by its caller.
        unsafe { raw_launch(f, grid, block, stream, [x, u64::from(add), n]) }
    }

    fn function<'k, S: gpu_sync::Signature>(&self, k: &'k Kernel<S>) -> Result<BorrowedFunction<'k>> {
        // SAFETY: the function comes from a module gpu-sync loaded through
        // the process-wide table, and a `Kernel` holds its module loaded, so
        // the `CUfunction` lives as long as the borrow of `k`; functions may
        // be used from any thread.
        Ok(unsafe { Borrowed::borrow_raw(driver()?, k.as_raw()) })
    }
}

/// One `cuLaunchKernel` with three 8-byte parameter slots built on the
/// stack, as a program without gpu-sync makes it.
///
/// # Safety
/// `f` takes three parameters whose values are the slots' (a 4-byte one in
/// the low bytes of its slot), and its accesses with them are sound
/// (`launch_kernel`'s point 2).
#[inline]
unsafe fn raw_launch(
    f: BorrowedFunction<'_>,
    grid: [u32; 3],
    block: [u32; 3],
    stream: BorrowedStream<'_>,
    slots: [u64; 3],
) -> Result<()> {
    let mut slots = slots;
    let mut params = slots.each_mut().map(|v| (v as *mut u64).cast::<c_void>());
    // SAFETY: (1) one pointer per parameter, each to an 8-byte slot alive
    // across the call (the driver copies the values during it); (2) the
    // caller's.
    unsafe { launch::launch_kernel(f, grid, block, 0, stream, &mut params) }?;
    Ok(())
}

//! Device and pinned host memory, copies and sets ([Memory Management][mem];
//! stream-ordered allocation from [Stream Ordered Memory Allocator][async]).
//!
//! Allocating is safe (it hands out an address and owns nothing); freeing,
//! copying and setting take raw addresses the driver will read or write, so
//! they are `unsafe`.
//!
//! [mem]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html
//! [async]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html

use super::Result;
use crate::handle::{AsBorrowed, kind, same_driver};
use crate::{CUdeviceptr, Driver};
use std::ffi::c_void;

/// Allocates `bytes` of device memory in the current context (`cuMemAlloc`).
/// Synchronous: not allowed on a thread capturing a graph.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// `CUDA_ERROR_OUT_OF_MEMORY`, …; `Unsupported` without the entry point.
pub fn alloc(drv: &Driver, bytes: usize) -> Result<CUdeviceptr> {
    let mut p: CUdeviceptr = 0;
    // SAFETY: writes one device pointer through a valid pointer.
    unsafe { call!(drv, cuMemAlloc(&mut p, bytes)) }?;
    Ok(p)
}

/// Frees device memory from [`alloc`] (`cuMemFree`); synchronizes with the
/// device first.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `ptr` came from [`alloc`] of this driver and is freed once;
/// 2. nothing uses the memory afterwards (no queued or later work, no host
///    code through a mapping).
pub unsafe fn free(drv: &Driver, ptr: CUdeviceptr) -> Result<()> {
    // SAFETY: the caller's obligations.
    unsafe { call!(drv, cuMemFree(ptr)) }
}

/// Allocates `bytes` ordered on the stream (`cuMemAllocAsync`, from the
/// device's current memory pool): usable by work queued on the stream after
/// this call, or elsewhere after waiting for it.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// `CUDA_ERROR_NOT_SUPPORTED` without memory pools,
/// `CUDA_ERROR_OUT_OF_MEMORY`, …; `Unsupported` before CUDA 11.2.
#[inline]
pub fn alloc_async(bytes: usize, stream: impl AsBorrowed<kind::StreamKind>) -> Result<CUdeviceptr> {
    let s = stream.as_borrowed();
    let mut p: CUdeviceptr = 0;
    // SAFETY: a live stream; writes one device pointer through a valid
    // pointer.
    unsafe { call!(s.driver(), cuMemAllocAsync(&mut p, bytes, s.as_raw())) }?;
    Ok(p)
}

/// Frees memory ordered on the stream (`cuMemFreeAsync`): the memory is
/// reused only after the work queued on the stream before the free.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// The driver's code; `Unsupported` before CUDA 11.2.
///
/// # Safety
/// 1. `ptr` is a live allocation of this driver, freed once;
/// 2. every use of it on other streams is ordered before this point of
///    `stream` (waited for), and nothing uses it afterwards.
#[inline]
pub unsafe fn free_async(ptr: CUdeviceptr, stream: impl AsBorrowed<kind::StreamKind>) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; `ptr` is the caller's obligation.
    unsafe { call!(s.driver(), cuMemFreeAsync(ptr, s.as_raw())) }
}

/// Free and total device memory in bytes of the current context's device
/// (`cuMemGetInfo`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_info(drv: &Driver) -> Result<(usize, usize)> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t through valid pointers.
    unsafe { call!(drv, cuMemGetInfo(&mut free, &mut total)) }?;
    Ok((free, total))
}

/// Allocates `bytes` of page-locked host memory (`cuMemHostAlloc`); `flags`
/// are the `CU_MEMHOSTALLOC_*` bits. The memory is uninitialized and owned
/// by the caller until [`free_host`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// `CUDA_ERROR_OUT_OF_MEMORY`, …; `Unsupported` without the entry point.
pub fn host_alloc(drv: &Driver, bytes: usize, flags: u32) -> Result<*mut c_void> {
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: writes one host pointer through a valid pointer.
    unsafe { call!(drv, cuMemHostAlloc(&mut p, bytes, flags)) }?;
    Ok(p)
}

/// Frees page-locked host memory from [`host_alloc`] (`cuMemFreeHost`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `ptr` came from [`host_alloc`] of this driver and is freed once;
/// 2. no queued copy reads or writes it any more, and the host does not
///    use it afterwards.
pub unsafe fn free_host(drv: &Driver, ptr: *mut c_void) -> Result<()> {
    // SAFETY: the caller's obligations.
    unsafe { call!(drv, cuMemFreeHost(ptr)) }
}

/// The device address of mapped pinned memory (`cuMemHostGetDevicePointer`);
/// `flags` must be 0. The driver only looks `ptr` up in its own tables (an
/// unknown pointer is `CUDA_ERROR_INVALID_VALUE`), it does not dereference
/// it, so this is safe.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
#[allow(clippy::not_unsafe_ptr_arg_deref, reason = "the driver looks the address up, never dereferences it")]
pub fn host_get_device_pointer(drv: &Driver, ptr: *mut c_void, flags: u32) -> Result<CUdeviceptr> {
    let mut d: CUdeviceptr = 0;
    // SAFETY: writes one device pointer through a valid pointer; `ptr` is
    // only looked up.
    unsafe { call!(drv, cuMemHostGetDevicePointer(&mut d, ptr, flags)) }?;
    Ok(d)
}

/// Queues a copy of `bytes` from host memory to device memory
/// (`cuMemcpyHtoDAsync`). Asynchronous only from page-locked memory; from
/// pageable memory the driver copies before returning.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `src` is valid for reads of `bytes` and not written until the copy
///    completed; `dst..dst + bytes` is device memory of this driver;
/// 2. no other work accesses `dst..dst + bytes` unordered with the copy.
pub unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; the ranges are the caller's obligations.
    unsafe { call!(s.driver(), cuMemcpyHtoDAsync(dst, src, bytes, s.as_raw())) }
}

/// Queues a copy of `bytes` from device memory to host memory
/// (`cuMemcpyDtoHAsync`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `dst` is valid for writes of `bytes` and neither read nor written by
///    the host until the copy completed; `src..src + bytes` is device
///    memory of this driver;
/// 2. no other work writes `src..src + bytes` unordered with the copy.
pub unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; the ranges are the caller's obligations.
    unsafe { call!(s.driver(), cuMemcpyDtoHAsync(dst, src, bytes, s.as_raw())) }
}

/// Queues a device-to-device copy of `bytes` (`cuMemcpyDtoDAsync`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. both ranges are device memory of this driver, alive until the copy
///    completed;
/// 2. no other work accesses them unordered with the copy (writes to
///    `src`, any access to `dst`).
pub unsafe fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; the ranges are the caller's obligations.
    unsafe { call!(s.driver(), cuMemcpyDtoDAsync(dst, src, bytes, s.as_raw())) }
}

/// Queues a copy of `bytes` between the memory of two contexts
/// (`cuMemcpyPeerAsync`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Refused` for handles of two tables; `Unsupported`
/// without the entry point.
///
/// # Safety
/// As [`memcpy_dtod_async`], with `dst` memory of `dst_ctx` and `src` memory
/// of `src_ctx`.
pub unsafe fn memcpy_peer_async(
    dst: CUdeviceptr,
    dst_ctx: impl AsBorrowed<kind::ContextKind>,
    src: CUdeviceptr,
    src_ctx: impl AsBorrowed<kind::ContextKind>,
    bytes: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let (dc, sc, s) = (dst_ctx.as_borrowed(), src_ctx.as_borrowed(), stream.as_borrowed());
    same_driver("cuMemcpyPeerAsync", dc.driver(), s.driver())?;
    same_driver("cuMemcpyPeerAsync", sc.driver(), s.driver())?;
    // SAFETY: live contexts and stream of one table; the ranges are the
    // caller's obligations.
    unsafe { call!(s.driver(), cuMemcpyPeerAsync(dst, dc.as_raw(), src, sc.as_raw(), bytes, s.as_raw())) }
}

/// Queues setting `count` bytes at `dst` to `value` (`cuMemsetD8Async`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `dst..dst + count` is device memory of this driver, alive until the
///    set completed, and accessed by no other work unordered with it.
pub unsafe fn memset_d8_async(
    dst: CUdeviceptr,
    value: u8,
    count: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; the range is the caller's obligation.
    unsafe { call!(s.driver(), cuMemsetD8Async(dst, value, count, s.as_raw())) }
}

/// Queues setting `count` 32-bit words at `dst` to `value`
/// (`cuMemsetD32Async`); `dst` must be 4-byte aligned.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `dst..dst + 4 * count` is device memory of this driver, alive until
///    the set completed, and accessed by no other work unordered with it.
pub unsafe fn memset_d32_async(
    dst: CUdeviceptr,
    value: u32,
    count: usize,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; the range is the caller's obligation.
    unsafe { call!(s.driver(), cuMemsetD32Async(dst, value, count, s.as_raw())) }
}

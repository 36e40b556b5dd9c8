//! Allocation: device memory (synchronous and stream-ordered), pinned host
//! memory, the default memory pool's attributes.
#![allow(non_snake_case)]

use super::device::pools_supported;
use super::{api, id, need, put};
use crate::graph::{refuse_in_capture, refuse_unsafe_call};
use crate::host::host_access;
use crate::memory::{DEVICE_ALIGN, Kind, PINNED_ALIGN};
use crate::ops::Work;
use crate::oracle::{Record, freed_access};
use crate::pool::PoolStats;
use crate::report::Actor;
use crate::result::{CUresult, INVALID_VALUE, OUT_OF_MEMORY, Res};
use crate::scheduler::{self, free_now};
use crate::state::{Caller, State};
use crate::stream::{self, Waits};
use cuda_sys::{CU_MEMHOSTALLOC_DEVICEMAP, CUdeviceptr, CUmemPool_attribute as P, CUmemoryPool, CUstream};
use std::ffi::{c_uint, c_void};

/// All `cuMemHostAlloc` flags.
const HOST_ALLOC_FLAGS: u32 =
    cuda_sys::CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | cuda_sys::CU_MEMHOSTALLOC_WRITECOMBINED;

/// Allocates `bytes` of device memory on `device` within its budget.
fn alloc_device(st: &mut State, session: u64, device: i32, bytes: usize, pooled: bool) -> Res<u64> {
    if bytes == 0 {
        return Err(INVALID_VALUE);
    }
    let bytes = bytes as u64;
    let used = st.mem.used.get(&device).copied().unwrap_or(0);
    if used.saturating_add(bytes) > st.config.memory_per_device {
        return Err(OUT_OF_MEMORY);
    }
    let base = st
        .mem
        .allocate(bytes, DEVICE_ALIGN, Kind::Device { device, pooled }, session)
        .ok_or(OUT_OF_MEMORY)?;
    st.session_mut(session).live.device_allocations += 1;
    Ok(base)
}

/// The device allocation whose base is exactly `dptr`, or
/// `CUDA_ERROR_INVALID_VALUE`.
fn device_block(st: &State, dptr: u64, pinned: bool) -> Res<u64> {
    match st.mem.block(dptr) {
        Some(b) if b.is_pinned() == pinned => Ok(dptr),
        _ => Err(INVALID_VALUE),
    }
}

/// Reports a second free of `base` (by `label`) and fails with
/// `CUDA_ERROR_INVALID_VALUE`; `Ok` if it was not freed before.
fn refuse_double_free(st: &mut State, session: u64, base: u64, api: &str, label: Actor) -> Res {
    let Some(b) = st.mem.block(base) else { return Err(INVALID_VALUE) };
    let Some(first) = b.freed.clone().or_else(|| b.issued_free.clone()) else { return Ok(()) };
    let end = b.end(base);
    let s = st.session_mut(session);
    let mut stamp = s.host_stamp();
    stamp.label = label;
    let second = Record { stamp, start: base, end, write: true, free: true, op: api.into() };
    s.report(&first.stamp, &second.stamp, freed_access(&first, &second, base));
    Err(INVALID_VALUE)
}

/// Counts a free issued by the program against the creating session.
fn count_free(st: &mut State, base: u64) {
    let Some(b) = st.mem.block(base) else { return };
    let (owner, pinned) = (b.session, b.is_pinned());
    let live = &mut st.session_mut(owner).live;
    if pinned {
        live.pinned_allocations = live.pinned_allocations.saturating_sub(1);
    } else {
        live.device_allocations = live.device_allocations.saturating_sub(1);
    }
}

pub(super) unsafe extern "C" fn cuMemAlloc(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    api("cuMemAlloc", |st, caller| {
        need(dptr)?;
        let dev = st.current_device(caller)?;
        refuse_unsafe_call(st, caller)?;
        let base = alloc_device(st, caller.session, dev, bytesize, false)?;
        // SAFETY: output slot from the caller.
        unsafe { put(dptr, base) }
    })
}

/// `cuMemFree`: completes the session's work on the allocation's device
/// first (CUDA's implicit synchronization), then frees as a host write.
pub(super) unsafe extern "C" fn cuMemFree(dptr: CUdeviceptr) -> CUresult {
    api("cuMemFree", |st, caller| {
        let base = device_block(st, dptr, false)?;
        refuse_unsafe_call(st, caller)?;
        refuse_double_free(st, caller.session, base, "cuMemFree", Actor::Host)?;
        let device = match st.mem.block(base).map(|b| b.kind) {
            Some(Kind::Device { device, .. }) => device,
            _ => return Err(INVALID_VALUE),
        };
        scheduler::sync_device(st, caller.session, device)?;
        let stamp = st.session_mut(caller.session).host_stamp();
        count_free(st, base);
        free_now(st, caller.session, &stamp, base, "cuMemFree");
        if let Some(b) = st.mem.block_mut(base) {
            b.issued_free = b.freed.clone();
        }
        scheduler::sync_result(st, caller.session)
    })
}

/// `cuMemAllocAsync`: allocated now; for the oracle the allocation is a
/// write by the stream at this point of it.
pub(super) unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemAllocAsync", |st, caller| {
        need(dptr)?;
        let sid = stream::resolve(st, caller, hStream)?;
        let dev = st.streams.get(&sid).map_or(0, |s| s.device);
        pools_supported(st, caller.session, dev)?;
        refuse_in_capture(st, sid)?;
        let base = alloc_device(st, caller.session, dev, bytesize, true)?;
        st.session_mut(caller.session).pools.entry(dev).or_default().alloc(bytesize as u64);
        stream::enqueue(st, sid, Work::AllocAsync { base }, Waits::default())?;
        // SAFETY: output slot from the caller.
        unsafe { put(dptr, base) }
    })
}

/// `cuMemFreeAsync`: a stream-ordered write of the whole allocation, then
/// the free, when the stream gets there.
pub(super) unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) -> CUresult {
    api("cuMemFreeAsync", |st, caller| {
        let sid = stream::resolve(st, caller, hStream)?;
        let dev = st.streams.get(&sid).map_or(0, |s| s.device);
        pools_supported(st, caller.session, dev)?;
        let base = device_block(st, dptr, false)?;
        let label = st.streams.get(&sid).map_or(Actor::Host, |s| s.label());
        refuse_double_free(st, caller.session, base, "cuMemFreeAsync", label)?;
        refuse_in_capture(st, sid)?;
        let op = stream::enqueue(st, sid, Work::FreeAsync { base }, Waits::default())?;
        let issued = st.ops.get(&op).and_then(|o| o.declared.first().map(|d| d.record(&o.stamp)));
        count_free(st, base);
        if let Some(b) = st.mem.block_mut(base) {
            b.issued_free = issued;
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuMemGetInfo(free: *mut usize, total: *mut usize) -> CUresult {
    api("cuMemGetInfo", |st, caller| {
        need(free)?;
        need(total)?;
        let dev = st.current_device(caller)?;
        let t = st.config.memory_per_device;
        let used = st.mem.used.get(&dev).copied().unwrap_or(0);
        let clamp = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        // SAFETY: output slots from the caller.
        unsafe {
            put(free, clamp(t.saturating_sub(used)))?;
            put(total, clamp(t))
        }
    })
}

/// `cuMemHostAlloc`: poison-filled, page-aligned host memory owned by the
/// simulator.
pub(super) unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    Flags: c_uint,
) -> CUresult {
    api("cuMemHostAlloc", |st, caller| {
        need(pp)?;
        if bytesize == 0 || Flags & !HOST_ALLOC_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        st.current_device(caller)?;
        let kind = Kind::Pinned { flags: Flags };
        let base =
            st.mem.allocate(bytesize as u64, PINNED_ALIGN, kind, caller.session).ok_or(OUT_OF_MEMORY)?;
        st.session_mut(caller.session).live.pinned_allocations += 1;
        let p = st.mem.host_ptr(base).ok_or(OUT_OF_MEMORY)?;
        // SAFETY: output slot from the caller.
        unsafe { put(pp, p.cast::<c_void>()) }
    })
}

/// Frees a pinned block: checked as a host write against unfinished and
/// unsynchronized device work, then (CUDA's implicit synchronization) the
/// session's work completes and the block is quarantined.
fn free_host(st: &mut State, caller: &Caller, addr: u64) -> Res {
    let base = device_block(st, addr, true)?;
    refuse_double_free(st, caller.session, base, "cuMemFreeHost", Actor::Host)?;
    let end = st.mem.block(base).map_or(base, |b| b.end(base));
    let free = host_access(st, caller.session, base, base..end, true, true, "cuMemFreeHost");
    count_free(st, base);
    if let Some(b) = st.mem.block_mut(base) {
        b.issued_free = Some(free.clone());
    }
    for dev in 0..st.device_count() {
        scheduler::sync_device(st, caller.session, dev)?;
    }
    st.mem.retire(base, free);
    scheduler::sync_result(st, caller.session)
}

pub(super) unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    api("cuMemFreeHost", |st, caller| {
        need(p)?;
        free_host(st, caller, id(p))
    })
}

/// `cuMemHostGetDevicePointer`: for `CU_MEMHOSTALLOC_DEVICEMAP` blocks the
/// device address is the host address.
pub(super) unsafe extern "C" fn cuMemHostGetDevicePointer(
    pdptr: *mut CUdeviceptr,
    p: *mut c_void,
    Flags: c_uint,
) -> CUresult {
    api("cuMemHostGetDevicePointer", |st, caller| {
        need(pdptr)?;
        need(p)?;
        if Flags != 0 {
            return Err(INVALID_VALUE);
        }
        st.current_device(caller)?;
        let addr = id(p);
        let base = st.mem.containing(addr, 1).ok_or(INVALID_VALUE)?;
        match st.mem.block(base) {
            Some(b) if b.is_pinned() && b.device_visible() && b.freed.is_none() => {}
            _ => return Err(INVALID_VALUE),
        }
        // SAFETY: output slot from the caller.
        unsafe { put(pdptr, addr) }
    })
}

/// The calling session's statistics of `pool`.
fn pool<'a>(st: &'a mut State, caller: &Caller, pool: CUmemoryPool) -> Res<&'a mut PoolStats> {
    let dev = st.pool_device(id(pool)).ok_or(crate::result::INVALID_HANDLE)?;
    pools_supported(st, caller.session, dev)?;
    Ok(st.session_mut(caller.session).pools.entry(dev).or_default())
}

pub(super) unsafe extern "C" fn cuMemPoolGetAttribute(
    hPool: CUmemoryPool,
    attr: P,
    value: *mut c_void,
) -> CUresult {
    api("cuMemPoolGetAttribute", |st, caller| {
        need(value)?;
        let p = *pool(st, caller, hPool)?;
        let v64 = match attr {
            P::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES
            | P::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC
            | P::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
                let i = (attr.0 - 1) as usize;
                let v = p.reuse.get(i).copied().unwrap_or(1);
                // SAFETY: CUDA documents these attributes as `int`.
                return unsafe { put(value.cast::<i32>(), v) };
            }
            P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD => p.release_threshold,
            P::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT => p.reserved,
            P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH => p.reserved_high,
            P::CU_MEMPOOL_ATTR_USED_MEM_CURRENT => p.used,
            P::CU_MEMPOOL_ATTR_USED_MEM_HIGH => p.used_high,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: CUDA documents these attributes as `cuuint64_t`.
        unsafe { put(value.cast::<u64>(), v64) }
    })
}

/// `cuMemPoolSetAttribute`: the release threshold, the reuse policies, and
/// resetting a high watermark (value 0) are settable.
pub(super) unsafe extern "C" fn cuMemPoolSetAttribute(
    hPool: CUmemoryPool,
    attr: P,
    value: *mut c_void,
) -> CUresult {
    api("cuMemPoolSetAttribute", |st, caller| {
        need(value)?;
        let p = pool(st, caller, hPool)?;
        match attr {
            P::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES
            | P::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC
            | P::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
                // SAFETY: CUDA documents these attributes as `int`; `value`
                // is non-null.
                let v = unsafe { value.cast::<i32>().read() };
                if let Some(slot) = p.reuse.get_mut((attr.0 - 1) as usize) {
                    *slot = i32::from(v != 0);
                }
            }
            P::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD => {
                // SAFETY: a `cuuint64_t`; `value` is non-null.
                p.release_threshold = unsafe { value.cast::<u64>().read() };
            }
            P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH | P::CU_MEMPOOL_ATTR_USED_MEM_HIGH => {
                // SAFETY: a `cuuint64_t`; `value` is non-null.
                if unsafe { value.cast::<u64>().read() } != 0 {
                    return Err(INVALID_VALUE);
                }
                if attr == P::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH {
                    p.reserved_high = p.reserved;
                } else {
                    p.used_high = p.used;
                }
            }
            _ => return Err(INVALID_VALUE),
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuMemPoolTrimTo(hPool: CUmemoryPool, minBytesToKeep: usize) -> CUresult {
    api("cuMemPoolTrimTo", |st, caller| {
        pool(st, caller, hPool)?.trim_to(minBytesToKeep as u64);
        Ok(())
    })
}

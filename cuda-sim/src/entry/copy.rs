//! Copies and memsets, all stream-ordered.
//!
//! The host side of a copy is pinned when it lies inside a `cuMemHostAlloc`
//! block: the copy then touches host memory when it executes. Any other
//! host pointer is pageable: an H2D copy stages the source at call time, a
//! D2H copy blocks until it has executed (as the real driver does).
#![allow(non_snake_case)]

use super::{api, id};
use crate::graph::{add_node, capture_of, refuse_in_capture};
use crate::ops::{Loc, SendPtr, Work};
use crate::result::{CUresult, INVALID_CONTEXT, INVALID_VALUE, Res};
use crate::scheduler::{self, complete};
use crate::state::{Caller, State};
use crate::stream::{self, Waits};
use cuda_sys::{CUcontext, CUdeviceptr, CUstream};
use std::ffi::{c_uchar, c_uint, c_void};
use std::sync::Arc;

/// Checks that `[addr, addr + len)` is inside one device-visible
/// allocation (freed ones included, quarantined or remembered as a tomb:
/// the use is reported when it runs).
fn device_range(st: &State, addr: u64, len: u64) -> Res<u64> {
    match st.mem.place(addr, len) {
        Some(p) if p.kind.device_visible() => Ok(p.base),
        _ => Err(INVALID_VALUE),
    }
}

/// Whether host range `[addr, addr + len)` is pinned (`Some(true)`),
/// pageable (`Some(false)`), or invalid (straddles a pinned block, or is
/// device memory).
fn host_kind(st: &State, addr: u64, len: u64) -> Res<bool> {
    if addr == 0 {
        return Err(INVALID_VALUE);
    }
    if let Some(base) = st.mem.containing(addr, len) {
        return match st.mem.block(base) {
            Some(b) if b.is_pinned() => Ok(true),
            _ => Err(INVALID_VALUE),
        };
    }
    let last = addr.checked_add(len - 1).ok_or(INVALID_VALUE)?;
    if st.mem.touches(addr) || st.mem.touches(last) {
        return Err(INVALID_VALUE);
    }
    Ok(false)
}

/// Queues `work` on stream `sid`, or adds it to the stream's capture.
fn submit(st: &mut State, sid: u64, work: Work) -> Res<Option<u64>> {
    if capture_of(st, sid).is_some() {
        add_node(st, sid, work)?;
        return Ok(None);
    }
    stream::enqueue(st, sid, work, Waits::default()).map(Some)
}

fn htod(st: &mut State, caller: &Caller, dst: u64, src: *const c_void, n: usize, h: CUstream) -> Res {
    let sid = stream::resolve(st, caller, h)?;
    if n == 0 {
        return Ok(());
    }
    let len = n as u64;
    device_range(st, dst, len)?;
    let api = "cuMemcpyHtoDAsync";
    let src_loc = if host_kind(st, id(src.cast_mut()), len)? {
        Loc::Pinned(id(src.cast_mut()), SendPtr(src.cast_mut()))
    } else {
        refuse_in_capture(st, sid)?;
        // SAFETY: `src` is a non-null pageable host pointer the caller
        // guarantees valid for `n` bytes of reads for this call (CUDA's
        // contract); it is not inside any simulator block (checked above).
        let data: Arc<[u8]> = Arc::from(unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) });
        Loc::Staged(data)
    };
    submit(st, sid, Work::Copy { api, dst: Loc::Device(dst), src: src_loc, len }).map(|_| ())
}

pub(super) unsafe extern "C" fn cuMemcpyHtoDAsync(
    dstDevice: CUdeviceptr,
    srcHost: *const c_void,
    ByteCount: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemcpyHtoDAsync", |st, caller| htod(st, caller, dstDevice, srcHost, ByteCount, hStream))
}

fn dtoh(st: &mut State, caller: &Caller, dst: *mut c_void, src: u64, n: usize, h: CUstream) -> Res {
    let sid = stream::resolve(st, caller, h)?;
    if n == 0 {
        return Ok(());
    }
    let len = n as u64;
    device_range(st, src, len)?;
    let api = "cuMemcpyDtoHAsync";
    if host_kind(st, id(dst), len)? {
        let work = Work::Copy { api, dst: Loc::Pinned(id(dst), SendPtr(dst)), src: Loc::Device(src), len };
        return submit(st, sid, work).map(|_| ());
    }
    refuse_in_capture(st, sid)?;
    let work = Work::Copy { api, dst: Loc::Pageable(SendPtr(dst)), src: Loc::Device(src), len };
    let op = stream::enqueue(st, sid, work, Waits::default())?;
    let (clock, end) = st.ops.get(&op).map(|o| ((*o.stamp.clock).clone(), o.end)).unwrap_or_default();
    if let Err(e) = scheduler::run_until(st, caller.session, |st| complete(st, op)) {
        // Never leave a pointer to the caller's buffer behind.
        if let Some(o) = st.ops.get_mut(&op) {
            o.work = Work::Marker;
        }
        return Err(e);
    }
    crate::retire::host_sync(st, caller.session, &clock, end);
    scheduler::sync_result(st, caller.session)
}

pub(super) unsafe extern "C" fn cuMemcpyDtoHAsync(
    dstHost: *mut c_void,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemcpyDtoHAsync", |st, caller| dtoh(st, caller, dstHost, srcDevice, ByteCount, hStream))
}

fn dtod(
    st: &mut State,
    caller: &Caller,
    api: &'static str,
    dst: u64,
    src: u64,
    n: usize,
    h: CUstream,
) -> Res {
    let sid = stream::resolve(st, caller, h)?;
    if n == 0 {
        return Ok(());
    }
    let len = n as u64;
    device_range(st, src, len)?;
    device_range(st, dst, len)?;
    submit(st, sid, Work::Copy { api, dst: Loc::Device(dst), src: Loc::Device(src), len }).map(|_| ())
}

pub(super) unsafe extern "C" fn cuMemcpyDtoDAsync(
    dstDevice: CUdeviceptr,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemcpyDtoDAsync", |st, caller| {
        dtod(st, caller, "cuMemcpyDtoDAsync", dstDevice, srcDevice, ByteCount, hStream)
    })
}

/// Checks that `addr` is memory of the device of context `ctx`.
fn on_device_of(st: &State, ctx: CUcontext, addr: u64) -> Res {
    let dev = st.ctx_device(id(ctx)).ok_or(INVALID_CONTEXT)?;
    let base = st.mem.containing(addr, 1).ok_or(INVALID_VALUE)?;
    match st.mem.block(base).map(|b| b.kind) {
        Some(crate::memory::Kind::Device { device, .. }) if device == dev => Ok(()),
        Some(crate::memory::Kind::Pinned { .. }) => Ok(()),
        _ => Err(INVALID_VALUE),
    }
}

pub(super) unsafe extern "C" fn cuMemcpyPeerAsync(
    dstDevice: CUdeviceptr,
    dstContext: CUcontext,
    srcDevice: CUdeviceptr,
    srcContext: CUcontext,
    ByteCount: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemcpyPeerAsync", |st, caller| {
        on_device_of(st, dstContext, dstDevice)?;
        on_device_of(st, srcContext, srcDevice)?;
        dtod(st, caller, "cuMemcpyPeerAsync", dstDevice, srcDevice, ByteCount, hStream)
    })
}

/// Queues a memset of `n` elements; `fill` is (element size 1 or 4, value).
fn memset(
    st: &mut State,
    caller: &Caller,
    api: &'static str,
    dst: u64,
    fill: (u8, u32),
    n: usize,
    h: CUstream,
) -> Res {
    let (elem, value) = fill;
    let sid = stream::resolve(st, caller, h)?;
    if elem == 4 && !dst.is_multiple_of(4) {
        return Err(INVALID_VALUE);
    }
    if n == 0 {
        return Ok(());
    }
    let count = n as u64;
    let len = count.checked_mul(u64::from(elem)).ok_or(INVALID_VALUE)?;
    device_range(st, dst, len)?;
    submit(st, sid, Work::Memset { api, dst, count, elem, value }).map(|_| ())
}

pub(super) unsafe extern "C" fn cuMemsetD8Async(
    dstDevice: CUdeviceptr,
    uc: c_uchar,
    N: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemsetD8Async", |st, caller| {
        memset(st, caller, "cuMemsetD8Async", dstDevice, (1, u32::from(uc)), N, hStream)
    })
}

pub(super) unsafe extern "C" fn cuMemsetD32Async(
    dstDevice: CUdeviceptr,
    ui: c_uint,
    N: usize,
    hStream: CUstream,
) -> CUresult {
    api("cuMemsetD32Async", |st, caller| {
        memset(st, caller, "cuMemsetD32Async", dstDevice, (4, ui), N, hStream)
    })
}

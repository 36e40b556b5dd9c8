//! Primary contexts, the current context of a thread, context-wide
//! synchronization and stream priorities (peer access: `peer.rs`).
#![allow(non_snake_case)]

use super::{api, handle, id, need, put};
use crate::device::{GREATEST_PRIORITY, LEAST_PRIORITY};
use crate::graph;
use crate::result::{CUresult, INVALID_CONTEXT, INVALID_VALUE};
use crate::scheduler;
use crate::state;
use cuda_sys::{CUcontext, CUdevice};
use std::ffi::c_int;

/// `cuDevicePrimaryCtxRetain`: the device's one context; references are
/// counted per session.
pub(super) unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    api("cuDevicePrimaryCtxRetain", |st, caller| {
        need(pctx)?;
        st.device(dev)?;
        let ctx = st.ctx_of(dev);
        *st.session_mut(caller.session).primary_refs.entry(dev).or_insert(0) += 1;
        // SAFETY: output slot from the caller.
        unsafe { put(pctx, handle(ctx)) }
    })
}

/// `cuDevicePrimaryCtxRelease`: more releases than retains (in this
/// session) is `CUDA_ERROR_INVALID_CONTEXT`. The context itself lives on
/// (other sessions share it).
pub(super) unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult {
    api("cuDevicePrimaryCtxRelease", |st, caller| {
        st.device(dev)?;
        let refs = st.session_mut(caller.session).primary_refs.entry(dev).or_insert(0);
        if *refs == 0 {
            return Err(INVALID_CONTEXT);
        }
        *refs -= 1;
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    api("cuCtxSetCurrent", |st, _| {
        let c = id(ctx);
        if c != 0 && st.ctx_device(c).is_none() {
            return Err(INVALID_CONTEXT);
        }
        state::set_current_ctx(c);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    api("cuCtxGetCurrent", |_, caller| {
        let c = caller.ctx.unwrap_or(0);
        // SAFETY: output slot from the caller.
        unsafe { put(pctx, handle(c)) }
    })
}

pub(super) unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    api("cuCtxGetDevice", |st, caller| {
        need(device)?;
        let d = st.current_device(caller)?;
        // SAFETY: output slot from the caller.
        unsafe { put(device, d) }
    })
}

/// `cuCtxSynchronize`: runs every queued operation on the current device
/// (every session's, as a context synchronization does) and reports the
/// calling session's asynchronous errors.
pub(super) unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    api("cuCtxSynchronize", |st, caller| {
        let dev = st.current_device(caller)?;
        graph::refuse_device_sync(st, caller.session, dev)?;
        let t0 = st.session_mut(caller.session).host_time();
        scheduler::sync_device(st, caller.session, dev)?;
        let t1 = st.session_mut(caller.session).host_time();
        crate::cupti::on_sync(st, crate::cupti::SyncOf::Context, t0, t1);
        scheduler::sync_result(st, caller.session)
    })
}

/// `cuCtxGetStreamPriorityRange`: least 0, greatest -5. Either pointer may
/// be null (not written), not both.
pub(super) unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    leastPriority: *mut c_int,
    greatestPriority: *mut c_int,
) -> CUresult {
    api("cuCtxGetStreamPriorityRange", |st, caller| {
        st.current_device(caller)?;
        if leastPriority.is_null() && greatestPriority.is_null() {
            return Err(INVALID_VALUE);
        }
        if !leastPriority.is_null() {
            // SAFETY: non-null output slot from the caller.
            unsafe { put(leastPriority, LEAST_PRIORITY)? };
        }
        if !greatestPriority.is_null() {
            // SAFETY: non-null output slot from the caller.
            unsafe { put(greatestPriority, GREATEST_PRIORITY)? };
        }
        Ok(())
    })
}

//! Streams: creation, destruction, queries, synchronization, event waits,
//! host functions.
#![allow(non_snake_case)]

use super::{api, handle, need, put};
use crate::event;
use crate::graph::refuse_in_capture;
use crate::ops::{SendPtr, Work};
use crate::result::{CUresult, ILLEGAL_STATE, INVALID_HANDLE, INVALID_VALUE, NOT_READY, Res};
use crate::scheduler::{self, complete};
use crate::state::{Caller, State};
use crate::stream::{self, NON_BLOCKING, StreamKind, Waits};
use cuda_sys::{CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CUevent, CUhostFn, CUstream};
use std::ffi::{c_int, c_uint, c_void};

pub(super) unsafe extern "C" fn cuStreamCreateWithPriority(
    phStream: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    api("cuStreamCreateWithPriority", |st, caller| {
        need(phStream)?;
        if flags & !NON_BLOCKING != 0 {
            return Err(INVALID_VALUE);
        }
        let dev = st.current_device(caller)?;
        let id = stream::create(st, caller.session, dev, StreamKind::User, flags, priority);
        // SAFETY: output slot from the caller.
        unsafe { put(phStream, handle(id)) }
    })
}

/// `cuStreamDestroy`: the handle dies now; queued work still completes.
pub(super) unsafe extern "C" fn cuStreamDestroy(hStream: CUstream) -> CUresult {
    api("cuStreamDestroy", |st, _| {
        if hStream.is_null() || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD {
            return Err(INVALID_HANDLE);
        }
        let sid = super::id(hStream);
        let s = st.streams.get_mut(&sid).filter(|s| !s.destroyed && s.kind == StreamKind::User);
        let s = s.ok_or(INVALID_HANDLE)?;
        if s.capture.is_some() {
            return Err(ILLEGAL_STATE);
        }
        s.destroyed = true;
        let (session, idle) = (s.session, s.idle());
        let sess = st.session_mut(session);
        sess.live.streams = sess.live.streams.saturating_sub(1);
        if idle {
            stream::remove(st, sid);
        }
        Ok(())
    })
}

/// The stream's clock and end time now, for a host sync with all of it.
fn position(st: &State, sid: u64) -> Res<(crate::clock::VClock, u64, Option<u64>)> {
    let s = st.streams.get(&sid).ok_or(INVALID_HANDLE)?;
    Ok((s.clock.clone(), s.tail_end, s.last_op))
}

fn query(st: &mut State, caller: &Caller, h: CUstream) -> Res {
    let sid = stream::resolve(st, caller, h)?;
    refuse_in_capture(st, sid)?;
    let (clock, time, last) = position(st, sid)?;
    let session = caller.session;
    let pending = st.ops.values().filter(|o| o.session == session).count() as u64;
    let n = st.session_mut(session).rng.below(pending + 1);
    scheduler::run_some(st, session, n);
    if !last.is_none_or(|op| complete(st, op)) {
        return Err(NOT_READY);
    }
    crate::retire::host_sync(st, session, &clock, time);
    scheduler::sync_result(st, session)
}

/// `cuStreamQuery`: runs a seeded-random amount of ready work, then
/// answers `CUDA_SUCCESS` if all the stream's work is done, else
/// `CUDA_ERROR_NOT_READY`.
pub(super) unsafe extern "C" fn cuStreamQuery(hStream: CUstream) -> CUresult {
    api("cuStreamQuery", |st, caller| query(st, caller, hStream))
}

fn synchronize(st: &mut State, caller: &Caller, h: CUstream) -> Res {
    let sid = stream::resolve(st, caller, h)?;
    refuse_in_capture(st, sid)?;
    let (clock, time, last) = position(st, sid)?;
    if let Some(op) = last {
        scheduler::run_until(st, caller.session, |st| complete(st, op))?;
    }
    crate::retire::host_sync(st, caller.session, &clock, time);
    scheduler::sync_result(st, caller.session)
}

pub(super) unsafe extern "C" fn cuStreamSynchronize(hStream: CUstream) -> CUresult {
    api("cuStreamSynchronize", |st, caller| {
        let t0 = st.session_mut(caller.session).host_time();
        let r = synchronize(st, caller, hStream);
        let t1 = st.session_mut(caller.session).host_time();
        if r.is_ok() {
            crate::cupti::on_sync(st, crate::cupti::SyncOf::Stream(hStream.addr() as u64), t0, t1);
        }
        r
    })
}

pub(super) unsafe extern "C" fn cuStreamWaitEvent(
    hStream: CUstream,
    hEvent: CUevent,
    Flags: c_uint,
) -> CUresult {
    api("cuStreamWaitEvent", |st, caller| event::wait(st, caller, hStream, super::id(hEvent), Flags))
}

pub(super) unsafe extern "C" fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int) -> CUresult {
    api("cuStreamGetPriority", |st, caller| {
        need(priority)?;
        let sid = stream::resolve(st, caller, hStream)?;
        let p = st.streams.get(&sid).map_or(0, |s| s.priority);
        // SAFETY: output slot from the caller.
        unsafe { put(priority, p) }
    })
}

pub(super) unsafe extern "C" fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint) -> CUresult {
    api("cuStreamGetFlags", |st, caller| {
        need(flags)?;
        let sid = stream::resolve(st, caller, hStream)?;
        let f = st.streams.get(&sid).map_or(0, |s| s.flags);
        // SAFETY: output slot from the caller.
        unsafe { put(flags, f) }
    })
}

/// `cuLaunchHostFunc`: queued; runs on whichever thread drives the
/// scheduler. Not capturable in the simulator.
pub(super) unsafe extern "C" fn cuLaunchHostFunc(
    hStream: CUstream,
    fn_: CUhostFn,
    userData: *mut c_void,
) -> CUresult {
    api("cuLaunchHostFunc", |st, caller| {
        let f = fn_.ok_or(INVALID_VALUE)?;
        let sid = stream::resolve(st, caller, hStream)?;
        refuse_in_capture(st, sid)?;
        let work = Work::HostFn { f, data: SendPtr(userData) };
        stream::enqueue(st, sid, work, Waits::default()).map(|_| ())
    })
}

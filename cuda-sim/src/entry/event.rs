//! Events.
#![allow(non_snake_case)]

use super::{api, handle, id, need, put};
use crate::event::{self, DISABLE_TIMING, Event, VALID_FLAGS};
use crate::result::{CUresult, INVALID_HANDLE, INVALID_VALUE, NOT_SUPPORTED};
use cuda_sys::{CUevent, CUevent_flags, CUstream};
use std::ffi::c_uint;

/// `cuEventCreate`: `CU_EVENT_INTERPROCESS` is not supported by the simulator.
pub(super) unsafe extern "C" fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) -> CUresult {
    api("cuEventCreate", |st, caller| {
        need(phEvent)?;
        if Flags & !VALID_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        if Flags & CUevent_flags::CU_EVENT_INTERPROCESS.0 != 0 {
            return Err(if Flags & DISABLE_TIMING == 0 { INVALID_VALUE } else { NOT_SUPPORTED });
        }
        let device = st.current_device(caller)?;
        let h = st.new_handle();
        st.events
            .insert(h, Event { session: caller.session, device, flags: Flags, rec: None, captured: None });
        st.session_mut(caller.session).live.events += 1;
        // SAFETY: output slot from the caller.
        unsafe { put(phEvent, handle(h)) }
    })
}

/// `cuEventDestroy`: a pending record still completes.
pub(super) unsafe extern "C" fn cuEventDestroy(hEvent: CUevent) -> CUresult {
    api("cuEventDestroy", |st, _| {
        let e = st.events.remove(&id(hEvent)).ok_or(INVALID_HANDLE)?;
        let s = st.session_mut(e.session);
        s.live.events = s.live.events.saturating_sub(1);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuEventRecord(hEvent: CUevent, hStream: CUstream) -> CUresult {
    api("cuEventRecord", |st, caller| event::record(st, caller, id(hEvent), hStream))
}

pub(super) unsafe extern "C" fn cuEventRecordWithFlags(
    hEvent: CUevent,
    hStream: CUstream,
    flags: c_uint,
) -> CUresult {
    api("cuEventRecordWithFlags", |st, caller| {
        event::record_with_flags(st, caller, id(hEvent), hStream, flags)
    })
}

pub(super) unsafe extern "C" fn cuEventQuery(hEvent: CUevent) -> CUresult {
    api("cuEventQuery", |st, caller| event::query(st, caller, id(hEvent)))
}

pub(super) unsafe extern "C" fn cuEventSynchronize(hEvent: CUevent) -> CUresult {
    api("cuEventSynchronize", |st, caller| {
        let t0 = st.session_mut(caller.session).host_time();
        let r = event::synchronize(st, caller, id(hEvent));
        let t1 = st.session_mut(caller.session).host_time();
        if r.is_ok() {
            crate::cupti::on_sync(st, crate::cupti::SyncOf::Event(id(hEvent)), t0, t1);
        }
        r
    })
}

pub(super) unsafe extern "C" fn cuEventElapsedTime(
    pMilliseconds: *mut f32,
    hStart: CUevent,
    hEnd: CUevent,
) -> CUresult {
    api("cuEventElapsedTime", |st, _| {
        need(pMilliseconds)?;
        let ms = event::elapsed(st, id(hStart), id(hEnd))?;
        // SAFETY: output slot from the caller.
        unsafe { put(pMilliseconds, ms) }
    })
}

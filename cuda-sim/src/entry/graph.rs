//! Stream capture and graphs.
#![allow(non_snake_case)]

use super::{api, handle, id, need, put};
use crate::graph;
use crate::result::{CUresult, INVALID_HANDLE};
use crate::stream;
use cuda_sys::{CUgraph, CUgraphExec, CUgraphNode, CUstream, CUstreamCaptureMode, CUstreamCaptureStatus};
use std::ffi::c_ulonglong;

pub(super) unsafe extern "C" fn cuStreamBeginCapture(
    hStream: CUstream,
    mode: CUstreamCaptureMode,
) -> CUresult {
    api("cuStreamBeginCapture", |st, caller| {
        let sid = stream::resolve(st, caller, hStream)?;
        graph::begin(st, caller, sid, mode)
    })
}

/// `cuStreamEndCapture`: on failure `*phGraph` is set to null.
pub(super) unsafe extern "C" fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut CUgraph) -> CUresult {
    api("cuStreamEndCapture", |st, caller| {
        need(phGraph)?;
        let sid = stream::resolve(st, caller, hStream)?;
        match graph::end(st, caller, sid) {
            // SAFETY: output slot from the caller.
            Ok(g) => unsafe { put(phGraph, handle(g)) },
            Err(e) => {
                // SAFETY: output slot from the caller (checked non-null).
                unsafe { put(phGraph, std::ptr::null_mut())? };
                Err(e)
            }
        }
    })
}

pub(super) unsafe extern "C" fn cuStreamIsCapturing(
    hStream: CUstream,
    captureStatus: *mut CUstreamCaptureStatus,
) -> CUresult {
    api("cuStreamIsCapturing", |st, caller| {
        need(captureStatus)?;
        let sid = stream::resolve(st, caller, hStream)?;
        let s = graph::status(st, sid);
        // SAFETY: output slot from the caller.
        unsafe { put(captureStatus, s) }
    })
}

pub(super) unsafe extern "C" fn cuGraphInstantiateWithFlags(
    phGraphExec: *mut CUgraphExec,
    hGraph: CUgraph,
    flags: c_ulonglong,
) -> CUresult {
    api("cuGraphInstantiateWithFlags", |st, caller| {
        need(phGraphExec)?;
        let e = graph::instantiate(st, caller, id(hGraph), flags)?;
        // SAFETY: output slot from the caller.
        unsafe { put(phGraphExec, handle(e)) }
    })
}

pub(super) unsafe extern "C" fn cuGraphLaunch(hGraph: CUgraphExec, hStream: CUstream) -> CUresult {
    api("cuGraphLaunch", |st, caller| {
        if !st.execs.contains_key(&id(hGraph)) {
            return Err(INVALID_HANDLE);
        }
        let sid = stream::resolve(st, caller, hStream)?;
        graph::launch(st, id(hGraph), sid)
    })
}

pub(super) unsafe extern "C" fn cuGraphDestroy(hGraph: CUgraph) -> CUresult {
    api("cuGraphDestroy", |st, _| {
        let g = st.graphs.remove(&id(hGraph)).ok_or(INVALID_HANDLE)?;
        let s = st.session_mut(g.session);
        s.live.graphs = s.live.graphs.saturating_sub(1);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuGraphExecDestroy(hGraphExec: CUgraphExec) -> CUresult {
    api("cuGraphExecDestroy", |st, _| {
        let e = st.execs.remove(&id(hGraphExec)).ok_or(INVALID_HANDLE)?;
        let s = st.session_mut(e.session);
        s.live.graph_execs = s.live.graph_execs.saturating_sub(1);
        Ok(())
    })
}

/// `cuGraphGetNodes`: with `nodes` null, the count; else up to `*numNodes`
/// handles (the rest of the array nulled) and the number written.
pub(super) unsafe extern "C" fn cuGraphGetNodes(
    hGraph: CUgraph,
    nodes: *mut CUgraphNode,
    numNodes: *mut usize,
) -> CUresult {
    api("cuGraphGetNodes", |st, _| {
        need(numNodes)?;
        let g = st.graphs.get(&id(hGraph)).ok_or(INVALID_HANDLE)?;
        let count = g.handles.len();
        if nodes.is_null() {
            // SAFETY: output slot from the caller.
            return unsafe { put(numNodes, count) };
        }
        // SAFETY: `numNodes` is a valid, non-null in/out slot.
        let room = unsafe { numNodes.read() };
        for i in 0..room {
            let h = g.handles.get(i).map_or(std::ptr::null_mut(), |&h| handle(h));
            // SAFETY: the caller provides an array of `*numNodes` slots.
            unsafe { nodes.add(i).write(h) };
        }
        // SAFETY: as above.
        unsafe { put(numNodes, room.min(count)) }
    })
}

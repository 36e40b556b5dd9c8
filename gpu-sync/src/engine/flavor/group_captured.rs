//! The group flavor inside graph captures: one call that enqueues on
//! several streams (an NCCL group) while **every** one of them captures —
//! each in its own capture (one per device, the usual shape: each rank's
//! graph holds its part) or several in one.
//!
//! The captures' gates are all locked (in the order of their addresses: the
//! one place that holds several gates, so two groups never wait for each
//! other) and found open, so no capture can end under the call. Then, as
//! the single-stream captured flavor does for one operation, each part's
//! stream waits (graph edges) for its capture's conflicting work, the one
//! call runs, and each part's uses are recorded in its capture (after a
//! failed call as well, as the eager group flavor does: the call may have
//! captured part of its work, and recording a use only adds an edge). The
//! graphs keep what the parts keep (the communicators).
//!
//! A group mixing capturing and non-capturing streams is refused: its
//! captured parts would only run at a replay, and its other parts now, so
//! the collective could never pair up.

use super::captured::{CaptureInner, CaptureState, after, before, capture_of};
use super::group::{Part, refuse_shared_writes};
use crate::engine::Reach;
use crate::engine::capture::capture_gate::GateGuard;
use crate::error::{Error, Result};
use cuda_sys::BorrowedStream;
use smallvec::SmallVec;
use std::sync::Arc;

/// The refusal of a group over capturing and non-capturing streams.
const MIXED: &str = "an operation over several streams some of which capture a graph and \
     some not (every stream of an NCCL group must capture, each in its own capture, or none)";

/// Runs `call` inside the captures of `parts`' streams when they capture
/// (`joined` called just before it): `Ok(None)` when none of them does
/// (`call` is left in place: the caller takes the eager group flavor, which
/// refuses under the books a capture begun meanwhile), `Ok(Some(r))` when
/// they all did and `call` was captured.
///
/// # Errors
/// [`Error::Capturing`] when some streams capture and others do not; the
/// refusals of the captured flavor (device rule, host memory); a driver
/// error of the graph edges; `call`'s error.
pub(in crate::engine) fn run<R>(
    op_name: &'static str,
    parts: &[Part<'_>],
    call: &mut Option<impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>>,
    joined: impl FnOnce(),
) -> Result<Option<R>> {
    refuse_shared_writes(op_name, parts)?;
    loop {
        let caps: SmallVec<[Option<Arc<CaptureState>>; 4]> =
            parts.iter().map(|p| if p.stream.capture_hint() { capture_of(p.stream) } else { None }).collect();
        if caps.iter().all(Option::is_none) {
            return Ok(None);
        }
        let caps: SmallVec<[Arc<CaptureState>; 4]> = match caps.into_iter().collect::<Option<_>>() {
            Some(c) => c,
            None => return Err(Error::Capturing { op: MIXED }),
        };
        // The distinct captures, in address order, and each part's one.
        let mut distinct: SmallVec<[&Arc<CaptureState>; 4]> = SmallVec::new();
        for c in &caps {
            if !distinct.iter().any(|d| Arc::ptr_eq(d, c)) {
                distinct.push(c);
            }
        }
        distinct.sort_by_key(|c| Arc::as_ptr(c) as usize);
        let mut gates: SmallVec<[GateGuard<'_, CaptureInner>; 4]> =
            distinct.iter().map(|c| c.inner.lock()).collect();
        if gates.iter().any(|g| g.is_ended()) {
            // A capture ended between the reads above and these locks: its
            // streams were detached under its lock; read them again.
            continue;
        }
        let of = |c: &Arc<CaptureState>| distinct.iter().position(|d| Arc::ptr_eq(d, c)).unwrap_or(0);
        let reach = Reach::Every("a buffer");
        let mut lists = SmallVec::<[_; 4]>::new();
        for (p, c) in parts.iter().zip(&caps) {
            let g = &mut gates[of(c)];
            lists.push(before(p.stream, (op_name, p.uses, reach), c, &mut g.data)?);
        }
        parts[0].stream.device.inner.bind()?;
        let raws: SmallVec<[BorrowedStream<'_>; 4]> = parts.iter().map(|p| p.stream.raw()).collect();
        let f = call.take().ok_or_else(|| Error::Internal("the captured group ran its call twice".into()))?;
        joined();
        let r = f(&raws);
        for ((p, c), list) in parts.iter().zip(&caps).zip(&lists) {
            let g = &mut gates[of(c)];
            let keep = p.keep.map(|k| k.keep_alive());
            after(p.stream, list, keep.as_ref(), reach, &mut g.data);
        }
        return r.map(Some);
    }
}

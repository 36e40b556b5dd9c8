//! Streams ([Stream Management][stream]; host functions from [Execution
//! Control][exec]).
//!
//! [stream]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html
//! [exec]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html

use super::Result;
use crate::handle::{AsBorrowed, Owned, OwnedGraph, OwnedStream, kind, same_driver};
use crate::{CUgraph, CUhostFn, CUstream, CUstreamCaptureMode, CUstreamCaptureStatus, Driver};
use std::ffi::c_void;

/// Creates a stream in the current context (`cuStreamCreateWithPriority`):
/// `flags` from `CUstream_flags` (`CU_STREAM_NON_BLOCKING`), `priority`
/// clamped by the driver to the context's range.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_CONTEXT` without a current context, …;
/// `Unsupported` without the entry point.
pub fn create_with_priority(drv: &'static Driver, flags: u32, priority: i32) -> Result<OwnedStream> {
    let mut s: CUstream = std::ptr::null_mut();
    // SAFETY: writes one stream handle through a valid pointer.
    unsafe { call!(drv, cuStreamCreateWithPriority(&mut s, flags, priority)) }?;
    super::non_null("cuStreamCreateWithPriority", s)?;
    // SAFETY: a new stream of `drv`, owned by nobody else.
    Ok(unsafe { Owned::from_raw(drv, s) })
}

/// Destroys the stream (`cuStreamDestroy`); queued work still runs. The same
/// as [`Owned::destroy`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The driver's code (the stream is then leaked); `Unsupported` without the
/// entry point.
pub fn destroy(stream: OwnedStream) -> Result<()> {
    stream.destroy()
}

/// Whether all work queued on the stream has completed (`cuStreamQuery`):
/// `CUDA_ERROR_NOT_READY` is `Ok(false)`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// Any other code; `Unsupported` without the entry point.
pub fn query(stream: impl AsBorrowed<kind::StreamKind>) -> Result<bool> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream (the handle proves it).
    unsafe { query!(s.driver(), cuStreamQuery(s.as_raw())) }
}

/// Blocks the host until the stream's queued work has completed
/// (`cuStreamSynchronize`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The error of failed work; `Unsupported` without the entry point.
pub fn synchronize(stream: impl AsBorrowed<kind::StreamKind>) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream.
    unsafe { call!(s.driver(), cuStreamSynchronize(s.as_raw())) }
}

/// Makes later work on `stream` wait for the work `event` last recorded
/// (`cuStreamWaitEvent`); the host does not block. `flags`:
/// `CUevent_wait_flags` (0 = default).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The driver's code; `Refused` for handles of two tables; `Unsupported`
/// without the entry point.
#[inline]
pub fn wait_event(
    stream: impl AsBorrowed<kind::StreamKind>,
    event: impl AsBorrowed<kind::EventKind>,
    flags: u32,
) -> Result<()> {
    let (s, e) = (stream.as_borrowed(), event.as_borrowed());
    same_driver("cuStreamWaitEvent", s.driver(), e.driver())?;
    // SAFETY: a live stream and a live event of one table.
    unsafe { call!(s.driver(), cuStreamWaitEvent(s.as_raw(), e.as_raw(), flags)) }
}

/// The stream's priority (`cuStreamGetPriority`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_priority(stream: impl AsBorrowed<kind::StreamKind>) -> Result<i32> {
    let s = stream.as_borrowed();
    let mut p = 0;
    // SAFETY: a live stream; writes one int through a valid pointer.
    unsafe { call!(s.driver(), cuStreamGetPriority(s.as_raw(), &mut p)) }?;
    Ok(p)
}

/// The stream's creation flags (`cuStreamGetFlags`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_flags(stream: impl AsBorrowed<kind::StreamKind>) -> Result<u32> {
    let s = stream.as_borrowed();
    let mut f = 0;
    // SAFETY: a live stream; writes one unsigned int through a valid pointer.
    unsafe { call!(s.driver(), cuStreamGetFlags(s.as_raw(), &mut f)) }?;
    Ok(f)
}

/// Queues a host function on the stream (`cuLaunchHostFunc`): the driver
/// calls `func(user_data)` on one of its threads once the work before it
/// completed; later work waits for it to return.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EXEC.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
///
/// # Safety
/// 1. `func` is sound to call once with `user_data`, on another thread, at
///    any later time (whatever `user_data` points to stays valid until then
///    and may be used from that thread);
/// 2. `func` makes no CUDA call (the driver forbids it there).
pub unsafe fn launch_host_func(
    stream: impl AsBorrowed<kind::StreamKind>,
    func: CUhostFn,
    user_data: *mut c_void,
) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream; `func` and `user_data` are the caller's
    // obligations.
    unsafe { call!(s.driver(), cuLaunchHostFunc(s.as_raw(), func, user_data)) }
}

/// Starts capturing the stream's work into a graph (`cuStreamBeginCapture`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// `CUDA_ERROR_ILLEGAL_STATE` when already capturing, …; `Unsupported`
/// without the entry point.
pub fn begin_capture(stream: impl AsBorrowed<kind::StreamKind>, mode: CUstreamCaptureMode) -> Result<()> {
    let s = stream.as_borrowed();
    // SAFETY: a live stream.
    unsafe { call!(s.driver(), cuStreamBeginCapture(s.as_raw(), mode)) }
}

/// Ends the stream's capture (`cuStreamEndCapture`) and returns the graph.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` (no graph),
/// `CUDA_ERROR_ILLEGAL_STATE` when not capturing, …; `Unsupported` without
/// the entry point.
pub fn end_capture(stream: impl AsBorrowed<kind::StreamKind>) -> Result<OwnedGraph> {
    let s = stream.as_borrowed();
    let mut g: CUgraph = std::ptr::null_mut();
    // SAFETY: a live stream; writes one graph handle through a valid pointer.
    unsafe { call!(s.driver(), cuStreamEndCapture(s.as_raw(), &mut g)) }?;
    super::non_null("cuStreamEndCapture", g)?;
    // SAFETY: the new graph is the caller's alone.
    Ok(unsafe { Owned::from_raw(s.driver(), g) })
}

/// The stream's capture status (`cuStreamIsCapturing`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__STREAM.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn is_capturing(stream: impl AsBorrowed<kind::StreamKind>) -> Result<CUstreamCaptureStatus> {
    let s = stream.as_borrowed();
    let mut st = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: a live stream; writes one status through a valid pointer.
    unsafe { call!(s.driver(), cuStreamIsCapturing(s.as_raw(), &mut st)) }?;
    Ok(st)
}

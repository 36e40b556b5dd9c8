//! Events ([Event Management][ev]).
//!
//! [ev]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html

use super::Result;
use crate::handle::{AsBorrowed, Owned, OwnedEvent, kind, same_driver};
use crate::{CUevent, Driver};

/// Creates an event in the current context (`cuEventCreate`); `flags` from
/// `CUevent_flags` (`CU_EVENT_DISABLE_TIMING` for sync-only events).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_CONTEXT` without a current context, …;
/// `Unsupported` without the entry point.
pub fn create(drv: &'static Driver, flags: u32) -> Result<OwnedEvent> {
    let mut e: CUevent = std::ptr::null_mut();
    // SAFETY: writes one event handle through a valid pointer.
    unsafe { call!(drv, cuEventCreate(&mut e, flags)) }?;
    super::non_null("cuEventCreate", e)?;
    // SAFETY: a new event of `drv`, owned by nobody else.
    Ok(unsafe { Owned::from_raw(drv, e) })
}

/// Destroys the event (`cuEventDestroy`); the same as [`Owned::destroy`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// The driver's code (the event is then leaked); `Unsupported` without the
/// entry point.
pub fn destroy(event: OwnedEvent) -> Result<()> {
    event.destroy()
}

/// Records the event on the stream (`cuEventRecord`): it completes when the
/// work queued before it has.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// The driver's code; `Refused` for handles of two tables; `Unsupported`
/// without the entry point.
#[inline]
pub fn record(
    event: impl AsBorrowed<kind::EventKind>,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let (e, s) = (event.as_borrowed(), stream.as_borrowed());
    same_driver("cuEventRecord", e.driver(), s.driver())?;
    // SAFETY: a live event and a live stream of one table.
    unsafe { call!(e.driver(), cuEventRecord(e.as_raw(), s.as_raw())) }
}

/// Records the event on the stream with `flags` from `CUevent_record_flags`
/// (`cuEventRecordWithFlags`). `CU_EVENT_RECORD_DEFAULT` is
/// [`record`]; `CU_EVENT_RECORD_EXTERNAL` on a capturing stream adds an
/// event-record *node* to the graph (each replay records the event, at that
/// point of the graph) instead of standing for a dependency set.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// The driver's code; `Refused` for handles of two tables; `Unsupported`
/// before CUDA 11.1 (no entry point).
pub fn record_with_flags(
    event: impl AsBorrowed<kind::EventKind>,
    stream: impl AsBorrowed<kind::StreamKind>,
    flags: u32,
) -> Result<()> {
    let (e, s) = (event.as_borrowed(), stream.as_borrowed());
    same_driver("cuEventRecordWithFlags", e.driver(), s.driver())?;
    // SAFETY: a live event and a live stream of one table; `flags` is a plain
    // integer the driver validates.
    unsafe { call!(e.driver(), cuEventRecordWithFlags(e.as_raw(), s.as_raw(), flags)) }
}

/// Whether the event's last record has completed (`cuEventQuery`):
/// `CUDA_ERROR_NOT_READY` is `Ok(false)`; never recorded is `Ok(true)`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// Any other code; `Unsupported` without the entry point.
pub fn query(event: impl AsBorrowed<kind::EventKind>) -> Result<bool> {
    let e = event.as_borrowed();
    // SAFETY: a live event.
    unsafe { query!(e.driver(), cuEventQuery(e.as_raw())) }
}

/// Blocks the host until the event's last record has completed
/// (`cuEventSynchronize`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// The error of failed work; `Unsupported` without the entry point.
pub fn synchronize(event: impl AsBorrowed<kind::EventKind>) -> Result<()> {
    let e = event.as_borrowed();
    // SAFETY: a live event.
    unsafe { call!(e.driver(), cuEventSynchronize(e.as_raw())) }
}

/// Milliseconds between two completed records of timing events
/// (`cuEventElapsedTime`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html)
///
/// # Errors
/// `CUDA_ERROR_NOT_READY` before both completed,
/// `CUDA_ERROR_INVALID_HANDLE` for a sync-only event, …; `Refused` for
/// handles of two tables; `Unsupported` without the entry point.
pub fn elapsed_time(
    start: impl AsBorrowed<kind::EventKind>,
    end: impl AsBorrowed<kind::EventKind>,
) -> Result<f32> {
    let (a, b) = (start.as_borrowed(), end.as_borrowed());
    same_driver("cuEventElapsedTime", a.driver(), b.driver())?;
    let mut ms = 0f32;
    // SAFETY: two live events of one table; writes one float through a
    // valid pointer.
    unsafe { call!(a.driver(), cuEventElapsedTime(&mut ms, a.as_raw(), b.as_raw())) }?;
    Ok(ms)
}

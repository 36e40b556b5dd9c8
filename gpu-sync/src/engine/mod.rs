//! The engine: the only place that knows tickets, books, markers, captures
//! and deferred work. Its inner modules are private; the API files (streams,
//! events, memory, launches, graphs) see this facade only — functions, and
//! types whose state is private to the engine (`pub(in crate::engine)` at
//! most) — so the compiler, not a text scan, keeps the wall.
//!
//! - [`submit`]: the one way to put an operation on a stream. The caller
//!   says what the operation is ([`Op`]: its name, its uses, its [`Kind`])
//!   and gives the closure that makes the driver call; the engine applies
//!   the guards once, in this order, before any lock — refusal inside a
//!   host function (or a simulated kernel) → the deferred work drained →
//!   the capture routing (join the stream's capture, or run as ordinary
//!   work) → then, under the book lock, refusal of what a capture cannot
//!   hold → context bound → the flavor chosen from the operation (eager on
//!   one device, across several devices in ordinal order, blocking on an
//!   idle stream, captured) → the ticket drawn → the uses recorded.
//! - host waits ([`Point::host_wait`], [`Timeline::synchronize`],
//!   [`host_wait_device`]) and the capture's begin and end
//!   ([`begin_capture`], [`end_capture`]);
//! - "now or later" for frees and releases, in one place
//!   ([`free_now_or_later`]; driver handles through [`Held`]);
//! - calls on no stream that a capturing thread must not make
//!   ([`off_stream`]: pinned alloc and free) and the close of a buffer
//!   ([`close_allocation`]): their guards are the engine's too.
//!
//! Inside: `capture/` (the capture gate, loom-checked; the thread's capture
//! state; host functions; the one deferred-work queue), `timeline/` (a
//! stream's timeline, points, markers, the per-device book, the conflict
//! rules, events' record state, `Pending`), `track/` (resources and the uses
//! an operation declares; a device allocation's life), `flavor/` (eager,
//! across, blocking and captured submission, chosen in [`submit`] only),
//! `hook` (the recorder's hook around an operation while its device
//! records), `release` (driver handles released with their context bound).

mod capture;
mod flavor;
mod hook;
mod release;
mod timeline;
mod track;

use crate::device::Device;
use crate::error::Result;
use crate::trace::{OpDesc, OpKind};
use cuda_sys::BorrowedStream;
use hook::{Hooked, hook};
use std::cell::Cell;
use std::sync::Arc;

pub use timeline::conflicts::Access;
pub use timeline::pending::{NotCovered, Pending, Polled};

pub(crate) use capture::host_fn::{HostFn, Inside, launch as launch_host_fn};
pub(crate) use flavor::captured::{Capture as CaptureHandle, KeepAlive};
pub(crate) use flavor::group::{Part, Tickets};
pub(crate) use release::Held;
pub(crate) use timeline::event::EventInner;
pub(crate) use timeline::marker::TailMark;
pub(crate) use timeline::{Point, Timeline};
pub(crate) use track::{Allocation, Resource, Target, Use, Uses};

use timeline::book::DeviceBook;

/// What an operation is: the engine picks the flavor from it.
#[derive(Clone, Copy)]
pub(crate) enum Kind<'a> {
    /// Asynchronous device work over tracked resources: waits for the
    /// conflicting uses, records its own; joins the stream's capture when
    /// the stream captures.
    Async,
    /// Asynchronous work that never joins a capture (a graph replay):
    /// refused while the stream captures.
    Uncaptured,
    /// A driver call that blocks the host until its own transfer is done
    /// (a copy from or to borrowed host memory): made on the idle stream,
    /// holding no book, and complete when `submit` returns.
    Blocking,
    /// Work over no tracked resource, ordered (device-side) after the
    /// points in the slice, which may be on other devices' streams: an
    /// allocation, a stream-ordered free, device-side waits alone (a no-op
    /// closure). Refused while the stream captures.
    After(&'a [Point]),
    /// A host function (`cuLaunchHostFunc`): refused while the stream
    /// captures.
    HostFn,
    /// A device-side wait on a user event's latest record
    /// (`Stream::wait`), which covers the point, if the record was made on
    /// a tracked stream: no device-side wait of the engine's own (the call
    /// is the wait); afterwards the stream counts the point as waited for.
    /// Refused while the stream captures.
    WaitEvent(Option<&'a Point>),
}

/// One stream-ordered operation, made by [`Op::new`] (its name, kind and
/// uses) and the optional parts after it ([`Op::keep`], [`Op::describe`],
/// [`Op::naming`], [`Op::copy_between_devices`], [`Op::device_checked`]).
pub(crate) struct Op<'a, U: Uses + ?Sized> {
    /// Its name, for errors (`Error::Capturing { op }`, refusals).
    pub(in crate::engine) name: &'static str,
    /// The resources it touches, and how.
    pub(in crate::engine) uses: &'a U,
    /// What it is.
    pub(in crate::engine) kind: Kind<'a>,
    /// What a captured operation keeps alive for its graph (a launch's
    /// module).
    pub(in crate::engine) keep: Option<&'a KeepAlive>,
    /// What it is, for a recording (`gpu_sync::trace`): its name (a
    /// kernel's), kind and arguments. Called only while its device records,
    /// so an operation builds no `String` otherwise; `None`: the name above
    /// and a kind from [`Kind`].
    pub(in crate::engine) describe: Option<&'a dyn Fn() -> OpDesc>,
    /// Which devices its device memory may belong to (the engine's one
    /// device rule, [`Reach`]).
    pub(in crate::engine) reach: Reach,
    /// The stream whose book its caller's own pass found every buffer in
    /// ([`Home`]): when it is the stream the operation is submitted on, the
    /// eager flavor asks no more.
    pub(in crate::engine) home: Option<&'a Timeline>,
}

/// What a caller's own pass over an operation's buffers (a launch's
/// argument pass, which walks them anyway) finds for the device rule:
/// whether every buffer is tracked in the stream's book (so of the stream's
/// device), asked of each with [`Home::note`]. Given to the operation
/// ([`Op::home`]), it spares the eager flavor a pass of its own; where it
/// finds a buffer elsewhere, or was made for another stream, the engine
/// asks as if it were not given (the rule itself is unchanged).
///
/// It names the stream it was made for, not only its book: the engine
/// compares that stream's address with the one it submits on, which the
/// compiler folds away where both come from one reference (a launch), where
/// comparing books would load the book through the stream after the
/// guards' calls. A stream's book never changes, so the same stream means
/// the same book.
pub(crate) struct Home<'s> {
    stream: &'s Timeline,
    book: &'s Arc<DeviceBook>,
    all: bool,
}

impl<'s> Home<'s> {
    /// Nothing noted yet, for an operation on `s`.
    #[inline(always)]
    pub(crate) fn new(s: &'s Timeline) -> Self {
        Home { stream: s, book: &s.book, all: true }
    }

    /// Notes one buffer of the operation: every buffer it touches must be
    /// noted (checked in debug builds by the eager flavor).
    #[inline(always)]
    pub(crate) fn note(&mut self, alloc: &Allocation) {
        self.all &= alloc.res.is_in(self.book);
    }
}

/// The device rule an operation's device memory is held to, checked by the
/// engine (`engine::submit`, before any lock) with the one question
/// `DeviceInner::reaches`: may work on the stream's device touch memory of
/// the buffer's device (the same device, or peer access opened)?
#[derive(Clone, Copy)]
pub(crate) enum Reach {
    /// Every buffer is reached from the stream's device (a kernel, a
    /// memset, a copy between host and device): otherwise
    /// [`crate::Error::DeviceMismatch`] naming the buffer as `what` and both
    /// devices.
    Every(&'static str),
    /// A copy between devices, which the driver stages through the host
    /// when no peer access is open: at least one buffer is reached from the
    /// stream's device (otherwise [`crate::Error::DeviceMismatch`], `what`).
    One(&'static str),
    /// The caller checked its device already (a graph replay: its graph's
    /// device, its buffers as they were captured).
    Checked,
}

impl<'a, U: Uses + ?Sized> Op<'a, U> {
    /// The operation `name` of kind `kind` over `uses`; every buffer it
    /// touches must be reached from the stream's device ([`Reach::Every`],
    /// naming "a buffer").
    #[inline(always)]
    pub(crate) fn new(name: &'static str, kind: Kind<'a>, uses: &'a U) -> Self {
        Op { name, uses, kind, keep: None, describe: None, reach: Reach::Every("a buffer"), home: None }
    }

    /// What the caller's own pass found ([`Home`], each buffer of `uses`
    /// noted).
    #[inline(always)]
    pub(crate) fn home(self, home: Home<'a>) -> Self {
        Op { home: home.all.then_some(home.stream), ..self }
    }

    /// What a captured operation keeps alive for its graph (a launch's
    /// module).
    #[inline(always)]
    pub(crate) fn keep(self, keep: &'a KeepAlive) -> Self {
        Op { keep: Some(keep), ..self }
    }

    /// Its description for a recording, called only while its device
    /// records.
    #[inline(always)]
    pub(crate) fn describe(self, describe: &'a dyn Fn() -> OpDesc) -> Self {
        Op { describe: Some(describe), ..self }
    }

    /// What a [`crate::Error::DeviceMismatch`] calls a buffer of a device the
    /// stream does not reach ("the destination buffer").
    #[inline(always)]
    pub(crate) fn naming(self, what: &'static str) -> Self {
        Op { reach: Reach::Every(what), ..self }
    }

    /// A copy between two devices' memory: one buffer reached from the
    /// stream's device is enough ([`Reach::One`], naming `what`).
    #[inline(always)]
    pub(crate) fn copy_between_devices(self, what: &'static str) -> Self {
        Op { reach: Reach::One(what), ..self }
    }

    /// The caller checked its device already ([`Reach::Checked`]).
    #[inline(always)]
    pub(crate) fn device_checked(self) -> Self {
        Op { reach: Reach::Checked, ..self }
    }
}

/// No tracked resource.
pub(crate) const NO_USES: &[Use<'static>] = &[];

/// Submits `op` on stream `s`, `call` making its driver call on the raw
/// stream: the one submission function (see the module docs for the order
/// of the guards). Returns `call`'s result and the operation's ticket (0
/// when it was captured into a graph).
///
/// Recording (`gpu_sync::trace`) is one relaxed load of the device's flag
/// here while off; on, the recorder's hook wraps `call` ([`Hooked::call`])
/// and nothing else: the guards, the routing and the flavors are the same.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED` inside a host function or a simulated kernel
/// (before any lock); [`crate::Error::Capturing`] for what a capture cannot
/// hold; the errors of the waits, of `call`, and, for a blocking call, of
/// the wait for its completion.
#[inline(always)]
pub(crate) fn submit<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op: Op<'_, U>,
    call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
) -> Result<(R, u64)> {
    // 1. Refused inside a host function, before any lock; 2. the work host
    // functions deferred runs (no lock is held here).
    crate::ffi::refuse(op.name)?;
    capture::host_fn::drain();
    // Recording: one relaxed load while off; on, the hook's context, made
    // out of line. The routing is instantiated once either way (a second
    // instantiation lets LLVM merge the flavors' closures and stop inlining
    // them on the hot path), with `call` wrapped by `Hooked::call`.
    // The hook takes the fields it keeps by value: a reference to `op` would
    // make the whole operation a stack object on the hot path too.
    let hook = if s.device.inner.trace.is_on() { hook(s, op.name, op.kind, op.describe) } else { None };
    let captured = hook.as_ref().map(|h| &h.captured);
    // `#[inline(always)]` on the closure (it holds the operation's own
    // driver call): one instantiation is called from every flavor, so no
    // single-call bonus, and LLVM rates the eager flavor's call site in a
    // launch cold (under 2 % of the entry's estimated frequency: threshold
    // 45 against a cost of 355). Left to LLVM it became a call, about 50
    // instructions a launch (`-C remark=inline` shows the decision).
    route(
        s,
        op,
        #[inline(always)]
        |raw: BorrowedStream<'_>| Hooked::call(hook.as_ref(), raw, call),
        captured,
    )
}

/// Submits one operation over several streams (of one device or several):
/// `call` enqueues the work of every part of `parts`, each on the raw
/// stream of the same index, in one go (an NCCL group; a foreign call given
/// several streams). The group flavor (`flavor::group`) locks the books of
/// every device involved once, in ordinal order, makes each stream wait for
/// its part's conflicting uses, runs `call`, then draws a ticket per stream
/// and records each part's uses at it. The guards come first, as in
/// [`submit`]: refusal inside a host function, the deferred work drained;
/// a capturing stream is refused ([`crate::Error::Capturing`]: this group
/// does not join a capture; see [`submit_group_capturable`]). Returns
/// `call`'s result and the tickets, one per part.
///
/// Recording: each recorded part gets its events (or CUPTI correlation)
/// around the one call, in the parts' order, closed in reverse.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED` inside a host function; the refusals of the
/// group flavor; the errors of the waits; `call`'s error (its uses are
/// recorded all the same: it may have enqueued part of its work).
pub(crate) fn submit_group<R>(
    op_name: &'static str,
    parts: &[Part<'_>],
    call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
) -> Result<(R, Tickets)> {
    group_routed(op_name, parts, false, call)
}

/// [`submit_group`] for work a graph can hold on every stream (an NCCL
/// group): when every stream of `parts` captures (each in its own capture,
/// or several in one), the call joins the captures
/// (`flavor::group_captured`) and no ticket is drawn (the tickets are
/// empty: nothing runs until the graphs are launched); when none does, as
/// [`submit_group`].
///
/// # Errors
/// As [`submit_group`]; [`crate::Error::Capturing`] when some streams
/// capture and others do not; the refusals of the captured flavor.
pub(crate) fn submit_group_capturable<R>(
    op_name: &'static str,
    parts: &[Part<'_>],
    call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
) -> Result<(R, Tickets)> {
    group_routed(op_name, parts, true, call)
}

/// [`submit_group`] and [`submit_group_capturable`]: the guards, the
/// recording hooks, then the captured group flavor (when `capturable` and a
/// stream captures) or the group flavor.
fn group_routed<R>(
    op_name: &'static str,
    parts: &[Part<'_>],
    capturable: bool,
    call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
) -> Result<(R, Tickets)> {
    crate::ffi::refuse(op_name)?;
    capture::host_fn::drain();
    // A hook per part only when some part's device records (none built,
    // moved or dropped otherwise: the call runs bare).
    let traced = parts.iter().any(|p| p.stream.device.inner.trace.is_on());
    let hooks: smallvec::SmallVec<[Option<Hooked<'_>>; 4]> = if traced {
        parts
            .iter()
            .map(|p| {
                if p.stream.device.inner.trace.is_on() {
                    hook(p.stream, op_name, Kind::Async, None)
                } else {
                    None
                }
            })
            .collect()
    } else {
        smallvec::SmallVec::new()
    };
    let mut call = Some(|raws: &[BorrowedStream<'_>]| {
        if hooks.iter().all(Option::is_none) { call(raws) } else { Hooked::around_group(&hooks, raws, call) }
    });
    if capturable && parts.iter().any(|p| p.stream.capture_hint()) {
        // The hooks learn that the call is captured, before it runs.
        let joined = || hooks.iter().flatten().for_each(|h| h.captured.set(true));
        if let Some(r) = flavor::group_captured::run(op_name, parts, &mut call, joined)? {
            return Ok((r, Tickets::new()));
        }
    }
    let f = call.take().ok_or_else(|| crate::Error::Internal("a group ran its call twice".into()))?;
    let out = flavor::group::run(op_name, parts, f)?;
    for (h, ticket) in hooks.iter().zip(&out.1) {
        if let Some(h) = h {
            h.placed(*ticket);
        }
    }
    Ok(out)
}

/// The device rule, asked by every flavor before it locks a book for an
/// operation over `uses` on `s` (the eager flavor's one pass over the uses
/// finds whether each resource is in the stream's book, under its lock, and
/// hands any other to the across flavor, which asks here first): `Ok` when
/// every resource is in the stream's own book, else [`reached`].
///
/// # Errors
/// [`crate::Error::DeviceMismatch`], as [`reached`].
#[inline]
pub(in crate::engine) fn devices<U: Uses + ?Sized>(s: &Timeline, uses: &U, reach: Reach) -> Result<()> {
    devices_local(s, uses, reach).map(drop)
}

/// [`devices`], answering also whether every resource is in the stream's
/// own book (`true`), as the group flavor needs to know.
///
/// # Errors
/// As [`devices`].
#[inline]
pub(in crate::engine) fn devices_local<U: Uses + ?Sized>(
    s: &Timeline,
    uses: &U,
    reach: Reach,
) -> Result<bool> {
    let mut one = true;
    uses.each(|t, _| one &= t.res().is_in(&s.book));
    if one { Ok(true) } else { reached(s, uses, reach).map(|()| false) }
}

/// The device rule for an operation whose resources are not all in its
/// stream's book: each device buffer asked `DeviceInner::reaches` (host
/// memory is reached from every device: pinned buffers are portable) as
/// the operation's [`Reach`] requires.
///
/// # Errors
/// [`crate::Error::DeviceMismatch`] naming the stream's device and the
/// first buffer's device it does not reach.
#[cold]
#[inline(never)]
pub(in crate::engine) fn reached<U: Uses + ?Sized>(s: &Timeline, uses: &U, reach: Reach) -> Result<()> {
    let dev = &s.device.inner;
    let (mut unreached, mut any_reached) = (None::<i32>, false);
    uses.each(|t, _| {
        if let Target::Device(a) = t {
            let owner = &a.device().inner;
            if dev.reaches(owner) {
                any_reached = true;
            } else if unreached.is_none() {
                unreached = Some(owner.ordinal);
            }
        }
    });
    let refused = |what, found| crate::error::Error::DeviceMismatch { what, expected: dev.ordinal, found };
    match (reach, unreached) {
        (Reach::Every(what), Some(found)) => Err(refused(what, found)),
        (Reach::One(what), Some(found)) if !any_reached => Err(refused(what, found)),
        _ => Ok(()),
    }
}

/// Whether every device buffer of `uses` is reached from the device of `s`
/// (its own, or a peer whose access it opened): the answer of the device
/// rule ([`Reach::Every`]) without its error, for an API file choosing
/// between two ways of making one call (a copy between devices inside a
/// capture: over unified addresses, which a graph holds).
pub(crate) fn all_reached<U: Uses + ?Sized>(s: &Timeline, uses: &U) -> bool {
    devices(s, uses, Reach::Every("")).is_ok()
}

/// The device rule asked again of `allocs` for work on `s` whose kernels
/// touch them (a graph replay: peer access open when it was captured may
/// have been closed since): every one reached from the stream's device.
///
/// # Errors
/// [`crate::Error::DeviceMismatch`] naming `what`, the stream's device and
/// the first allocation's device it no longer reaches.
pub(crate) fn reached_again(s: &Timeline, allocs: &[Arc<Allocation>], what: &'static str) -> Result<()> {
    if allocs.is_empty() {
        return Ok(());
    }
    let uses: Vec<Use<'_>> = allocs.iter().map(|a| (Target::Device(a), Access::Read)).collect();
    reached(s, uses.as_slice(), Reach::Every(what))
}

/// The routing of [`submit`] after its first two guards: the capture
/// routing, then the flavor. `captured` (while recording) is set when the
/// operation joins a capture, before `call` runs.
#[inline(always)]
fn route<R, U: Uses + ?Sized>(
    s: &Arc<Timeline>,
    op: Op<'_, U>,
    call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    captured: Option<&Cell<bool>>,
) -> Result<(R, u64)> {
    // Every resource in the stream's book, as the caller's pass found for
    // this very stream.
    let home = op.home.is_some_and(|t| std::ptr::eq(t, Arc::as_ptr(s)));
    match op.kind {
        // 3. The capture routing, then the eager or across flavor.
        // Joins the stream's capture under its gate, or (no capture, or it
        // ended first) runs as ordinary work: see `capture_gate`.
        Kind::Async => capture::capture_gate::submit(
            &**s,
            call,
            |cap, inner, call| {
                if let Some(c) = captured {
                    c.set(true);
                }
                flavor::captured::run_captured(s, (op.name, op.uses, op.keep, op.reach), cap, inner, call)
                    .map(|r| (r, 0))
            },
            |call| flavor::eager::run(s, op.name, op.uses, (op.reach, home), call),
        ),
        Kind::Uncaptured => flavor::eager::run(s, op.name, op.uses, (op.reach, home), call),
        Kind::Blocking => flavor::blocking::run(s, op.name, op.uses, op.reach, call),
        Kind::After(deps) => s.submit(op.name, deps, call),
        Kind::HostFn => s.submit(op.name, &[], call),
        Kind::WaitEvent(recorded) => s.submit_event_wait(op.name, recorded, call),
    }
}

/// Blocks the host until every stream of `device` has finished all work
/// submitted before the call (`cuCtxSynchronize`); returns the ticket that
/// proves. Refused inside a host function and on a capturing thread.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED`; [`crate::Error::Capturing`]; a driver error.
pub(crate) fn host_wait_device(device: &Device) -> Result<u64> {
    crate::ffi::refuse("cuCtxSynchronize")?;
    capture::thread::refuse_on_capturing_thread("Device::synchronize (cuCtxSynchronize)")?;
    let dev = &device.inner;
    // Every ticket up to this value was taken after its driver call
    // returned (see `DeviceInner::next_ticket`), so that work is already
    // queued and the synchronize below covers it.
    let ticket = dev.ticket.load(std::sync::atomic::Ordering::Acquire);
    dev.bind()?;
    // The device's primary context is current on this thread.
    crate::ffi::call("cuCtxSynchronize", || cuda_sys::result::context::synchronize(dev.drv))?;
    dev.completed.fetch_max(ticket, std::sync::atomic::Ordering::SeqCst);
    // Frees that host functions which ran meanwhile had to put off.
    capture::host_fn::drain();
    Ok(ticket)
}

/// `Err` (`CUDA_ERROR_NOT_PERMITTED`, naming `op`) inside a host function
/// or a simulated kernel: the first guard of the engine's own operations
/// that do not go through [`submit`] (host waits, allocations, releases).
#[inline(always)]
pub(in crate::engine) fn refuse(op: &'static str) -> Result<()> {
    crate::ffi::refuse(op)
}

/// [`crate::Error::Capturing`] if this thread captures a graph (for the
/// calls the driver forbids a capturing thread: `cuMemHostAlloc`,
/// `cuMemAlloc`, `cuCtxSynchronize`, …).
pub(in crate::engine) fn refuse_on_capturing_thread(op: &'static str) -> Result<()> {
    capture::thread::refuse_on_capturing_thread(op)
}

/// Runs `call`, an operation on no stream that the driver forbids a
/// capturing thread (`cuMemHostAlloc`, `cuMemFreeHost`), after the guards
/// in the funnel's order, before any lock: refusal inside a host function
/// (`CUDA_ERROR_NOT_PERMITTED`), then on a capturing thread
/// ([`crate::Error::Capturing`]), both naming `op`. The door of the API
/// files for such calls: they name no guard themselves.
///
/// # Errors
/// The refusals; `call`'s error.
pub(crate) fn off_stream<R>(op: &'static str, call: impl FnOnce() -> Result<R>) -> Result<R> {
    crate::ffi::refuse(op)?;
    capture::thread::refuse_on_capturing_thread(op)?;
    call()
}

/// Closes one handle of a device allocation (`DeviceBuffer::close`): the
/// memory is freed now if it was the last (waiting for its uses; see
/// `Allocation::close`), else only the handle goes. Inside a host function
/// the handle is dropped instead (its free deferred, see
/// [`free_now_or_later`]) and the refusal reported.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED` inside a host function; the errors of
/// `Allocation::close`.
pub(crate) fn close_allocation(alloc: Arc<Allocation>) -> Result<()> {
    crate::ffi::refuse("DeviceBuffer::close")?;
    match Arc::try_unwrap(alloc) {
        Ok(a) => a.close(),
        // A graph (or a view's owner) still holds the memory: only this
        // handle goes.
        Err(_shared) => Ok(()),
    }
}

/// Whether an operation on `s` would now run as ordinary work: this thread
/// runs no host function (or simulated kernel) and captures no graph, and
/// `s` does not capture (a hint: a capture may begin right after, so an
/// operation routed by this answer must still be one the funnel refuses
/// during a capture — `Kind::Uncaptured`, `Kind::Blocking`). The one place
/// an API file asks, to choose between two ways of doing a thing (a staged
/// pageable copy or the driver's own).
pub(crate) fn ordinary_now(s: &Arc<Timeline>) -> bool {
    !inside_host_fn() && !thread_is_capturing() && !s.capture_hint()
}

/// Whether this thread is capturing a graph.
pub(crate) fn thread_is_capturing() -> bool {
    capture::thread::thread_is_capturing()
}

/// Whether the calling thread runs a host function or a simulated kernel
/// (no driver call, no lock: drops defer their work).
#[inline(always)]
pub(crate) fn inside_host_fn() -> bool {
    crate::ffi::calls_refused()
}

/// Runs the work host functions deferred (call with no gpu-sync lock
/// held; nothing happens inside a host function).
#[inline]
pub(crate) fn drain() {
    capture::host_fn::drain();
}

/// The one decision "free now or later", for a `Drop` that frees memory or
/// releases a driver object through the driver: later on an ordinary
/// thread inside a host function (or a simulated kernel); when the capture
/// ends if `stream` (the stream the memory is freed on, if any) captures —
/// decided under its book lock, so the end of that capture, which clears it
/// under the same lock, runs the free after; when this thread's capture ends
/// on a capturing thread; else now.
pub(crate) fn free_now_or_later(stream: Option<&Arc<Timeline>>, free: capture::deferred::Work) {
    use capture::deferred::{Until, defer};
    if inside_host_fn() {
        defer(Until::Ordinary, free);
        return;
    }
    if let Some(s) = stream {
        let book = s.lock();
        if s.is_capturing() {
            defer(Until::StreamCaptureEnds(s.id), free);
            drop(book);
            return;
        }
    }
    capture::thread::free_outside_capture(free);
}

/// Begins a capture of stream `s` (`cuStreamBeginCapture`, thread-local
/// mode), marks this thread as capturing until the returned handle is
/// ended, and seals a marker first so waits on earlier work never need a
/// new record during the capture.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED` inside a host function (before any lock);
/// [`crate::Error::Capturing`] if `s` already captures; a driver error.
pub(crate) fn begin_capture(s: &Arc<Timeline>) -> Result<CaptureHandle> {
    crate::ffi::refuse("Stream::capture")?;
    flavor::captured::begin(s)
}

/// Ends capture `c` (joining its forks, `cuStreamEndCapture`), runs the
/// frees it deferred and clears this thread's capture mark; returns the
/// graph and what it keeps (the allocations it touches and how, the
/// modules of its launches).
///
/// # Errors
/// The driver's error ending the capture or joining a fork.
pub(crate) fn end_capture(c: CaptureHandle) -> Result<flavor::captured::Ended> {
    flavor::captured::end(c)
}

/// Waits, device-side, on `s` for everything submitted so far on `other`
/// (`Stream::wait_stream`): a graph edge when both take part in one
/// capture, else a wait on a marker of `other`.
///
/// # Errors
/// `CUDA_ERROR_NOT_PERMITTED` inside a host function (before any lock);
/// [`crate::Error::Capturing`] between a capture and work outside it; a
/// driver error.
pub(crate) fn wait_stream(s: &Arc<Timeline>, other: &Arc<Timeline>) -> Result<()> {
    crate::ffi::refuse("Stream::wait_stream")?;
    if Arc::ptr_eq(s, other) {
        return Ok(());
    }
    if (s.capture_hint() || other.capture_hint()) && flavor::captured::join_in_capture(s, other)? {
        return Ok(());
    }
    let ticket = other.last_ticket();
    if ticket == 0 {
        return Ok(());
    }
    let dep = Point::new(other.clone(), ticket);
    submit(
        s,
        Op::new("Stream::wait_stream", Kind::After(&[dep]), NO_USES)
            .describe(&|| OpDesc { name: "wait".into(), kind: OpKind::Wait }),
        |_| Ok(()),
    )
    .map(drop)
}

// The facade's own tests use the API above the engine (streams, buffers,
// the simulator), so they sit in their own file, which the layer test does
// not scan.
#[cfg(all(test, feature = "sim"))]
mod tests;

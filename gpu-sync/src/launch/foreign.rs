//! The door for other libraries: a call into foreign GPU code (cuBLAS,
//! cuFFT, NCCL, a raw launch) on a gpu-sync stream, tracked like a kernel
//! launch.
//!
//! The caller declares the device memory the call reads ([`ForeignUses::input`],
//! like a kernel's `In<T>`) and writes ([`ForeignUses::output`], like
//! `Out<T>`), and gets each view's device address; the engine then does for
//! the call what it does for a launch — device-side waits for conflicting
//! uses on other streams, the call on the raw stream, the new uses recorded
//! (so later work on other streams waits for it, and the memory is freed
//! only after it), or, on a capturing stream, the call joins the capture.

use crate::engine::{self, Access, Kind, Op, Target, Use};
use crate::error::Result;
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut};
use crate::stream::Stream;
use bytemuck::Pod;
use cuda_sys::{BorrowedStream, CUdeviceptr};
use smallvec::SmallVec;

/// The device memory one foreign call reads and writes, declared before the
/// call ([`Stream::launch_foreign`]). Each declaration borrows its buffer
/// (shared for an input, exclusive for an output) until the call is
/// submitted, and returns the address the foreign code is given.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::cuda_sys::result::memory::memset_d32_async;
/// use gpu_sync::{Device, DeviceBuffer, ForeignUses, Stream};
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let mut y = DeviceBuffer::<u32>::zeroed(&a, 256)?;
/// let mut uses = ForeignUses::new();
/// let ptr = uses.output(&mut y); // ordered after a's zeroing, device-side
/// // SAFETY: the closure submits one memset on the stream it is given over
/// // exactly the declared output (256 words from `ptr`), submits nothing
/// // when it fails, and leaves the stream and context as it found them.
/// unsafe { b.launch_foreign("memset", uses, |raw| Ok(memset_d32_async(ptr, 7, 256, raw)?))? };
/// assert_eq!(a.to_vec(&y)?, [7; 256]); // a waits for b's foreign write
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Default)]
pub struct ForeignUses<'a> {
    uses: SmallVec<[Use<'a>; 8]>,
}

impl<'a> ForeignUses<'a> {
    /// No memory declared yet.
    pub fn new() -> ForeignUses<'a> {
        ForeignUses::default()
    }

    /// Declares that the call reads `buf` (a kernel's `In<T>`); returns the
    /// device address of its first element.
    pub fn input<T: Pod, S: AsDeviceSlice<T> + ?Sized>(&mut self, buf: &'a S) -> CUdeviceptr {
        let v = buf.view();
        self.uses.push((Target::Device(v.alloc), Access::Read));
        v.ptr()
    }

    /// Declares that the call may read and write `buf` (a kernel's
    /// `Out<T>`); returns the device address of its first element.
    pub fn output<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(&mut self, buf: &'a mut D) -> CUdeviceptr {
        let v = buf.view();
        self.uses.push((Target::Device(v.alloc), Access::Write));
        v.ptr()
    }
}

impl Stream {
    /// Runs `call`, which submits foreign work (a cuBLAS or cuFFT call, an
    /// NCCL collective, a raw `cuLaunchKernel`) on this stream's raw handle,
    /// as one tracked operation over the memory declared in `uses`: it is
    /// ordered after the conflicting uses on other streams (device-side
    /// waits), later uses on other streams wait for it, and the memory is
    /// not freed before it. On a capturing stream it joins the capture, as
    /// a launch does. `name` names the operation in errors.
    ///
    /// `call` runs at once, with the stream's device context current and
    /// gpu-sync's bookkeeping locked: a gpu-sync call inside it fails with
    /// `CUDA_ERROR_NOT_PERMITTED` (and what it drops is released later).
    ///
    /// # Panics
    /// When `call` panics, which it may do after queuing work: the
    /// operation is then recorded as submitted — the declared uses as for a
    /// successful call, so later work on other streams waits for whatever
    /// it queued, and the memory is not freed before it — and the panic
    /// resumes, unchanged, once the bookkeeping is unlocked.
    ///
    /// # Errors
    /// [`crate::Error::DeviceMismatch`] for declared memory of another
    /// device; [`crate::Error::Capturing`] when a capture cannot hold the
    /// call; `call`'s error; a driver error of the waits.
    ///
    /// # Safety
    /// The caller promises, of the work `call` submits:
    /// 1. **Stream.** It is submitted only on the stream `call` is given,
    ///    and only while `call` runs; it never waits for work submitted
    ///    after it (so the stream's order is the order gpu-sync records).
    /// 2. **Memory.** The device memory it accesses is inside the views
    ///    declared in `uses`: it only reads those declared with
    ///    [`ForeignUses::input`], and reads or writes those declared with
    ///    [`ForeignUses::output`]; it touches no other memory gpu-sync owns
    ///    (other buffers, pinned host buffers). Memory the foreign library
    ///    owns itself (workspaces, handles) is its own to keep alive.
    /// 3. **Failure.** If `call` returns an error, it submitted nothing.
    ///    (A panic needs no promise: the declared uses are recorded, see
    ///    *Panics*.)
    /// 4. **Stream and context left as found.** `call` does not destroy,
    ///    synchronize, begin or end a capture on, or change the flags of
    ///    the stream, and leaves the calling thread's current context as it
    ///    found it.
    /// 5. **Capture.** On a capturing stream (see [`Stream::is_capturing`];
    ///    the call is then recorded into the graph, not run) the work is of
    ///    a kind CUDA can capture.
    /// 6. **No waiting on other threads' gpu-sync calls.** While `call`
    ///    runs this thread holds the book of the stream's device (the one
    ///    lock every tracked operation on that device's streams, memory
    ///    and events takes, and any operation that waits on work of that
    ///    device): `call` must not block on another thread (a join, a
    ///    channel, a lock, a barrier such as an NCCL rendezvous of several
    ///    host threads) that makes such a gpu-sync call before it lets
    ///    `call` go on, or both wait for ever. The refusal inside the door
    ///    only sees this thread. Breaking this deadlocks; it cannot make
    ///    memory unsafe.
    pub unsafe fn launch_foreign<R>(
        &self,
        name: &'static str,
        uses: ForeignUses<'_>,
        call: impl FnOnce(BorrowedStream<'_>) -> Result<R>,
    ) -> Result<R> {
        let op =
            Op::new(name, Kind::Async, uses.uses.as_slice()).naming("memory declared for a foreign call");
        let (r, _) = engine::submit(&self.inner, op, |raw| inside_caught(|| call(raw)))?;
        resumed(r)
    }
}

/// What a foreign call returned, or the panic it raised.
type Caught<R> = std::result::Result<R, Box<dyn std::any::Any + Send>>;

/// Runs `call` inside the engine's call as a foreign door does: with
/// gpu-sync's bookkeeping locked (every gpu-sync call inside refuses before
/// any lock), and its panic caught — a panic may come after `call` queued
/// work, so the operation must count as submitted (uses recorded, tickets
/// drawn, the books released in order) before [`resumed`] goes on with it.
/// `AssertUnwindSafe`: nothing `call` captured is looked at again here — its
/// result is either returned or the unwind goes on.
fn inside_caught<R>(call: impl FnOnce() -> Result<R>) -> Result<Caught<R>> {
    let _inside = engine::Inside::enter();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(r) => r.map(Ok),
        Err(payload) => Ok(Err(payload)),
    }
}

/// The foreign call's result, or its panic resumed (the books released).
fn resumed<R>(r: Caught<R>) -> Result<R> {
    match r {
        Ok(r) => Ok(r),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// One foreign operation over several streams, of one device or several:
/// work that a single host call enqueues on all of them at once (an NCCL
/// group, whose `ncclGroupEnd` enqueues on every rank's stream), tracked as
/// **one** operation. Each stream comes with the memory its part reads and
/// writes ([`ForeignUses`]); [`ForeignGroup::launch`] orders each stream
/// after its part's conflicting uses, runs the call once, and then records
/// every part's uses on its stream — so later work waits for the stream
/// that used the memory, and the memory is freed only after it, with no
/// host wait and no `record_stream`.
///
/// # Examples
/// Two streams of one device written by one call (on the simulator; with
/// two GPUs the streams may be on two devices):
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::cuda_sys::result::memory::memset_d32_async;
/// use gpu_sync::{Device, DeviceBuffer, ForeignGroup, ForeignUses, Stream};
/// let device = Device::get(0)?;
/// let (s0, s1) = (Stream::new(&device)?, Stream::new(&device)?);
/// let mut a = DeviceBuffer::<u32>::zeroed(&s0, 4)?;
/// let mut b = DeviceBuffer::<u32>::zeroed(&s1, 4)?;
/// let (mut ua, mut ub) = (ForeignUses::new(), ForeignUses::new());
/// let (pa, pb) = (ua.output(&mut a), ub.output(&mut b));
/// // SAFETY: the call queues one memset per stream, on that stream, over
/// // exactly the memory declared for it; streams and context untouched.
/// unsafe {
///     ForeignGroup::new().on(&s0, ua).on(&s1, ub).launch("two memsets", |raw| {
///         memset_d32_async(pa, 7, 4, raw[0])?;
///         memset_d32_async(pb, 9, 4, raw[1])?;
///         Ok(())
///     })?;
/// }
/// // Read on s1: ordered after s0's memset by the engine, no wait written.
/// assert_eq!(s1.to_vec(&a)?, [7; 4]);
/// assert_eq!(s0.to_vec(&b)?, [9; 4]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Default)]
pub struct ForeignGroup<'a> {
    parts: SmallVec<[(&'a Stream, ForeignUses<'a>); 4]>,
}

impl<'a> ForeignGroup<'a> {
    /// No stream yet.
    pub fn new() -> ForeignGroup<'a> {
        ForeignGroup::default()
    }

    /// Adds `stream`, whose part of the call touches the memory of `uses`
    /// (each buffer reached from the stream's device: of that device, or of
    /// a peer whose access it opened). The call's raw streams come in the
    /// order the streams were added.
    pub fn on(mut self, stream: &'a Stream, uses: ForeignUses<'a>) -> ForeignGroup<'a> {
        self.parts.push((stream, uses));
        self
    }

    /// Runs `call`, which submits foreign work on the raw streams it is
    /// given (index `i`: the `i`-th stream added), as one tracked operation:
    /// each stream is first made to wait (device-side) for the conflicting
    /// uses of its part's memory on other streams, and after `call` returns
    /// each part's uses are recorded on its stream. `name` names the
    /// operation in errors.
    ///
    /// `call` runs at once, with the first stream's device context
    /// current and gpu-sync's bookkeeping of every device involved locked:
    /// a gpu-sync call inside it fails with `CUDA_ERROR_NOT_PERMITTED`.
    /// Unlike [`Stream::launch_foreign`], a failed `call` may have queued
    /// part of its work: its uses are recorded either way.
    ///
    /// # Panics
    /// When `call` panics: the operation is recorded as submitted (every
    /// part's uses), and the panic resumes once the bookkeeping is unlocked.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] with no stream, or when one buffer
    /// is declared for two streams and written by either (their work is
    /// concurrent: nothing orders it); [`crate::Error::DeviceMismatch`] for
    /// declared memory a stream's device does not reach;
    /// [`crate::Error::Capturing`] when a stream captures (a foreign group
    /// is not captured, unlike an [`nccl::group`](crate::nccl::group): its
    /// call is arbitrary code, and nothing promises that what it enqueues
    /// on several streams is work the captures can hold — it may order its
    /// streams with events of its own, merging or invalidating them);
    /// `call`'s error; a driver error of the waits.
    ///
    /// # Safety
    /// The promises of [`Stream::launch_foreign`], for each part: its work
    /// is submitted only on its own raw stream and only while `call` runs,
    /// touching only the memory declared for that stream (inputs read,
    /// outputs read or written), never waiting for work submitted after it;
    /// `call` leaves the streams and the current context as it found them.
    /// Rule 6 there holds for every device of the group: `call` must not
    /// block on another thread that makes a gpu-sync call — an NCCL group
    /// of several host threads is such a barrier: drive every rank of one
    /// process from one call, or give each thread its own operation.
    pub unsafe fn launch<R>(
        self,
        name: &'static str,
        call: impl FnOnce(&[BorrowedStream<'_>]) -> Result<R>,
    ) -> Result<R> {
        let parts: SmallVec<[engine::Part<'_>; 4]> =
            self.parts.iter().map(|(s, u)| engine::Part::new(&s.inner, u.uses.as_slice())).collect();
        let (r, _) = engine::submit_group(name, &parts, |raws| inside_caught(|| call(raws)))?;
        resumed(r)
    }
}

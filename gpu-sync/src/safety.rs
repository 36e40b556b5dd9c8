//! The unsafe contracts of gpu-sync, in one place: every `unsafe fn`, every
//! `unsafe impl`, what a caller promises, and why everything else is safe.
//!
//! This module holds documentation only.
//!
//! # The promise
//! Safe code cannot cause undefined behaviour through gpu-sync, also under
//! [`std::mem::forget`]: no device or host memory is read or written by the
//! device while Rust code may use it, freed while the device may still use
//! it, or used from two streams without an ordering between a write and any
//! other access. Errors are values ([`crate::Error`]); `Drop` never panics,
//! it logs and leaks what it cannot free safely.
//!
//! # What the promise rests on
//! Each point names the one function that carries it; every other file
//! reaches that state only through the engine's facade (`engine/mod.rs`),
//! whose inner modules are private: the compiler, not a review, keeps the
//! API files from writing tickets, books, markers or capture state.
//!
//! 1. **The driver behaves as documented.** The table gpu-sync calls is
//!    `libcuda` or one installed with `cuda_sys::install` (an `unsafe fn`:
//!    its caller promises the table behaves like the CUDA driver; `cuda-sim`
//!    is such a table). Every driver call passes `ffi::call`.
//! 2. **Kernels and foreign calls keep the contract they were declared
//!    with** (see [Kernels](#kernels) and [`crate::Stream::launch_foreign`]):
//!    the places where safe code runs device code nobody in this crate
//!    checked.
//! 3. **Ownership, not guards.** Device memory is owned by an
//!    `Arc<Allocation>` (buffers, graphs and replays hold clones); its free
//!    is `Allocation::free` (`engine/track/alloc.rs`): stream-ordered
//!    (`cuMemFreeAsync`) after device-side waits for every use not known
//!    complete, or after host waits without memory pools. Whether a free
//!    (or a module unload, a pinned free, a graph exec's destroy) happens
//!    now or later is decided by one function, `engine::free_now_or_later`:
//!    later on an ordinary thread inside a host function or a simulated
//!    kernel, at the end of the capture while its stream or this thread
//!    captures. Host memory given to an asynchronous copy is moved into a
//!    [`crate::Pending`], so a forgotten `Pending` leaks instead of freeing
//!    early.
//! 4. **The tracker sees every submission.** Every stream-ordered operation
//!    (device-side waits on events, `Stream::wait`, included) goes through
//!    `engine::submit`, which chooses the flavor (`engine/flavor/`) from the
//!    operation's `Kind`: the guards in one order before any lock
//!    (refusal inside a host function, deferred work drained, the capture
//!    routing), then, under the device's book lock (the trackers of its
//!    resources and the states of its streams; the books of several devices
//!    in ordinal order), the conflicting uses read, the stream made to wait
//!    for them, the driver call, the ticket drawn (`Timeline::draw_ticket`,
//!    the only draw: after the driver call returned, so the timeline is the
//!    driver's order) and the new uses recorded. A marker is recorded under
//!    that lock (`Timeline::record_marker`), so it covers exactly the
//!    tickets before it.
//!    Devices: the flavors ask one rule before any lock — every device
//!    buffer of an operation is reached from its stream's device
//!    (`DeviceInner::reaches`: the same device, or peer access opened by
//!    `Device::enable_peer_access`), or for a copy between devices at least
//!    one; else [`crate::Error::DeviceMismatch`] naming both. A reached
//!    buffer of another device is tracked in its own device's book, the
//!    books locked in ordinal order (the across flavor), so freeing it
//!    waits for the other device's uses too and a cross-device handoff
//!    waits on the GPU.
//!    **Several streams, one operation** (`engine::submit_group`, the group
//!    flavor; `ForeignGroup::launch`): work that one call enqueues on N
//!    streams (an NCCL group) is one operation. Every book involved (each
//!    stream's device, each buffer's, each conflicting use's) is locked by
//!    `book::locked`, the one function that locks several books: in ordinal
//!    order, and when the work under them finds a book missing it has
//!    submitted nothing, releases them all and locks again with it — so no
//!    thread ever waits for a book while holding a higher one, and the
//!    `loom` model in `engine/timeline/book.rs` checks this under groups
//!    given in opposite orders, an across relock and single-device work.
//!    Every stream waits for its own part's conflicts, the call runs once,
//!    and only after it returns each stream draws its ticket — per stream,
//!    for work its call enqueued — and its part's uses are recorded; after
//!    a failed or panicking call as well (it may have enqueued part of its
//!    work: recording uses of work that never ran only delays later work).
//!    One buffer used by two parts and written by either is refused: the
//!    parts run concurrently, and a tracker keeps one last write.
//! 5. **No blocking driver call under a book.** Host waits run unlocked
//!    (`Point::host_wait`, `Timeline::synchronize`,
//!    `engine::host_wait_device`). The one operation that blocks in the
//!    driver, a copy from or to borrowed host memory, is the blocking
//!    flavor (`flavor::blocking::run_idle`): it waits, unlocked, until its
//!    stream is idle and its dependencies complete, checks that under the
//!    book, and — when the caller's borrow is the only handle to the memory
//!    (`flavor::blocking::only_borrowed`: no graph holds it) — **releases the book**
//!    and makes the call holding only the stream's `blocking` lock (which
//!    keeps a capture from beginning under it; taken by nothing inside a
//!    host function), then relocks to draw the ticket and record the uses;
//!    the `blocking` lock stays held until the transfer is known complete
//!    (the stream synchronize after the call must not meet a capture begun
//!    meanwhile on another thread: the driver would refuse it and
//!    invalidate that capture).
//!    Its doc argues the gap: the ticket is drawn after the call as always;
//!    no other handle can submit a conflicting use of the memory (the
//!    caller borrows it; a graph, which could be replayed meanwhile, keeps
//!    the book held across the call instead — `tests/tests/deadlocks.rs`
//!    has the replay race that catches the unlocked variant); the host
//!    memory is borrowed until the copy is complete. With the book held or
//!    not, a host function the driver runs during the call never waits for
//!    a gpu-sync lock: by point 6 it never takes one.
//! 6. **Nothing inside a host function or a simulated kernel waits for
//!    gpu-sync.** The trampoline (`host_fn::launch`) and `sim::register`'s
//!    closures mark the thread (`host_fn::Inside`); then `ffi::refuse` —
//!    asked first by `engine::submit`, by every host wait, by every engine
//!    entry point that takes a lock (`EventInner`'s record, query and wait,
//!    `engine::wait_stream`, `engine::begin_capture`), by
//!    `engine::off_stream` (pinned alloc and free, which then refuses on a
//!    capturing thread), `engine::close_allocation` and
//!    `DeviceInner::call` — refuses before any lock with
//!    `CUDA_ERROR_NOT_PERMITTED`, and every `Drop` hands its work to the
//!    deferred-work queue (`engine::free_now_or_later`, `release::Held`,
//!    `Resource`'s slot, a timeline's slot). The same mark covers the
//!    closure of [`crate::Stream::launch_foreign`], which runs under the
//!    book lock.
//! 7. **A capture is atomic with its end.** Operations on a capturing
//!    stream join the graph under the capture's submission lock
//!    (`capture_gate::submit`), which `cuStreamEndCapture` also holds
//!    (`capture_gate::end`): an operation's driver call is in the graph, or
//!    finds the capture ended and runs as ordinary tracked work — never for
//!    real and unrecorded. Operations that may not be captured check the
//!    stream's capture state under its device's book lock, the lock
//!    `cuStreamBeginCapture` is called under (`flavor::captured::begin`).
//!    Lock order: a stream's `blocking` lock, then the capture lock, then
//!    the capture's stream list, then a device's book; a book before
//!    `GraphExec`'s launch lock (taken inside `submit`'s closure, and held
//!    past it only to store the launch's point, taking nothing; modelled
//!    in `capture_gate::funnel`, loom); an event's
//!    record lock before a book (`Stream::wait`, `SyncEvent::record`);
//!    books in ordinal order. An NCCL group on capturing streams
//!    (`flavor::group_captured`) is the one holder of several capture
//!    locks: taken in the order of the captures' addresses, all found open
//!    before its call, so no capture ends under it.
//! 8. **The context is the device's.** Every driver call that needs a
//!    context binds its device's primary context first
//!    (`DeviceInner::bind`: in the engine before a submission's waits and
//!    call, and `DeviceInner::call` for the rest); whether it is already
//!    current is asked of cuda-sys's `result::context::is_current_here`,
//!    which every safe `cuCtxSetCurrent` updates, so safe code (also through
//!    the re-exported `gpu_sync::cuda_sys`) cannot make it stale.
//! 9. **A module outlives its launches.** A launch notes its stream in the
//!    module (`ModuleInner::note_launch`, before the launch returns; one
//!    load for a stream seen recently; nothing where the launch will be
//!    refused). Per stream the module keeps what its unload must wait for:
//!    the stream while anything else holds it (a `Stream`, a buffer's
//!    recorded use); once nothing else does — found when a new stream joins
//!    the list — a marker of everything submitted there (`engine::TailMark`,
//!    from `Timeline::tail_mark`: an event outlives its driver stream),
//!    dropped once `cuEventQuery` finds it complete, or nothing if a host
//!    wait proved the stream's work complete. A stream let go takes no more
//!    launches: a launch needs a `Stream`, which holds the timeline, and
//!    nothing makes a `Weak` of one. Lock order: the module's list, then a
//!    book. The last drop waits on the host for each entry
//!    (`Timeline::host_wait_all_so_far`, `TailMark::host_wait`) before
//!    `cuModuleUnload`, and leaks the module if a wait fails. Graphs keep
//!    their modules alive.
//!
//! 10. **Recording adds only its own events, around the call it records.**
//!     While a device records (`gpu_sync::trace`), `engine::submit` makes
//!     the recorder's hook (`engine::hook`) and routes the operation as
//!     always — the same guards, the same routing and flavors — with the
//!     operation's driver-call closure wrapped (`Hooked::call`): before the call the host clock and, with
//!     `Timing::Events`, `cuEventRecord` of a timing event on the raw
//!     stream; after it the end event's record (or, with `Timing::Cupti`,
//!     CUPTI's external correlation push and pop). The wrapper runs where
//!     the closure would — inside the flavor, book held and context bound
//!     (for a blocking copy: on its idle stream under its `blocking` lock) —
//!     so the raw stream handle it records on is alive for the call
//!     (the engine's `Timeline` holds it) and the records sit right around
//!     the operation in the stream's order. The events are the recorder's
//!     own (`trace/events.rs`, created with `cuEventCreate` by the sink,
//!     never handed to user code, never waited on by the engine): recording
//!     one on a stream orders nothing for the tracker, draws no ticket and
//!     records no use, so the tracker's state is the same with recording on
//!     or off. A captured operation gets no event (an event record in a
//!     capture would become a graph node): the flag is set by the capture
//!     branch before the closure runs. The calibration's records (a stream's
//!     first operation, polled with `cuEventQuery`, never waited on under
//!     the book; the reference on the recorder's own stream, waited on in
//!     `Device::record` and `Recorder::take`, which hold no gpu-sync lock)
//!     keep point 5. The records are made through cuda-sys's safe per-call
//!     functions (`result::event::record`, `query`, `synchronize`,
//!     `elapsed_time`), whose handles prove liveness: no `unsafe` in
//!     `trace/`. Spans are resolved in `Recorder::take` (unlocked host
//!     waits). A sink's events are destroyed with the device's context
//!     bound or kept for the device's next recorder; inside a host function
//!     they are leaked, as point 6 requires. Lock order: a book, then a
//!     sink's state; the sinks' list, then a sink's state; `trace/` takes
//!     no gpu-sync lock and calls nothing in the engine.
//!
//! # Unsafe functions
//! Public:
//!
//! | item | the caller promises | why the rest is safe |
//! |---|---|---|
//! | `Module::kernel::<S>` (an `unsafe fn`: the typed-kernel contract) | the kernel's parameters are `S`: an `In<T>` parameter is only read, an `Out<T>` parameter is read and written, each through a `T` pointer; every access stays inside the view passed for any launch the checks accept; a scalar is not used as a bound except a `Len` parameter, which the launch checks to be at most every view's length | each launch ([`crate::Kernel::launch`]) is then safe: the argument tuple is typed by the compiler, views carry their device and length, the `Len` bound and each view's alignment are checked, the configuration against device limits, and every buffer's use is tracked as its `In`/`Out` says |
//! | [`crate::RawKernel::launch`] | 1. `S` is the kernel's real parameter list (count and type of each); 2. the kernel touches device memory only through its buffer arguments, within their lengths, writing only through `Out` ones (any other memory is the caller's to keep alive and ordered) | buffer arguments are kept alive and tracked exactly as for a typed launch |
//! | [`crate::Stream::launch_foreign`] | the work the closure submits goes on the stream it is given, while it runs; touches only the declared views (reads `input`s, reads/writes `output`s); nothing is submitted when it returns an error; the stream and the thread's context are left as found; it is capturable on a capturing stream; it does not wait for another thread's gpu-sync call (it runs holding the device's book: breaking this deadlocks, it is not unsound) | the declared views are kept alive and tracked exactly as a launch's buffers (one `engine::submit`); a panic of the closure is caught inside the submission, the declared uses are recorded as for a success (it may have queued work), and the panic then resumes; gpu-sync calls inside the closure refuse |
//! | `cuda_sys::install` (in `cuda-sys`) | the table behaves like the CUDA driver | gpu-sync relies on documented driver behaviour only |
//!
//! Crate-private (argued at each call site):
//!
//! | item | the caller promises |
//! |---|---|
//! | `Stream::h2d` (`memory/copy.rs`) | the host pointer is valid for `len` initialized elements and not written until the copy completed (pinned: the buffer is borrowed for the tracked copy; pageable: the call waits) |
//! | `Stream::d2h` (`memory/copy.rs`) | the host pointer is valid for `len` elements (initialized or not: `to_vec` passes a `Vec`'s spare capacity), neither read nor written by the host until the copy completed (pinned: moved into a `Pending`; pageable: the call waits) |
//! | `Stream::h2d_view`, `Stream::d2h_view` (`memory/copy.rs`) | as `h2d`/`d2h`, for a view's bytes; the view is (part of) one the caller borrows (`&mut` for an upload). The staged pageable copies (`Stream::upload_staged`, `download_staged`, 16 MiB and up) pass a chunk of a gpu-sync-owned `PinnedBuffer` with `Host::Pinned`, so the pinned rule holds: the chunk is written or read by the host only through `as_mut_slice`, which waits for its recorded uses, and freed only after them; the borrowed slice is touched by the host alone, inside the call, through safe slices |
//!
//! Every other `unsafe` block is a call of a `cuda_sys::result` function that
//! takes raw pointers (a free, a copy or fill, the kernel launch, a module
//! image, a host function) or the move of an owned handle out of
//! `release::Held`; its `// SAFETY:` comment argues what the driver will do
//! with the pointers, why they are live, and which lock or wait orders the
//! call. Calls whose handles prove liveness are safe functions of the
//! per-call layer and need no `unsafe` here. Five files allow `unsafe`
//! (`engine/capture/`, `engine/release.rs`, `engine/track/alloc.rs`,
//! `launch/`, `memory/`); the rest of the crate denies it.
//!
//! # Kernels
//! Running device code is inherently unsafe; gpu-sync puts the `unsafe` where
//! the knowledge is. Whoever declares a typed kernel from code this crate did
//! not write makes the promise above once, in an `unsafe` block around
//! `Module::kernel`; launches are safe afterwards. The `kernels` crate
//! declares its own kernels this way and hands them out only through
//! wrappers that check every length against the buffers passed. Anything
//! else goes through [`crate::RawKernel`], whose every launch is `unsafe`.
//!
//! # `Send` / `Sync`
//! Each rests on the driver's thread-safety rules: a context may be current
//! on many threads at once; streams, events, modules and functions are not
//! tied to a thread and may be used from any; graph objects (`CUgraph`,
//! `CUgraphExec`) are *not* internally synchronized, and calls on one must
//! be serialized ([graph object thread safety][ts]). cuda-sys argues these
//! once, for its owned and borrowed handles (`cuda_sys::handle`); gpu-sync's
//! devices, streams, events, markers, modules, graphs and graph execs hold
//! those handles and get `Send`/`Sync` from their fields. gpu-sync has no
//! `unsafe impl` (a test, `layers::no_unsafe_impl`, keeps it so):
//! - a [`crate::PinnedBuffer<T>`] holds its memory as a cuda-sys
//!   `OwnedHostAlloc` and a `PhantomData<T>`: `Send`/`Sync` when `T` is,
//!   like a `Vec<T>`; it hands out the bytes only through `&self` (reads)
//!   and `&mut self` (writes);
//! - a kernel (`KernelCore`, behind [`crate::Kernel`] and
//!   [`crate::RawKernel`]) names its function with a cuda-sys `RawHandle`
//!   (a name that may cross threads; using it takes the `unsafe`
//!   `borrow_raw`, argued at each use: the module the kernel keeps loaded
//!   keeps the function alive); its dynamic shared-memory limit is atomic;
//! - a [`crate::nccl::Communicator`] names its `ncclComm_t` with a cuda-sys
//!   `nccl::CommName` (a name that may cross threads; every NCCL call on it
//!   is an `unsafe` function of `cuda_sys::nccl::result` whose caller argues
//!   that it is alive and that no two threads call NCCL on it at once):
//!   gpu-sync calls NCCL on a communicator only while it owns it alone
//!   (creation, drop) or inside an engine operation on a stream of its
//!   device, which holds that device's book for the call — so calls never
//!   overlap, as NCCL requires.
//!
//! NCCL collectives ([`crate::nccl::group`]) are one engine operation over
//! their streams (point 4, several streams): the group's operations are
//! collected first, with their buffers borrowed and checked, and
//! `ncclGroupStart` … `ncclGroupEnd` runs inside the engine's call with no
//! user code between them, so the group ends on every path and nothing can
//! be recorded inside it. A group of one operation on a stream that is not
//! capturing is the engine's single-stream operation (point 4 for one
//! stream) and makes its one NCCL call alone (all-to-all keeps its group);
//! its uses are recorded once NCCL was called, whatever it answered. On
//! non-blocking communicators the call polls
//! `ncclCommGetAsyncError` until NCCL reports the work enqueued (bounded by
//! the communicator's timeout, then aborted), so each stream's ticket is
//! drawn after its work is enqueued. Blocking communicators (an opt-in,
//! for cliques whose every rank is in this process) enqueue inside
//! `ncclGroupEnd`, which may wait on the host for the clique's other ranks
//! — under the books, an exception to point 5 that is only sound because
//! every rank it can wait for is in the same call: `Group::check_blocking`
//! refuses, before any lock, a group missing a rank of a blocking clique,
//! giving its ranks different collectives, or sending what the peer does
//! not receive; nothing NCCL waits for then needs another thread.
//!
//! Without an `unsafe impl`: [`crate::Graph`] is `Send` but **not** `Sync`
//! (its `OwnedGraph` is not: calls on a graph must be serialized — even
//! `cuGraphGetNodes` and `cuGraphInstantiate` — so `&Graph` may not cross
//! threads; compile-fail case `share_graph_across_threads`);
//! [`crate::GraphExec`] is `Send + Sync` because its exec handle sits inside
//! the mutex held across every `cuGraphLaunch`.
//!
//! Types not listed get `Send`/`Sync` from their fields; [`crate::PerThreadStream`]
//! is neither (it names the calling thread's own default stream).
//!
//! # Sealed traits
//! Some guarantees hold because code outside the crate cannot implement a
//! trait: [`crate::Proof`] (a forged proof would release a
//! [`crate::Pending`] early), [`crate::AsDeviceSlice`] and
//! [`crate::AsDeviceSliceMut`] (views carry an allocation and bounds the
//! tracker trusts; only a writable view may be written), [`crate::AsEvent`]
//! and [`crate::RecordTarget`] (an event's recorded point), and the launch
//! traits [`crate::Param`], [`crate::KernelArg`], [`crate::Signature`],
//! [`crate::KernelArgs`] (a launch hands the driver exactly one pointer per
//! parameter, each to a value of the declared size, and every buffer
//! argument is a view the crate made, of the parameter's element type).
//!
//! How each seal holds: the public trait has a supertrait that is `pub`
//! inside a private module (`launch::signature::sealed`,
//! `memory::buffer::sealed`, `scope`'s and `event`'s `sealed`), which no
//! other crate can name, so none can implement it. No seal has a blanket
//! impl over `&S` or `&mut S`: `&Local` and `&mut Local` are local types
//! under the orphan rules, so such a blanket would let a user crate write
//! `impl KernelArg<Out<u32>> for &Local` (issue 25 found exactly that: a
//! mapped host address passed as an `Out` buffer, one buffer's allocation
//! with another's address, a length longer than the view). The seals are
//! also *per type parameter* where the trait has one: a `KernelArg<P>` needs
//! `ArgSeal<P>`, implemented for `&S` with `P = In<T>` only where `S` is a
//! sealed readable view **of `T`**, for `&mut S` with `P = Out<T>` only where
//! `S` is a sealed **writable** view of `T` (`MutSeal<T>`: a
//! `DeviceBuffer<T>` or `DeviceSliceMut<T>`, never a `DeviceSlice`), for a
//! scalar with `P` its own type, and for `u64` with `P = Len`; and
//! `AsDeviceSlice<T>` needs `ViewSeal<T>`, implemented for
//! `DeviceBuffer<T>`, `DeviceSlice<T>` and `DeviceSliceMut<T>` with that same
//! `T` — so `impl AsDeviceSlice<Big> for DeviceBuffer<u8>` (a byte buffer
//! read as 16-byte elements) and `impl AsDeviceSliceMut<W> for
//! DeviceSlice<'_, W>` (a shared view made writable) are refused too.
//!
//! The compile-fail cases keep each seal: `forge_a_proof`,
//! `implement_proof`, `implement_record_target`, `implement_kernel_arg`
//! (a local type, `&Local` and `&mut Local`), `implement_param`,
//! `implement_signature`, `implement_kernel_args` (each for `&Local` and
//! `&mut Local`), `build_raw_arg` and `implement_device_slice`.
//!
//! ## Public items reachable from safe code but not documented
//! A sealed trait's supertrait methods can still be *called* through a
//! generic bound. What they return is opaque, and no public function takes
//! it back:
//!
//! | item | reachable as | why harmless |
//! |---|---|---|
//! | `ArgSeal::raw` (seal of `KernelArg`) | `a.raw()` on any `A: KernelArg<P>` | returns a `RawArg`: a struct with a crate-private field, no public constructor, field or method, not re-exported; nothing public accepts one |
//! | `ArgsSeal::raw_args`, `ArgsSeal::Raw` (seal of `KernelArgs`) | on any `A: KernelArgs<S>` | an array of `RawArg`s, as above |
//! | `ViewSeal::view` (seal of `AsDeviceSlice`) | `s.view()` on any `S: AsDeviceSlice<T>` | returns a `View`: crate-private fields, no public method, not re-exported; nothing public accepts one |
//! | `SimParam`/`SimSignature`'s hidden `Staged`, `spec`, `load`, `view`, `store` (feature `sim`) | on the crate's parameter types (`SimParam: Param`, which is sealed, so no new implementors) | they move a simulated kernel's arguments between a `cuda_sim::KernelCall` and the closure; every access goes through the call's own checked reads and writes of simulated memory, which the race oracle sees |
//!
//! Nothing else in gpu-sync is `#[doc(hidden)]`.
//!
//! # Checked by tests
//! - Tracking and capture: the race oracle of `cuda-sim` in every
//!   integration test; `tests/tests/capture_race.rs` (three threads racing a
//!   capture's end).
//! - The deadlocks a guard asked after a lock caused, and the two points
//!   above about contexts and modules: `tests/tests/deadlocks.rs` (each
//!   under a watchdog).
//! - The foreign door: `tests/tests/foreign.rs` (declared uses ordered; an
//!   undeclared write caught by the oracle) and `tests/tests/foreign_panic.rs`
//!   (a closure that queues a write and panics leaves it tracked).
//! - A module's unload and the streams it keeps: `tests/tests/module_streams.rs`.
//! - Re-entry into the simulator from a host function or a simulated kernel,
//!   through every simulated table (driver, CUPTI): `cuda-sim/tests/reentry.rs`
//!   and `tests/tests/deadlocks.rs`.
//! - The capture protocol's core (`engine/capture/capture_gate.rs`, the
//!   code the engine runs) under the `loom` model checker: `RUSTFLAGS="--cfg loom"
//!   CARGO_TARGET_DIR=target/loom cargo test -p gpu-sync --lib --release
//!   capture_gate`.
//! - The lock protocol of several books (`engine/timeline/book.rs`:
//!   `BookList`, `locked`) under `loom`: the same command with `loom_model`;
//!   one operation over several streams and devices under the race oracle:
//!   `tests/tests/group.rs`.
//! - Host memory: the Miri subset (`tests/tests/miri.rs`).
//!
//! [ts]: https://docs.nvidia.com/cuda/cuda-driver-api/graphs-thread-safety.html

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
//! 1. **The driver behaves as documented.** The table gpu-sync calls is
//!    `libcuda` or one installed with `cuda_sys::install` (an `unsafe fn`:
//!    its caller promises the table behaves like the CUDA driver; `cuda-sim`
//!    is such a table).
//! 2. **Kernels keep the contract they were declared with** (see
//!    [Kernels](#kernels)): the one place where safe code runs device code
//!    nobody in this crate checked.
//! 3. **Ownership, not guards.** Device memory is owned by an
//!    `Arc<Allocation>` (buffers, graphs and replays hold clones) and freed
//!    stream-ordered (`cuMemFreeAsync`) after every recorded use, or after a
//!    host wait for them without memory pools; host memory given to an
//!    asynchronous copy is moved into a [`crate::Pending`], so a forgotten
//!    `Pending` leaks instead of freeing early.
//! 4. **The tracker sees every submission.** Each operation on a buffer goes
//!    through one function that, under the device's book lock (the trackers
//!    of its resources and the states of its streams), reads the
//!    conflicting uses, makes the stream wait for them, submits, and records
//!    the new uses; a stream's ticket is taken under that lock after the
//!    driver call returned, so the timeline is the driver's order, and a
//!    marker recorded under that lock covers exactly the tickets before it.
//! 5. **A capture is atomic with its end.** Operations on a capturing stream
//!    join the graph under the capture's submission lock, which
//!    `cuStreamEndCapture` also holds: an operation's driver call is in the
//!    graph, or finds the capture ended and runs as ordinary tracked work —
//!    never for real and unrecorded (issue 7, hole 4). Operations that may not
//!    be captured check the stream's capture state under its device's book
//!    lock, the lock `cuStreamBeginCapture` is called under. Lock order:
//!    capture lock, then the capture's stream list, then a device's book;
//!    `GraphExec`'s launch lock before a book; books in ordinal order.
//!
//! # Unsafe functions
//! Public:
//!
//! | item | the caller promises | why the rest is safe |
//! |---|---|---|
//! | `Module::kernel::<S>` (an `unsafe fn` with the typed-kernel contract of issue 7, hole 1) | the kernel's parameters are `S`: an `In<T>` parameter is only read, an `Out<T>` parameter is read and written, each through a `T` pointer; every access stays inside the view passed for any launch the checks accept; a scalar is not used as a bound except a `Len` parameter, which the launch checks to be at most every view's length | each launch ([`crate::Kernel::launch`]) is then safe: the argument tuple is typed by the compiler, views carry their device and length, the `Len` bound and each view's alignment are checked, the configuration against device limits, and every buffer's use is tracked as its `In`/`Out` says |
//! | [`crate::RawKernel::launch`] | 1. `S` is the kernel's real parameter list (count and type of each); 2. the kernel touches device memory only through its buffer arguments, within their lengths, writing only through `Out` ones (any other memory is the caller's to keep alive and ordered) | buffer arguments are kept alive and tracked exactly as for a typed launch |
//! | `cuda_sys::install` (in `cuda-sys`) | the table behaves like the CUDA driver | gpu-sync relies on documented driver behaviour only |
//!
//! Crate-private (argued at each call site):
//!
//! | item | the caller promises |
//! |---|---|
//! | `Stream::h2d` (`memory/copy.rs`) | the host pointer is valid for `len` initialized elements and not written until the copy completed (pinned: the buffer is borrowed for the tracked copy; pageable: the call waits) |
//! | `Stream::d2h` (`memory/copy.rs`) | the host pointer is valid for `len` elements, neither read nor written by the host until the copy completed (pinned: moved into a `Pending`; pageable: the call waits) |
//!
//! Every other `unsafe` block is a call of a `cuda_sys::result` function that
//! takes raw pointers (a free, a copy or fill, the kernel launch, a module
//! image, a host function) or the move of an owned handle out of
//! `release::Held`; its `// SAFETY:` comment argues what the driver will do
//! with the pointers, why they are live, and which lock or wait orders the
//! call. Calls whose handles prove liveness are safe functions of the
//! per-call layer and need no `unsafe` here. Four modules allow `unsafe`
//! (`capture`, `launch`, `memory`, `release`); the rest of the crate denies
//! it.
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
//!   keeps the function alive); its dynamic shared-memory limit is atomic.
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
//! [`crate::Pending`] early), [`crate::AsDeviceSlice`] (views carry an
//! allocation and bounds the tracker trusts), [`crate::AsEvent`] and
//! [`crate::RecordTarget`] (an event's recorded point), and the launch
//! traits [`crate::Param`], [`crate::KernelArg`], [`crate::Signature`],
//! [`crate::KernelArgs`] (a launch hands the driver exactly one pointer per
//! parameter, each to a value of the declared size). The compile-fail cases
//! `forge_a_proof`, `implement_proof`, `implement_record_target` and
//! `implement_kernel_arg` keep them sealed.
//!
//! # Checked by tests
//! - Tracking and capture: the race oracle of `cuda-sim` in every
//!   integration test; `tests/tests/capture_race.rs` (three threads racing a
//!   capture's end).
//! - The capture protocol's core (`capture/capture_gate.rs`, the code `graph.rs`
//!   runs) under the `loom` model checker: `RUSTFLAGS="--cfg loom"
//!   CARGO_TARGET_DIR=target/loom cargo test -p gpu-sync --lib --release
//!   capture_gate`.
//! - Host memory: the Miri subset (`tests/tests/miri.rs`).
//!
//! [ts]: https://docs.nvidia.com/cuda/cuda-driver-api/graphs-thread-safety.html

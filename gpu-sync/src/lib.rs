//! Safe CUDA streams, events and buffers whose synchronization is encoded in
//! types.
//!
//! CUDA work is asynchronous: a [`Stream`] is a FIFO queue, an event a fence
//! on it. The classic bugs — using a buffer on a second stream without a
//! wait, freeing it while another stream still reads it, reading an
//! asynchronous download before it lands — cannot happen here:
//!
//! - **record_stream by construction.** Every copy, fill and launch records on
//!   each buffer it touches which stream used it, how (read or write), and at
//!   which point of that stream's timeline. A use on another stream after a
//!   write waits for it device-side automatically; a write waits for every
//!   reader (kept per stream). Dropping a buffer frees it stream-ordered after
//!   all of them (`cuMemFreeAsync`): no host block, no early reuse.
//! - **Cheap timelines.** Each stream counts its submissions; an event is
//!   recorded only when another stream or the host must wait on a point, and
//!   reused while it still covers it. Same-stream work costs a counter write.
//! - **Wait scopes are types.** Host waits come in three sizes —
//!   [`SyncEvent::synchronize`]/[`TimingEvent::synchronize`] <
//!   [`Stream::synchronize`] < [`Device::synchronize`] — and each returns a
//!   proof of what it covers. A [`Pending`] value (an asynchronous download)
//!   is released by its own wait, or by a proof that covers it (checked in
//!   O(1)).
//! - **Typed events.** [`TimingEvent::elapsed`] exists; a [`SyncEvent`] has no
//!   `elapsed`.
//! - **Pinned vs pageable is a type.** Only a [`PinnedBuffer`] gets
//!   asynchronous copies; pageable slices get synchronous ones.
//! - **Typed launches.** Declaring a [`Kernel`] is `unsafe`
//!   ([`Module::kernel`]: its `# Safety` is the kernel's contract, stated
//!   once); its Rust signature is checked against the driver at load, and
//!   each launch is then safe: arguments of the wrong type do not compile,
//!   misaligned views and [`Len`]s longer than a view are errors.
//!   [`Module::load`] validates the image's own sizes against the slice.
//! - **No undefined behaviour from safe code, even under `mem::forget`**:
//!   memory is reclaimed by shared ownership and deferred, stream-ordered
//!   frees, never by a guard's `Drop`.
//!
//! # Example
//! Two streams, no explicit synchronization between them, and a host wait
//! whose proof releases an asynchronous download (on the simulator here:
//! `select_driver` picks the GPU where the CUDA driver loads):
//!
//! ```
//! # gpu_sync::sim::install()?;
//! use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream, TimingEvent};
//! let device = Device::get(0)?;
//! let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
//! let mut x = DeviceBuffer::<u32>::alloc(&a, 1 << 16)?;
//! let start = TimingEvent::new(&device)?;
//! start.record(&b)?;
//! a.fill_u32(&mut x, 3)?; // written on a
//! let mut y = DeviceBuffer::<u32>::alloc(&b, 1 << 16)?;
//! b.copy(&x, &mut y)?; // read on b: b waits for a's fill, device-side
//! let end = TimingEvent::new(&device)?;
//! end.record(&b)?;
//! let host = b.download(&y, PinnedBuffer::new(&device, 1 << 16, HostAllocFlags::empty())?)?;
//! let proof = b.synchronize()?; // covers everything queued on b before it
//! let host = host.redeem(&proof).map_err(|e| e.error)?; // O(1), no driver call
//! assert!(host.iter().all(|&v| v == 3));
//! println!("copy after fill: {:?} of device time", start.elapsed(&end)?);
//! # Ok::<(), gpu_sync::Error>(())
//! ```
//! [`Pending`], [`Stream`], [`DeviceBuffer`], [`TimingEvent`] and
//! [`Graph`] have more; `examples/` in the repository has whole programs.
//!
//! Errors name the driver call and its `CUresult`; sticky errors are reported
//! as [`Error::ContextLost`]. `Drop` never panics: it logs (through `log`)
//! and leaks what it cannot free safely.
//!
//! # Threads
//! [`Device`], [`Stream`], [`DeviceBuffer`], [`PinnedBuffer`], events,
//! [`Module`], [`Kernel`], [`GraphExec`] and proofs are `Send + Sync`: the
//! driver API is thread-safe for them, and gpu-sync serializes submissions
//! per stream so its timeline matches the driver's order. A [`Graph`] is
//! `Send` only: the driver does not synchronize graph objects. An operation
//! racing the end of a capture on its stream joins the graph or runs as
//! ordinary tracked work, never untracked. [`PerThreadStream`] is neither
//! `Send` nor `Sync`: it names the calling thread's own default stream.
//!
//! # Safety
//! Every `unsafe fn`, every `unsafe impl` and what the rest relies on are
//! listed in [`safety`].
//!
//! The driver is loaded at run time (`cuda-sys`); tests install the software
//! driver `cuda-sim` in its place.
#![deny(unsafe_code)]

// The modules, bottom-up (each uses only those before it; see
// docs/ARCHITECTURE.md and the `layers` test):
// the driver door, proofs, captures and host functions, devices, the
// tracker, streams and events, memory, launches and graphs.
mod backend;
mod device;
mod engine;
mod error;
mod event;
mod ffi;
mod graph;
mod launch;
#[cfg(test)]
mod layers;
mod memory;
pub mod nccl;
pub mod safety;
mod scope;
#[cfg(feature = "sim")]
pub mod sim;
mod stream;
pub mod trace;

pub use launch::nvrtc;

pub use backend::{Backend, DRIVER_ENV, DriverChoice, select_driver, select_driver_with};
pub use device::{Device, P2PAttributes};
pub use engine::{Access, NotCovered, Pending, Polled};
pub use error::{Error, Result};
pub use event::{AsEvent, RecordTarget, SyncEvent, TimingEvent};
pub use graph::{Capture, Graph, GraphExec, capture_each};
pub use launch::config::{Dim3, LaunchConfig};
pub use launch::foreign::{ForeignGroup, ForeignUses};
pub use launch::kernel::{Kernel, RawKernel};
pub use launch::module::Module;
pub use launch::signature::{In, KernelArg, KernelArgs, Len, Out, Param, Signature};
pub use memory::buffer::{AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceSlice, DeviceSliceMut};
pub use memory::ledger::{MemoryStats, PoolStats};
pub use memory::pinned::{HostAllocFlags, PinnedBuffer};
pub use memory::prefetch::Prefetcher;
pub use scope::{DeviceSynced, EventSynced, Proof, StreamSynced, WorkPoint};
pub use stream::{LegacyStream, PerThreadStream, Stream};

// bytemuck's traits, documented there (element types of buffers and
// kernel arguments).
#[doc(no_inline)]
pub use bytemuck::{Pod, Zeroable};
pub use cuda_sys;

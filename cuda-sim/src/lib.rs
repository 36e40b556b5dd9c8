//! A software CUDA **driver**: the [`cuda_sys::Driver`] function table
//! implemented over host memory, with a seeded scheduler and a race oracle,
//! so code written against the driver API (the `gpu-sync` crate above all)
//! is tested in CI without a GPU.
//!
//! [`install`] makes it the process-wide driver (or use [`table`] directly).
//! Each test runs in its own [`Session`]: its own seed, race reports, call
//! log, fault plan and sticky-error state, so tests stay isolated and
//! deterministic while cargo runs them in parallel threads.
//!
//! # What it models
//! - **Devices**: [`Config::devices`] H100-like devices (attributes, name,
//!   UUID, PCI bus id, memory budget), one primary context each, current
//!   context per OS thread, peer access.
//! - **Memory**: device memory is host memory the simulator owns
//!   (poison-filled with `0xCD`); a `CUdeviceptr` is its address, used only
//!   as a number and looked up in a map. Pinned host memory
//!   (`cuMemHostAlloc`) is tracked, and device-mapped blocks are addressable
//!   from the device. Freed blocks are quarantined (up to 256 MiB, 16,384
//!   blocks), then remembered as freed ranges (the last 65,536, forgotten
//!   when an allocation takes the address), so late accesses are
//!   recognized as use-after-free.
//! - **Asynchrony**: work is queued per stream and runs only when the host
//!   synchronizes or queries, in a seeded random order that respects stream
//!   FIFO order, event waits and the legacy default stream's implicit
//!   ordering. Pinned copies touch host memory when they execute; pageable
//!   H2D copies stage at call time and pageable D2H copies block.
//! - **Timing**: simulated nanoseconds from one device model ([`model`]:
//!   the simulated device's own HBM bandwidth and FP32 rate, a PCIe link, a
//!   1 µs shortest kernel) — kernels from their registration or from the
//!   bytes they may touch, copies and memsets from the bandwidths — so
//!   `cuEventElapsedTime` and CUPTI's records are exact and reproducible.
//! - **Race oracle** (PyTorch CSAN's rules): vector clocks per stream and
//!   per session host; every device access (kernel parameters as
//!   registered, copies, memsets, stream-ordered allocation and free) and
//!   declared host access ([`host_read`], [`host_write`]) to pinned memory is
//!   checked against the allocation's history. Races, use-after-free, double
//!   free and frees unordered with a use are reported ([`Session::races`]),
//!   not fatal.
//!   A destroyed stream leaves the clocks once it has drained, whether or
//!   not a host observed its last work (a stream-ordered free nobody waits
//!   for): one entry per session ("retired streams") and one per device
//!   (its drained streams) stand for it, each covering only what its
//!   holder really saw, so clocks, and each operation's cost, stay as small
//!   as the set of live streams however many came and went; no race with
//!   its work is lost.
//!   [`Session::footprint`] shows what the simulator holds.
//! - **Graphs**: stream capture (with fork/join through events; event-record
//!   nodes from `cuEventRecordWithFlags(.., CU_EVENT_RECORD_EXTERNAL)`, which
//!   record their event at each launch, timestamped at the node), instantiate,
//!   launch; capture misuse errors (`UNJOINED`, `ISOLATION`, `INVALIDATED`,
//!   `UNSUPPORTED`, `IMPLICIT`, `UNMATCHED`, `WRONG_THREAD`).
//! - **Faults**: [`FaultPlan`] fails chosen calls; sticky codes poison the
//!   session like a lost context. Kernel faults (illegal address) are sticky.
//! - **Kernels** run as CPU reference implementations registered by name
//!   ([`register_kernel`]); every module exposes every registered kernel.
//!
//! # What it does not model (limits)
//! - No real device code: module images are only checked for a fatbin, ELF
//!   or PTX header; `cuModuleGetFunction` finds registered kernels only.
//! - Inside a capture, `cuMemAllocAsync`, `cuMemFreeAsync`, pageable copies,
//!   host functions and graph launches are refused with
//!   `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` (and invalidate the capture).
//! - No race detection between nodes of one graph launch (a launch is one
//!   operation whose accesses are the union of its nodes').
//! - A pending kernel's declared range for host checks is from each pointer
//!   argument to the end of its allocation (conservative).
//! - Peer access is per session (the simulator's process): every pair of
//!   distinct devices can access each other (rank 0, native atomics), at
//!   most 8 peers per context. A kernel touching another device's memory
//!   without access (the context's for `cuMemAlloc` memory, the pool's for
//!   pool memory) faults with `CUDA_ERROR_ILLEGAL_ADDRESS`, checked when it
//!   runs; copies never fault, they take the peer link
//!   ([`model::NVLINK_BYTES_PER_NS`]) when either device reaches the other's
//!   memory, else are staged at the host link's rate. A captured copy keeps
//!   the link of its capture. Memory pools are per-session statistics over
//!   ordinary allocations, never reused addresses.
//! - Contexts are never destroyed: releasing the last primary-context
//!   reference keeps its memory and streams (sessions share contexts).
//! - `CU_EVENT_INTERPROCESS`, `extra` launch parameters and device-launch
//!   graphs return `CUDA_ERROR_NOT_SUPPORTED`.
//! - Stream and event synchronization run the calling session's work (and
//!   whatever it depends on); a context synchronization runs every
//!   session's work on the device, as on a GPU, and every session's host
//!   clock learns of it. A test that plants an unsynchronized access must
//!   therefore not run beside tests that synchronize the device (it would be
//!   ordered, so not flagged); the workspace's tests hold a process-wide
//!   lock for that.
//! - Host functions and registered kernels' CPU versions run with the
//!   simulator's lock held: calling back into the driver from one returns
//!   `CUDA_ERROR_NOT_PERMITTED`, into CUPTI `CUPTI_ERROR_INVALID_OPERATION`
//!   (every table goes through one door that refuses re-entry before
//!   locking), and [`Session`] methods and [`host_read`] do nothing.
//! - Sticky errors poison the whole session (every device), not one context;
//!   a poisoned session's queued work retires without running (a lost
//!   context's queues are aborted), whoever synchronizes.
//! - `cuLaunchKernel` requires the stream's context to be current
//!   (`CUDA_ERROR_INVALID_CONTEXT` otherwise); copies and waits do not.
//! - A registered kernel's accesses are checked against the allocations
//!   before any host buffer of the requested size is made
//!   ([`KernelCall::check_access`]): a length past the buffer is
//!   `CUDA_ERROR_ILLEGAL_ADDRESS` (sticky), never a huge allocation.
//! - A copy into pinned memory writes through the pointer the program
//!   passed (so Miri judges the program's borrows), when the copy runs.
//! - Pinned memory is device-addressable only when allocated with
//!   `CU_MEMHOSTALLOC_DEVICEMAP`; a kernel touching other pinned memory
//!   faults with `CUDA_ERROR_ILLEGAL_ADDRESS`.
//! - `cuStreamDestroy` of a capturing stream fails with
//!   `CUDA_ERROR_ILLEGAL_STATE` (it stays capturing).
//! - Simulated time only advances through queued work and host waits; it
//!   has no launch overhead, contention between streams or clock changes.
//! - Device work on freed memory does not fault (a GPU usually does not
//!   fault on freed pool memory): it is a [`RaceKind::UseAfterFree`] or
//!   [`RaceKind::UnorderedFree`] report, as compute-sanitizer's memcheck
//!   gives it; kernels read it as poison (`0xCD`), their writes, copies and
//!   memsets to it are dropped. A use is recognized while the freed range
//!   is remembered (above); after that, or for memory never mapped, it is
//!   `CUDA_ERROR_ILLEGAL_ADDRESS` (sticky).
//!
//! # Error codes for misuse (what layers above can match)
//! - Capture: waiting in a capture on an event recorded outside it:
//!   `STREAM_CAPTURE_ISOLATION`; ending with a forked stream not joined back:
//!   `STREAM_CAPTURE_UNJOINED`; synchronizing/querying a capturing stream or
//!   an event recorded in a capture, `cuCtxSynchronize` with a capture
//!   active, `cuMemAlloc`/`cuMemFree` during a non-relaxed capture:
//!   `STREAM_CAPTURE_UNSUPPORTED`; legacy-stream work while a blocking
//!   stream captures: `STREAM_CAPTURE_IMPLICIT`; each of these invalidates
//!   the capture, and `cuStreamEndCapture` then fails with
//!   `STREAM_CAPTURE_INVALIDATED` (and so does further work on the stream).
//! - Memory: second free `INVALID_VALUE` (and a [`RaceKind::DoubleFree`]
//!   report); use after free at execution a [`RaceKind::UseAfterFree`]
//!   report, no error; an access to memory never mapped at execution
//!   `ILLEGAL_ADDRESS` (sticky).
#![deny(unsafe_code)]

mod clock;
mod config;
pub mod cupti;
mod cupti_profiler;
mod device;
mod entry;
mod event;
mod faults;
mod graph;
mod host;
mod memory;
pub mod model;
mod module;
pub mod nccl;
mod ops;
mod oracle;
mod peer;
mod pool;
mod registry;
mod report;
mod result;
mod retire;
mod rng;
mod scheduler;
mod session;
mod state;
mod stream;

pub use crate::{
    config::{Config, ConfigError, DEVICES_ENV, MAX_DEVICES, configure, current_config},
    entry::{ORIGIN, install, table},
    faults::FaultPlan,
    host::{host_read, host_write},
    registry::{
        DurationFn, KernelCall, KernelFault, KernelFn, KernelSpec, ParamKind, ParamSpec, Touched,
        lookup_kernel, register_kernel,
    },
    report::{Access, Actor, RaceKind, RaceReport},
    session::{CALL_LOG, Footprint, LiveCounts, Session, SessionGuard},
};

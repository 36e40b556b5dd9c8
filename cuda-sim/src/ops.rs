//! Queued work: what an operation does, what it declares it touches, and
//! how long it takes in simulated time.
//!
//! This file holds `unsafe` code only to mark two raw-pointer wrappers
//! `Send` (a host function's user data, a pageable copy destination).
#![allow(unsafe_code)]

use crate::graph::GraphBody;
use crate::memory::Memory;
use crate::oracle::{Record, Stamp};
use crate::registry::{KernelCall, KernelFault, KernelSpec, ParamKind};
use std::ffi::c_void;
use std::sync::Arc;

/// A raw pointer carried by a queued operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut c_void);

// SAFETY: the pointer is only dereferenced by the simulator with the global
// lock held, at a time the CUDA contract makes it valid: a pageable D2H
// destination while the issuing call is still blocked waiting for that very
// copy (`entry::copy`), a pinned D2H destination while its block is live
// (checked first) and the program keeps it lent to the copy (CUDA's
// contract for asynchronous copies), a host function's user data by the
// host function the program registered with it (the program's obligation,
// as in CUDA).
unsafe impl Send for SendPtr {}

// SAFETY: as for `Send`: shared references to a `SendPtr` (inside an
// `Arc<GraphBody>` or `Arc<Launch>`) only copy the address; it is
// dereferenced solely under the global lock, by one thread at a time.
unsafe impl Sync for SendPtr {}

/// Where one side of a copy is.
#[derive(Debug, Clone)]
pub(crate) enum Loc {
    /// A device address (device memory, or device-mapped pinned memory).
    Device(u64),
    /// A host address inside a pinned allocation, accessed when the copy
    /// runs, and the pointer the program passed for it: a copy into pinned
    /// memory writes through the program's own pointer (its provenance, for
    /// Miri), as the program lent it to the device.
    Pinned(u64, SendPtr),
    /// Pageable host data copied at call time.
    Staged(Arc<[u8]>),
    /// A pageable host destination, written when the copy runs (the call
    /// blocks until then).
    Pageable(SendPtr),
}

/// A kernel launch with its parameters copied at call time.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) spec: KernelSpec,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared: u32,
    pub(crate) args: Vec<Vec<u8>>,
}

/// What an operation does.
#[derive(Debug, Clone)]
pub(crate) enum Work {
    /// An event record or a stream wait: ordering only.
    Marker,
    Kernel(Arc<Launch>),
    Copy {
        api: &'static str,
        dst: Loc,
        src: Loc,
        len: u64,
    },
    Memset {
        api: &'static str,
        dst: u64,
        count: u64,
        elem: u8,
        value: u32,
    },
    HostFn {
        f: unsafe extern "C" fn(*mut c_void),
        data: SendPtr,
    },
    /// `cuMemAllocAsync`: the allocation happens on the stream.
    AllocAsync {
        base: u64,
    },
    /// `cuMemFreeAsync`.
    FreeAsync {
        base: u64,
    },
    /// `cuGraphLaunch`.
    Graph(Arc<GraphBody>),
    /// An event-record node of a graph (`cuEventRecordWithFlags` with
    /// `CU_EVENT_RECORD_EXTERNAL` while capturing): ordering only; each
    /// launch of the graph records the event at this node's finish
    /// ([`crate::graph::launch`]).
    EventRecord(u64),
    /// One rank's part of NCCL collectives (`crate::nccl`): runs when every
    /// part of its collectives is reached on its stream.
    Nccl(Arc<crate::nccl::Part>),
}

/// A byte range an operation declares it will touch, for checks against
/// work not yet executed (host accesses, host frees).
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    pub(crate) base: u64,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) write: bool,
    pub(crate) free: bool,
    pub(crate) op: Arc<str>,
}

impl Declared {
    /// As an access record with `stamp`.
    pub(crate) fn record(&self, stamp: &Stamp) -> Record {
        Record {
            stamp: stamp.clone(),
            start: self.start,
            end: self.end,
            write: self.write,
            free: self.free,
            op: self.op.clone(),
        }
    }
}

/// A queued operation.
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) id: u64,
    pub(crate) session: u64,
    pub(crate) stream: u64,
    /// Random priority from the stream's generator: among ready operations
    /// the lowest runs first.
    pub(crate) prio: u64,
    /// Randomness for the operation itself (a graph's node order).
    pub(crate) seed: u64,
    /// Operations (on other streams) that must complete first.
    pub(crate) deps: Vec<u64>,
    pub(crate) stamp: Stamp,
    /// Simulated start time (ns).
    pub(crate) start: u64,
    /// Simulated end time (ns).
    pub(crate) end: u64,
    pub(crate) work: Work,
    pub(crate) declared: Vec<Declared>,
}

/// Description of a kernel parameter access.
pub(crate) fn kernel_param_op(name: &str, param: usize, write: bool) -> String {
    format!("kernel {name} param {param} ({})", if write { "write" } else { "read" })
}

/// The device address held by pointer argument `i`, if it is one.
pub(crate) fn pointer_arg(l: &Launch, i: usize) -> Option<u64> {
    let a = l.args.get(i)?;
    let bytes: [u8; 8] = a.as_slice().try_into().ok()?;
    Some(u64::from_ne_bytes(bytes))
}

impl Work {
    /// The ranges this work declares, resolved against `mem` (ranges it
    /// cannot resolve are left out: they fault when executed).
    pub(crate) fn declared(&self, mem: &Memory) -> Vec<Declared> {
        let whole = |base: u64, write: bool, free: bool, op: &str| {
            mem.block(base).map(|b| Declared {
                base,
                start: base,
                end: b.end(base),
                write,
                free,
                op: op.into(),
            })
        };
        let range = |addr: u64, len: u64, write: bool, op: String| {
            let base = mem.containing(addr, len)?;
            Some(Declared { base, start: addr, end: addr + len, write, free: false, op: op.into() })
        };
        match self {
            Work::Marker | Work::EventRecord(_) | Work::HostFn { .. } => Vec::new(),
            Work::AllocAsync { base } => whole(*base, true, false, "cuMemAllocAsync").into_iter().collect(),
            Work::FreeAsync { base } => whole(*base, true, true, "cuMemFreeAsync").into_iter().collect(),
            Work::Memset { api, dst, count, elem, .. } => {
                range(*dst, count * u64::from(*elem), true, format!("{api} destination"))
                    .into_iter()
                    .collect()
            }
            Work::Copy { api, dst, src, len } => {
                let mut v = Vec::new();
                if let Loc::Device(a) | Loc::Pinned(a, _) = src {
                    v.extend(range(*a, *len, false, format!("{api} source")));
                }
                if let Loc::Device(a) | Loc::Pinned(a, _) = dst {
                    v.extend(range(*a, *len, true, format!("{api} destination")));
                }
                v
            }
            Work::Kernel(l) => {
                let mut v = Vec::new();
                for (i, p) in l.spec.params.iter().enumerate() {
                    if p.kind == ParamKind::Scalar {
                        continue;
                    }
                    let Some(ptr) = pointer_arg(l, i) else { continue };
                    let Some(base) = mem.containing(ptr, 1) else { continue };
                    let Some(b) = mem.block(base) else { continue };
                    let write = p.kind != ParamKind::Read;
                    let op: Arc<str> = kernel_param_op(l.spec.name, i, write).into();
                    v.push(Declared { base, start: ptr, end: b.end(base), write, free: false, op });
                }
                v
            }
            Work::Graph(g) => g.nodes.iter().flat_map(|n| n.work.declared(mem)).collect(),
            Work::Nccl(p) => p.declared(mem),
        }
    }
}

/// Memory that faults on every access: what a duration function sees.
struct NoMemory;

impl crate::registry::DeviceMemory for NoMemory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), (u64, u64)> {
        Err((addr, out.len() as u64))
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), (u64, u64)> {
        Err((addr, data.len() as u64))
    }
    fn extent(&self, _: u64) -> Option<u64> {
        None
    }

    fn check(&self, addr: u64, len: u64) -> Result<(), (u64, u64)> {
        Err((addr, len))
    }
}

/// Duration of a host function.
const HOST_FN_NS: u64 = 1000;

/// Simulated duration of a kernel launch (ns): its registration's, else the
/// device model's for the bytes its parameters may touch (`declared`: each
/// pointer to the end of its allocation, an upper bound, so a simulated
/// bandwidth never exceeds the model's).
pub(crate) fn kernel_duration(l: &Launch, declared: &[Declared]) -> u64 {
    let Some(f) = l.spec.duration else {
        let bytes: u64 = declared.iter().filter(|d| !d.free).map(|d| d.end.saturating_sub(d.start)).sum();
        return crate::model::kernel_ns(bytes, 0);
    };
    let mut mem = NoMemory;
    let call = KernelCall {
        spec: &l.spec,
        grid: l.grid,
        block: l.block,
        shared_mem_bytes: l.shared,
        args: l.args.clone(),
        memory: &mut mem,
        touched: Vec::new(),
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&call))).unwrap_or(crate::model::MIN_KERNEL_NS)
}

/// Simulated duration of `work` (ns), from the device model
/// ([`crate::model`]); `declared` is the work's declared accesses.
pub(crate) fn duration(work: &Work, declared: &[Declared]) -> u64 {
    use crate::model::{memory_ns, pcie_ns};
    match work {
        Work::Marker | Work::EventRecord(_) | Work::AllocAsync { .. } | Work::FreeAsync { .. } => 0,
        Work::HostFn { .. } => HOST_FN_NS,
        Work::Kernel(l) => kernel_duration(l, declared),
        Work::Memset { count, elem, .. } => memory_ns(count * u64::from(*elem)),
        Work::Copy { dst, src, len, .. } => {
            let host = |l: &Loc| !matches!(l, Loc::Device(_));
            if host(dst) || host(src) { pcie_ns(*len) } else { memory_ns(len * 2) }
        }
        Work::Graph(g) => g.duration,
        Work::Nccl(p) => p.duration,
    }
}

/// Whether a kernel fault is an illegal address (else a bad parameter).
pub(crate) fn fault_code(f: &KernelFault) -> cuda_sys::CUresult {
    match f {
        KernelFault::IllegalAddress { .. } => crate::result::ILLEGAL_ADDRESS,
        KernelFault::BadParam { .. } => crate::result::INVALID_VALUE,
    }
}

//! The raw twin of the all-reduce: the same collective written against
//! NCCL's C API through cuda-sys, and gpu-sync's tracked one, measured
//! side by side in one process, on the same communicators, streams and
//! buffers — the host cost of issuing one all-reduce (issue 30: tracked ≤
//! raw + 1 µs) and its time on the GPU.
//!
//! # Method
//! - **Raw**: on each gpu-sync communicator's own handle
//!   ([`Communicator::as_raw`]), an iteration is one `ncclAllReduce` (sum,
//!   out of place) per rank of this process on the rank's stream — between
//!   `ncclGroupStart` and `ncclGroupEnd` when the process holds several
//!   ranks, alone when it holds one (one process per GPU, as nccl-tests
//!   calls it with `-g 1`) — and on a non-blocking communicator a poll of
//!   `ncclCommGetAsyncError` on each until it reports success (what a
//!   program must do before it may use the work as enqueued).
//! - **Tracked**: `gpu_sync::nccl::group` with one `Group::all_reduce` per
//!   rank of this process.
//! - **Raw on `cuMemAlloc` memory**: the raw iteration on a second pair of
//!   buffers per rank from `cuMemAlloc`, the kind nccl-tests and PyTorch
//!   use (gpu-sync's come from the stream-ordered pool): whether the kind
//!   of memory changes NCCL's own cost per call.
//! - **Interleaved batches**: per size, `batches` rounds; in each, a batch
//!   of `iters` iterations of each side (each side first, second and last
//!   in turn, round by round). A batch is timed twice: with the
//!   host clock around its issue loop (host µs per iteration: nothing
//!   waits for the GPU inside it), and per device with events around it
//!   (GPU µs per iteration: the longest device span / iters, as the
//!   sweep). The report gives the medians over rounds.
//! - **Warm-up**: first an untimed raw and tracked batch at every size (on
//!   4 H200s the first sizes of a run read 1–12 µs slower on both sides
//!   without it), then one more of each before each size's rounds.
//! - **One process per GPU** ([`host_cost_rank`]): every rank measures its
//!   own calls, in the same order as its peers (a collective finishes once
//!   every rank has issued it), and the rows of every rank are gathered
//!   (an NCCL all-gather) so each process holds all of them.
//!
//! This file calls NCCL directly (the raw side): its `unsafe` blocks are
//! argued one by one.
#![allow(unsafe_code)]

use crate::error::Result;
use gpu_sync::cuda_sys::nccl::result as nc;
use gpu_sync::cuda_sys::nccl::{self, Nccl, NcclError};
use gpu_sync::cuda_sys::nccl_bindings::{ncclDataType_t, ncclRedOp_t, ncclResult_t};
use gpu_sync::cuda_sys::result as cu;
use gpu_sync::cuda_sys::{Borrowed, CUdeviceptr};
use gpu_sync::nccl::{CommOptions, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Stream, TimingEvent};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// One size of [`host_cost`]: medians over the interleaved rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCostRow {
    /// Bytes per rank (f32 elements × 4).
    pub bytes: u64,
    /// `ncclAllReduce` calls per iteration: the ranks this process drives
    /// (1 with one process per GPU).
    #[serde(default)]
    pub calls: usize,
    /// The rank that measured the row, with one process per GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Host µs to issue one raw iteration (`calls` raw calls, grouped
    /// when several).
    pub raw_host_us: f64,
    /// Host µs to issue one tracked iteration (one `gpu_sync::nccl::group`
    /// of `calls` all-reduces).
    pub ours_host_us: f64,
    /// GPU µs per raw all-reduce (longest device span / iterations).
    pub raw_gpu_us: f64,
    /// GPU µs per tracked all-reduce.
    pub ours_gpu_us: f64,
    /// Host µs of a raw iteration on buffers from `cuMemAlloc` (the kind
    /// nccl-tests and PyTorch use; gpu-sync's come from the stream-ordered
    /// pool, `cuMemAllocAsync`): whether the memory's kind changes NCCL's
    /// own cost per call.
    #[serde(default)]
    pub raw_legacy_host_us: f64,
    /// GPU µs per raw all-reduce on the `cuMemAlloc` buffers.
    #[serde(default)]
    pub raw_legacy_gpu_us: f64,
}

impl HostCostRow {
    /// Tracked host µs minus raw host µs, per iteration.
    pub fn host_added_us(&self) -> f64 {
        self.ours_host_us - self.raw_host_us
    }

    /// [`HostCostRow::host_added_us`] per `ncclAllReduce` call (the
    /// iteration's added cost over its `calls`).
    pub fn host_added_per_call_us(&self) -> f64 {
        self.host_added_us() / self.calls.max(1) as f64
    }
}

/// What [`host_cost`] measures.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCostOptions {
    /// Bytes per rank, each a multiple of 4 (f32 elements).
    pub sizes: Vec<usize>,
    /// Blocking communicators for both sides.
    pub blocking: bool,
    /// Iterations per batch.
    pub iters: usize,
    /// Interleaved rounds (one raw and one tracked batch each).
    pub batches: usize,
}

fn in_progress_ok(r: std::result::Result<(), NcclError>) -> Result<()> {
    match r {
        Ok(()) | Err(NcclError::InProgress { .. }) => Ok(()),
        Err(e) => Err(gpu_sync::Error::from(e).into()),
    }
}

/// A rank: its tracked communicator, stream, buffers and timing events.
struct Rank<'c> {
    comm: &'c Communicator,
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
    /// The same two buffers from `cuMemAlloc` (nccl-tests' and PyTorch's
    /// kind of memory; gpu-sync's come from the stream-ordered pool).
    legacy: Legacy,
    start: TimingEvent,
    end: TimingEvent,
}

/// A send and a receive buffer from `cuMemAlloc` on one device, freed on
/// drop once `stream` (the only stream that uses them) is synchronized.
struct Legacy {
    stream: Stream,
    send: CUdeviceptr,
    recv: CUdeviceptr,
}

impl Legacy {
    /// `elems` f32 elements each on `stream`'s device, zeroed on it (the
    /// sums' values do not change what NCCL does).
    fn new(stream: &Stream, elems: usize) -> Result<Legacy> {
        let drv = gpu_sync::cuda_sys::installed()
            .ok_or_else(|| bad("nccl host cost: no CUDA driver in use".into()))?;
        stream.device().make_current()?;
        let bytes = elems * 4;
        let mut me = Legacy { stream: stream.clone(), send: 0, recv: 0 };
        me.send = cu::memory::alloc(drv, bytes).map_err(gpu_sync::Error::from)?;
        me.recv = cu::memory::alloc(drv, bytes).map_err(gpu_sync::Error::from)?;
        // SAFETY: `me.stream` is a live gpu-sync stream, held by `me` for
        // as long as the borrowed handle is used (this function).
        let raw = unsafe { Borrowed::borrow_raw(drv, me.stream.as_raw()) };
        for p in [me.send, me.recv] {
            // SAFETY: a live allocation of `bytes` on this device (made
            // above, freed only by drop after the stream is synchronized);
            // nothing else uses it until this is done (the same stream).
            unsafe { cu::memory::memset_d8_async(p, 0, bytes, raw) }.map_err(gpu_sync::Error::from)?;
        }
        Ok(me)
    }
}

impl Drop for Legacy {
    fn drop(&mut self) {
        if let Err(e) = self.stream.synchronize() {
            log::error!("nccl host cost: the cuMemAlloc buffers are leaked (their stream: {e})");
            return;
        }
        let Some(drv) = gpu_sync::cuda_sys::installed() else { return };
        for p in [self.send, self.recv].into_iter().filter(|&p| p != 0) {
            // SAFETY: an allocation of `cuMemAlloc` made by `Legacy::new`,
            // freed once; its only stream is synchronized, so no work on it
            // is pending.
            if let Err(e) = unsafe { cu::memory::free(drv, p) } {
                log::error!("nccl host cost: cuMemFree: {e}");
            }
        }
    }
}

/// Which side a batch runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Raw calls on gpu-sync's buffers.
    Raw,
    /// gpu-sync's tracked group on the same buffers.
    Tracked,
    /// Raw calls on the `cuMemAlloc` buffers.
    RawLegacy,
}

/// Measures the host cost and GPU time of one all-reduce group, raw and
/// tracked, at each size of `opts` over `devices`, one process driving
/// every one (see the module docs). Each row's `calls` is the number of
/// devices.
///
/// # Errors
/// [`crate::Error::Gpu`] for a driver or NCCL error (NCCL missing
/// included); [`crate::Error::Gpu`] with an invalid argument for fewer than
/// two devices, no size, a size not a multiple of 4, zero iterations or
/// zero batches.
pub fn host_cost(
    devices: &[Device],
    opts: &HostCostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<HostCostRow>> {
    if devices.len() < 2 {
        return Err(bad(format!("nccl host cost: {} devices (at least 2)", devices.len())));
    }
    validate(opts)?;
    let mode = if opts.blocking { "blocking" } else { "non-blocking" };
    progress(&format!("nccl host cost: {} {mode} communicators, raw and tracked", devices.len()));
    let comms =
        Communicator::init_all_with(devices, CommOptions { blocking: opts.blocking, ..Default::default() })?;
    measure(&comms, opts, progress)
}

/// [`host_cost`] for one rank of a clique with one process per GPU: this
/// process's raw `ncclAllReduce` call against its tracked all-reduce (a
/// group of one), in the same interleaved batches as every other rank,
/// which must call it with the same `opts`. Returns the rows of every
/// rank (each row's `rank` set, `calls` 1), gathered over the clique.
///
/// # Errors
/// As [`host_cost`]; a communicator of one rank is refused.
pub fn host_cost_rank(
    comm: Communicator,
    opts: &HostCostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<HostCostRow>> {
    if comm.size() < 2 {
        return Err(bad(format!("nccl host cost: a clique of {} rank (at least 2)", comm.size())));
    }
    validate(opts)?;
    let size = comm.size();
    let mine = measure(std::slice::from_ref(&comm), opts, progress)?;
    // Every rank's rows, in rank order, `FIELDS` numbers a size (copied
    // bit for bit: this rank's own come back as measured).
    const FIELDS: usize = 6;
    let flat: Vec<f64> = mine
        .iter()
        .flat_map(|r| {
            [
                r.raw_host_us,
                r.ours_host_us,
                r.raw_gpu_us,
                r.ours_gpu_us,
                r.raw_legacy_host_us,
                r.raw_legacy_gpu_us,
            ]
        })
        .collect();
    let stream = Stream::new(comm.device())?;
    let send = DeviceBuffer::from_slice(&stream, &flat)?;
    let mut recv = DeviceBuffer::<f64>::zeroed(&stream, flat.len() * size)?;
    gpu_sync::nccl::group(|g| g.all_gather(&comm, &stream, &send, &mut recv))?;
    let all = stream.to_vec(&recv)?;
    let mut rows = Vec::with_capacity(mine.len() * size);
    for (r, block) in all.chunks_exact(flat.len()).enumerate() {
        for (row, v) in mine.iter().zip(block.chunks_exact(FIELDS)) {
            rows.push(HostCostRow {
                rank: Some(r),
                raw_host_us: v[0],
                ours_host_us: v[1],
                raw_gpu_us: v[2],
                ours_gpu_us: v[3],
                raw_legacy_host_us: v[4],
                raw_legacy_gpu_us: v[5],
                ..row.clone()
            });
        }
    }
    Ok(rows)
}

/// An invalid-argument error of this module.
fn bad(m: String) -> crate::Error {
    gpu_sync::Error::InvalidArgument(m).into()
}

/// Refuses no size, a size not a multiple of 4, zero iterations or zero
/// batches.
fn validate(opts: &HostCostOptions) -> Result<()> {
    if opts.sizes.is_empty() || opts.iters == 0 || opts.batches == 0 {
        return Err(bad(format!(
            "nccl host cost: {} sizes, {} iterations, {} batches (at least 1 of each)",
            opts.sizes.len(),
            opts.iters,
            opts.batches
        )));
    }
    if let Some(s) = opts.sizes.iter().find(|&&s| s == 0 || s % 4 != 0) {
        return Err(bad(format!("nccl host cost: {s} B is not a whole number of f32 elements")));
    }
    Ok(())
}

/// The measurement over this process's communicators (every rank of a
/// clique, or its own one).
fn measure(
    comms: &[Communicator],
    opts: &HostCostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<HostCostRow>> {
    let nccl = nccl::installed_nccl().map(Ok).unwrap_or_else(nccl::nccl).map_err(gpu_sync::Error::from)?;
    let max = opts.sizes.iter().copied().max().unwrap_or(4) / 4;
    let calls = comms.len();
    let mut ranks = Vec::with_capacity(calls);
    for comm in comms {
        let d = comm.device().clone();
        let stream = Stream::new(&d)?;
        let send = DeviceBuffer::from_slice(&stream, &vec![1.0f32; max])?;
        let recv = DeviceBuffer::zeroed(&stream, max)?;
        let legacy = Legacy::new(&stream, max)?;
        ranks.push(Rank {
            comm,
            stream,
            send,
            recv,
            legacy,
            start: TimingEvent::new(&d)?,
            end: TimingEvent::new(&d)?,
        });
    }
    let raw = Raw { nccl, blocking: opts.blocking };
    let mut rows = Vec::with_capacity(opts.sizes.len());
    progress("nccl host cost: an untimed pass over every size");
    const SIDES: [Side; 3] = [Side::Raw, Side::Tracked, Side::RawLegacy];
    for &bytes in &opts.sizes {
        for side in SIDES {
            batch(&raw, &mut ranks, bytes / 4, opts.iters, side)?;
        }
    }
    for (i, &bytes) in opts.sizes.iter().enumerate() {
        progress(&format!("nccl host cost: {bytes} B ({}/{})", i + 1, opts.sizes.len()));
        let count = bytes / 4;
        // [side][host, gpu] seconds per batch.
        let mut samples: [[Vec<f64>; 2]; 3] = Default::default();
        // One untimed batch of each warms every path.
        for side in SIDES {
            batch(&raw, &mut ranks, count, opts.iters, side)?;
        }
        for round in 0..opts.batches {
            // Each side first, second and last in turn.
            for k in 0..SIDES.len() {
                let j = (round + k) % SIDES.len();
                let (host, gpu) = batch(&raw, &mut ranks, count, opts.iters, SIDES[j])?;
                samples[j][0].push(host);
                samples[j][1].push(gpu);
            }
        }
        let us = |v: &[f64]| crate::stats::median(v) * 1e6 / opts.iters as f64;
        let [raw_s, ours_s, legacy_s] = &samples;
        rows.push(HostCostRow {
            bytes: bytes as u64,
            calls,
            rank: None,
            raw_host_us: us(&raw_s[0]),
            ours_host_us: us(&ours_s[0]),
            raw_gpu_us: us(&raw_s[1]),
            ours_gpu_us: us(&ours_s[1]),
            raw_legacy_host_us: us(&legacy_s[0]),
            raw_legacy_gpu_us: us(&legacy_s[1]),
        });
    }
    for r in &ranks {
        r.stream.synchronize()?;
    }
    Ok(rows)
}

/// The raw side: NCCL's table and whether the communicators block.
struct Raw {
    nccl: &'static Nccl,
    blocking: bool,
}

/// One batch of `iters` all-reduce groups of `count` elements, raw or
/// tracked: (host seconds of the issue loop, longest device span seconds).
fn batch(raw: &Raw, ranks: &mut [Rank<'_>], count: usize, iters: usize, side: Side) -> Result<(f64, f64)> {
    for r in ranks.iter() {
        r.start.record(&r.stream)?;
    }
    let host = if side == Side::Tracked {
        // The views, made once per batch as the raw side's pointers are:
        // the loop times the groups alone.
        let mut views = Vec::with_capacity(ranks.len());
        for r in ranks.iter_mut() {
            views.push((r.comm, &r.stream, r.send.slice(..count)?, r.recv.slice_mut(..count)?));
        }
        let t = Instant::now();
        for _ in 0..iters {
            let views = &mut views;
            gpu_sync::nccl::group(move |g| {
                for (comm, stream, send, recv) in views.iter_mut() {
                    g.all_reduce(comm, stream, send, recv, ReduceOp::Sum)?;
                }
                Ok(())
            })?;
        }
        t.elapsed().as_secs_f64()
    } else {
        let t = Instant::now();
        let legacy = side == Side::RawLegacy;
        for _ in 0..iters {
            raw_all_reduce(raw, ranks, count, legacy)?;
        }
        t.elapsed().as_secs_f64()
    };
    let mut longest = 0.0f64;
    for r in ranks.iter() {
        r.end.record(&r.stream)?;
    }
    for r in ranks.iter() {
        r.end.synchronize()?;
        longest = longest.max(r.start.elapsed(&r.end)?.as_secs_f64());
    }
    Ok((host, longest))
}

/// One raw all-reduce over this process's ranks: in a group when there
/// are several, the one call alone otherwise; then, non-blocking, each
/// communicator polled until NCCL reports the work enqueued.
fn raw_all_reduce(raw: &Raw, ranks: &[Rank<'_>], count: usize, legacy: bool) -> Result<()> {
    let grouped = ranks.len() > 1;
    if grouped {
        nc::group_start(raw.nccl).map_err(gpu_sync::Error::from)?;
    }
    let mut first = Ok(());
    for r in ranks {
        let (send, recv) =
            if legacy { (r.legacy.send, r.legacy.recv) } else { (r.send.as_raw(), r.recv.as_raw()) };
        // SAFETY: a live communicator (owned by `r`, which outlives the
        // call; nothing else calls NCCL on it meanwhile: this thread makes
        // every call of the measurement) and a stream of its device;
        // `send` and `recv` hold at least `count` f32 elements and live
        // until every stream is synchronized (end of `measure`; the legacy
        // pair's drop synchronizes first); the raw work is ordered with
        // the tracked work by sharing the rank's stream, and only the raw
        // side writes `recv` meanwhile.
        let res = unsafe {
            nc::all_reduce(
                raw.nccl,
                send as usize as *const std::ffi::c_void,
                recv as usize as *mut std::ffi::c_void,
                count,
                ncclDataType_t::ncclFloat32,
                ncclRedOp_t::ncclSum,
                r.comm.as_raw(),
                r.stream.as_raw(),
            )
        };
        if let Err(e) = in_progress_ok(res) {
            first = Err(e);
            break;
        }
    }
    let ended = if grouped { in_progress_ok(nc::group_end(raw.nccl)) } else { Ok(()) };
    first?;
    ended?;
    if !raw.blocking {
        wait_ready(raw.nccl, ranks)?;
    }
    Ok(())
}

/// Polls every rank's communicator until NCCL reports it ready (a
/// non-blocking one's group), for at most a minute.
fn wait_ready(nccl: &'static Nccl, ranks: &[Rank<'_>]) -> Result<()> {
    let start = Instant::now();
    for r in ranks {
        loop {
            // SAFETY: a live communicator of `nccl`, called from the one
            // thread that makes the measurement's NCCL calls.
            let s =
                unsafe { nc::comm_get_async_error(nccl, r.comm.as_raw()) }.map_err(gpu_sync::Error::from)?;
            match s {
                ncclResult_t::ncclSuccess => break,
                ncclResult_t::ncclInProgress if start.elapsed() < Duration::from_secs(60) => {
                    std::thread::yield_now()
                }
                other => {
                    return Err(bad(format!("the raw twin's communicator reports {other:?}")));
                }
            }
        }
    }
    Ok(())
}

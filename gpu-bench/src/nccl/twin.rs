//! The raw twin of the all-reduce: the same collective written against
//! NCCL's C API through cuda-sys, and gpu-sync's tracked one, measured
//! side by side in one process, on the same streams and buffers — the host
//! cost of issuing one all-reduce group (issue 30: tracked ≤ raw + 1 µs)
//! and its time on the GPU.
//!
//! # Method
//! - **Raw**: its own communicators, made as gpu-sync makes its own (one
//!   `ncclCommInitRankConfig` per device inside one group, blocking as
//!   asked); an iteration is `ncclGroupStart`, one `ncclAllReduce` (sum,
//!   out of place) per rank on the rank's stream, `ncclGroupEnd`, and on a
//!   non-blocking communicator a poll of `ncclCommGetAsyncError` on each
//!   until it reports success (what a program must do before it may use
//!   the work as enqueued).
//! - **Tracked**: `gpu_sync::nccl::group` with one `Group::all_reduce` per
//!   rank, on communicators of the same blocking mode.
//! - **Interleaved batches**: per size, `batches` rounds; in each, a batch
//!   of `iters` raw iterations and a batch of `iters` tracked ones (their
//!   order alternating round by round). A batch is timed twice: with the
//!   host clock around its issue loop (host µs per iteration: nothing
//!   waits for the GPU inside it), and per device with events around it
//!   (GPU µs per iteration: the longest device span / iters, as the
//!   sweep). The report gives the medians over rounds.
//! - **Warm-up**: first an untimed raw and tracked batch at every size (on
//!   4 H200s the first sizes of a run read 1–12 µs slower on both sides
//!   without it), then one more of each before each size's rounds.
//!
//! This file calls NCCL directly (the raw side): its `unsafe` blocks are
//! argued one by one.
#![allow(unsafe_code)]

use crate::error::Result;
use gpu_sync::cuda_sys::nccl::result as nc;
use gpu_sync::cuda_sys::nccl::{self, Nccl, NcclError};
use gpu_sync::cuda_sys::nccl_bindings::{
    NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t,
};
use gpu_sync::nccl::{CommOptions, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Stream, TimingEvent};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// One size of [`host_cost`]: medians over the interleaved rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostCostRow {
    /// Bytes per rank (f32 elements × 4).
    pub bytes: u64,
    /// Host µs to issue one raw all-reduce group.
    pub raw_host_us: f64,
    /// Host µs to issue one tracked all-reduce group.
    pub ours_host_us: f64,
    /// GPU µs per raw all-reduce (longest device span / iterations).
    pub raw_gpu_us: f64,
    /// GPU µs per tracked all-reduce.
    pub ours_gpu_us: f64,
}

impl HostCostRow {
    /// Tracked host µs minus raw host µs.
    pub fn host_added_us(&self) -> f64 {
        self.ours_host_us - self.raw_host_us
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

/// The raw side's communicators, destroyed (or aborted) on drop.
struct RawComms {
    nccl: &'static Nccl,
    comms: Vec<ncclComm_t>,
    blocking: bool,
}

impl RawComms {
    fn new(nccl: &'static Nccl, devices: &[Device], blocking: bool) -> Result<RawComms> {
        let id = nc::get_unique_id(nccl).map_err(gpu_sync::Error::from)?;
        let n = devices.len();
        let mut me = RawComms { nccl, comms: vec![std::ptr::null_mut(); n], blocking };
        nc::group_start(nccl).map_err(gpu_sync::Error::from)?;
        let mut first = Ok(());
        for (rank, d) in devices.iter().enumerate() {
            let mut config = NCCL_CONFIG_INITIALIZER;
            config.blocking = i32::from(blocking);
            // The device's context current on this thread, as NCCL needs.
            let r = d.make_current().map_err(Into::into).and_then(|()| {
                // SAFETY: a valid out-pointer; `config` starts from the
                // initializer and holds no strings; the rank's device is
                // current.
                in_progress_ok(unsafe {
                    nc::comm_init_rank_config(nccl, &mut me.comms[rank], n, id, rank, &mut config)
                })
            });
            if r.is_err() {
                first = r;
                break;
            }
        }
        let ended = in_progress_ok(nc::group_end(nccl));
        first?;
        ended?;
        me.wait_ready()?;
        Ok(me)
    }

    /// Polls every communicator until NCCL reports it ready (a
    /// non-blocking one's init or group), for at most a minute.
    fn wait_ready(&self) -> Result<()> {
        let start = Instant::now();
        for &c in &self.comms {
            loop {
                // SAFETY: a live communicator of `self.nccl`.
                let s = unsafe { nc::comm_get_async_error(self.nccl, c) }.map_err(gpu_sync::Error::from)?;
                match s {
                    ncclResult_t::ncclSuccess => break,
                    ncclResult_t::ncclInProgress if start.elapsed() < Duration::from_secs(60) => {
                        std::thread::yield_now()
                    }
                    other => {
                        return Err(gpu_sync::Error::InvalidArgument(format!(
                            "the raw twin's communicator reports {other:?}"
                        ))
                        .into());
                    }
                }
            }
        }
        Ok(())
    }
}

impl Drop for RawComms {
    fn drop(&mut self) {
        for &c in self.comms.iter().filter(|c| !c.is_null()) {
            // SAFETY: a live communicator owned here alone, its work done
            // (the caller synchronized every stream); destroyed once.
            let r = unsafe { nc::comm_destroy(self.nccl, c) };
            if let Err(e) = r {
                log::error!("ncclCommDestroy of the raw twin: {e}");
            }
        }
    }
}

fn in_progress_ok(r: std::result::Result<(), NcclError>) -> Result<()> {
    match r {
        Ok(()) | Err(NcclError::InProgress { .. }) => Ok(()),
        Err(e) => Err(gpu_sync::Error::from(e).into()),
    }
}

/// A rank: its tracked communicator, stream, buffers and timing events.
struct Rank {
    comm: Communicator,
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
    start: TimingEvent,
    end: TimingEvent,
}

/// Measures the host cost and GPU time of one all-reduce group, raw and
/// tracked, at each size of `opts` over `devices` (see the module docs).
///
/// # Errors
/// [`crate::Error::Gpu`] for a driver or NCCL error (NCCL missing
/// included); [`crate::Error::Gpu`] with an invalid argument for fewer than
/// two devices, no size, a size not a multiple of 4, or zero iterations.
pub fn host_cost(
    devices: &[Device],
    opts: &HostCostOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<HostCostRow>> {
    let bad = |m: String| -> crate::Error { gpu_sync::Error::InvalidArgument(m).into() };
    if devices.len() < 2 || opts.sizes.is_empty() || opts.iters == 0 || opts.batches == 0 {
        return Err(bad(format!(
            "nccl host cost: {} devices, {} sizes, {} iterations, {} batches (at least 2, 1, 1, 1)",
            devices.len(),
            opts.sizes.len(),
            opts.iters,
            opts.batches
        )));
    }
    if let Some(s) = opts.sizes.iter().find(|&&s| s == 0 || s % 4 != 0) {
        return Err(bad(format!("nccl host cost: {s} B is not a whole number of f32 elements")));
    }
    let table = nccl::installed_nccl().map(Ok).unwrap_or_else(nccl::nccl).map_err(gpu_sync::Error::from)?;
    let mode = if opts.blocking { "blocking" } else { "non-blocking" };
    progress(&format!("nccl host cost: {} {mode} communicators, raw and tracked", devices.len()));
    let comms =
        Communicator::init_all_with(devices, CommOptions { blocking: opts.blocking, ..Default::default() })?;
    let raw = RawComms::new(table, devices, opts.blocking)?;
    let max = opts.sizes.iter().copied().max().unwrap_or(4) / 4;
    let mut ranks = Vec::with_capacity(devices.len());
    for (comm, d) in comms.into_iter().zip(devices) {
        let stream = Stream::new(d)?;
        let send = DeviceBuffer::from_slice(&stream, &vec![1.0f32; max])?;
        let recv = DeviceBuffer::zeroed(&stream, max)?;
        ranks.push(Rank { comm, stream, send, recv, start: TimingEvent::new(d)?, end: TimingEvent::new(d)? });
    }
    let mut rows = Vec::with_capacity(opts.sizes.len());
    progress("nccl host cost: an untimed pass over every size");
    for &bytes in &opts.sizes {
        batch(&raw, &mut ranks, bytes / 4, opts.iters, false)?;
        batch(&raw, &mut ranks, bytes / 4, opts.iters, true)?;
    }
    for (i, &bytes) in opts.sizes.iter().enumerate() {
        progress(&format!("nccl host cost: {bytes} B ({}/{})", i + 1, opts.sizes.len()));
        let count = bytes / 4;
        let mut samples: [[Vec<f64>; 2]; 2] = Default::default(); // [raw, ours][host, gpu]
        // One untimed batch of each warms both paths.
        batch(&raw, &mut ranks, count, opts.iters, false)?;
        batch(&raw, &mut ranks, count, opts.iters, true)?;
        for round in 0..opts.batches {
            for ours in if round % 2 == 0 { [false, true] } else { [true, false] } {
                let (host, gpu) = batch(&raw, &mut ranks, count, opts.iters, ours)?;
                samples[usize::from(ours)][0].push(host);
                samples[usize::from(ours)][1].push(gpu);
            }
        }
        let us = |v: &mut Vec<f64>| crate::stats::median(v) * 1e6 / opts.iters as f64;
        let [[mut rh, mut rg], [mut oh, mut og]] = samples;
        rows.push(HostCostRow {
            bytes: bytes as u64,
            raw_host_us: us(&mut rh),
            ours_host_us: us(&mut oh),
            raw_gpu_us: us(&mut rg),
            ours_gpu_us: us(&mut og),
        });
    }
    for r in &ranks {
        r.stream.synchronize()?;
    }
    Ok(rows)
}

/// One batch of `iters` all-reduce groups of `count` elements, raw or
/// tracked: (host seconds of the issue loop, longest device span seconds).
fn batch(raw: &RawComms, ranks: &mut [Rank], count: usize, iters: usize, ours: bool) -> Result<(f64, f64)> {
    for r in ranks.iter() {
        r.start.record(&r.stream)?;
    }
    let host = if ours {
        // The views, made once per batch as the raw side's pointers are:
        // the loop times the groups alone.
        let mut views = Vec::with_capacity(ranks.len());
        for r in ranks.iter_mut() {
            views.push((&r.comm, &r.stream, r.send.slice(..count)?, r.recv.slice_mut(..count)?));
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
        for _ in 0..iters {
            raw_all_reduce(raw, ranks, count)?;
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

/// One raw all-reduce group over every rank.
fn raw_all_reduce(raw: &RawComms, ranks: &[Rank], count: usize) -> Result<()> {
    nc::group_start(raw.nccl).map_err(gpu_sync::Error::from)?;
    let mut first = Ok(());
    for (r, &c) in ranks.iter().zip(&raw.comms) {
        // SAFETY: live communicators and streams of the same devices, rank
        // order; `send` and `recv` hold at least `count` f32 elements and
        // live until every stream is synchronized (end of `host_cost`);
        // the raw work is ordered with the tracked work by sharing the
        // rank's stream, and only the raw side writes `recv` meanwhile.
        let res = unsafe {
            nc::all_reduce(
                raw.nccl,
                r.send.as_raw() as usize as *const std::ffi::c_void,
                r.recv.as_raw() as usize as *mut std::ffi::c_void,
                count,
                ncclDataType_t::ncclFloat32,
                ncclRedOp_t::ncclSum,
                c,
                r.stream.as_raw(),
            )
        };
        if let Err(e) = in_progress_ok(res) {
            first = Err(e);
            break;
        }
    }
    let ended = in_progress_ok(nc::group_end(raw.nccl));
    first?;
    ended?;
    if !raw.blocking {
        raw.wait_ready()?;
    }
    Ok(())
}

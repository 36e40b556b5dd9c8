//! gpu-sync's own host cost per tracked NCCL group (issue 30: a tracked
//! all-reduce group costs at most a raw `ncclGroupStart`, one
//! `ncclAllReduce` per rank, `ncclGroupEnd` + 1 µs), on the simulator: `N`
//! groups over `RANKS` ranks (2 unless set; as many simulated devices, so
//! `CUDA_SIM_DEVICES` at least as many; blocking communicators unless
//! `BLOCKING=0`) issued raw through `cuda_sys::nccl::result`, then `N`
//! through `gpu_sync::nccl::group`, each on the same streams and buffers.
//! `RANKS=1` is a clique of one, its raw call made alone (no
//! `ncclGroupStart`), as one process per GPU makes its rank's call.
//! `MODE=raw` or `MODE=tracked` runs one side only.
//!
//! `cargo run --release -p sync-tests --example nccl_group_overhead`. The
//! wall times include the simulator's own work; for a count of gpu-sync's
//! work alone, run each side under `valgrind --tool=callgrind` at two
//! values of `N` and take (tracked difference − raw difference) / ΔN:
//! the simulator's collective is the same on both sides.
#![allow(unsafe_code)]

use gpu_sync::cuda_sys::nccl::result as nc;
use gpu_sync::cuda_sys::nccl::{self, Nccl, NcclError};
use gpu_sync::cuda_sys::nccl_bindings::{NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclDataType_t, ncclRedOp_t};
use gpu_sync::nccl::{CommOptions, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Error, Result, Stream};
use std::time::Instant;

/// Elements per rank: small, so the simulator's reduction costs little.
const COUNT: usize = 4;
/// Groups between two synchronizations of every stream (bounds the
/// simulator's queues).
const BATCH: usize = 1000;

fn in_progress_ok(r: std::result::Result<(), NcclError>) -> Result<()> {
    match r {
        Ok(()) | Err(NcclError::InProgress { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The raw side's communicators (left to the process's end: the example
/// exits right after its loops).
fn raw_comms(table: &'static Nccl, devices: &[Device], blocking: bool) -> Result<Vec<ncclComm_t>> {
    let id = nc::get_unique_id(table)?;
    let n = devices.len();
    let mut comms = vec![std::ptr::null_mut(); n];
    nc::group_start(table)?;
    let mut first = Ok(());
    for (rank, d) in devices.iter().enumerate() {
        let mut config = NCCL_CONFIG_INITIALIZER;
        config.blocking = i32::from(blocking);
        let r = d.make_current().and_then(|()| {
            // SAFETY: a valid out-pointer; `config` starts from the
            // initializer and holds no strings; the rank's device is current.
            in_progress_ok(unsafe {
                nc::comm_init_rank_config(table, &mut comms[rank], n, id, rank, &mut config)
            })
        });
        if r.is_err() {
            first = r;
            break;
        }
    }
    let ended = in_progress_ok(nc::group_end(table));
    first?;
    ended?;
    for &c in &comms {
        // Non-blocking: poll until the init is done.
        loop {
            // SAFETY: a live communicator of `table`.
            let s = unsafe { nc::comm_get_async_error(table, c) }?;
            if s == gpu_sync::cuda_sys::nccl_bindings::ncclResult_t::ncclSuccess {
                break;
            }
            std::thread::yield_now();
        }
    }
    Ok(comms)
}

fn main() -> Result<()> {
    gpu_sync::sim::install()?;
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let mode = std::env::var("MODE").unwrap_or_default();
    let blocking = std::env::var("BLOCKING").map_or(true, |b| b != "0");
    let ranks: usize = std::env::var("RANKS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let devices = Device::all()?;
    if ranks < 1 || devices.len() < ranks {
        return Err(Error::InvalidArgument(format!(
            "RANKS={ranks} over {} simulated devices: at least 1 rank, at most one per device \
             (set CUDA_SIM_DEVICES)",
            devices.len()
        )));
    }
    let devices = &devices[..ranks];
    let table = nccl::installed_nccl().map(Ok).unwrap_or_else(nccl::nccl)?;
    let comms = Communicator::init_all_with(devices, CommOptions { blocking, ..Default::default() })?;
    let raw = raw_comms(table, devices, blocking)?;
    let streams: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_>>()?;
    let sends: Vec<DeviceBuffer<f32>> = streams
        .iter()
        .enumerate()
        .map(|(r, s)| DeviceBuffer::from_slice(s, &[r as f32 + 1.0; COUNT]))
        .collect::<Result<_>>()?;
    let mut recvs: Vec<DeviceBuffer<f32>> =
        streams.iter().map(|s| DeviceBuffer::zeroed(s, COUNT)).collect::<Result<_>>()?;
    let sync = |streams: &[Stream]| streams.iter().try_for_each(|s| s.synchronize().map(drop));
    if mode != "tracked" {
        let t = Instant::now();
        for i in 0..n {
            // One rank: its call alone (as one process per GPU makes it).
            let grouped = ranks > 1;
            if grouped {
                nc::group_start(table)?;
            }
            let mut first = Ok(());
            for r in 0..ranks {
                // SAFETY: live communicators and streams of the same
                // devices, rank order; `sends[r]` and `recvs[r]` hold
                // `COUNT` f32 and live until the streams are synchronized
                // (below); the raw work shares the tracked work's streams,
                // so the two never run concurrently.
                let res = unsafe {
                    nc::all_reduce(
                        table,
                        sends[r].as_raw() as usize as *const std::ffi::c_void,
                        recvs[r].as_raw() as usize as *mut std::ffi::c_void,
                        COUNT,
                        ncclDataType_t::ncclFloat32,
                        ncclRedOp_t::ncclSum,
                        raw[r],
                        streams[r].as_raw(),
                    )
                };
                if let Err(e) = in_progress_ok(res) {
                    first = Err(e);
                    break;
                }
            }
            let ended = if grouped { in_progress_ok(nc::group_end(table)) } else { Ok(()) };
            first?;
            ended?;
            if i % BATCH == BATCH - 1 {
                sync(&streams)?;
            }
        }
        sync(&streams)?;
        println!("raw: {:.0} ns per group ({n} groups)", t.elapsed().as_nanos() as f64 / n.max(1) as f64);
    }
    if mode != "raw" {
        let t = Instant::now();
        for i in 0..n {
            gpu_sync::nccl::group(|g| {
                for (((c, s), send), recv) in comms.iter().zip(&streams).zip(&sends).zip(recvs.iter_mut()) {
                    g.all_reduce(c, s, send, recv, ReduceOp::Sum)?;
                }
                Ok(())
            })?;
            if i % BATCH == BATCH - 1 {
                sync(&streams)?;
            }
        }
        sync(&streams)?;
        println!("tracked: {:.0} ns per group ({n} groups)", t.elapsed().as_nanos() as f64 / n.max(1) as f64);
    }
    Ok(())
}

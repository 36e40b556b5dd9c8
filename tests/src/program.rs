//! Random programs over the safe API, a sequential reference for them, and
//! an interpreter that runs one on the installed driver.
//!
//! A program is a list of [`Op`]s over a few streams and buffers (indices are
//! taken modulo what exists, so every generated list is runnable). Buffers
//! hold `u32`s and start zeroed. gpu-sync promises that every buffer sees its
//! operations in program order, whatever streams they are on; so the
//! reference is the same list applied in order to host vectors, and every
//! value read back — pending downloads, pageable downloads, the final
//! contents — must equal it.

use gpu_sync::{
    Device, DeviceBuffer, Error, HostAllocFlags, Pending, PinnedBuffer, Polled, Proof, Stream, SyncEvent,
};
use kernels::{Kernels, reference};
use proptest::prelude::*;

/// Buffer lengths (elements; multiples of 4, so every kernel takes them).
pub const LENGTHS: [usize; 2] = [256, 1024];

/// How a pending download is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Its own event wait.
    Wait,
    /// A proof from synchronizing its stream.
    StreamProof,
    /// A proof from synchronizing the device.
    DeviceProof,
    /// Polling until ready.
    Poll,
}

/// One step of a program. Indices pick among what exists (modulo); each
/// variant's doc says what its fields mean.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Op {
    /// A new stream.
    NewStream,
    /// A new zeroed buffer of `LENGTHS[len % 2]` elements on a stream.
    Alloc { stream: u8, len: u8 },
    /// `dst[i] = pattern(seed, i)`.
    Fill { stream: u8, dst: u8, seed: u32 },
    /// `dst[i] += add`.
    Bump { stream: u8, dst: u8, add: u32 },
    /// `out[i] = mix(a[i], b[i], salt)` (same lengths, `out` distinct).
    Mix { stream: u8, a: u8, b: u8, out: u8, salt: u32 },
    /// `dst = src` (same lengths, distinct).
    Copy { stream: u8, src: u8, dst: u8 },
    /// Upload a pinned buffer holding `pattern(seed, ·)`; the pinned buffer is
    /// kept and may be rewritten later.
    UploadPinned { stream: u8, dst: u8, seed: u32 },
    /// Synchronous upload from a pageable `Vec`.
    UploadPageable { stream: u8, dst: u8, seed: u32 },
    /// Overwrite a kept pinned buffer on the host (waits for its uploads).
    RewritePinned { which: u8, seed: u32 },
    /// Asynchronous download into a fresh pinned buffer (a pending value).
    Download { stream: u8, src: u8 },
    /// Release a pending download and check it.
    Release { which: u8, how: Release },
    /// Synchronous download into a `Vec`, checked at once.
    DownloadPageable { stream: u8, src: u8 },
    /// Record a sync event on one stream and make another wait for it.
    EventWait { from: u8, to: u8 },
    /// `to.wait_stream(from)`.
    WaitStream { from: u8, to: u8 },
    /// Host wait on a stream.
    SyncStream { stream: u8 },
    /// Host wait on the device.
    SyncDevice,
    /// Drop a buffer (its free is stream-ordered after every use).
    Drop { buf: u8 },
    /// Capture `bump(dst, add)` into a graph and replay it `replays` times.
    Graph { stream: u8, dst: u8, add: u32, replays: u8 },
}

fn idx() -> impl Strategy<Value = u8> {
    any::<u8>()
}

/// One random op.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::NewStream),
        4 => (idx(), idx()).prop_map(|(stream, len)| Op::Alloc { stream, len }),
        4 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, seed)| Op::Fill { stream, dst, seed }),
        3 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, add)| Op::Bump { stream, dst, add }),
        3 => (idx(), idx(), idx(), idx(), any::<u32>())
            .prop_map(|(stream, a, b, out, salt)| Op::Mix { stream, a, b, out, salt }),
        3 => (idx(), idx(), idx()).prop_map(|(stream, src, dst)| Op::Copy { stream, src, dst }),
        2 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, seed)| Op::UploadPinned { stream, dst, seed }),
        1 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, seed)| Op::UploadPageable { stream, dst, seed }),
        1 => (idx(), any::<u32>()).prop_map(|(which, seed)| Op::RewritePinned { which, seed }),
        2 => (idx(), idx()).prop_map(|(stream, src)| Op::Download { stream, src }),
        2 => (idx(), prop_oneof![Just(Release::Wait), Just(Release::StreamProof), Just(Release::DeviceProof), Just(Release::Poll)])
            .prop_map(|(which, how)| Op::Release { which, how }),
        1 => (idx(), idx()).prop_map(|(stream, src)| Op::DownloadPageable { stream, src }),
        1 => (idx(), idx()).prop_map(|(from, to)| Op::EventWait { from, to }),
        1 => (idx(), idx()).prop_map(|(from, to)| Op::WaitStream { from, to }),
        1 => idx().prop_map(|stream| Op::SyncStream { stream }),
        1 => Just(Op::SyncDevice),
        2 => idx().prop_map(|buf| Op::Drop { buf }),
        1 => (idx(), idx(), any::<u32>(), 1u8..4).prop_map(|(stream, dst, add, replays)| Op::Graph { stream, dst, add, replays }),
    ]
}

/// A random program of up to `max_ops` ops.
pub fn program(max_ops: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=max_ops)
}

/// How a run failed.
#[derive(Debug)]
pub enum RunError {
    /// The safe API returned an error at op `op`.
    Api {
        /// Index of the op.
        op: usize,
        /// The error.
        error: Error,
    },
    /// A value read back differs from the reference.
    Mismatch(String),
}

impl From<String> for RunError {
    fn from(s: String) -> Self {
        RunError::Mismatch(s)
    }
}

struct Buf {
    dev: DeviceBuffer<u32>,
    host: Vec<u32>,
}

/// Index `i` modulo `v`'s length (`None` when `v` is empty).
pub(crate) fn pick<T>(v: &[T], i: u8) -> Option<usize> {
    (!v.is_empty()).then(|| i as usize % v.len())
}

/// `pattern(seed, i)` for `i` in `0..n`: what `fill_pattern` writes.
pub(crate) fn pattern_vec(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u64).map(|i| reference::pattern(seed, i)).collect()
}

/// `Ok` when `got` equals `want`, else a mismatch naming `what` and the
/// first element that differs.
pub(crate) fn compare(what: &str, got: &[u32], want: &[u32]) -> Result<(), RunError> {
    if got == want {
        return Ok(());
    }
    let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
    Err(RunError::Mismatch(format!(
        "{what}: element {i} is {:#x}, the reference says {:#x} ({} elements)",
        got.get(i).copied().unwrap_or(0),
        want.get(i).copied().unwrap_or(0),
        want.len()
    )))
}

/// A synchronization bug planted through the raw driver, behind gpu-sync's
/// back, at one point of a program (simulator only: the oracle must flag it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantKind {
    /// A buffer written by a tracked kernel on one stream is read by a raw
    /// copy on another stream with no wait.
    MissingWait,
    /// Raw memory read on one stream is freed (`cuMemFreeAsync`) on another
    /// with no wait for the read.
    EarlyFree,
    /// The host reads pinned memory a download is still writing.
    UnwaitedHostRead,
}

/// Where and what to plant; `correct` keeps the synchronization in (the twin
/// that must stay clean).
#[derive(Debug, Clone, Copy)]
pub struct Plant {
    /// Op index (modulo the program's length) before which to plant.
    pub at: usize,
    /// What.
    pub kind: PlantKind,
    /// With the synchronization (`true`) or without it (`false`).
    pub correct: bool,
}

/// Runs `ops` on `device` and checks every value read back against the
/// sequential reference; at the end reads every live buffer back, drops
/// everything and synchronizes the device.
///
/// # Errors
/// [`RunError::Api`] at the first op whose call failed (the program stops
/// there; everything is still dropped); [`RunError::Mismatch`] for a wrong
/// value.
pub fn run(device: &Device, ops: &[Op]) -> Result<(), RunError> {
    run_planted(device, ops, None)
}

fn plant(device: &Device, k: &Kernels, s: &Stream, kind: PlantKind, correct: bool) -> Result<(), Error> {
    // Without its synchronization, a planted bug may fault like on a GPU
    // (an early free read is an illegal address, which poisons the context),
    // so what follows it may fail.
    let raw = if correct { crate::raw::Raw::new() } else { crate::raw::Raw::new().lenient() };
    device.make_current()?;
    const N: usize = 256;
    let bytes = N * 4;
    match kind {
        PlantKind::MissingWait => {
            let mut b = DeviceBuffer::<u32>::zeroed(s, N)?;
            k.fill_pattern(s, &mut b, 1)?;
            let r = raw.stream();
            let scratch = raw.alloc(bytes, r);
            let e = raw.event();
            if correct {
                raw.record(e, s.as_raw());
                raw.wait(r, e);
            }
            raw.copy(scratch, b.as_raw(), bytes, r);
            raw.free(scratch, r);
            raw.sync(r);
            raw.destroy_event(e);
            raw.destroy_stream(r);
        }
        PlantKind::EarlyFree => {
            let r = raw.stream();
            let mem = raw.alloc(bytes, r);
            raw.memset(mem, 7, N, r);
            let (e1, e2) = (raw.event(), raw.event());
            raw.record(e1, r);
            raw.wait(s.as_raw(), e1);
            let scratch = DeviceBuffer::<u32>::alloc(s, N)?;
            raw.copy(scratch.as_raw(), mem, bytes, s.as_raw());
            if correct {
                raw.record(e2, s.as_raw());
                raw.wait(r, e2);
            }
            raw.free(mem, r);
            raw.sync(r);
            raw.sync(s.as_raw());
            raw.destroy_event(e1);
            raw.destroy_event(e2);
            raw.destroy_stream(r);
        }
        PlantKind::UnwaitedHostRead => {
            let mut b = DeviceBuffer::<u32>::zeroed(s, N)?;
            k.fill_pattern(s, &mut b, 3)?;
            let h = raw.host_alloc(bytes);
            raw.download(h, b.as_raw(), bytes, s.as_raw());
            if correct {
                raw.sync(s.as_raw());
            }
            cuda_sim::host_read(h, bytes);
            raw.sync(s.as_raw());
            raw.free_host(h);
        }
    }
    Ok(())
}

/// [`run`] with an optional [`Plant`].
///
/// # Errors
/// As [`run`].
pub fn run_planted(device: &Device, ops: &[Op], planted: Option<Plant>) -> Result<(), RunError> {
    let at = |op: usize| move |error: Error| RunError::Api { op, error };
    let k = Kernels::load(device).map_err(at(0))?;
    let mut streams = vec![Stream::new(device).map_err(at(0))?];
    let mut bufs: Vec<Buf> = Vec::new();
    let mut pinned: Vec<PinnedBuffer<u32>> = Vec::new();
    let mut pending: Vec<(Pending<PinnedBuffer<u32>>, Vec<u32>, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if let Some(p) = planted
            && p.at % ops.len() == i
        {
            let s = &streams[p.at % streams.len()];
            plant(device, &k, s, p.kind, p.correct).map_err(at(i))?;
        }
        let e = at(i);
        let s = |x: u8| &streams[x as usize % streams.len()];
        match *op {
            Op::NewStream => {
                if streams.len() < 4 {
                    streams.push(Stream::new(device).map_err(e)?);
                }
            }
            Op::Alloc { stream, len } => {
                if bufs.len() < 6 {
                    let n = LENGTHS[len as usize % 2];
                    let dev = DeviceBuffer::zeroed(s(stream), n).map_err(e)?;
                    bufs.push(Buf { dev, host: vec![0; n] });
                }
            }
            Op::Fill { stream, dst, seed } => {
                let Some(d) = pick(&bufs, dst) else { continue };
                k.fill_pattern(s(stream), &mut bufs[d].dev, seed).map_err(e)?;
                bufs[d].host = pattern_vec(seed, bufs[d].host.len());
            }
            Op::Bump { stream, dst, add } => {
                let Some(d) = pick(&bufs, dst) else { continue };
                k.bump(s(stream), &mut bufs[d].dev, add).map_err(e)?;
                reference::bump_u32(&mut bufs[d].host, add);
            }
            Op::Mix { stream, a, b, out, salt } => {
                let (Some(a), Some(b), Some(o)) = (pick(&bufs, a), pick(&bufs, b), pick(&bufs, out)) else {
                    continue;
                };
                let n = bufs[o].host.len();
                if o == a || o == b || bufs[a].host.len() != n || bufs[b].host.len() != n {
                    continue;
                }
                let mut out_buf = bufs.remove(o);
                let (ai, bi) = (if a > o { a - 1 } else { a }, if b > o { b - 1 } else { b });
                let r = k.mix(s(stream), &bufs[ai].dev, &bufs[bi].dev, &mut out_buf.dev, salt);
                reference::mix_u32(&bufs[ai].host, &bufs[bi].host, &mut out_buf.host, salt);
                bufs.insert(o, out_buf);
                r.map_err(e)?;
            }
            Op::Copy { stream, src, dst } => {
                let (Some(a), Some(d)) = (pick(&bufs, src), pick(&bufs, dst)) else { continue };
                if a == d || bufs[a].host.len() != bufs[d].host.len() {
                    continue;
                }
                let mut dst_buf = bufs.remove(d);
                let ai = if a > d { a - 1 } else { a };
                let r = s(stream).copy(&bufs[ai].dev, &mut dst_buf.dev);
                dst_buf.host.copy_from_slice(&bufs[ai].host);
                bufs.insert(d, dst_buf);
                r.map_err(e)?;
            }
            Op::UploadPinned { stream, dst, seed } => {
                let Some(d) = pick(&bufs, dst) else { continue };
                let data = pattern_vec(seed, bufs[d].host.len());
                let p = PinnedBuffer::from_slice(device, &data, HostAllocFlags::empty()).map_err(e)?;
                s(stream).upload(&p, &mut bufs[d].dev).map_err(e)?;
                bufs[d].host = data;
                pinned.push(p);
                if pinned.len() > 4 {
                    pinned.remove(0);
                }
            }
            Op::UploadPageable { stream, dst, seed } => {
                let Some(d) = pick(&bufs, dst) else { continue };
                let data = pattern_vec(seed, bufs[d].host.len());
                s(stream).upload_pageable(&data, &mut bufs[d].dev).map_err(e)?;
                bufs[d].host = data;
            }
            Op::RewritePinned { which, seed } => {
                let Some(p) = pick(&pinned, which) else { continue };
                let n = pinned[p].len();
                pinned[p].as_mut_slice().map_err(e)?.copy_from_slice(&pattern_vec(seed, n));
            }
            Op::Download { stream, src } => {
                let Some(a) = pick(&bufs, src) else { continue };
                let n = bufs[a].host.len();
                let p = PinnedBuffer::new(device, n, HostAllocFlags::empty()).map_err(e)?;
                let sidx = stream as usize % streams.len();
                let pend = streams[sidx].download(&bufs[a].dev, p).map_err(e)?;
                pending.push((pend, bufs[a].host.clone(), sidx));
            }
            Op::Release { which, how } => {
                let Some(w) = pick(&pending, which) else { continue };
                let (p, want, sidx) = pending.remove(w);
                let got = match how {
                    Release::Wait => p.wait().map_err(e)?,
                    Release::StreamProof => {
                        let proof = streams[sidx].synchronize().map_err(e)?;
                        if !proof.covers(&p.work()) {
                            return Err(RunError::Mismatch(format!(
                                "op {i}: a stream proof missed its own download"
                            )));
                        }
                        p.redeem(&proof).map_err(|nc| RunError::Mismatch(nc.to_string()))?
                    }
                    Release::DeviceProof => {
                        let proof = device.synchronize().map_err(e)?;
                        p.redeem(&proof).map_err(|nc| RunError::Mismatch(nc.to_string()))?
                    }
                    Release::Poll => {
                        let mut p = p;
                        loop {
                            match p.poll().map_err(at(i))? {
                                Polled::Ready(v) => break v,
                                Polled::Waiting(back) => p = back,
                            }
                        }
                    }
                };
                compare(&format!("op {i}: pending download ({how:?})"), &got, &want)?;
            }
            Op::DownloadPageable { stream, src } => {
                let Some(a) = pick(&bufs, src) else { continue };
                let got = s(stream).to_vec(&bufs[a].dev).map_err(e)?;
                compare(&format!("op {i}: pageable download"), &got, &bufs[a].host)?;
            }
            Op::EventWait { from, to } => {
                let ev = SyncEvent::new(device).map_err(at(i))?;
                ev.record(s(from)).map_err(at(i))?;
                s(to).wait(&ev).map_err(e)?;
            }
            Op::WaitStream { from, to } => s(to).wait_stream(s(from)).map_err(e)?,
            Op::SyncStream { stream } => {
                s(stream).synchronize().map_err(e)?;
            }
            Op::SyncDevice => {
                device.synchronize().map_err(e)?;
            }
            Op::Drop { buf } => {
                let Some(b) = pick(&bufs, buf) else { continue };
                bufs.remove(b);
            }
            Op::Graph { stream, dst, add, replays } => {
                let Some(d) = pick(&bufs, dst) else { continue };
                let st = s(stream);
                let buf = &mut bufs[d].dev;
                let graph = st.capture(|cap| k.bump(cap.stream(), buf, add)).map_err(at(i))?;
                let exec = graph.instantiate().map_err(at(i))?;
                for _ in 0..replays {
                    exec.launch(st).map_err(at(i))?;
                    reference::bump_u32(&mut bufs[d].host, add);
                }
            }
        }
    }
    let last = ops.len();
    for (p, want, _) in pending.drain(..) {
        let got = p.wait().map_err(at(last))?;
        compare("final pending download", &got, &want)?;
    }
    for (j, b) in bufs.iter().enumerate() {
        let got = streams[j % streams.len()].to_vec(&b.dev).map_err(at(last))?;
        compare(&format!("buffer {j} at the end"), &got, &b.host)?;
    }
    drop((bufs, pinned, streams, k));
    device.synchronize().map_err(at(last))?;
    Ok(())
}

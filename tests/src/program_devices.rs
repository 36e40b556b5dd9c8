//! Random programs over several devices and streams, the sequential
//! reference for them, and an interpreter that runs one on the installed
//! driver (issue 29: the device rule, peer access, copies and waits across
//! devices, one operation over several streams).
//!
//! A program is a list of [`Op`]s over `D` devices (2 or 3), a few streams
//! of each and buffers of `u32`s (indices are taken modulo what exists, so
//! every generated list is runnable). The program also decides peer access
//! ([`Op::EnablePeer`], [`Op::DisablePeer`]), so the interpreter knows, as
//! the reference, which device's work reaches which device's memory: an
//! operation touching a buffer its stream's device does not reach must be
//! refused with [`Error::DeviceMismatch`] naming both devices, and leaves
//! the reference as it was; every other operation must succeed. Every value
//! read back — pending downloads, pageable downloads, the final contents —
//! must equal the reference, which applies the accepted operations in
//! program order to host vectors.
//!
//! Peer access is process-wide state in gpu-sync and on a GPU (the
//! simulator keeps its grants per session): [`run`] closes every pair it
//! finds open before it returns, whatever happened, so cases stay
//! independent; a test binary running these programs must not run other
//! peer-access tests beside them.

use crate::program::{RunError, compare, pattern_vec, pick};
use crate::raw::Raw;
use gpu_sync::cuda_sys::result::memory::memset_d32_async;
use gpu_sync::{
    Device, DeviceBuffer, Error, ForeignGroup, ForeignUses, HostAllocFlags, Pending, PinnedBuffer, Proof,
    Stream, SyncEvent,
};
use kernels::{Kernels, reference};
use proptest::prelude::*;

/// Buffer lengths (elements; multiples of 4, so every kernel takes them).
pub const LENGTHS: [usize; 2] = [256, 1024];

/// At most this many streams and buffers live at once.
const MAX_STREAMS: usize = 6;
const MAX_BUFS: usize = 7;

/// One step of a program. Stream, buffer and device indices pick among what
/// exists (modulo); each variant's doc says what it does.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub enum Op {
    /// A new stream on device `dev`.
    NewStream { dev: u8 },
    /// A new zeroed buffer on a stream (of
    /// the stream's device): `LENGTHS[1]` elements when `len % 4 == 3`, else `LENGTHS[0]`.
    Alloc { stream: u8, len: u8 },
    /// `dst[i] = pattern(seed, i)`, a kernel on the stream's device.
    Fill { stream: u8, dst: u8, seed: u32 },
    /// `dst[i] += add`.
    Bump { stream: u8, dst: u8, add: u32 },
    /// `out[i] = mix(a[i], b[i], salt)` (same lengths, `out` distinct).
    Mix { stream: u8, a: u8, b: u8, out: u8, salt: u32 },
    /// `dst = src` (same lengths, distinct), the buffers of any devices, on
    /// a stream of any device (`Stream::copy`: at least one buffer reached).
    Copy { stream: u8, src: u8, dst: u8 },
    /// Upload a pinned buffer holding `pattern(seed, ·)` (kept a while).
    Upload { stream: u8, dst: u8, seed: u32 },
    /// Asynchronous download into a fresh pinned buffer (a pending value).
    Download { stream: u8, src: u8 },
    /// Release a pending download (its own wait, or a proof of its stream)
    /// and check it.
    Release { which: u8, stream_proof: bool },
    /// Synchronous download into a `Vec`, checked at once.
    ToVec { stream: u8, src: u8 },
    /// One `ForeignGroup` call over several streams: part `i` sets every
    /// element of its buffer to its value with a raw `cuMemsetD32Async` on
    /// its stream (standing in for an NCCL group). Repeated streams and
    /// buffers are dropped from the group.
    Group { parts: Vec<(u8, u8, u32)> },
    /// Record a sync event (of `from`'s device) on `from`; `to`, of any
    /// device, waits for it.
    EventWait { from: u8, to: u8 },
    /// `to.wait_stream(from)`, streams of any two devices.
    WaitStream { from: u8, to: u8 },
    /// Host wait on a stream.
    SyncStream { stream: u8 },
    /// Host wait on a device.
    SyncDevice { dev: u8 },
    /// Drop a buffer (its free waits for every device's uses).
    Drop { buf: u8 },
    /// Capture `bump(dst, add)` on a stream into a graph and replay it
    /// `replays` times at once (a peer's buffer too, while reached).
    Graph { stream: u8, dst: u8, add: u32, replays: u8 },
    /// `devices[dev].enable_peer_access(devices[peer])` (the same device:
    /// refused with `Error::PeerAccess`).
    EnablePeer { dev: u8, peer: u8 },
    /// `devices[dev].disable_peer_access(devices[peer])`.
    DisablePeer { dev: u8, peer: u8 },
}

fn idx() -> impl Strategy<Value = u8> {
    any::<u8>()
}

/// One random op.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => idx().prop_map(|dev| Op::NewStream { dev }),
        4 => (idx(), idx()).prop_map(|(stream, len)| Op::Alloc { stream, len }),
        4 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, seed)| Op::Fill { stream, dst, seed }),
        3 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, add)| Op::Bump { stream, dst, add }),
        2 => (idx(), idx(), idx(), idx(), any::<u32>())
            .prop_map(|(stream, a, b, out, salt)| Op::Mix { stream, a, b, out, salt }),
        4 => (idx(), idx(), idx()).prop_map(|(stream, src, dst)| Op::Copy { stream, src, dst }),
        2 => (idx(), idx(), any::<u32>()).prop_map(|(stream, dst, seed)| Op::Upload { stream, dst, seed }),
        2 => (idx(), idx()).prop_map(|(stream, src)| Op::Download { stream, src }),
        2 => (idx(), any::<bool>()).prop_map(|(which, stream_proof)| Op::Release { which, stream_proof }),
        1 => (idx(), idx()).prop_map(|(stream, src)| Op::ToVec { stream, src }),
        3 => prop::collection::vec((idx(), idx(), any::<u32>()), 1..4).prop_map(|parts| Op::Group { parts }),
        2 => (idx(), idx()).prop_map(|(from, to)| Op::EventWait { from, to }),
        2 => (idx(), idx()).prop_map(|(from, to)| Op::WaitStream { from, to }),
        1 => idx().prop_map(|stream| Op::SyncStream { stream }),
        1 => idx().prop_map(|dev| Op::SyncDevice { dev }),
        2 => idx().prop_map(|buf| Op::Drop { buf }),
        3 => (idx(), idx()).prop_map(|(dev, peer)| Op::EnablePeer { dev, peer }),
        1 => (idx(), idx()).prop_map(|(dev, peer)| Op::DisablePeer { dev, peer }),
        2 => (idx(), idx(), any::<u32>(), 1u8..3).prop_map(|(stream, dst, add, replays)| Op::Graph { stream, dst, add, replays }),
    ]
}

/// A random program of up to `max_ops` ops (at least a quarter of that).
pub fn program(max_ops: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), (max_ops / 4).max(1)..=max_ops)
}

/// A synchronization bug across two devices planted through the raw driver,
/// behind gpu-sync's back (simulator only: the oracle must flag it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrossPlant {
    /// A buffer written by a tracked kernel on a stream of device A is read
    /// by a raw peer copy on a raw stream of device B with no wait (the
    /// twin: an event of A recorded after the kernel, waited for on B).
    MissingWait,
    /// Raw memory of device A, read by a raw peer copy on a stream of device
    /// B, is freed on A's raw stream with no wait for the read.
    EarlyFree,
}

/// Where and what to plant; `correct` keeps the synchronization in (the
/// twin that must stay clean).
#[derive(Debug, Clone, Copy)]
pub struct Plant {
    /// Op index (modulo the program's length) before which to plant; its
    /// stream is `at` modulo the streams.
    pub at: usize,
    /// What.
    pub kind: CrossPlant,
    /// With the synchronization (`true`) or without it (`false`).
    pub correct: bool,
}

struct Buf {
    dev: DeviceBuffer<u32>,
    host: Vec<u32>,
    /// Index of its device in the program's devices.
    on: usize,
}

/// The run's state: what exists, and which device reaches which.
struct Run<'d> {
    devices: &'d [Device],
    kernels: Vec<Kernels>,
    /// Each stream with the index of its device.
    streams: Vec<(Stream, usize)>,
    bufs: Vec<Buf>,
    pinned: Vec<PinnedBuffer<u32>>,
    pending: Vec<(Pending<PinnedBuffer<u32>>, Vec<u32>, usize)>,
    /// `peers[x][y]`: work on device `x` reaches device `y`'s memory
    /// because the program enabled it.
    peers: Vec<Vec<bool>>,
    stats: Stats,
}

/// Runs `ops` over `devices` and checks every value read back against the
/// sequential reference and every refusal against the device rule; at the
/// end reads every live buffer back, drops everything, synchronizes every
/// device and closes every peer pair open.
///
/// # Errors
/// [`RunError::Api`] at the first op whose call failed unexpectedly (the
/// program stops there; everything is still dropped and peer access still
/// closed; `op` is `ops.len()` for the final checks and the closing);
/// [`RunError::Mismatch`] for a wrong value or a wrong verdict of the device
/// rule.
pub fn run(devices: &[Device], ops: &[Op]) -> Result<Stats, RunError> {
    run_planted(devices, ops, None)
}

/// [`run`] with an optional [`Plant`] (which needs cuda-sim).
///
/// # Errors
/// As [`run`].
pub fn run_planted(devices: &[Device], ops: &[Op], planted: Option<Plant>) -> Result<Stats, RunError> {
    let r = run_inner(devices, ops, planted);
    let closed = close_peers(devices).map_err(|error| RunError::Api { op: ops.len(), error });
    let stats = r?;
    closed.map(|()| stats)
}

/// Disables every peer pair of `devices` that gpu-sync has open; tries
/// every pair and returns the first error.
///
/// # Errors
/// The first `disable_peer_access` error.
pub fn close_peers(devices: &[Device]) -> Result<(), Error> {
    let mut first = Ok(());
    for a in devices {
        for b in devices {
            if a.ordinal() != b.ordinal() && a.peer_access_enabled(b) {
                let r = a.disable_peer_access(b);
                if first.is_ok() {
                    first = r;
                }
            }
        }
    }
    first
}

fn run_inner(devices: &[Device], ops: &[Op], planted: Option<Plant>) -> Result<Stats, RunError> {
    let at = |op: usize| move |error: Error| RunError::Api { op, error };
    let d = devices.len();
    // The reference starts with every pair closed; so must gpu-sync.
    for a in devices {
        if let Some(b) = devices.iter().find(|b| a.ordinal() != b.ordinal() && a.peer_access_enabled(b)) {
            return Err(RunError::Mismatch(format!(
                "peer access {} -> {} is open before the program starts (left by an earlier case?)",
                a.ordinal(),
                b.ordinal()
            )));
        }
    }
    let mut run = Run {
        devices,
        kernels: devices.iter().map(Kernels::load).collect::<Result<_, _>>().map_err(at(0))?,
        streams: Vec::new(),
        bufs: Vec::new(),
        pinned: Vec::new(),
        pending: Vec::new(),
        peers: vec![vec![false; d]; d],
        stats: Stats::default(),
    };
    // A stream and a zeroed buffer on each device to start from.
    for (i, dev) in devices.iter().enumerate() {
        let s = Stream::new(dev).map_err(at(0))?;
        let n = LENGTHS[0];
        run.bufs.push(Buf { dev: DeviceBuffer::zeroed(&s, n).map_err(at(0))?, host: vec![0; n], on: i });
        run.streams.push((s, i));
    }
    for (i, op) in ops.iter().enumerate() {
        if let Some(p) = planted
            && p.at % ops.len() == i
        {
            run.plant(p).map_err(at(i))?;
        }
        run.step(i, op)?;
    }
    run.finish(ops.len())
}

/// What the device rule says of an operation on a stream of device `x`
/// over memory of the devices `owners`: accepted when `unreached` is
/// empty, else refused naming `x` and one of `unreached`.
struct Verdict {
    x: usize,
    owners: Vec<usize>,
    unreached: Vec<usize>,
}

/// What a run exercised, so a test can check its programs reach the paths
/// it is about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Operations refused by the device rule, as the reference said.
    pub refused: usize,
    /// Accepted operations over a peer's memory (kernels, uploads,
    /// downloads, group parts): peer access at work.
    pub peer_uses: usize,
    /// Accepted copies between buffers of two devices.
    pub cross_copies: usize,
    /// Event and stream waits between streams of two devices.
    pub cross_waits: usize,
    /// Accepted group calls over streams of two devices or more.
    pub groups_across: usize,
    /// Successful enables and disables of peer access.
    pub peer_changes: usize,
    /// Graphs captured over a peer's buffer and replayed.
    pub peer_captures: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.refused += o.refused;
        self.peer_uses += o.peer_uses;
        self.cross_copies += o.cross_copies;
        self.cross_waits += o.cross_waits;
        self.groups_across += o.groups_across;
        self.peer_changes += o.peer_changes;
        self.peer_captures += o.peer_captures;
    }
}

impl Run<'_> {
    fn reaches(&self, x: usize, y: usize) -> bool {
        x == y || self.peers[x][y]
    }

    /// A buffer for work on device `x`: three times in four one that `x`
    /// reaches (its own or an opened peer's) if there is one, else any (so
    /// refusals stay common without crowding out the work).
    fn pick_for(&self, x: usize, i: u8) -> Option<usize> {
        if i % 4 != 3 {
            let reached: Vec<usize> =
                (0..self.bufs.len()).filter(|&b| self.reaches(x, self.bufs[b].on)).collect();
            if !reached.is_empty() {
                return Some(reached[(i / 4) as usize % reached.len()]);
            }
        }
        pick(&self.bufs, i)
    }

    /// The verdict for a stream of device `x` touching memory of `owners`,
    /// every one of which must be reached.
    fn every(&self, x: usize, owners: &[usize]) -> Verdict {
        let unreached = owners.iter().copied().filter(|&y| !self.reaches(x, y)).collect();
        Verdict { x, owners: owners.to_vec(), unreached }
    }

    /// Checks `r` against `verdict`: `Some` for an accepted operation that
    /// succeeded (apply it to the reference), `None` for a refusal that
    /// came as the device rule says.
    fn expect<T>(
        &mut self,
        i: usize,
        what: &str,
        r: Result<T, Error>,
        v: &Verdict,
    ) -> Result<Option<T>, RunError> {
        let (x, unreached) = (v.x, &v.unreached);
        match r {
            Ok(v) if unreached.is_empty() => Ok(Some(v)),
            Err(error) if unreached.is_empty() => Err(RunError::Api { op: i, error }),
            Err(Error::DeviceMismatch { expected, found, .. })
                if expected == self.devices[x].ordinal()
                    && unreached.iter().any(|&y| self.devices[y].ordinal() == found) =>
            {
                self.stats.refused += 1;
                Ok(None)
            }
            // A driver failure before the device rule was asked (a capture
            // begins first): the call's own error, not a verdict.
            Err(error) if error.cu_error().is_some() => Err(RunError::Api { op: i, error }),
            r => Err(RunError::Mismatch(format!(
                "op {i} ({what}): a stream of device {x} touching memory of devices {unreached:?} it does not \
                 reach must be refused with DeviceMismatch; got {:?}",
                r.map(drop)
            ))),
        }
        .inspect(|done| {
            if done.is_some() && v.owners.iter().any(|&y| y != x) {
                self.stats.peer_uses += 1;
            }
        })
    }

    fn step(&mut self, i: usize, op: &Op) -> Result<(), RunError> {
        let e = move |error: Error| RunError::Api { op: i, error };
        let ns = self.streams.len();
        let sx = |x: u8| x as usize % ns;
        match *op {
            Op::NewStream { dev } => {
                if ns < MAX_STREAMS {
                    let on = dev as usize % self.devices.len();
                    self.streams.push((Stream::new(&self.devices[on]).map_err(e)?, on));
                }
            }
            Op::Alloc { stream, len } => {
                if self.bufs.len() < MAX_BUFS {
                    let (s, on) = &self.streams[sx(stream)];
                    // Mostly one length, so copies and mixes find partners.
                    let n = LENGTHS[usize::from(len % 4 == 3)];
                    let dev = DeviceBuffer::zeroed(s, n).map_err(e)?;
                    self.bufs.push(Buf { dev, host: vec![0; n], on: *on });
                }
            }
            Op::Fill { stream, dst, seed } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, dst) else { return Ok(()) };
                let v = self.every(x, &[self.bufs[b].on]);
                let r = self.kernels[x].fill_pattern(s, &mut self.bufs[b].dev, seed);
                if self.expect(i, "fill", r, &v)?.is_some() {
                    self.bufs[b].host = pattern_vec(seed, self.bufs[b].host.len());
                }
            }
            Op::Bump { stream, dst, add } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, dst) else { return Ok(()) };
                let v = self.every(x, &[self.bufs[b].on]);
                let r = self.kernels[x].bump(s, &mut self.bufs[b].dev, add);
                if self.expect(i, "bump", r, &v)?.is_some() {
                    reference::bump_u32(&mut self.bufs[b].host, add);
                }
            }
            Op::Mix { stream, a, b, out, salt } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let (Some(a), Some(b), Some(o)) =
                    (self.pick_for(x, a), self.pick_for(x, b), self.pick_for(x, out))
                else {
                    return Ok(());
                };
                let n = self.bufs[o].host.len();
                if o == a || o == b || self.bufs[a].host.len() != n || self.bufs[b].host.len() != n {
                    return Ok(());
                }
                let v = self.every(x, &[self.bufs[a].on, self.bufs[b].on, self.bufs[o].on]);
                let mut out_buf = self.bufs.remove(o);
                let (ai, bi) = (if a > o { a - 1 } else { a }, if b > o { b - 1 } else { b });
                let r =
                    self.kernels[x].mix(s, &self.bufs[ai].dev, &self.bufs[bi].dev, &mut out_buf.dev, salt);
                let checked = self.expect(i, "mix", r, &v);
                if let Ok(Some(())) = checked {
                    reference::mix_u32(&self.bufs[ai].host, &self.bufs[bi].host, &mut out_buf.host, salt);
                }
                self.bufs.insert(o, out_buf);
                checked?;
            }
            Op::Copy { stream, src, dst } => {
                let (Some(a), Some(b)) = (pick(&self.bufs, src), pick(&self.bufs, dst)) else {
                    return Ok(());
                };
                if a == b || self.bufs[a].host.len() != self.bufs[b].host.len() {
                    return Ok(());
                }
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                // One buffer reached is enough: the driver stages the rest.
                let (ya, yb) = (self.bufs[a].on, self.bufs[b].on);
                let unreached =
                    if self.reaches(x, ya) || self.reaches(x, yb) { Vec::new() } else { vec![ya, yb] };
                // Counted below as a copy, not as a peer use.
                let v = Verdict { x, owners: Vec::new(), unreached };
                let mut dst_buf = self.bufs.remove(b);
                let ai = if a > b { a - 1 } else { a };
                let r = s.copy(&self.bufs[ai].dev, &mut dst_buf.dev);
                let checked = self.expect(i, "copy", r, &v);
                if let Ok(Some(())) = checked {
                    dst_buf.host.copy_from_slice(&self.bufs[ai].host);
                    self.stats.cross_copies += usize::from(ya != yb);
                }
                self.bufs.insert(b, dst_buf);
                checked?;
            }
            Op::Upload { stream, dst, seed } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, dst) else { return Ok(()) };
                let data = pattern_vec(seed, self.bufs[b].host.len());
                let p =
                    PinnedBuffer::from_slice(&self.devices[x], &data, HostAllocFlags::empty()).map_err(e)?;
                let v = self.every(x, &[self.bufs[b].on]);
                let r = s.upload(&p, &mut self.bufs[b].dev);
                if self.expect(i, "upload", r, &v)?.is_some() {
                    self.bufs[b].host = data;
                    self.pinned.push(p);
                    if self.pinned.len() > 3 {
                        self.pinned.remove(0);
                    }
                }
            }
            Op::Download { stream, src } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, src) else { return Ok(()) };
                let n = self.bufs[b].host.len();
                let p = PinnedBuffer::new(&self.devices[x], n, HostAllocFlags::empty()).map_err(e)?;
                let v = self.every(x, &[self.bufs[b].on]);
                let r = s.download(&self.bufs[b].dev, p);
                if let Some(pend) = self.expect(i, "download", r, &v)? {
                    self.pending.push((pend, self.bufs[b].host.clone(), sx(stream)));
                }
            }
            Op::Release { which, stream_proof } => {
                let Some(w) = pick(&self.pending, which) else { return Ok(()) };
                let (p, want, si) = self.pending.remove(w);
                let got = if stream_proof {
                    let proof = self.streams[si].0.synchronize().map_err(e)?;
                    if !proof.covers(&p.work()) {
                        return Err(RunError::Mismatch(format!(
                            "op {i}: a stream proof missed its own download"
                        )));
                    }
                    p.redeem(&proof).map_err(|nc| RunError::Mismatch(nc.to_string()))?
                } else {
                    p.wait().map_err(e)?
                };
                compare(&format!("op {i}: pending download"), &got, &want)?;
            }
            Op::ToVec { stream, src } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, src) else { return Ok(()) };
                let v = self.every(x, &[self.bufs[b].on]);
                let r = s.to_vec(&self.bufs[b].dev);
                if let Some(got) = self.expect(i, "to_vec", r, &v)? {
                    compare(&format!("op {i}: pageable download"), &got, &self.bufs[b].host)?;
                }
            }
            Op::Group { ref parts } => self.group(i, parts)?,
            Op::EventWait { from, to } => {
                let (a, x) = (&self.streams[sx(from)].0, self.streams[sx(from)].1);
                let ev = SyncEvent::new(&self.devices[x]).map_err(e)?;
                ev.record(a).map_err(e)?;
                self.streams[sx(to)].0.wait(&ev).map_err(e)?;
                self.stats.cross_waits += usize::from(x != self.streams[sx(to)].1);
            }
            Op::WaitStream { from, to } => {
                self.streams[sx(to)].0.wait_stream(&self.streams[sx(from)].0).map_err(e)?;
                self.stats.cross_waits += usize::from(self.streams[sx(from)].1 != self.streams[sx(to)].1);
            }
            Op::SyncStream { stream } => {
                self.streams[sx(stream)].0.synchronize().map_err(e)?;
            }
            Op::SyncDevice { dev } => {
                self.devices[dev as usize % self.devices.len()].synchronize().map_err(e)?;
            }
            Op::Drop { buf } => {
                if let Some(b) = pick(&self.bufs, buf) {
                    self.bufs.remove(b);
                }
            }
            Op::Graph { stream, dst, add, replays } => {
                let (s, x) = (&self.streams[sx(stream)].0, self.streams[sx(stream)].1);
                let Some(b) = self.pick_for(x, dst) else { return Ok(()) };
                let y = self.bufs[b].on;
                let (k, buf) = (&self.kernels[x], &mut self.bufs[b].dev);
                match s.capture(|cap| k.bump(cap.stream(), buf, add)) {
                    Ok(graph) if self.reaches(x, y) => {
                        let exec = graph.instantiate().map_err(e)?;
                        for _ in 0..replays {
                            exec.launch(s).map_err(e)?;
                            reference::bump_u32(&mut self.bufs[b].host, add);
                        }
                        self.stats.peer_captures += usize::from(x != y);
                    }
                    Ok(_) => {
                        return Err(RunError::Mismatch(format!(
                            "op {i}: a capture on device {x} took a kernel over device {y}'s buffer, unreached"
                        )));
                    }
                    r @ Err(_) => {
                        let v = self.every(x, &[y]);
                        self.expect(i, "captured bump", r.map(drop), &v)?;
                    }
                }
            }
            Op::EnablePeer { dev, peer } => self.peer(i, dev, peer, true)?,
            Op::DisablePeer { dev, peer } => self.peer(i, dev, peer, false)?,
        }
        Ok(())
    }

    /// [`Op::EnablePeer`] (`enable`) or [`Op::DisablePeer`].
    fn peer(&mut self, i: usize, dev: u8, peer: u8, enable: bool) -> Result<(), RunError> {
        let d = self.devices.len();
        let (x, y) = (dev as usize % d, peer as usize % d);
        let (a, b) = (&self.devices[x], &self.devices[y]);
        let r = if enable { a.enable_peer_access(b) } else { a.disable_peer_access(b) };
        if x == y {
            return match r {
                Err(Error::PeerAccess { device, peer, .. })
                    if device == a.ordinal() && peer == a.ordinal() =>
                {
                    Ok(())
                }
                other => Err(RunError::Mismatch(format!(
                    "op {i}: peer access of device {x} to itself must be refused with PeerAccess; got {other:?}"
                ))),
            };
        }
        let can = a.can_access_peer(b).map_err(|error| RunError::Api { op: i, error })?;
        match r {
            Ok(()) if can || !enable => {
                self.peers[x][y] = enable;
                self.stats.peer_changes += 1;
            }
            Err(Error::PeerAccess { device, peer, .. })
                if !can && device == a.ordinal() && peer == b.ordinal() => {}
            Err(error) => return Err(RunError::Api { op: i, error }),
            Ok(()) => {
                return Err(RunError::Mismatch(format!(
                    "op {i}: enabling peer access {x} -> {y} succeeded without a peer path"
                )));
            }
        }
        if a.peer_access_enabled(b) != self.peers[x][y] {
            return Err(RunError::Mismatch(format!(
                "op {i}: peer_access_enabled({x} -> {y}) is {}, the program left it {}",
                !self.peers[x][y], self.peers[x][y]
            )));
        }
        Ok(())
    }

    /// [`Op::Group`]: one `ForeignGroup` call, a memset per distinct stream
    /// over a distinct buffer.
    fn group(&mut self, i: usize, parts: &[(u8, u8, u32)]) -> Result<(), RunError> {
        if self.bufs.is_empty() {
            return Ok(());
        }
        let ns = self.streams.len();
        // (stream, buffer, value), streams and buffers distinct.
        let mut chosen: Vec<(usize, usize, u32)> = Vec::new();
        for &(s, b, value) in parts {
            let s = s as usize % ns;
            let Some(b) = self.pick_for(self.streams[s].1, b) else { return Ok(()) };
            if chosen.iter().all(|&(t, c, _)| t != s && c != b) {
                chosen.push((s, b, value));
            }
        }
        let unreached: Vec<(usize, usize)> = chosen
            .iter()
            .map(|&(s, b, _)| (self.streams[s].1, self.bufs[b].on))
            .filter(|&(x, y)| !self.reaches(x, y))
            .collect();
        // Each chosen buffer borrowed mutably, in the parts' order.
        let mut slots: Vec<Option<&mut Buf>> = self.bufs.iter_mut().map(Some).collect();
        let mut targets: Vec<(&mut DeviceBuffer<u32>, u32, usize)> = Vec::new();
        for &(_, b, value) in &chosen {
            let buf = slots[b]
                .take()
                .ok_or_else(|| RunError::Mismatch(format!("op {i}: buffer {b} chosen twice")))?;
            let n = buf.host.len();
            targets.push((&mut buf.dev, value, n));
        }
        let mut group = ForeignGroup::new();
        let mut sets = Vec::new();
        for (&(s, _, _), (buf, value, n)) in chosen.iter().zip(targets.iter_mut()) {
            let mut u = ForeignUses::new();
            sets.push((u.output(&mut **buf), *value, *n));
            group = group.on(&self.streams[s].0, u);
        }
        // SAFETY: part `k` queues one memset on its own raw stream `raw[k]`,
        // over exactly the `n` words of the buffer declared as its output;
        // a failed memset queued nothing of its own; streams and the current
        // context are left alone, and nothing waits on another thread.
        let r = unsafe {
            group.launch("program group", |raw| {
                for (&(ptr, value, n), r) in sets.iter().zip(raw) {
                    memset_d32_async(ptr, value, n, *r)?;
                }
                Ok(())
            })
        };
        let devs = |v: &[(usize, usize)]| {
            v.iter().map(|&(x, y)| (self.devices[x].ordinal(), self.devices[y].ordinal())).collect::<Vec<_>>()
        };
        match r {
            Ok(()) if unreached.is_empty() => {
                for &(s, b, value) in &chosen {
                    self.bufs[b].host.fill(value);
                    self.stats.peer_uses += usize::from(self.streams[s].1 != self.bufs[b].on);
                }
                let first = self.streams[chosen[0].0].1;
                self.stats.groups_across +=
                    usize::from(chosen.iter().any(|&(s, _, _)| self.streams[s].1 != first));
                Ok(())
            }
            Err(Error::DeviceMismatch { expected, found, .. })
                if devs(&unreached).contains(&(expected, found)) =>
            {
                self.stats.refused += 1;
                Ok(())
            }
            Err(error) if unreached.is_empty() => Err(RunError::Api { op: i, error }),
            other => Err(RunError::Mismatch(format!(
                "op {i}: a group with parts (stream device, buffer device) {:?} not reached must be refused with \
                 DeviceMismatch; got {other:?}",
                devs(&unreached)
            ))),
        }
    }

    /// Waits for every pending download, reads every buffer back on a
    /// stream of its own device, drops everything, synchronizes every
    /// device.
    fn finish(mut self, last: usize) -> Result<Stats, RunError> {
        let e = move |error: Error| RunError::Api { op: last, error };
        for (p, want, _) in self.pending.drain(..) {
            let got = p.wait().map_err(e)?;
            compare("final pending download", &got, &want)?;
        }
        for (j, b) in self.bufs.iter().enumerate() {
            // Stream `x` for `x < D` is device `x`'s first (never dropped).
            let got = self.streams[b.on].0.to_vec(&b.dev).map_err(e)?;
            compare(&format!("buffer {j} (device {}) at the end", b.on), &got, &b.host)?;
        }
        let (devices, stats) = (self.devices, self.stats);
        drop(self);
        for d in devices {
            d.synchronize().map_err(e)?;
        }
        Ok(stats)
    }

    /// Plants `p` before op `p.at` (see [`CrossPlant`]).
    fn plant(&self, p: Plant) -> Result<(), Error> {
        // Without its synchronization a planted bug may fault as on a GPU,
        // so what follows it may fail: lenient then.
        let (s, a) = {
            let (s, a) = &self.streams[p.at % self.streams.len()];
            (s, *a)
        };
        let b = (a + 1) % self.devices.len();
        let (dev_a, dev_b) = (&self.devices[a], &self.devices[b]);
        let (ctx_a, ctx_b) = (dev_a.raw_context(), dev_b.raw_context());
        const N: usize = 256;
        let bytes = N * 4;
        match p.kind {
            CrossPlant::MissingWait => {
                let mut x = DeviceBuffer::<u32>::zeroed(s, N)?;
                self.kernels[a].fill_pattern(s, &mut x, 1)?;
                dev_a.make_current()?;
                let raw = if p.correct { Raw::new() } else { Raw::new().lenient() };
                let ev = raw.event();
                raw.record(ev, s.as_raw());
                dev_b.make_current()?;
                let r = raw.stream();
                let scratch = raw.alloc(bytes, r);
                if p.correct {
                    raw.wait(r, ev);
                }
                raw.copy_peer(scratch, ctx_b, x.as_raw(), ctx_a, bytes, r);
                raw.free(scratch, r);
                raw.sync(r);
                raw.destroy_stream(r);
                dev_a.make_current()?;
                raw.destroy_event(ev);
            }
            CrossPlant::EarlyFree => {
                dev_a.make_current()?;
                let raw = if p.correct { Raw::new() } else { Raw::new().lenient() };
                let r = raw.stream();
                let mem = raw.alloc(bytes, r);
                raw.memset(mem, 7, N, r);
                let written = raw.event();
                raw.record(written, r);
                let sb = Stream::new(dev_b)?;
                let scratch = DeviceBuffer::<u32>::alloc(&sb, N)?;
                dev_b.make_current()?;
                raw.wait(sb.as_raw(), written);
                raw.copy_peer(scratch.as_raw(), ctx_b, mem, ctx_a, bytes, sb.as_raw());
                let read = raw.event();
                if p.correct {
                    raw.record(read, sb.as_raw());
                    raw.wait(r, read);
                }
                dev_a.make_current()?;
                raw.free(mem, r);
                raw.sync(r);
                raw.sync(sb.as_raw());
                raw.destroy_event(written);
                raw.destroy_event(read);
                raw.destroy_stream(r);
            }
        }
        Ok(())
    }
}

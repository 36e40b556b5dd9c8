//! Peer-to-peer measurement between every ordered pair of devices, after
//! NVIDIA's `p2pBandwidthLatencyTest` and `nvbandwidth`: copy-engine
//! bandwidth one way and both ways at once (two copies on two streams, one
//! per device), with peer access off (staged through host memory) and on
//! (over the link); an SM copy kernel pushing and pulling across the link;
//! the 4-byte latency as GPU time (events) and as the host's round trip;
//! a cross-device handoff (tiny kernels handing a buffer A → B → A); the
//! link per pair from NVML; and beside each of gpu-sync's figures its
//! raw-driver twin in the same run: a `cuMemcpyPeerAsync` loop with peer
//! access on (the same bytes and repeats), the SM copy's own function
//! launched by `cuLaunchKernel`, and the handoff ordered by hand with
//! `cuEventRecord` and `cuStreamWaitEvent`.
//!
//! Each bandwidth and latency figure is the median of `repeats` runs, each
//! timed by events on the device that runs it; a both-ways run spans two
//! devices, whose events cannot be subtracted, so its time is the longer
//! of the two devices' spans. After the timed runs every destination is
//! read back and checked. The handoff's method is in its module's docs.
//!
//! The SM copy and the handoff need the workspace's kernels (`copy_u32x4`,
//! `bump_u32`) and spin gate: with gpu-bench's `kernels` feature; without
//! it those figures are reported missing.
//!
//! [`run`] is the method; [`P2pReport`] renders it (markdown, CSV, JSON
//! through serde, a heat-map SVG of the one-way matrix).

#[cfg(feature = "kernels")]
mod handoff;
mod nvml;
mod raw;
mod render;
#[cfg(feature = "kernels")]
mod twin;
mod with_kernels;

pub use nvml::Link;

use crate::spans::DeviceSpans;
use gpu_sync::{Device, DeviceBuffer, Stream};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What to measure; [`P2pReport`]'s example passes one to [`run`].
#[derive(Debug, Clone, Copy)]
pub struct P2pOptions {
    /// Bytes per bandwidth copy (a multiple of 16).
    pub bytes: usize,
    /// Timed runs per figure (the median is reported).
    pub repeats: usize,
    /// Hops of the cross-device handoff (even: A → B → A …; at most
    /// [`MAX_HANDOFF_HOPS`], what one gated batch can queue).
    pub handoff_hops: usize,
}

/// The most handoff hops one gated batch queues: three driver entries a
/// hop (a wait, a launch, a record), kept under half the ~1024 entries a
/// stream takes before a submission blocks (the overhead method's
/// `QUEUE_BUDGET` argument).
pub const MAX_HANDOFF_HOPS: usize = 128;

impl Default for P2pOptions {
    /// 256 MiB, 20 repeats, 64 handoff hops.
    fn default() -> P2pOptions {
        P2pOptions { bytes: 256 << 20, repeats: 20, handoff_hops: 64 }
    }
}

/// A figure: a value, or why there is none; [`P2pReport`]'s example reads
/// both kinds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// Measured and checked.
    Value(f64),
    /// Not measured here, and why.
    Missing(String),
}

impl Figure {
    /// What a figure added after a report was written reads as in it (the
    /// fields of the SM copy's raw twin and the handoff).
    fn older_report() -> Figure {
        Figure::Missing("not in this report (written before the figure existed)".into())
    }

    /// The value, if measured.
    pub fn value(&self) -> Option<f64> {
        match self {
            Figure::Value(v) => Some(*v),
            Figure::Missing(_) => None,
        }
    }
}

/// One ordered pair's figures (GB/s are 10^9 bytes per second; the
/// both-ways figure counts both directions' bytes).
///
/// [`P2pReport`]'s example reads the pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    /// Source device ordinal.
    pub src: i32,
    /// Destination device ordinal.
    pub dst: i32,
    /// The link NVML reports between them.
    pub link: Link,
    /// `cuDeviceCanAccessPeer(dst, src)`.
    pub can_access_peer: bool,
    /// `cuDeviceGetP2PAttribute` performance rank (lower is faster).
    pub performance_rank: Option<i32>,
    /// gpu-sync `Stream::copy`, one way, peer access off (staged), GB/s.
    pub copy_off_gbs: Figure,
    /// The same, both ways at once, GB/s.
    pub copy_both_off_gbs: Figure,
    /// gpu-sync `Stream::copy`, one way, peer access on, GB/s.
    pub copy_on_gbs: Figure,
    /// The same, both ways at once, GB/s.
    pub copy_both_on_gbs: Figure,
    /// Raw `cuMemcpyPeerAsync` loop, one way, peer access on, GB/s.
    pub raw_on_gbs: Figure,
    /// The same, both ways at once, GB/s.
    pub raw_both_on_gbs: Figure,
    /// SM copy kernel (`copy_u32x4`, gpu-sync's launch) on `src` writing
    /// `dst`'s memory, GB/s.
    pub sm_push_gbs: Figure,
    /// Its raw twin: the same function by `cuLaunchKernel`, GB/s.
    #[serde(default = "Figure::older_report")]
    pub sm_push_raw_gbs: Figure,
    /// SM copy kernel on `dst` reading `src`'s memory, GB/s.
    pub sm_pull_gbs: Figure,
    /// Its raw twin, GB/s.
    #[serde(default = "Figure::older_report")]
    pub sm_pull_raw_gbs: Figure,
    /// 4-byte copy, device time by events, peer access on, µs.
    pub latency_gpu_on_us: Figure,
    /// 4-byte copy, device time by events, peer access off, µs.
    pub latency_gpu_off_us: Figure,
    /// 4-byte copy and a stream synchronize, host round trip, peer access on, µs.
    pub latency_host_on_us: Figure,
    /// Handoff `src` → `dst` → `src`, gpu-sync's chain: GPU µs per hop
    /// (events on `src`).
    #[serde(default = "Figure::older_report")]
    pub handoff_gpu_us: Figure,
    /// The same chain ordered by hand (raw events and waits), GPU µs per hop.
    #[serde(default = "Figure::older_report")]
    pub handoff_raw_gpu_us: Figure,
    /// gpu-sync's chain: host µs per hop to submit.
    #[serde(default = "Figure::older_report")]
    pub handoff_host_us: Figure,
    /// The raw chain: host µs per hop to submit.
    #[serde(default = "Figure::older_report")]
    pub handoff_raw_host_us: Figure,
}

/// A whole run: what [`run`] returns.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::p2p::{P2pOptions, run};
/// let devices = gpu_sync::Device::all()?; // the simulator has two
/// let opts = P2pOptions { bytes: 1 << 20, repeats: 3, ..P2pOptions::default() };
/// let report = run(&devices[..2], opts)?;
/// assert!(report.simulated && report.pairs.len() == 2); // 0 → 1 and 1 → 0
/// let pair = &report.pairs[0];
/// assert!(pair.can_access_peer);
/// assert!(pair.copy_on_gbs.value().is_some_and(|gbs| gbs > 0.0)); // measured and checked
/// // A figure not measured says why (here: no `kernels` feature, or the simulator).
/// for f in [&pair.sm_push_gbs, &pair.handoff_gpu_us] {
///     assert!(f.value().is_some() || matches!(f, gpu_bench::p2p::Figure::Missing(why) if !why.is_empty()));
/// }
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct P2pReport {
    /// Device names by ordinal.
    pub devices: Vec<String>,
    /// Whether the simulator ran it (every figure timed by events is then
    /// simulated; the host-clock figures are real CPU time).
    pub simulated: bool,
    /// Bytes per bandwidth copy.
    pub bytes: usize,
    /// Timed runs per figure.
    pub repeats: usize,
    /// Hops of each handoff chain (0 in a report older than the handoff).
    #[serde(default)]
    pub handoff_hops: usize,
    /// Every ordered pair.
    pub pairs: Vec<PairResult>,
    /// Remarks (why figures are missing, what is simulated).
    pub notes: Vec<String>,
}

/// GB/s of `bytes` in `ms`.
fn gbs(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// The median of `v` (sorted in place); 0 for none.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The longest of `spans`' streams' spans (waiting for their ends), ms.
fn longest_ms(spans: &DeviceSpans) -> gpu_sync::Result<f64> {
    Ok(spans.read()?.longest() * 1e3)
}

/// The buffers and streams of one ordered pair.
struct Pair<'a> {
    a: &'a Device,
    b: &'a Device,
    sa: Stream,
    sb: Stream,
    /// On `a`: the source of a→b, and the destination of b→a.
    a_src: DeviceBuffer<u32>,
    a_dst: DeviceBuffer<u32>,
    /// On `b`: the destination of a→b, and the source of b→a.
    b_dst: DeviceBuffer<u32>,
    b_src: DeviceBuffer<u32>,
    pattern_ab: u32,
    pattern_ba: u32,
}

impl<'a> Pair<'a> {
    fn new(a: &'a Device, b: &'a Device, words: usize) -> gpu_sync::Result<Pair<'a>> {
        let (sa, sb) = (Stream::new(a)?, Stream::new(b)?);
        let pattern_ab = 0x5000_0000 | (a.ordinal() as u32) << 8 | b.ordinal() as u32;
        let pattern_ba = 0x6000_0000 | (b.ordinal() as u32) << 8 | a.ordinal() as u32;
        let a_src = DeviceBuffer::from_slice(&sa, &vec![pattern_ab; words])?;
        let a_dst = DeviceBuffer::zeroed(&sa, words)?;
        let b_src = DeviceBuffer::from_slice(&sb, &vec![pattern_ba; words])?;
        let b_dst = DeviceBuffer::zeroed(&sb, words)?;
        sa.synchronize()?;
        sb.synchronize()?;
        Ok(Pair { a, b, sa, sb, a_src, a_dst, b_dst, b_src, pattern_ab, pattern_ba })
    }

    /// Median ms of `Stream::copy` a→b on `b`'s stream (the destination's,
    /// as PyTorch's `copy_` does), one way or with b→a at once on `a`'s.
    fn copy_ms(&mut self, repeats: usize, both: bool) -> gpu_sync::Result<f64> {
        // Both ways: one span per device's stream, the longer one counts.
        let streams = if both { vec![&self.sb, &self.sa] } else { vec![&self.sb] };
        let spans = DeviceSpans::new(streams.iter().copied())?;
        let mut runs = Vec::with_capacity(repeats);
        for i in 0..=repeats {
            spans.start_all(streams.iter().copied())?;
            self.sb.copy(&self.a_src, &mut self.b_dst)?;
            spans.end(0, &self.sb)?;
            if both {
                self.sa.copy(&self.b_src, &mut self.a_dst)?;
                spans.end(1, &self.sa)?;
            }
            let ms = longest_ms(&spans)?;
            if i > 0 {
                runs.push(ms); // the first is a warmup
            }
        }
        Ok(median(&mut runs))
    }

    /// Median ms of gpu-sync's SM copy a→b on `twins`' device (`a` to
    /// push, `b` to pull), on that device's stream of the pair.
    #[cfg(feature = "kernels")]
    fn sm_ms(&mut self, twins: &twin::Twins, repeats: usize) -> gpu_sync::Result<f64> {
        let push = twins.device() == self.a;
        let stream = if push { &self.sa } else { &self.sb };
        let span = DeviceSpans::new([stream])?;
        let mut runs = Vec::with_capacity(repeats);
        for i in 0..=repeats {
            span.start(0, stream)?;
            twins.copy(stream, &self.a_src, &mut self.b_dst)?;
            span.end(0, stream)?;
            let ms = longest_ms(&span)?;
            if i > 0 {
                runs.push(ms);
            }
        }
        Ok(median(&mut runs))
    }

    /// (device µs, host round-trip µs) of a 4-byte copy a→b on `b`'s stream.
    fn latency_us(&mut self, repeats: usize) -> gpu_sync::Result<(f64, f64)> {
        let span = DeviceSpans::new([&self.sb])?;
        let src = self.a_src.slice(0..1)?;
        let mut dst = self.b_dst.slice_mut(0..1)?;
        let (mut dev, mut host) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
        for i in 0..=repeats {
            let t = Instant::now();
            span.start(0, &self.sb)?;
            self.sb.copy(&src, &mut dst)?;
            span.end(0, &self.sb)?;
            self.sb.synchronize()?;
            let h = t.elapsed().as_secs_f64() * 1e6;
            if i > 0 {
                dev.push(longest_ms(&span)? * 1e3);
                host.push(h);
            }
        }
        Ok((median(&mut dev), median(&mut host)))
    }

    /// Checks every destination holds its source's pattern.
    fn check(&self, both: bool) -> crate::Result<()> {
        let got = self.sb.to_vec(&self.b_dst)?;
        if let Some(i) = got.iter().position(|&v| v != self.pattern_ab) {
            return Err(crate::Error::Check(format!(
                "device {} -> {}: word {i} is {:#x}, not {:#x}",
                self.a.ordinal(),
                self.b.ordinal(),
                got[i],
                self.pattern_ab
            )));
        }
        if both {
            let got = self.sa.to_vec(&self.a_dst)?;
            if let Some(i) = got.iter().position(|&v| v != self.pattern_ba) {
                return Err(crate::Error::Check(format!(
                    "device {} -> {} (both ways): word {i} is {:#x}, not {:#x}",
                    self.b.ordinal(),
                    self.a.ordinal(),
                    got[i],
                    self.pattern_ba
                )));
            }
        }
        Ok(())
    }

    /// Zeroes the destinations, so the next check sees the next copies.
    fn clear(&mut self) -> gpu_sync::Result<()> {
        self.sb.fill_u32(&mut self.b_dst, 0)?;
        self.sa.fill_u32(&mut self.a_dst, 0)?;
        self.sa.synchronize()?;
        self.sb.synchronize()?;
        Ok(())
    }
}

/// A figure from a measurement and its check: the value, or the error as
/// the reason (a wrong result is an error of the whole run, never a figure).
fn figure(r: crate::Result<f64>) -> crate::Result<Figure> {
    match r {
        Ok(v) => Ok(Figure::Value(v)),
        Err(crate::Error::Check(m)) => Err(crate::Error::Check(m)),
        Err(e) => Ok(Figure::Missing(e.to_string())),
    }
}

/// Measures every ordered pair of `devices`.
///
/// Peer access is enabled (both ways) for the "on" figures and disabled
/// again after each pair, so the "off" figures of later pairs stay staged;
/// access another library of the process enabled stays (see
/// `Device::disable_peer_access`), and the report says so when an "off"
/// figure could not be staged.
///
/// # Errors
/// [`crate::Error::Check`] when a copy's data is wrong; a driver error
/// outside a figure (allocating, reading back).
pub fn run(devices: &[Device], opts: P2pOptions) -> crate::Result<P2pReport> {
    let words = (opts.bytes / 16).max(1) * 4;
    let bytes = words * 4;
    let repeats = opts.repeats.max(1);
    let hops = opts.handoff_hops;
    let simulated = gpu_sync::cuda_sys::installed().is_some_and(|d| d.origin() == "cuda-sim");
    let mut notes = vec![
        "4 B latency: one copy between a pair of events on the destination's stream, the median over the \
         runs; the event pair's own floor is inside it (back-to-back copies per pair, as \
         p2pBandwidthLatencyTest reports them, are not measured here)"
            .to_owned(),
    ];
    if simulated {
        notes.push(
            "simulated: every figure timed by events comes from cuda-sim's device model, not a GPU; the \
             host-time table's figures are real CPU times of the software driver, not simulated: the two \
             do not compare"
                .into(),
        );
    }
    let links = nvml::links(devices);
    if let Err(why) = &links {
        notes.push(format!("link unknown: {why}"));
    }
    let loaded = with_kernels::Loaded::load(devices);
    let mut pairs = Vec::new();
    for (i, a) in devices.iter().enumerate() {
        for (j, b) in devices.iter().enumerate() {
            if a == b {
                continue;
            }
            let link = match &links {
                Ok(l) => l.between(a.ordinal(), b.ordinal()),
                Err(_) => Link::Unknown,
            };
            let can = b.can_access_peer(a)?;
            let rank = a.p2p_attributes(b).ok().map(|p| p.performance_rank);
            let mut p = Pair::new(a, b, words)?;
            let already = b.peer_access_enabled(a) || a.peer_access_enabled(b);
            if already {
                notes.push(format!(
                    "{} <-> {}: peer access was already on: the off figures are not staged",
                    a.ordinal(),
                    b.ordinal()
                ));
            }
            let copy_off = figure(
                p.copy_ms(repeats, false)
                    .map_err(Into::into)
                    .and_then(|ms| p.check(false).map(|()| gbs(bytes, ms))),
            )?;
            p.clear()?;
            let copy_both_off = figure(
                p.copy_ms(repeats, true)
                    .map_err(Into::into)
                    .and_then(|ms| p.check(true).map(|()| gbs(2 * bytes, ms))),
            )?;
            p.clear()?;
            let (lat_off, _) = p.latency_us(repeats).unwrap_or((f64::NAN, f64::NAN));
            let unavailable = |why: &str| Figure::Missing(why.to_owned());
            let (mut copy_on, mut copy_both_on, mut raw_on, mut raw_both_on) = (
                unavailable("no peer access"),
                unavailable("no peer access"),
                unavailable("no peer access"),
                unavailable("no peer access"),
            );
            let mut k = with_kernels::KernelFigures::missing("no peer access");
            let (mut lat_on, mut host_on) = (unavailable("no peer access"), unavailable("no peer access"));
            if can {
                b.enable_peer_access(a)?;
                a.enable_peer_access(b)?;
                copy_on = figure(
                    p.copy_ms(repeats, false)
                        .map_err(Into::into)
                        .and_then(|ms| p.check(false).map(|()| gbs(bytes, ms))),
                )?;
                p.clear()?;
                copy_both_on = figure(
                    p.copy_ms(repeats, true)
                        .map_err(Into::into)
                        .and_then(|ms| p.check(true).map(|()| gbs(2 * bytes, ms))),
                )?;
                p.clear()?;
                raw_on = figure(
                    raw::copy_ms(&p, repeats, false).and_then(|ms| p.check(false).map(|()| gbs(bytes, ms))),
                )?;
                p.clear()?;
                raw_both_on = figure(
                    raw::copy_ms(&p, repeats, true).and_then(|ms| p.check(true).map(|()| gbs(2 * bytes, ms))),
                )?;
                p.clear()?;
                k = loaded.figures(&mut p, (i, j), (repeats, hops), &mut notes)?;
                match p.latency_us(repeats) {
                    Ok((d, h)) => {
                        lat_on = Figure::Value(d);
                        host_on = Figure::Value(h);
                    }
                    Err(e) => {
                        lat_on = Figure::Missing(e.to_string());
                        host_on = Figure::Missing(e.to_string());
                    }
                }
                if !already {
                    b.disable_peer_access(a)?;
                    a.disable_peer_access(b)?;
                }
            }
            pairs.push(PairResult {
                src: a.ordinal(),
                dst: b.ordinal(),
                link,
                can_access_peer: can,
                performance_rank: rank,
                copy_off_gbs: copy_off,
                copy_both_off_gbs: copy_both_off,
                copy_on_gbs: copy_on,
                copy_both_on_gbs: copy_both_on,
                raw_on_gbs: raw_on,
                raw_both_on_gbs: raw_both_on,
                sm_push_gbs: k.sm_push,
                sm_push_raw_gbs: k.sm_push_raw,
                sm_pull_gbs: k.sm_pull,
                sm_pull_raw_gbs: k.sm_pull_raw,
                latency_gpu_on_us: lat_on,
                latency_gpu_off_us: if lat_off.is_nan() {
                    unavailable("failed")
                } else {
                    Figure::Value(lat_off)
                },
                latency_host_on_us: host_on,
                handoff_gpu_us: k.handoff_gpu,
                handoff_raw_gpu_us: k.handoff_raw_gpu,
                handoff_host_us: k.handoff_host,
                handoff_raw_host_us: k.handoff_raw_host,
            });
        }
    }
    let names = devices.iter().map(|d| d.name().unwrap_or_else(|e| format!("unknown ({e})"))).collect();
    Ok(P2pReport { devices: names, simulated, bytes, repeats, handoff_hops: hops, pairs, notes })
}

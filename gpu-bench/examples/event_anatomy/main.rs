//! Where the time between a start event and an end event goes: the
//! event-pair floor, a raw driver pair around a raw launch, gpu-bench's own
//! hot and graph modes, CUPTI's kernel start/end and the kernel's own
//! `%globaltimer` stamps, kernel-to-kernel gaps with event records between,
//! and a graph whose event records are nodes inside it. Every sample is
//! queued behind the spin gate (the host is never inside a timed region).
//!
//!     cargo run --release -p gpu-bench --features kernels --example event_anatomy
//!     cargo run --release -p gpu-bench --features kernels --example event_anatomy -- sizes
//!
//! (f), in phase A: hot and graph mode against a raw pair around a raw
//! launch (and around a raw `cuGraphLaunch`) of `scale_f32` with truth's
//! tiled grid at truth's sizes, 1 Ki to 256 Mi elements, on the same
//! buffers, with the verdict of issue 26's target (nothing of gpu-bench's
//! inside the timed region: at most the raw pair + max(64 ns, 0.5 %)).
//! `sizes` runs (f) alone.
//!
//! (g), in phase A (`execs` runs it alone): at truth's sizes, several
//! graph execs of `scale_f32` (each a fresh capture and
//! instantiation, through gpu-sync and through the raw driver), each timed
//! by a raw pair around a raw `cuGraphLaunch` of it; for gpu-sync's execs
//! also by gpu-bench's hot mode on a tracked [`GraphExec::launch`] of the
//! same exec (what graph mode times): how much execs of the same work
//! differ, and what gpu-bench adds to one exec.
//!
//! Three phases in one process: (A) CUPTI never initialized, (B) a CUPTI
//! activity consumer enabled (kernel records), (C) CUPTI initialized but no
//! kind enabled. Prints one markdown table (medians and quartiles of ≥ 1000
//! samples each, ns). Without a GPU driver it runs on cuda-sim (simulated
//! times: only a check that the program works). Raw driver calls go through
//! `cuda_sys::result`; each `unsafe` block says why it is sound.
#![allow(unsafe_code)]

use gpu_bench::{Bench, Mode, Settings, Timer};
use gpu_sync::cuda_sys::cupti::{ActivityKind, ActivityOp, ActivityRecord, Consumer};
use gpu_sync::cuda_sys::result::{event, graph, launch, memory, module, stream};
use gpu_sync::cuda_sys::{
    self as sys, BorrowedContext, BorrowedFunction, BorrowedStream, CUdeviceptr, CUevent_record_flags,
    CUstream_flags, CUstreamCaptureMode, Driver, OwnedEvent, OwnedGraphExec, OwnedStream,
};
use gpu_sync::{Device, DeviceBuffer, Stream};
use std::ffi::c_void;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

mod sizes;
use sizes::{Scale, execs, sizes};

/// Samples per gated round (the timer's ring).
const ROUND: usize = 64;
/// Rounds per case: 16 × 64 = 1024 samples.
const ROUNDS: usize = 16;

/// One measured case: its name, the phase, and its samples (ns).
struct Row {
    phase: &'static str,
    case: String,
    v: Vec<f64>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let x = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    let (a, b) = (sorted[lo], sorted[hi]);
    a + (b - a) * (x - lo as f64)
}

/// The smallest non-zero step between distinct sample values: the tick
/// the samples are quantized to (if any).
fn step(sorted: &[f64]) -> f64 {
    let mut d: Vec<f64> = sorted.to_vec();
    d.dedup();
    d.windows(2).map(|w| w[1] - w[0]).filter(|&x| x > 0.5).fold(f64::NAN, f64::min)
}

impl Row {
    fn line(&self) -> String {
        let mut s = self.v.clone();
        s.sort_by(f64::total_cmp);
        let zeros = s.iter().filter(|&&x| x == 0.0).count();
        let mut distinct = s.clone();
        distinct.dedup();
        format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
            self.phase,
            self.case,
            s.len(),
            quantile(&s, 0.5),
            quantile(&s, 0.25),
            quantile(&s, 0.75),
            quantile(&s, 0.75) - quantile(&s, 0.25),
            s.first().copied().unwrap_or(f64::NAN),
            step(&s),
            zeros,
            distinct.len(),
        )
    }
}

/// The raw-driver side: the timer's stream borrowed raw, a ring of timing
/// events, the two kernels, a device buffer of stamps, a capture stream.
struct Raw<'m> {
    drv: &'static Driver,
    ring: Vec<(OwnedEvent, OwnedEvent)>,
    empty: BorrowedFunction<'m>,
    stamp: BorrowedFunction<'m>,
    /// `2 * 4 * ROUND` u64: up to four stamped kernels per sample.
    stamps: CUdeviceptr,
    /// A stream of our own to capture graphs on.
    capture: OwnedStream,
}

const STAMP_SLOTS: usize = 4 * ROUND;

impl Raw<'_> {
    /// Queues the empty kernel (`spin_cycles(1, out)`, one thread) raw.
    fn launch_empty(&self, s: BorrowedStream<'_>) -> Res<()> {
        let mut cycles = 1u64;
        let mut out = self.stamps;
        let mut params = [(&raw mut cycles).cast::<c_void>(), (&raw mut out).cast::<c_void>()];
        // SAFETY: spin_cycles(u64 cycles, u64* out) takes these two values;
        // one thread writes out[0], inside `stamps` (alive until the end of
        // main, after every stream is synchronized).
        unsafe { launch::launch_kernel(self.empty, [1, 1, 1], [1, 1, 1], 0, s, &mut params) }?;
        Ok(())
    }

    /// Queues `stamp(0, stamps + 2 * slot)` raw.
    fn launch_stamp(&self, s: BorrowedStream<'_>, slot: usize) -> Res<()> {
        self.launch_stamp_for(s, slot, 0)
    }

    /// Queues `stamp(cycles, stamps + 2 * slot)` raw.
    fn launch_stamp_for(&self, s: BorrowedStream<'_>, slot: usize, cycles: u64) -> Res<()> {
        let mut cycles = cycles;
        let mut out = self.stamps + (2 * 8 * (slot % STAMP_SLOTS)) as u64;
        let mut params = [(&raw mut cycles).cast::<c_void>(), (&raw mut out).cast::<c_void>()];
        // SAFETY: stamp(u64 cycles, u64* out) takes these two values; one
        // thread writes out[0..2], inside `stamps` (slot < STAMP_SLOTS).
        unsafe { launch::launch_kernel(self.stamp, [1, 1, 1], [1, 1, 1], 0, s, &mut params) }?;
        Ok(())
    }

    /// The stamps of the last round (synchronizes the stream first).
    fn read_stamps(&self, s: BorrowedStream<'_>) -> Res<Vec<u64>> {
        let mut host = vec![0u64; 2 * STAMP_SLOTS];
        // SAFETY: `host` holds 2 * STAMP_SLOTS u64, the size of `stamps`;
        // the stream is synchronized before `host` is read, and nothing
        // else writes `stamps` meanwhile.
        unsafe { memory::memcpy_dtoh_async(host.as_mut_ptr().cast(), self.stamps, host.len() * 8, s) }?;
        stream::synchronize(s)?;
        Ok(host)
    }

    /// A graph captured on our own stream from `body`, instantiated.
    fn graph(&self, body: &mut dyn FnMut(BorrowedStream<'_>) -> Res<()>) -> Res<OwnedGraphExec> {
        let cs = self.capture.as_borrowed();
        stream::begin_capture(cs, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let r = body(cs);
        let g = stream::end_capture(cs)?;
        r?;
        Ok(graph::instantiate_with_flags(&g, 0)?)
    }
}

/// The timer's stream as a raw borrowed stream.
fn raw_stream<'a>(drv: &'static Driver, s: &'a Stream) -> BorrowedStream<'a> {
    // SAFETY: `s` is a live stream of `drv` (gpu-sync's, made through the
    // installed table) and outlives the borrow; streams are `Shared`.
    unsafe { BorrowedStream::borrow_raw(drv, s.as_raw()) }
}

/// Where a sample's timing events are recorded.
#[derive(Clone, Copy, PartialEq)]
enum Timing {
    /// The ring's start and end events around the body.
    Around,
    /// The body records (or its graph holds) the ring's events.
    Inside,
    /// No timing events: the body alone (the samples come back empty).
    Off,
}

/// `rounds` gated rounds of `ROUND` samples (`ROUNDS` for the full
/// count): per sample, start event, `body(slot)`, end event (see
/// [`Timing`]). `after` runs after each round (the stream then drained).
/// Samples, ns.
fn pairs(
    rounds: usize,
    timer: &mut Timer,
    raw: &Raw<'_>,
    timing: Timing,
    body: &mut dyn FnMut(BorrowedStream<'_>, usize) -> Res<()>,
    after: &mut dyn FnMut(BorrowedStream<'_>) -> Res<()>,
) -> Res<Vec<f64>> {
    let drv = raw.drv;
    let mut v = Vec::with_capacity(ROUND * rounds);
    let mut err: Option<Box<dyn std::error::Error>> = None;
    let mut done = 0;
    let mut tries = 0;
    while done < rounds && tries < 2 * rounds {
        tries += 1;
        let opened = timer.gated(&mut |t| {
            let s = raw_stream(drv, t.stream());
            for (i, (a, b)) in raw.ring.iter().enumerate() {
                let r = (|| {
                    if timing == Timing::Around {
                        event::record(a, s)?;
                    }
                    body(s, i)?;
                    if timing == Timing::Around {
                        event::record(b, s)?;
                    }
                    Ok::<(), Box<dyn std::error::Error>>(())
                })();
                if let Err(e) = r {
                    err = Some(e);
                    break;
                }
            }
            Ok(())
        })?;
        if let Some(e) = err.take() {
            return Err(e);
        }
        if !opened {
            eprintln!("a gated round timed out: dropped");
            after(raw_stream(drv, timer.stream()))?;
            continue;
        }
        for (a, b) in raw.ring.iter().filter(|_| timing != Timing::Off) {
            event::synchronize(b)?;
            v.push(f64::from(event::elapsed_time(a, b)?) * 1e6);
        }
        after(raw_stream(drv, timer.stream()))?;
        done += 1;
    }
    Ok(v)
}

/// The timer stream's kernel records (without the spin gate's), in start
/// order.
fn kernels_of(c: &Consumer, sid: u32) -> Res<Vec<ActivityRecord>> {
    let mut r: Vec<ActivityRecord> = c
        .take()?
        .into_iter()
        .filter(|r| r.stream_id == sid)
        .filter(|r| matches!(&r.op, ActivityOp::Kernel { name, .. } if !name.contains("spin_gate")))
        .collect();
    r.sort_by_key(|r| r.start_ns);
    Ok(r)
}

/// Per sample, the pair's time less its kernel's CUPTI duration (when
/// every sample has its record).
fn minus(rows: &mut Vec<Row>, phase: &'static str, case: &str, pairs: &[f64], recs: &[ActivityRecord]) {
    if !recs.is_empty() && recs.len() == pairs.len() {
        let v = pairs.iter().zip(recs).map(|(p, r)| p - r.duration_ns() as f64).collect();
        rows.push(Row { phase, case: case.into(), v });
    }
}

fn main() -> Res<()> {
    let simulated = gpu_sync::select_driver()?.is_sim();
    if simulated {
        kernels::register_sim_kernels();
    }
    let device = Device::get(0)?;
    let caller = Stream::new(&device)?;
    let instruments = gpu_bench::instruments::load(&device)?;
    let bench_k = kernels::BenchKernels::load(&device)?;
    let k = kernels::Kernels::load(&device)?;
    let drv = sys::installed().ok_or("no driver installed")?;
    // SAFETY: the device's primary context, retained by `device` for all of
    // main; contexts are `Shared`.
    let ctx = unsafe { BorrowedContext::borrow_raw(drv, device.raw_context()) };
    sys::result::context::set_current(drv, Some(ctx))?;
    // SAFETY: the fatbin is a valid image, alive ('static) during the call.
    let bench_mod = unsafe { module::load_data(drv, kernels::ModuleId::Bench.fatbin().as_ptr().cast()) }?;
    // SAFETY: as above.
    let spin_mod = unsafe { module::load_data(drv, kernels::ModuleId::Spin.fatbin().as_ptr().cast()) }?;
    // SAFETY: as above.
    let elementwise_mod =
        unsafe { module::load_data(drv, kernels::ModuleId::Elementwise.fatbin().as_ptr().cast()) }?;
    let scale_f32 = module::get_function(elementwise_mod.as_borrowed(), c"scale_f32")?;
    let arg = std::env::args().nth(1);
    let only_sizes = arg.as_deref() == Some("sizes");
    let only_execs = arg.as_deref() == Some("execs");
    let stamps = memory::alloc(drv, 2 * 8 * STAMP_SLOTS)?;
    let mut ring = Vec::new();
    for _ in 0..ROUND {
        ring.push((event::create(drv, 0)?, event::create(drv, 0)?));
    }
    let raw = Raw {
        drv,
        ring,
        empty: module::get_function(spin_mod.as_borrowed(), c"spin_cycles")?,
        stamp: module::get_function(bench_mod.as_borrowed(), c"stamp")?,
        stamps,
        capture: stream::create_with_priority(drv, CUstream_flags::CU_STREAM_NON_BLOCKING.0, 0)?,
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut empty_out = DeviceBuffer::<u64>::zeroed(&caller, 1)?;
    let mut stamp_out = DeviceBuffer::<u64>::zeroed(&caller, 2)?;

    // Graphs of one kernel (i), and per ring slot start-node → K → end-node (ii).
    let g_empty = raw.graph(&mut |s| raw.launch_empty(s))?;
    let mut g_nodes = Vec::new();
    for (a, b) in &raw.ring {
        g_nodes.push(raw.graph(&mut |s| {
            event::record_with_flags(a, s, CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0)?;
            raw.launch_empty(s)?;
            event::record_with_flags(b, s, CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0)?;
            Ok(())
        })?);
    }
    let mut g_nodes_stamp = Vec::new();
    for (i, (a, b)) in raw.ring.iter().enumerate() {
        g_nodes_stamp.push(raw.graph(&mut |s| {
            event::record_with_flags(a, s, CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0)?;
            raw.launch_stamp(s, i)?;
            event::record_with_flags(b, s, CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL.0)?;
            Ok(())
        })?);
    }
    let g_stamp: Vec<OwnedGraphExec> =
        (0..ROUND).map(|i| raw.graph(&mut |s| raw.launch_stamp(s, i))).collect::<Res<_>>()?;

    let settings = if simulated { Settings::quick() } else { Settings::default() };
    let nothing = &mut |_: BorrowedStream<'_>| Ok(());

    for phase in ["A: CUPTI never initialized", "B: CUPTI kernel records on", "C: CUPTI initialized, off"] {
        let tag: &'static str = &phase[..1];
        // The timer's own floor as gpu-bench measures it at creation.
        let mut timer = Timer::new(&caller, Some(instruments.clone()))?;
        let res = timer.resolution().clone();
        notes.push(format!(
            "{phase}: Timer::new reports floor (idle, median of {}) {:.1} ns, tick {:.1} ns, busy floor {:.1} ns",
            res.pairs,
            res.floor_s * 1e9,
            res.step_s.unwrap_or(f64::NAN) * 1e9,
            res.busy_floor_s.unwrap_or(f64::NAN) * 1e9
        ));
        if tag == "A" {
            // The simulator's buffers stay small.
            let max = if simulated { 1 << 20 } else { 256 << 20 };
            // SAFETY: `scale_f32` is the elementwise module's `scale_f32`,
            // loaded above in the device's primary context, the context of
            // the timer's stream.
            let mut scale = unsafe { Scale::new(timer.stream(), &k, scale_f32, max) }?;
            if !only_execs {
                notes.extend(sizes(&mut timer, &raw, &mut scale, settings, &mut rows)?);
            }
            if only_execs || !only_sizes {
                notes.extend(execs(&mut timer, &raw, &mut scale, settings, &mut rows)?);
            }
            drop(scale);
            if only_sizes || only_execs {
                break;
            }
        }
        let consumer = match tag {
            "B" => Some(
                gpu_sync::cuda_sys::cupti::activity()?
                    .consumer(&[ActivityKind::Kernel])
                    .map_err(|e| format!("CUPTI consumer: {e}"))?,
            ),
            "C" => {
                // Initialized by phase B; nothing enabled now.
                None
            }
            _ => None,
        };
        let sid = match &consumer {
            Some(_) => Some(
                gpu_sync::cuda_sys::cupti::activity()?
                    .stream_id(device.raw_context(), timer.stream().as_raw())?,
            ),
            None => None,
        };
        if let Some(c) = &consumer {
            c.take()?;
        }
        let kern = |rows: &mut Vec<Row>,
                    name: &str,
                    c: &Option<Consumer>,
                    per: usize|
         -> Res<Vec<ActivityRecord>> {
            let (Some(c), Some(sid)) = (c, sid) else { return Ok(Vec::new()) };
            let r = kernels_of(c, sid)?;
            let d: Vec<f64> = r.iter().map(|r| r.duration_ns() as f64).collect();
            if !d.is_empty() {
                rows.push(Row { phase: tag, case: format!("{name}: CUPTI kernel duration"), v: d.clone() });
            }
            if per > 1 {
                // Gaps between consecutive kernels of one sample.
                let g: Vec<f64> = r
                    .chunks(per)
                    .filter(|c| c.len() == per)
                    .map(|c| c[1].start_ns as f64 - c[0].end_ns as f64)
                    .collect();
                rows.push(Row { phase: tag, case: format!("{name}: CUPTI gap K1 end → K2 start"), v: g });
            }
            Ok(r)
        };

        // (a) the empty pair.
        let v = pairs(ROUNDS, &mut timer, &raw, Timing::Around, &mut |_, _| Ok(()), nothing)?;
        rows.push(Row { phase: tag, case: "(a) empty pair, gated".into(), v });

        // (b) raw pair around a raw launch of the empty kernel and of stamp(0).
        if let Some(c) = &consumer {
            c.take()?;
        }
        let v = pairs(ROUNDS, &mut timer, &raw, Timing::Around, &mut |s, _| raw.launch_empty(s), nothing)?;
        let recs = kern(&mut rows, "(b) raw pair + raw empty kernel", &consumer, 1)?;
        if !recs.is_empty() && recs.len() == v.len() {
            let d: Vec<f64> = v.iter().zip(&recs).map(|(p, r)| p - r.duration_ns() as f64).collect();
            rows.push(Row { phase: tag, case: "(b) empty: pair − CUPTI kernel, per sample".into(), v: d });
        }
        rows.push(Row { phase: tag, case: "(b) raw pair + raw empty kernel".into(), v });

        let mut bodies = Vec::new();
        let mut entry_lat = Vec::new();
        let mut exit_lat = Vec::new();
        let mut collect = |s: BorrowedStream<'_>| -> Res<()> {
            let st = raw.read_stamps(s)?;
            for i in 0..ROUND {
                bodies.push(st[2 * i + 1] as f64 - st[2 * i] as f64);
            }
            Ok(())
        };
        let v =
            pairs(ROUNDS, &mut timer, &raw, Timing::Around, &mut |s, i| raw.launch_stamp(s, i), &mut |s| {
                collect(s)
            })?;
        rows.push(Row { phase: tag, case: "(b) raw pair + raw stamp(0)".into(), v });
        rows.push(Row {
            phase: tag,
            case: "(b) stamp(0) body exit − entry (%globaltimer)".into(),
            v: bodies,
        });
        if let Some(c) = &consumer {
            // Stamps of the last round against its CUPTI records.
            let recs = kernels_of(c, sid.unwrap_or(0))?;
            let d: Vec<f64> = recs.iter().map(|r| r.duration_ns() as f64).collect();
            rows.push(Row { phase: tag, case: "(b) stamp(0): CUPTI kernel duration".into(), v: d });
            if let Some(p) =
                rows.iter().rev().find(|r| r.phase == tag && r.case == "(b) raw pair + raw stamp(0)")
                && p.v.len() == recs.len()
            {
                let d: Vec<f64> = p.v.iter().zip(&recs).map(|(p, r)| p - r.duration_ns() as f64).collect();
                rows.push(Row {
                    phase: tag,
                    case: "(b) stamp(0): pair − CUPTI kernel, per sample".into(),
                    v: d,
                });
            }
            // One more round, read alone, to line stamps up with records.
            c.take()?;
            let mut last = Vec::new();
            let _ = pairs(
                ROUNDS,
                &mut timer,
                &raw,
                Timing::Around,
                &mut |s, i| raw.launch_stamp(s, i),
                &mut |s| {
                    last = raw.read_stamps(s)?;
                    Ok(())
                },
            )?;
            let recs = kernels_of(c, sid.unwrap_or(0))?;
            let tail = &recs[recs.len().saturating_sub(ROUND)..];
            for (i, r) in tail.iter().enumerate() {
                entry_lat.push(last[2 * i] as f64 - r.start_ns as f64);
                exit_lat.push(r.end_ns as f64 - last[2 * i + 1] as f64);
            }
            rows.push(Row { phase: tag, case: "(d) stamp entry − CUPTI start".into(), v: entry_lat });
            rows.push(Row { phase: tag, case: "(d) CUPTI end − stamp exit".into(), v: exit_lat });
        }

        // A longer body: stamp spinning ~10 µs (20 000 cycles at ~2 GHz).
        if let Some(c) = &consumer {
            c.take()?;
        }
        let mut long_bodies = Vec::new();
        let v = pairs(
            ROUNDS,
            &mut timer,
            &raw,
            Timing::Around,
            &mut |s, i| raw.launch_stamp_for(s, i, 20_000),
            &mut |s| {
                let st = raw.read_stamps(s)?;
                long_bodies.extend((0..ROUND).map(|i| st[2 * i + 1] as f64 - st[2 * i] as f64));
                Ok(())
            },
        )?;
        let recs = kern(&mut rows, "(b) raw pair + raw stamp(20k cycles)", &consumer, 1)?;
        if !recs.is_empty() && recs.len() == v.len() {
            let d: Vec<f64> = v.iter().zip(&recs).map(|(p, r)| p - r.duration_ns() as f64).collect();
            rows.push(Row {
                phase: tag,
                case: "(b) stamp(20k): pair − CUPTI kernel, per sample".into(),
                v: d,
            });
        }
        rows.push(Row { phase: tag, case: "(b) raw pair + raw stamp(20k cycles)".into(), v });
        rows.push(Row {
            phase: tag,
            case: "(b) stamp(20k) body exit − entry (%globaltimer)".into(),
            v: long_bodies,
        });

        // (d) kernel-to-kernel gaps: K K, K ev K, K ev ev K (stamps).
        for (name, evs) in [("K1 K2", 0usize), ("K1 ev K2", 1), ("K1 ev ev K2", 2)] {
            if let Some(c) = &consumer {
                c.take()?;
            }
            let mut gaps = Vec::new();
            let mut col = |s: BorrowedStream<'_>| -> Res<()> {
                let st = raw.read_stamps(s)?;
                for i in 0..ROUND {
                    let (k1, k2) = (2 * (2 * i), 2 * (2 * i + 1));
                    gaps.push(st[k2] as f64 - st[k1 + 1] as f64);
                }
                Ok(())
            };
            let ring = &raw.ring;
            pairs(
                ROUNDS,
                &mut timer,
                &raw,
                Timing::Off,
                &mut |s, i| {
                    raw.launch_stamp(s, 2 * i)?;
                    let (a, b) = &ring[i];
                    if evs >= 1 {
                        event::record(a, s)?;
                    }
                    if evs >= 2 {
                        event::record(b, s)?;
                    }
                    raw.launch_stamp(s, 2 * i + 1)?;
                    Ok(())
                },
                &mut |s| col(s),
            )?;
            rows.push(Row {
                phase: tag, case: format!("(d) {name}: stamp gap K1 exit → K2 entry"), v: gaps
            });
            kern(&mut rows, &format!("(d) {name}"), &consumer, 2)?;
        }

        // (e) graphs: (i) pair around cuGraphLaunch; (ii) event nodes inside.
        if let Some(c) = &consumer {
            c.take()?;
        }
        let v = pairs(
            ROUNDS,
            &mut timer,
            &raw,
            Timing::Around,
            &mut |s, _| Ok(graph::launch(&g_empty, s)?),
            nothing,
        )?;
        let recs = kern(&mut rows, "(e)(i) graph of K", &consumer, 1)?;
        minus(&mut rows, tag, "(e)(i) pair − CUPTI kernel, per sample", &v, &recs);
        rows.push(Row { phase: tag, case: "(e)(i) pair + cuGraphLaunch(K)".into(), v });
        let v = pairs(
            ROUNDS,
            &mut timer,
            &raw,
            Timing::Inside,
            &mut |s, i| Ok(graph::launch(&g_nodes[i], s)?),
            nothing,
        )?;
        let recs = kern(&mut rows, "(e)(ii) graph ev→K→ev", &consumer, 1)?;
        minus(&mut rows, tag, "(e)(ii) pair − CUPTI kernel, per sample", &v, &recs);
        rows.push(Row { phase: tag, case: "(e)(ii) graph: event node → K → event node".into(), v });
        let v = pairs(
            ROUNDS,
            &mut timer,
            &raw,
            Timing::Around,
            &mut |s, i| Ok(graph::launch(&g_stamp[i], s)?),
            nothing,
        )?;
        rows.push(Row { phase: tag, case: "(e)(i) pair + cuGraphLaunch(stamp)".into(), v });
        let v = pairs(
            ROUNDS,
            &mut timer,
            &raw,
            Timing::Inside,
            &mut |s, i| Ok(graph::launch(&g_nodes_stamp[i], s)?),
            nothing,
        )?;
        rows.push(Row { phase: tag, case: "(e)(ii) graph: event node → stamp → event node".into(), v });
        if let Some(c) = &consumer {
            c.take()?;
        }

        // (c) gpu-bench's own modes on the same kernels, tracked launches.
        let mut modes = vec![Mode::Hot, Mode::Graph];
        if tag == "B" {
            modes.push(Mode::Kernel);
        }
        for (name, which) in [("spin_cycles(1)", 0), ("stamp(0)", 1)] {
            let rec = Bench::new(name).modes(&modes).settings(settings).run_on(&mut timer, None, |s| {
                if which == 0 { k.spin(s, 1, &mut empty_out) } else { bench_k.stamp(s, 0, &mut stamp_out) }
            })?;
            for m in &rec.modes {
                rows.push(Row {
                    phase: tag,
                    case: format!("(c) gpu-bench {} on {name}", m.mode.name()),
                    v: m.samples.iter().map(|x| x * 1e9).collect(),
                });
            }
        }
        if let Some(c) = &consumer {
            c.take()?;
        }
        drop(consumer);
    }
    caller.synchronize()?;
    stream::synchronize(raw.capture.as_borrowed())?;
    drop((g_empty, g_nodes, g_nodes_stamp, g_stamp));
    // SAFETY: every stream that used `stamps` is synchronized and the graphs
    // that name it are destroyed.
    unsafe { memory::free(drv, stamps) }?;

    if simulated {
        println!("(no GPU driver: SIMULATED times from cuda-sim)\n");
    }
    for n in &notes {
        println!("- {n}");
    }
    println!();
    println!("| phase | case | n | median | p25 | p75 | IQR | min | step | zeros | distinct |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!("{}", r.line());
    }
    Ok(())
}

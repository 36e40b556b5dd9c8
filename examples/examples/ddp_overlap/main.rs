//! A DDP-style step, one process driving every GPU, or one process per GPU:
//! gradient buckets all-reduced on a communication stream while the next
//! bucket's compute runs — with no event, no wait and no `record_stream` in
//! the step.
//!
//! Per GPU a compute stream and a communication stream. Bucket `i` is
//! allocated on the compute stream and produced there by `passes` launches
//! of the kernels crate's `scale` (`bucket = s(rank, i) · ones`, a
//! bandwidth-bound kernel whose duration is sized by the number of passes);
//! then one `nccl::group` all-reduces bucket `i` of every GPU in place on
//! the communication streams. gpu-sync makes each all-reduce wait, on the
//! GPU, for the kernels that wrote its bucket, while bucket `i + 1`'s
//! compute runs. Bucket `i − 1` is dropped once bucket `i`'s compute is
//! issued, before bucket `i`'s all-reduce: its free is queued on the
//! communication stream (its latest use) right behind its own all-reduce,
//! so bucket `i + 1`'s allocation reuses its memory with no host call,
//! waiting on the GPU for that all-reduce only, and the ledger's peak stays
//! at two buckets whatever `B`.
//!
//! Timed with events on every GPU (the longest device span counts), the
//! median over `steps` repetitions of: C, compute alone (every bucket's
//! kernels, no collective); M, communication alone (every bucket's
//! all-reduce, no compute); and the step, both overlapped, with the memory
//! pool as a training loop finds it (grown by the step before). Each
//! repetition first runs a memory step with the pool trimmed (its peaks
//! are the memory figures; its time, the pool growing inside it, is
//! printed apart). The number of
//! passes is calibrated so that C ≈ M. Printed: ideal / step
//! = max(C, M) / step and the communication hidden, (C + M − step) /
//! min(C, M); the memory (the ledger's peak, the pool's peak reserve, how
//! many buckets got a freed bucket's address — on a GPU the pool hands the
//! compute stream's freed bucket back; cuda-sim never reuses an address, so
//! there only the ledger's peak shows the reuse). Every reduced bucket of a
//! checked step, and the last bucket of each timed step, is compared
//! exactly with the integer-valued sum: any wrong element exits nonzero.
//!
//! Sizes: `--buckets B --bucket-mib X --steps S [--passes P]`, or the
//! environment `DDP_BUCKETS`, `DDP_BUCKET_MIB`, `DDP_STEPS`, `DDP_PASSES`
//! (a fixed number of passes skips the calibration). `--c-over-m R`
//! (`DDP_C_OVER_M`) aims the calibration at C ≈ R·M instead (the issue
//! allows 0.7–1.5): whole passes of `scale`, or with `--fma` one pass whose
//! FMAs per float are scaled to the aim. `--fma N`
//! (`DDP_FMA`): compute-bound passes instead, each the kernels crate's
//! `intensity_f32` with N FMAs per float into a scratch buffer, then one
//! `scale` writing the bucket — compute that leaves memory bandwidth to
//! NCCL, as matrix products do. `--blocking 1` (`DDP_BLOCKING`): blocking
//! communicators (one process only). `--comm-priority high|default`
//! (`DDP_COMM_PRIORITY`): the communication streams at the device's
//! greatest stream priority (when a compute block retires, the GPU
//! schedules the collective's blocks first) or its least (the default, as
//! PyTorch's: `ProcessGroupNCCL.Options.is_high_priority_stream`). On two
//! H200s high priority read no better: ideal/step 0.697 and 0.725 against
//! 0.737 and 0.749 at the default, in two calls
//! (docs/results/h200/2026-11-27-eighth-session.md).
//! `--reserve-sms K` (`DDP_RESERVE_SMS`, with `--fma`): the compute-bound
//! passes run one block of 1024 threads on each of all but K SMs, leaving K
//! to NCCL's blocks. On two H200s NCCL ran 24 channels (a block each);
//! with 32 SMs left to them, with or without `NCCL_MAX_CTAS` capping them,
//! ideal/step read 0.69–0.71 against 0.73 with every SM computing: the
//! SMs are not what the overlap lacks there
//! (docs/results/h200/2026-11-27-eleventh-session.md). Nothing in that
//! grid keeps NCCL's blocks off the compute's SMs (a 1024-thread block
//! fills half an SM's threads; whether one of NCCL's fits beside it depends
//! on NCCL's thread count). `--hold-shared 1` (`DDP_HOLD_SHARED`, the
//! default with `--reserve-sms`) makes each compute block hold its SM's
//! whole shared memory (`RooflineKernels::intensity_holding_shared`), which
//! NCCL's kernels also need, so they run only on the SMs left;
//! `--hold-shared 0` is the earlier grid (held, 32 SMs, at C/M 1.42–1.46 and the pool as the
//! step before left it: ideal/step 0.953–0.956 on 2 and 4 H200s,
//! docs/results/h200/2026-11-27-twelfth-session.md). `--trace-buckets 1` (`DDP_TRACE_BUCKETS`) then
//! runs each phase once more with events after every bucket on the first
//! GPU and prints each all-reduce's and each bucket's compute time alone and
//! in the step, and how long the communication stream waited for compute:
//! where the step's time goes. Defaults 16 × 64 MiB,
//! 7 steps. On a shared multi-GPU host keep NVLink multicast off:
//! `NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1`.
//!
//! One process per GPU: `--spawn N` (this program re-executed once per rank
//! by `nccl::spawn_local`), or under a launcher (`RANK` and `WORLD_SIZE`
//! set: `NCCL_COMM_ID=127.0.0.1:29501 torchrun --nproc-per-node N
//! --master-port 29500 --no-python ddp_overlap`). Each rank runs
//! its own device's part of the same step — the same kernels, buckets and
//! events — with a communicator from `Communicator::from_env`; every timed
//! sample is then the maximum over the ranks of each rank's longest span
//! (an NCCL all-reduce of f64s), exactly what one process takes over its
//! devices, before the medians: C, M, the step and both ratios are computed
//! the same way in both modes. Rank 0 prints the report. cuda-sim cannot
//! join ranks of different processes, so on the simulator this mode is an
//! error beyond one rank (one rank runs, which is how CI tests this path).
use gpu_sync::nccl::{self, CommOptions, Communicator, ReduceOp, SpawnOptions, SpawnRole};
use gpu_sync::{Device, DeviceBuffer, Stream, TimingEvent};
use kernels::Kernels;
use std::time::Duration;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

mod config;
mod report;
mod trace;

use config::Config;
use report::{Report, report};
use trace::{Trace, report_traces};

/// One GPU: its rank, streams, kernels and the constant input of `scale`.
struct Rank {
    device: Device,
    comm: Communicator,
    compute: Stream,
    comm_stream: Stream,
    kernels: Kernels,
    ones: DeviceBuffer<f32>,
    /// With `--fma`: the compute-bound kernels, their grid, the shared
    /// memory each block holds (`--hold-shared`) and their output.
    fma: Option<(kernels::RooflineKernels, kernels::Grid, u32, std::cell::RefCell<DeviceBuffer<f32>>)>,
}

impl Rank {
    /// A new event of this rank's device, recorded on `s` (one of its
    /// streams).
    fn event_on(&self, s: &Stream) -> BoxResult<TimingEvent> {
        let e = TimingEvent::new(&self.device)?;
        e.record(s)?;
        Ok(e)
    }
}

/// The value rank `r` writes into bucket `i`: small integers, so every sum
/// is exact in f32.
fn grad_value(r: usize, i: usize) -> f32 {
    ((r + 1) * (i % 7 + 1)) as f32
}

/// What every rank's bucket `i` holds after the all-reduce.
fn reduced_value(ranks: usize, i: usize) -> f32 {
    (0..ranks).map(|r| grad_value(r, i)).sum()
}

/// Which work a timed phase issues.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Compute,
    Step,
}

/// What a step reports besides its time.
#[derive(Default)]
struct StepOutcome {
    wrong: usize,
    /// Buckets whose address a bucket freed earlier in the step had.
    reused: usize,
}

/// Events around one phase on every device: the start on `first`'s
/// stream, ends on the streams the phase used.
struct Span {
    start: Vec<TimingEvent>,
    ends: Vec<Vec<TimingEvent>>,
}

impl Span {
    fn begin(ranks: &[Rank], on_comm: bool) -> BoxResult<Span> {
        let mut start = Vec::new();
        for r in ranks {
            start.push(r.event_on(if on_comm { &r.comm_stream } else { &r.compute })?);
        }
        Ok(Span { start, ends: Vec::new() })
    }

    fn end(mut self, ranks: &[Rank], compute: bool, comm: bool) -> BoxResult<Duration> {
        for r in ranks {
            let mut ends = Vec::new();
            for (used, s) in [(compute, &r.compute), (comm, &r.comm_stream)] {
                if used {
                    ends.push(r.event_on(s)?);
                }
            }
            self.ends.push(ends);
        }
        let mut longest = Duration::ZERO;
        for (s, ends) in self.start.iter().zip(&self.ends) {
            for e in ends {
                e.synchronize()?;
                longest = longest.max(s.elapsed(e)?);
            }
        }
        Ok(longest)
    }
}

/// Compute alone (`Phase::Compute`) or the overlapped step: every bucket
/// allocated, produced by `passes` `scale` launches on the compute stream,
/// all-reduced (step only), and dropped once the next bucket is issued.
/// With `check`, every reduced bucket is read back at once (serialising the
/// step: untimed); the last bucket is always checked, after the span.
fn run_buckets(
    ranks: &[Rank],
    cfg: &Config,
    passes: usize,
    phase: Phase,
    check: bool,
    mut trace: Option<&mut Trace>,
) -> BoxResult<(Duration, StepOutcome)> {
    let (n, world) = (ranks.len(), ranks[0].comm.size());
    let mut out = StepOutcome::default();
    let mut freed: Vec<Vec<u64>> = vec![Vec::new(); n];
    let span = Span::begin(ranks, false)?;
    let mut prev: Option<Vec<DeviceBuffer<f32>>> = None;
    for i in 0..cfg.buckets {
        let mut cur = Vec::with_capacity(n);
        for (r, rank) in ranks.iter().enumerate() {
            let mut b = DeviceBuffer::<f32>::alloc(&rank.compute, cfg.elems())?;
            if freed[r].contains(&b.as_raw()) {
                out.reused += 1;
            }
            match (&rank.fma, cfg.fma) {
                (Some((roof, grid, held, scratch)), Some(fmas)) => {
                    // Compute-bound passes into the scratch buffer (the
                    // stream orders them before the bucket's write).
                    let mut scratch = scratch.borrow_mut();
                    for _ in 0..passes {
                        roof.intensity_holding_shared(
                            &rank.compute,
                            *grid,
                            &rank.ones,
                            &mut *scratch,
                            fmas,
                            *held,
                        )?;
                    }
                    rank.kernels.scale(&rank.compute, &rank.ones, &mut b, grad_value(rank.comm.rank(), i))?;
                }
                _ => {
                    for _ in 0..passes {
                        rank.kernels.scale(
                            &rank.compute,
                            &rank.ones,
                            &mut b,
                            grad_value(rank.comm.rank(), i),
                        )?;
                    }
                }
            }
            cur.push(b);
            if let Some(t) = trace.as_deref_mut().filter(|_| r == 0) {
                t.compute.push(rank.event_on(&rank.compute)?);
            }
        }
        // Bucket i − 1 is dropped before bucket i's all-reduce is issued:
        // its free goes on the communication stream (its latest use) right
        // behind its own all-reduce. Dropped after bucket i's, it would wait
        // for that one too, and bucket i + 1's allocation, which may take its
        // memory, with it: compute i + 1 behind all-reduce i, no overlap.
        if let Some(p) = prev.take() {
            for (r, b) in p.into_iter().enumerate() {
                freed[r].push(b.as_raw());
            }
        }
        if phase == Phase::Step {
            all_reduce_bucket(ranks, &mut cur, trace.as_deref_mut())?;
        }
        if check {
            for (rank, b) in ranks.iter().zip(&cur) {
                out.wrong += count_wrong(&rank.comm_stream, b, expected(phase, world, rank, i))?;
            }
        }
        prev = Some(cur);
    }
    let t = span.end(ranks, true, phase == Phase::Step)?;
    if let Some(last) = prev {
        for (rank, b) in ranks.iter().zip(&last) {
            let s = if phase == Phase::Step { &rank.comm_stream } else { &rank.compute };
            out.wrong += count_wrong(s, b, expected(phase, world, rank, cfg.buckets - 1))?;
        }
    }
    Ok((t, out))
}

/// One bucket of every rank (`bufs[r]` on rank `r`) all-reduced in place on
/// the communication streams, one `nccl::group`; traced, an event after it
/// on the first GPU's communication stream.
fn all_reduce_bucket(
    ranks: &[Rank],
    bufs: &mut [DeviceBuffer<f32>],
    trace: Option<&mut Trace>,
) -> BoxResult<()> {
    nccl::group(|g| {
        for (rank, b) in ranks.iter().zip(bufs.iter_mut()) {
            g.all_reduce_in_place(&rank.comm, &rank.comm_stream, b, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    if let Some(t) = trace {
        t.comm.push(ranks[0].event_on(&ranks[0].comm_stream)?);
    }
    Ok(())
}

/// The value bucket `i` of `rank` holds after `phase`.
fn expected(phase: Phase, n: usize, rank: &Rank, i: usize) -> f32 {
    match phase {
        Phase::Step => reduced_value(n, i),
        Phase::Compute => grad_value(rank.comm.rank(), i),
    }
}

fn count_wrong(s: &Stream, b: &DeviceBuffer<f32>, want: f32) -> BoxResult<usize> {
    Ok(s.to_vec(b)?.iter().filter(|&&v| v != want).count())
}

/// Communication alone: every bucket's all-reduce over buckets made (and
/// zeroed) beforehand, outside the span.
fn run_comm(ranks: &[Rank], cfg: &Config, mut trace: Option<&mut Trace>) -> BoxResult<Duration> {
    let mut sets: Vec<Vec<DeviceBuffer<f32>>> = Vec::with_capacity(cfg.buckets);
    for _ in 0..cfg.buckets {
        let set: Vec<DeviceBuffer<f32>> = ranks
            .iter()
            .map(|r| DeviceBuffer::zeroed(&r.comm_stream, cfg.elems()))
            .collect::<Result<_, _>>()?;
        sets.push(set);
    }
    for r in ranks {
        r.comm_stream.synchronize()?;
    }
    let span = Span::begin(ranks, true)?;
    for set in &mut sets {
        all_reduce_bucket(ranks, set, trace.as_deref_mut())?;
    }
    span.end(ranks, false, true)
}

/// Where the ranks run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Every GPU driven from this process.
    OneProcess,
    /// This process is one rank (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `NCCL_COMM_ID`).
    PerProcess,
}

/// `v`, element by element, reduced with `op` over every process: in one
/// process `v` itself (its spans are already the longest over every
/// device, its counts the sums); one per process, an NCCL all-reduce of
/// f64s over the ranks (every rank gets the result).
fn across(ranks: &[Rank], mode: Mode, op: ReduceOp, v: Vec<f64>) -> BoxResult<Vec<f64>> {
    if mode == Mode::OneProcess {
        return Ok(v);
    }
    let r = &ranks[0];
    let mut b = DeviceBuffer::from_slice(&r.comm_stream, &v)?;
    r.comm.all_reduce_in_place(&r.comm_stream, &mut b, op)?;
    Ok(r.comm_stream.to_vec(&b)?)
}

/// The median of per-rank samples, once each sample is the longest over
/// every process's ranks.
fn median(ranks: &[Rank], mode: Mode, v: &[Duration]) -> BoxResult<Duration> {
    let mut s = across(ranks, mode, ReduceOp::Max, v.iter().map(Duration::as_secs_f64).collect())?;
    s.sort_by(f64::total_cmp);
    Ok(Duration::from_secs_f64(s[s.len() / 2]))
}

/// A count summed over every process.
fn total(ranks: &[Rank], mode: Mode, v: usize) -> BoxResult<usize> {
    Ok(across(ranks, mode, ReduceOp::Sum, vec![v as f64])?[0] as usize)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20))
}

/// Runs the example with `cfg`; an error if any reduced value is wrong, or
/// if more than two buckets were ever live on a device (each is freed one
/// bucket after its all-reduce is issued, whatever the number of buckets).
fn run(mut cfg: Config, mode: Mode) -> BoxResult<()> {
    if gpu_sync::select_driver()?.is_sim() {
        let world = nccl::RankEnv::from_env()?.map_or(1, |r| r.world_size);
        if mode == Mode::PerProcess && world > 1 {
            return Err(SIM_PER_PROCESS.into());
        }
        kernels::register_sim_kernels();
    }
    if std::env::var("NCCL_NVLS_ENABLE").is_ok_and(|v| v != "0") {
        return Err(
            "NCCL_NVLS_ENABLE must be 0 here: NVLink multicast can take a shared host's GPUs out of service"
                .into(),
        );
    }
    let (devices, comms) = match mode {
        Mode::OneProcess => {
            let devices = Device::all()?;
            if devices.len() < 2 {
                println!("one GPU in this machine: nothing to all-reduce with");
                return Ok(());
            }
            let comms = Communicator::init_all_with(
                &devices,
                CommOptions { blocking: cfg.blocking, ..CommOptions::default() },
            )?;
            (devices, comms)
        }
        Mode::PerProcess => {
            if cfg.blocking {
                return Err(
                    "--blocking 1: blocking communicators are for one process driving every GPU".into()
                );
            }
            let comm = Communicator::from_env(CommOptions::default())?;
            (vec![comm.device().clone()], vec![comm])
        }
    };
    let mut ranks = Vec::new();
    for (device, comm) in devices.iter().zip(comms) {
        let compute = Stream::new(device)?;
        let ones = DeviceBuffer::from_slice(&compute, &vec![1.0f32; cfg.elems()])?;
        let fma = match cfg.fma {
            None => None,
            Some(_) => {
                let sms = device.attribute(
                    gpu_sync::cuda_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                )?;
                let sms = sms.max(1) as u32;
                let grid = match cfg.reserve_sms {
                    0 => kernels::Grid { blocks: 4 * sms, threads: 256 },
                    k if k < sms => kernels::Grid { blocks: sms - k, threads: 1024 },
                    k => return Err(format!("--reserve-sms {k}: the device has {sms} SMs").into()),
                };
                // A whole SM's shared memory per block: NCCL's blocks go to
                // the SMs the grid leaves.
                let held = if cfg.reserve_sms > 0 && cfg.hold_shared {
                    let optin = device.attribute(
                        gpu_sync::cuda_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                    )?;
                    optin.max(0) as u32
                } else {
                    0
                };
                let scratch = DeviceBuffer::<f32>::alloc(&compute, cfg.elems())?;
                Some((kernels::RooflineKernels::load(device)?, grid, held, std::cell::RefCell::new(scratch)))
            }
        };
        ranks.push(Rank {
            device: device.clone(),
            comm,
            comm_stream: if cfg.high_priority {
                Stream::with_priority(device, device.stream_priority_range().1)?
            } else {
                Stream::new(device)?
            },
            kernels: Kernels::load(device)?,
            ones,
            fma,
            compute,
        });
    }
    let n = ranks[0].comm.size();
    let sync = |ranks: &[Rank]| -> BoxResult<()> {
        for r in ranks {
            r.compute.synchronize()?;
            r.comm_stream.synchronize()?;
        }
        Ok(())
    };

    // Warm-up and the exact check of every reduced bucket (untimed: each
    // bucket is read back as soon as it is issued).
    let mut wrong = run_buckets(&ranks, &cfg, 1, Phase::Step, true, None)?.1.wrong;
    sync(&ranks)?;

    // Calibration: M first, then one pass's compute, then the passes that
    // bring C to M (the same on every rank: the samples are reduced first).
    let m0s = (0..3).map(|_| run_comm(&ranks, &cfg, None)).collect::<BoxResult<Vec<_>>>()?;
    let m0 = median(&ranks, mode, &m0s)?;
    let mut c1s = Vec::new();
    for _ in 0..3 {
        let (t, o) = run_buckets(&ranks, &cfg, 1, Phase::Compute, false, None)?;
        c1s.push(t);
        wrong += o.wrong;
    }
    let c1 = median(&ranks, mode, &c1s)?;
    let aim = cfg.c_over_m.unwrap_or(1.0);
    let passes = match (cfg.passes, cfg.fma, cfg.c_over_m) {
        (Some(p), _, _) => p,
        // Compute-bound with an aim: one pass, its FMAs per float scaled to
        // the aim (a pass's time is nearly proportional to them; refined
        // once on a second measurement).
        (None, Some(mut fmas), Some(_)) => {
            let mut c = c1;
            for _ in 0..2 {
                let scale = aim * m0.as_secs_f64() / c.as_secs_f64().max(1e-9);
                fmas = ((f64::from(fmas) * scale / 8.0).round() as u32).clamp(1, 1 << 20) * 8;
                cfg.fma = Some(fmas);
                let mut cs = Vec::new();
                for _ in 0..3 {
                    let (t, o) = run_buckets(&ranks, &cfg, 1, Phase::Compute, false, None)?;
                    cs.push(t);
                    wrong += o.wrong;
                }
                c = median(&ranks, mode, &cs)?;
            }
            1
        }
        (None, _, _) => {
            let r = aim * m0.as_secs_f64() / c1.as_secs_f64().max(1e-9);
            (r.round() as usize).max(1)
        }
    };

    let (mut cs, mut msv, mut steps, mut cold) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut peak_alloc, mut peak_reserved, mut reused) = (0u64, None::<u64>, Vec::new());
    for _ in 0..cfg.steps {
        msv.push(run_comm(&ranks, &cfg, None)?);
        sync(&ranks)?;
        let (c, o) = run_buckets(&ranks, &cfg, passes, Phase::Compute, false, None)?;
        cs.push(c);
        wrong += o.wrong;
        sync(&ranks)?;
        // The memory step: the pool trimmed first, so its peak is this
        // step's own (and its time, the pool growing inside it, is shown
        // apart).
        for r in &ranks {
            r.device.trim_memory_pool(0)?;
            r.device.reset_peak_memory()?;
        }
        let (t, o) = run_buckets(&ranks, &cfg, passes, Phase::Step, false, None)?;
        cold.push(t);
        wrong += o.wrong;
        reused.push(o.reused as f64);
        for r in &ranks {
            let s = r.device.memory_stats()?;
            peak_alloc = peak_alloc.max(s.peak_allocated);
            if let Some(p) = s.pool {
                peak_reserved = Some(peak_reserved.unwrap_or(0).max(p.reserved_peak));
            }
        }
        // The timed step, right after it: the pool as a training loop
        // finds it, already grown (no allocation maps memory).
        sync(&ranks)?;
        let (t, o) = run_buckets(&ranks, &cfg, passes, Phase::Step, false, None)?;
        steps.push(t);
        wrong += o.wrong;
    }
    let (c, m, step, cold) = (
        median(&ranks, mode, &cs)?,
        median(&ranks, mode, &msv)?,
        median(&ranks, mode, &steps)?,
        median(&ranks, mode, &cold)?,
    );
    // `--trace-buckets 1`: one more run of each phase, traced on the first
    // GPU (every rank runs them: they hold collectives).
    let traces = if cfg.trace_buckets {
        sync(&ranks)?;
        let mut comm_alone = Trace::begin(&ranks[0], true)?;
        run_comm(&ranks, &cfg, Some(&mut comm_alone))?;
        sync(&ranks)?;
        let mut compute_alone = Trace::begin(&ranks[0], false)?;
        wrong += run_buckets(&ranks, &cfg, passes, Phase::Compute, false, Some(&mut compute_alone))?.1.wrong;
        sync(&ranks)?;
        let mut step = Trace::begin(&ranks[0], false)?;
        wrong += run_buckets(&ranks, &cfg, passes, Phase::Step, false, Some(&mut step))?.1.wrong;
        Some((comm_alone, compute_alone, step))
    } else {
        None
    };
    // Counts summed, peaks the highest, over every process (no pool: -1).
    let wrong = total(&ranks, mode, wrong)?;
    let reused = across(&ranks, mode, ReduceOp::Sum, reused)?.into_iter().fold(0.0, f64::max) as usize;
    let peaks = vec![peak_alloc as f64, peak_reserved.map_or(-1.0, |p| p as f64)];
    let peaks = across(&ranks, mode, ReduceOp::Max, peaks)?;
    let (peak_alloc, peak_reserved) = (peaks[0] as u64, (peaks[1] >= 0.0).then_some(peaks[1] as u64));
    let bb = cfg.bucket_bytes as u64;
    // The constant input of `scale` (and with --fma its scratch output),
    // one bucket's size each.
    let ones = bb * if cfg.fma.is_some() { 2 } else { 1 };
    let peak_buckets = peak_alloc.saturating_sub(ones) as f64 / bb as f64;

    if ranks[0].comm.rank() == 0 {
        report(&Report {
            cfg,
            n,
            mode,
            passes,
            m0,
            c1,
            c,
            m,
            step,
            cold,
            peak_alloc,
            peak_reserved,
            reused,
            wrong,
        });
        if let Some((comm_alone, compute_alone, step)) = &traces {
            report_traces(comm_alone, compute_alone, step)?;
        }
    }
    if wrong > 0 {
        return Err(format!("{wrong} reduced elements differ from the exact sums").into());
    }
    if peak_buckets > 2.0 {
        return Err(format!(
            "{peak_buckets:.2} buckets live at the peak: a bucket's memory was held too long"
        )
        .into());
    }
    Ok(())
}

/// Why one process per GPU cannot run on cuda-sim.
const SIM_PER_PROCESS: &str = "one process per GPU needs GPUs: cuda-sim cannot join the ranks of different \
    processes (GPU_SYNC_DRIVER=sim, or no GPU found); run without --spawn and outside torchrun";

/// `--spawn N` taken out of `args`.
fn take_spawn(args: &mut Vec<String>) -> BoxResult<Option<usize>> {
    let Some(i) = args.iter().position(|a| a == "--spawn") else { return Ok(None) };
    let v = args.get(i + 1).ok_or("--spawn needs a number of processes")?;
    let n: usize = v.parse().map_err(|e| format!("--spawn={v:?}: {e}"))?;
    if n == 0 {
        return Err("--spawn 0: need at least one process".into());
    }
    args.drain(i..i + 2);
    Ok(Some(n))
}

/// The example with the command line `args`: one process for every GPU;
/// with `--spawn N` this program re-run as N ranks; as one rank when a
/// launcher set `RANK` (the ranks `--spawn` starts, or torchrun's).
fn main_with(mut args: Vec<String>) -> BoxResult<()> {
    let spawn = take_spawn(&mut args)?;
    let cfg = Config::from(Config::GPU, &args)?;
    if std::env::var_os("RANK").is_some() {
        return run(cfg, Mode::PerProcess);
    }
    let Some(n) = spawn else { return run(cfg, Mode::OneProcess) };
    if n > 1 && gpu_sync::select_driver()?.is_sim() {
        return Err(SIM_PER_PROCESS.into());
    }
    match nccl::spawn_local(n, &SpawnOptions::default())? {
        SpawnRole::Parent => Ok(()),
        SpawnRole::Rank(_) => run(cfg, Mode::PerProcess),
    }
}

fn main() -> BoxResult<()> {
    main_with(std::env::args().skip(1).collect())
}

/// The in-process tests share the devices' memory statistics (the peak the
/// example checks) and the simulated clock: they run one at a time.
#[cfg(test)]
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn runs_on_the_simulator() -> BoxResult<()> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // CI has no GPU: `select_driver` picks the simulator (two devices);
    // small sizes unless the environment asks for others (the GPU bundle).
    // It fails on a wrong element or a peak of more than two buckets.
    let small = Config::small(4, 3);
    run(Config::from(small, &[])?, Mode::OneProcess)
}

#[test]
fn compute_bound_passes_on_blocking_communicators() -> BoxResult<()> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // `--fma`, `--blocking 1` and `--reserve-sms 1`: the same exact sums
    // and the same peak of two buckets (the scratch buffer counted apart).
    let small = Config::small(4, 2);
    let mut c = Config::from(small, &[])?;
    c.fma = Some(c.fma.unwrap_or(16));
    c.blocking = true;
    // One SM left to NCCL: the compute's grid is one block per other SM.
    c.reserve_sms = 1;
    run(c, Mode::OneProcess)?;
    // Aimed at C ≈ 1.4·M: the FMAs per float calibrated, one pass; the
    // bucket traces run too (every traced bucket's sums checked as well).
    c.c_over_m = Some(1.4);
    c.trace_buckets = true;
    c.passes = None;
    run(c, Mode::OneProcess).map_err(|e| format!("aimed at C/M 1.4: {e}").into())
}

#[test]
fn one_process_per_gpu_is_refused_on_the_simulator() -> BoxResult<()> {
    // The simulator's NCCL lives in one process: `--spawn 2` says so before
    // starting any rank. On a GPU it would start two ranks of this test
    // binary: nothing to prove there.
    if !gpu_sync::select_driver()?.is_sim() || std::env::var_os("RANK").is_some() {
        return Ok(());
    }
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match main_with(args(&["--spawn", "2", "--buckets", "2"])) {
        Ok(()) => return Err("--spawn 2 ran on the simulator".into()),
        Err(e) => assert!(e.to_string().contains("cuda-sim cannot join"), "{e}"),
    }
    for bad in [&["--spawn"][..], &["--spawn", "0"], &["--spawn", "two"]] {
        assert!(main_with(args(bad)).is_err(), "{bad:?} accepted");
    }
    // The communication streams' priority: high or default, nothing else.
    assert!(Config::from(Config::GPU, &args(&["--comm-priority", "high"]))?.high_priority);
    let defaults = Config::from(Config::GPU, &args(&[]))?;
    assert!(!defaults.high_priority || std::env::var_os("DDP_COMM_PRIORITY").is_some());
    assert!(Config::from(Config::GPU, &args(&["--comm-priority", "low"])).is_err(), "low accepted");
    // Holding shared memory: 1 or 0.
    assert!(!Config::from(Config::GPU, &args(&["--hold-shared", "0"]))?.hold_shared);
    assert!(Config::from(Config::GPU, &args(&["--hold-shared", "2"])).is_err(), "--hold-shared 2 accepted");
    // The calibration's aim: a positive finite ratio.
    assert_eq!(Config::from(Config::GPU, &args(&["--c-over-m", "1.4"]))?.c_over_m, Some(1.4));
    for bad in ["0", "-1", "inf", "NaN", "x"] {
        assert!(Config::from(Config::GPU, &args(&["--c-over-m", bad])).is_err(), "--c-over-m {bad} accepted");
    }
    Ok(())
}

#[test]
fn one_rank_per_process() -> BoxResult<()> {
    // The per-process path end to end with one rank (all cuda-sim can join):
    // this test re-runs itself alone through `spawn_local`; the rank takes
    // its communicator from the environment and reduces its figures with
    // NCCL. The parent fails if the rank fails (a wrong element, a peak
    // over two buckets, any error), and if the rank ran no step at all (an
    // `--exact` filter that matches no test exits 0 having run nothing):
    // the rank writes a file the parent then looks for.
    const RAN: &str = "DDP_OVERLAP_RANK_RAN";
    let small = Config::small(3, 2);
    let marker = std::env::temp_dir().join(format!("ddp-overlap-rank-ran-{}", std::process::id()));
    let opts = SpawnOptions {
        timeout: Duration::from_secs(300),
        args: Some(["--exact", "one_rank_per_process", "--nocapture"].map(Into::into).to_vec()),
        env: vec![(RAN.into(), marker.clone().into_os_string())],
    };
    let _ = std::fs::remove_file(&marker);
    match nccl::spawn_local(1, &opts)? {
        SpawnRole::Parent => {
            let ran = marker.exists();
            let _ = std::fs::remove_file(&marker);
            if !ran {
                return Err("the rank ran no step (did the --exact filter match this test?)".into());
            }
        }
        SpawnRole::Rank(r) => {
            assert_eq!((r.rank, r.world_size), (0, 1));
            run(small, Mode::PerProcess)?;
            let path = std::env::var_os(RAN)
                .ok_or_else(|| format!("{RAN} is not set: the parent names the marker"))?;
            std::fs::write(&path, b"ran")
                .map_err(|e| format!("the marker {}: {e}", path.to_string_lossy()))?;
        }
    }
    Ok(())
}

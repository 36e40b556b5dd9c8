//! `gpu-bench truth`: the timer held against the GPU's own clock.
//!
//! Four memory kernels of the `kernels` crate (`scale_f32`, `copy_u32x4`,
//! `triad_f32`, `read_sum_u32x4`) at 1 Ki, 32 Ki, 1 Mi, 32 Mi and 256 Mi
//! elements, the spin kernel at 250 ns, 500 ns, 1 µs, 2 µs, 10 µs, 100 µs,
//! 1 ms and 10 ms (the short ones: is a profiler's reading of a kernel
//! shorter than its own fixed cost still a reading?), then
//! launch shapes other than the wrappers' grids: `scale_f32` with one thread
//! per element at 1 Mi, 4 Mi and 64 Mi elements (most blocks exit at once)
//! and at an odd size (1,000,003 elements, tiled and one thread per element),
//! each timed in every sampled mode (cold, hot, batch, graph) and in kernel
//! mode (CUPTI's records, where CUPTI loads). Each record carries
//! "`<mode>` over kernel": what each event mode reads above the GPU's own
//! duration of the same work. With `--launch-only N` nothing is timed and no
//! timer is built (no event, no spin gate, which a profiler's serialized
//! replay would starve): each case is launched N times back to back, the
//! stream synchronized once and the results checked, so an external
//! profiler (Nsight Compute) times the same launches.
//!
//! The cases run in a fixed order (an empty kernel, a one-cycle spin, then per size the four
//! memory kernels, then the spins, then the launch shapes), the order `peer/truth_table.py` joins
//! Nsight Compute's launches on. They run twice: first every case in the
//! event modes, with CUPTI not yet touched in the process, then every case
//! in kernel mode, added to the same records ([`gpu_bench::Bench::run_more`]):
//! CUPTI, once initialized, stays attached, and event pairs measured after
//! it read more.
//!
//! Kernel mode (and the CUPTI host-cost record) reads CUPTI's range
//! profiler by default (`--kernel-records profiler`: `gpu__time_duration.sum`
//! per kernel, the counter Nsight Compute reads, with no code added to the
//! kernels, each run after [`gpu_bench::PROFILER_IDLE_S`] of idle GPU,
//! which says why); `concurrent` reads `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`
//! (issue 26: it instruments kernel code, which slows grids of many short
//! blocks) and `serial` `CUPTI_ACTIVITY_KIND_KERNEL`; the report's notes
//! say which was read.
//!
//! On the simulator (`--driver sim`) or with `--quick` the sizes stop at
//! 1 Mi elements (the odd size still runs) and the spin lengths at 100 µs.

use crate::common::{Ctx, Failure, finish_report};
use gpu_bench::record::{Counter, Unit, format_value};
use gpu_bench::{Bench, KernelRecords, Mode, Report, Timer};
use gpu_sync::{DeviceBuffer, LaunchConfig, Stream};

/// Elements of each memory case.
const SIZES: [(usize, &str); 5] = gpu_bench::TRUTH_SIZES;
/// Spin lengths, seconds: a spin's length is known (cycles over the clock),
/// so the short ones show where each clock stops following the work.
const SPINS: [f64; 8] = [250e-9, 500e-9, 1e-6, 2e-6, 10e-6, 100e-6, 1e-3, 10e-3];
/// Sizes of `scale_f32` launched with one thread per element instead of its
/// tiled grid: 4,096, 16,384 and 262,144 blocks of 256 threads, most of them
/// past the tiles the kernel works on, exiting at once (the shape issue 26
/// found kernel mode reading 7 % above Nsight Compute on).
const WIDE: [(usize, &str); 3] = [(1 << 20, "1Mi"), (1 << 22, "4Mi"), (1 << 26, "64Mi")];
/// An odd size (not a multiple of the kernel's 4-float vectors), through the
/// tiled grid and with one thread per element.
const ODD: (usize, &str) = (1_000_003, "1000003");
/// The `grid` parameter of the cases of [`WIDE`] and [`ODD`].
const PER_ELEMENT: &str = "1 thread/element";
/// Threads per block of the one-thread-per-element shapes.
const WIDE_BLOCK: u32 = 256;

/// Which modes a pass over the cases measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The event modes (cold, hot, batch, graph), each case's record made
    /// here; CUPTI not yet touched in the process.
    Events,
    /// Kernel mode (CUPTI), added to the records of the first pass.
    Kernel,
}

/// What one case is timed with.
struct Plan<'a> {
    ctx: &'a Ctx,
    pass: Pass,
    /// The record the next case of the kernel pass adds to.
    next: std::cell::Cell<usize>,
}

/// The event modes, measured in the first pass.
const EVENT_MODES: [Mode; 4] = [Mode::Cold, Mode::Hot, Mode::Batch, Mode::Graph];

impl Plan<'_> {
    /// Times one case: in the event pass its record is
    /// added to `report`; in the kernel pass kernel mode is added to the
    /// record the event pass made for the same case (the cases run in the
    /// same order in both passes).
    fn case(
        &self,
        report: &mut Report,
        timer: &mut Timer,
        case: &Case,
        mut f: impl FnMut(&Stream) -> gpu_sync::Result<()>,
    ) -> Result<(), Failure> {
        let Case { kernel, size, grid, bytes, .. } = *case;
        self.ctx.progress.step(format!(
            "truth: {kernel} {size}{}{}",
            grid.map(|g| format!(" ({g})")).unwrap_or_default(),
            if self.pass == Pass::Kernel { " (kernel mode)" } else { "" }
        ));
        let mut s = self.ctx.settings;
        // Batches of about 2 ms of work.
        s.batch_runs = s.batch_runs.max(1);
        let mut bench = Bench::new(kernel).param("size", size);
        if let Some(g) = grid {
            bench = bench.param("grid", g);
        }
        let bench = bench.bytes(bytes).settings(s);
        if self.pass == Pass::Kernel {
            let i = self.next.get();
            self.next.set(i + 1);
            let Some(rec) = report.records.get_mut(i) else {
                return Err(Failure::Bench(gpu_bench::Error::Settings(format!(
                    "the kernel pass found no record for case {i} ({kernel} {size})"
                ))));
            };
            bench.modes(&[Mode::Kernel]).run_more(timer, rec, &mut f)?;
            let expected = rec.counter("expected (cycles / clock)").map(|c| c.value);
            if let (Some(expected), Some(kt)) = (expected, rec.mode(Mode::Kernel).map(|m| m.median())) {
                rec.counters.push(Counter::new("kernel vs expected", kt / expected - 1.0, Unit::Fraction));
            }
            return Ok(());
        }
        let mut rec = bench.modes(&EVENT_MODES).run_on(timer, None, &mut f)?;
        if let (Some(h), Some(c)) = (rec.mode(Mode::Hot), rec.mode(Mode::Cold))
            && h.median() > c.median() * 1.02
        {
            rec.counters.push(Counter::new("hot above cold", h.median() / c.median() - 1.0, Unit::Fraction));
        }
        report.records.push(rec);
        Ok(())
    }
}

/// Host time to submit one launch of the empty spin with CUPTI's activity
/// recording off and on (kernels of the `records` kind, copies, memsets;
/// for the range profiler, the profiler started and no activity records):
/// 2,000 launches a round,
/// submission time only (the GPU drains between rounds), off and on
/// alternating over 9 rounds each; medians per launch.
fn cupti_host_cost(
    ctx: &Ctx,
    stream: &Stream,
    out: &mut DeviceBuffer<u64>,
    records: KernelRecords,
) -> Result<gpu_bench::Record, Failure> {
    use gpu_sync::cuda_sys::cupti::{ActivityKind, KernelDurations, activity};
    const LAUNCHES: usize = 2000;
    // The activity records, for every kind but the profiler's (which runs
    // without them, as kernel mode runs it).
    let a = match records.activity_kind() {
        Some(_) => Some(activity().map_err(|e| Failure::Bench(gpu_bench::Error::Kernel(e.to_string())))?),
        None => None,
    };
    let k = &ctx.kernels;
    let round = |out: &mut DeviceBuffer<u64>| -> Result<f64, Failure> {
        stream.synchronize()?;
        let t0 = std::time::Instant::now();
        for _ in 0..LAUNCHES {
            k.spin(stream, 1, out)?;
        }
        let t = t0.elapsed().as_secs_f64() / LAUNCHES as f64;
        stream.synchronize()?;
        Ok(t)
    };
    let cupti_err =
        |e: gpu_sync::cuda_sys::cupti::CuptiError| Failure::Bench(gpu_bench::Error::Kernel(e.to_string()));
    // The range profiler, for its records, made for each "on" round and
    // dropped (disabled) after it, so the "off" rounds run without it:
    // every launch of a round is one of its ranges.
    let device = stream.device();
    let ordinal = usize::try_from(device.ordinal()).map_err(|e| {
        Failure::Bench(gpu_bench::Error::Kernel(format!("device ordinal {}: {e}", device.ordinal())))
    })?;
    let profiler = || -> Result<Option<KernelDurations<'static>>, Failure> {
        match records {
            KernelRecords::Profiler => {
                device.make_current()?;
                Ok(Some(KernelDurations::new(device.context(), ordinal, LAUNCHES).map_err(cupti_err)?))
            }
            _ => Ok(None),
        }
    };
    round(out)?;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..9 {
        off.push(round(out)?);
        let c = match (a, records.activity_kind()) {
            (Some(a), Some(k)) => {
                Some(a.consumer(&[k, ActivityKind::Memcpy, ActivityKind::Memset]).map_err(cupti_err)?)
            }
            _ => None,
        };
        let mut counters = profiler()?;
        if let Some(p) = counters.as_mut() {
            p.start().map_err(cupti_err)?;
        }
        let t = round(out);
        if let Some(p) = counters.as_mut() {
            let n = p.stop().map_err(cupti_err)?.len();
            if n != LAUNCHES {
                return Err(Failure::Bench(gpu_bench::Error::Kernel(format!(
                    "the range profiler read {n} kernels of {LAUNCHES} launched"
                ))));
            }
        }
        on.push(t?);
        // The records are taken so the buffers do not grow.
        if let Some(c) = c {
            c.take().map_err(cupti_err)?;
        }
    }
    let (m_off, m_on) = (gpu_bench::stats::median(&off), gpu_bench::stats::median(&on));
    let mut r = gpu_bench::Record::new(
        "CUPTI host cost per launch",
        &[("launches", LAUNCHES.to_string()), ("kernel records", records.name().to_string())],
    );
    r.counters.push(Counter::new("host submit, CUPTI off", m_off, Unit::Seconds));
    r.counters.push(Counter::new("host submit, CUPTI on", m_on, Unit::Seconds));
    r.counters.push(Counter::new("CUPTI on - off", m_on - m_off, Unit::Seconds));
    if let Some(a) = a {
        r.counters.push(Counter::new("records dropped (process)", a.dropped() as f64, Unit::Count));
    }
    Ok(r)
}

/// The inputs and outputs of every case: one set, viewed at each size.
struct Buffers {
    /// The largest size run.
    max: usize,
    xs: DeviceBuffer<f32>,
    ys: DeviceBuffer<f32>,
    src: DeviceBuffer<u32>,
    out_f: DeviceBuffer<f32>,
    out_u: DeviceBuffer<u32>,
    /// The output of the launch-shape cases ([`WIDE`], [`ODD`]).
    out_s: DeviceBuffer<f32>,
    /// The CUPTI host-cost record's spin output.
    empty_out: DeviceBuffer<u64>,
    /// The spins' one-word outputs.
    spin: Slots,
    /// `read_sum_u32x4`'s sums (its warps' atomic adds go to one word).
    sum: Slots,
}

/// Words a kernel that writes one word (a spin, a sum's atomic adds) writes
/// to, launch after launch: [`SLOTS`] of them, [`SLOT_STRIDE`] apart, in
/// turn. Where one word lies moves a small kernel's time: on an H200 the
/// empty spin read 1,376–1,504 ns by the word's offset alone (seventeenth
/// session, call 8). An external profiler's process places every buffer
/// elsewhere (its own allocations come first), so one fixed word would
/// hold kernel mode and Nsight Compute to two different places; rotating
/// over words spread across the L2's address hash gives both the same mix,
/// in the same launch order.
struct Slots {
    words: DeviceBuffer<u64>,
    /// The slot the next launch writes.
    next: usize,
    /// The slot the last launch wrote.
    last: usize,
}

/// Slots of a [`Slots`].
const SLOTS: usize = 64;
/// Words between two slots: 4 KiB and 64 bytes, so consecutive slots
/// differ in the page, the line and the line's place in its sector group.
const SLOT_STRIDE: usize = 520;

impl Slots {
    /// [`SLOTS`] zeroed words, [`SLOT_STRIDE`] apart.
    fn new(stream: &Stream) -> Result<Slots, Failure> {
        Ok(Slots { words: DeviceBuffer::<u64>::zeroed(stream, SLOTS * SLOT_STRIDE)?, next: 0, last: 0 })
    }

    /// The word the next launch writes (a one-element view), in turn over
    /// the slots; noted as the last written.
    fn next(&mut self) -> gpu_sync::Result<gpu_sync::DeviceSliceMut<'_, u64>> {
        let at = self.next * SLOT_STRIDE;
        self.last = self.next;
        self.next = (self.next + 1) % SLOTS;
        self.words.slice_mut(at..=at)
    }

    /// Every slot's word, in slot order (`stream` reads them).
    fn read(&self, stream: &Stream) -> Result<Vec<u64>, Failure> {
        let words = stream.to_vec(&self.words)?;
        Ok(words.into_iter().step_by(SLOT_STRIDE).collect())
    }
}

/// The value of element `i` of `xs` and `ys` (real values, never zeros).
fn x_at(i: usize) -> f32 {
    1.0 + (i % 1013) as f32 * 0.25
}

/// The word at `i` of `src`.
fn word_at(i: usize) -> u32 {
    (i as u32).wrapping_mul(2_654_435_761)
}

impl Buffers {
    fn new(ctx: &Ctx, stream: &Stream) -> Result<Buffers, Failure> {
        let max = if ctx.quick || ctx.sim { 1 << 20 } else { SIZES[4].0 };
        let x: Vec<f32> = (0..max).map(x_at).collect();
        let xs = DeviceBuffer::from_slice(stream, &x)?;
        let ys = DeviceBuffer::from_slice(stream, &x)?;
        drop(x);
        let words: Vec<u32> = (0..max).map(word_at).collect();
        let src = DeviceBuffer::from_slice(stream, &words)?;
        drop(words);
        Ok(Buffers {
            max,
            xs,
            ys,
            src,
            out_f: DeviceBuffer::<f32>::alloc(stream, max)?,
            out_u: DeviceBuffer::<u32>::alloc(stream, max)?,
            out_s: DeviceBuffer::<f32>::alloc(stream, shapes_len(max))?,
            empty_out: DeviceBuffer::<u64>::zeroed(stream, 1)?,
            spin: Slots::new(stream)?,
            sum: Slots::new(stream)?,
        })
    }
}

/// Elements of the launch-shape cases' output when the sizes stop at `max`:
/// the largest [`WIDE`] size run, or [`ODD`].
fn shapes_len(max: usize) -> usize {
    WIDE.iter().map(|(n, _)| *n).filter(|&n| n <= max).chain([ODD.0]).max().unwrap_or(ODD.0)
}

/// One case as the visitor of [`cases`] sees it.
struct Case<'a> {
    kernel: &'a str,
    size: &'a str,
    /// The launch shape, where it is not the kernel wrapper's own grid.
    grid: Option<&'a str>,
    bytes: u64,
    /// A spin's expected length (cycles over the clock), seconds.
    expected: Option<f64>,
}

/// The work of one case, given the stream.
type Work<'a> = dyn FnMut(&Stream) -> gpu_sync::Result<()> + 'a;

/// Every case, in the fixed order: an empty kernel first (the fixed cost of
/// a launch as each clock sees it, with no memory access; ncu's offset from
/// CUPTI is taken on it), a one-cycle spin, then per size the four memory
/// kernels, then the spins: `length × cycles_mhz` cycles (the same in every
/// run, so the timed run and launch-only run the same work), each expected
/// to take its cycles over `clock()` MHz (asked once the memory cases have
/// run). Each spin launch writes, and each sum adds to, the next word of
/// its [`Slots`].
fn cases(
    ctx: &Ctx,
    b: &mut Buffers,
    cycles_mhz: f64,
    clock: &mut dyn FnMut() -> f64,
    visit: &mut dyn FnMut(Case, &mut Work) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let k = &ctx.kernels;
    // An empty kernel first: no memory access, so no word's place in it
    // (ncu's offset is taken on it); then the one-cycle spin. Every spin
    // writes its word to the next slot, every sum adds to the next one (see
    // `Slots`).
    let empty = Case { kernel: "empty_kernel", size: "empty", grid: None, bytes: 0, expected: None };
    visit(empty, &mut |s| k.empty(s))?;
    let one = Case { kernel: "spin_cycles", size: "1 cycle", grid: None, bytes: 0, expected: None };
    visit(one, &mut |s| k.spin(s, 1, &mut b.spin.next()?))?;
    for &(n, label) in SIZES.iter().filter(|(n, _)| *n <= b.max) {
        let (xv, yv, sv) = (b.xs.slice(..n)?, b.ys.slice(..n)?, b.src.slice(..n)?);
        let (out_f, out_u, sum) = (&mut b.out_f, &mut b.out_u, &mut b.sum);
        let bytes = n as u64;
        let case = |kernel, bytes| Case { kernel, size: label, grid: None, bytes, expected: None };
        visit(case("scale_f32", 8 * bytes), &mut |s| k.scale(s, &xv, &mut out_f.slice_mut(..n)?, 2.0))?;
        visit(case("copy_u32x4", 8 * bytes), &mut |s| k.copy(s, &sv, &mut out_u.slice_mut(..n)?))?;
        visit(case("triad_f32", 12 * bytes), &mut |s| k.triad(s, &mut out_f.slice_mut(..n)?, &xv, &yv, 0.5))?;
        visit(case("read_sum_u32x4", 4 * bytes), &mut |s| k.read_sum(s, &sv, &mut sum.next()?))?;
    }
    let mhz = clock();
    let small = ctx.quick || ctx.sim;
    for &len in SPINS.iter().filter(|&&t| !small || t <= 100e-6) {
        let cycles = Ctx::cycles(len, cycles_mhz);
        let label = format_value(len, Unit::Seconds);
        let case = Case {
            kernel: "spin_cycles",
            size: &label,
            grid: None,
            bytes: 0,
            expected: Some(cycles as f64 / (mhz * 1e6)),
        };
        visit(case, &mut |s| k.spin(s, cycles, &mut b.spin.next()?))?;
    }
    // The launch shapes, last (the order above is the one the peers join
    // on): `out_s = 2 x` with one thread per element, then the odd size,
    // `out_s = 3 x`, tiled and with one thread per element.
    let per_element = |n: usize| LaunchConfig::for_elements(n as u64, WIDE_BLOCK);
    for &(n, label) in WIDE.iter().filter(|(n, _)| *n <= b.max) {
        let (xv, out) = (b.xs.slice(..n)?, &mut b.out_s);
        let case = Case {
            kernel: "scale_f32",
            size: label,
            grid: Some(PER_ELEMENT),
            bytes: 8 * n as u64,
            expected: None,
        };
        visit(case, &mut |s| k.scale_f32_with_grid(s, per_element(n), &xv, &mut out.slice_mut(..n)?, 2.0))?;
    }
    let (n, label) = ODD;
    let (xv, out) = (b.xs.slice(..n)?, &mut b.out_s);
    let odd = |grid| Case { kernel: "scale_f32", size: label, grid, bytes: 8 * n as u64, expected: None };
    visit(odd(None), &mut |s| k.scale(s, &xv, &mut out.slice_mut(..n)?, 3.0))?;
    visit(odd(Some(PER_ELEMENT)), &mut |s| {
        k.scale_f32_with_grid(s, per_element(n), &xv, &mut out.slice_mut(..n)?, 3.0)
    })?;
    Ok(())
}

/// `--launch-only N`: each case's kernel launched `n` times back to back, a
/// final synchronize, and the results checked. No timer, no event, no spin
/// gate: nothing for a serialized profiler's replay (Nsight Compute) to
/// starve. The spins' cycles come from the device's maximum SM clock.
///
/// # Errors
/// A driver error; [`Failure::Check`] when a kernel computed a wrong result.
/// The stream and the buffers, made first and in this order by the timed
/// run and by [`launch_only`] alike: an external profiler's run of
/// launch-only then times kernels on buffers placed as the timed run's
/// are (where a 1 GiB buffer sits moved a kernel by up to 0.6 % on an
/// H200).
fn stream_and_buffers(ctx: &Ctx) -> Result<(Stream, Buffers), Failure> {
    let stream = Stream::new(&ctx.device)?;
    let b = Buffers::new(ctx, &stream)?;
    Ok((stream, b))
}

fn launch_only(ctx: &Ctx, n: usize, mut report: Report) -> Result<Report, Failure> {
    let (first, mut b) = stream_and_buffers(ctx)?;
    // The launches go to a second stream, made after the buffers' one had
    // its work, as the timed run's timer makes its stream: on an H200 a
    // small kernel reads longer on a context's later streams than on its
    // first (seventeenth session, calls 2 and 3), so an external profiler
    // must time the launches on a stream placed as the timer's.
    let stream = Stream::new(&ctx.device)?;
    stream.wait_stream(&first)?;
    let mhz = report.device.sm_clock_mhz;
    let (mut launched, mut sums) = (0usize, 0u64);
    let mut min_spin = 0u64;
    cases(ctx, &mut b, mhz, &mut || mhz, &mut |case, work| {
        ctx.progress.step(format!("truth: {} {} (launch only)", case.kernel, case.size));
        for _ in 0..n {
            work(&stream)?;
        }
        launched += n;
        if case.kernel == "read_sum_u32x4" {
            sums += 1;
        }
        if let Some(t) = case.expected {
            min_spin = Ctx::cycles(t, mhz);
        }
        Ok(())
    })?;
    stream.synchronize()?;
    // The last size's outputs: the copy and the triad (`a = 0.5 * y + x`,
    // `y = x`: exactly 1.5 x), the sum over every size's launches, the last
    // spin's cycles.
    let m = SIZES.iter().filter(|(s, _)| *s <= b.max).map(|(s, _)| *s).max().unwrap_or(0);
    let bad = |what: &str| Failure::Check(format!("truth --launch-only: {what}"));
    let got_u = stream.to_vec(&b.out_u.slice(..m)?)?;
    if let Some(i) = (0..m).find(|&i| got_u[i] != word_at(i)) {
        return Err(bad(&format!("copy_u32x4 wrote {} at {i}, expected {}", got_u[i], word_at(i))));
    }
    let got_f = stream.to_vec(&b.out_f.slice(..m)?)?;
    if let Some(i) = (0..m).find(|&i| got_f[i] != 1.5 * x_at(i)) {
        return Err(bad(&format!("triad_f32 wrote {} at {i}, expected {}", got_f[i], 1.5 * x_at(i))));
    }
    let expected_sum = SIZES
        .iter()
        .filter(|(s, _)| *s <= b.max)
        .map(|(s, _)| (0..*s).fold(0u64, |a, i| a.wrapping_add(u64::from(word_at(i)))))
        .fold(0u64, |a, one| a.wrapping_add(one.wrapping_mul(n as u64)));
    let sum = b.sum.read(&stream)?.into_iter().fold(0u64, u64::wrapping_add);
    if sums == 0 || sum != expected_sum {
        return Err(bad(&format!("read_sum_u32x4 summed {sum:#x}, expected {expected_sum:#x}")));
    }
    // The launch shapes: `3 x` over the odd size, `2 x` (the widest
    // one-thread-per-element case) past it, untouched by the odd size.
    let got_s = stream.to_vec(&b.out_s)?;
    let want_s = |i: usize| (if i < ODD.0 { 3.0 } else { 2.0 }) * x_at(i);
    if let Some(i) = (0..got_s.len()).find(|&i| got_s[i] != want_s(i)) {
        return Err(bad(&format!(
            "scale_f32 (launch shapes) wrote {} at {i}, expected {}",
            got_s[i],
            want_s(i)
        )));
    }
    let spun = b.spin.read(&stream)?[b.spin.last];
    if spun < min_spin {
        return Err(bad(&format!("spin_cycles waited {spun} cycles, asked {min_spin}")));
    }
    report.notes.push(format!(
        "launch only: {launched} launches ({n} per case, in the fixed case order) on a second stream, made \
         after the buffers' one (as the timer's), one synchronize, the results checked; no timer, event or \
         spin gate; spin cycles at the device's {mhz:.0} MHz"
    ));
    Ok(report)
}

/// Runs the table (or, with `launch_only`, only launches each case:
/// [`launch_only`], which builds no timer), kernel mode reading CUPTI's
/// kernel records of the `records` kind.
///
/// # Errors
/// A driver error; a mode that cannot run; a wrong result (launch only).
pub fn run(ctx: &Ctx, launch_only: Option<usize>, records: KernelRecords) -> Result<Report, Failure> {
    let mut report = ctx.report("Timer truth: every mode against the GPU's own kernel time")?;
    if let Some(n) = launch_only {
        return self::launch_only(ctx, n, report);
    }
    // The buffers before the timer, as `launch_only` makes them.
    let (stream, mut b) = stream_and_buffers(ctx)?;
    let mut timer = ctx.timer(&stream)?;
    // The spins' cycles from the device's reported clock, as launch-only's
    // (with the measured clock they differed: on an H100 the timed spins ran
    // 0.74 % fewer cycles than ncu's, seventeenth session call 13); their
    // expected length from the clock measured in the first pass.
    let mut mhz: Option<f64> = None;
    let device_mhz = report.device.sm_clock_mhz;
    // Every case, in the fixed order; run once per pass. The timer is
    // shared by the case visitor and the spins' clock, asked after the
    // memory cases (the probes taken so far), never at once.
    let mut pass = |plan: &Plan, report: &mut Report, timer: &mut Timer, b: &mut Buffers| {
        let timer = std::cell::RefCell::new(timer);
        let mut clock =
            || *mhz.get_or_insert_with(|| timer.borrow().clock().map_or(device_mhz, |c| c.steady_mhz));
        cases(ctx, b, device_mhz, &mut clock, &mut |case, work| {
            plan.case(report, &mut timer.borrow_mut(), &case, work)?;
            if let (Pass::Events, Some(expected), Some(r)) =
                (plan.pass, case.expected, report.records.last_mut())
            {
                r.counters.push(Counter::new("expected (cycles / clock)", expected, Unit::Seconds));
            }
            Ok(())
        })
    };
    // The event modes first, with CUPTI not yet touched in the process: once
    // initialized it stays attached, and event pairs read more (see
    // `Bench::run_more`).
    let events = Plan { ctx, pass: Pass::Events, next: 0.into() };
    pass(&events, &mut report, &mut timer, &mut b)?;
    let mut kernel_mode = false;
    timer.set_kernel_records(records);
    match timer.kernel_mode_available() {
        Ok(()) => {
            let plan = Plan { ctx, pass: Pass::Kernel, next: 0.into() };
            pass(&plan, &mut report, &mut timer, &mut b)?;
            kernel_mode = true;
            report.notes.push(format!(
                "kernel mode read {} ({}; --kernel-records {})",
                match records {
                    KernelRecords::Concurrent => "CUPTI's concurrent kernel records".to_string(),
                    KernelRecords::Serialized => "CUPTI's serialized kernel records".to_string(),
                    KernelRecords::Profiler => format!(
                        "CUPTI's range profiler, one range per kernel, each run after {} ms of idle GPU",
                        gpu_bench::PROFILER_IDLE_S * 1e3
                    ),
                },
                records.cupti_name(),
                records.name()
            ));
            if let Some(setup) = timer.kernel_mode_setup_s() {
                report.notes.push(format!(
                    "the range profiler was made and first started once, in {setup:.2} s (its first start \
                     is the costly part), then kept enabled and stopped between the cases: no case's warm-up \
                     pays for it"
                ));
            }
        }
        Err(why) => report
            .notes
            .push(format!("kernel mode (CUPTI, {} kernel records) not measured: {why}", records.name())),
    }
    let mhz = mhz.unwrap_or(device_mhz);
    // The host-cost record makes its own profilers: one per context.
    timer.end_kernel_mode();
    if kernel_mode {
        ctx.progress.step("truth: CUPTI's host cost per launch");
        report.records.push(cupti_host_cost(ctx, &stream, &mut b.empty_out, records)?);
    }
    finish_report(&mut report, &timer);
    if timer.dropped_rounds() > 0 {
        report.notes.push(format!(
            "{} gated rounds were dropped (the spin gate timed out before the host had queued them)",
            timer.dropped_rounds()
        ));
    }
    report.notes.push(format!(
        "spin cycles = length x the device's {device_mhz:.0} MHz (as launch-only's), expected to take \
         cycles / {mhz:.0} MHz (the measured steady clock); \
         '<mode> over kernel' = that mode's median - kernel mode's median (CUPTI: the GPU's own \
         start/end of the run's device operations); the event modes of every case ran first, kernel mode \
         after them (CUPTI, once initialized, stays attached and event pairs read more)"
    ));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_only_launches_the_cases_and_creates_no_timer_event_or_gate() -> Result<(), Failure> {
        let session = cuda_sim::Session::new(26);
        let ctx = Ctx::open(gpu_sync::DriverChoice::Sim, 0, gpu_bench::Settings::sim(), true)?;
        let report = ctx.report("truth")?;
        let before = session.total_calls();
        let report = launch_only(&ctx, 2, report)?;
        let calls = session.calls();
        assert!((session.total_calls() - before) as usize <= calls.len(), "the call log kept every call");
        let ours = &calls[calls.len() - (session.total_calls() - before) as usize..];
        // The empty kernel, the one-cycle spin, 4 memory kernels at 3 sizes,
        // 6 spins (250 ns to 100 µs on the simulator), 3 launch shapes (1 Mi
        // one thread per element, the odd size both ways): 23 cases, 2 each.
        assert_eq!(ours.iter().filter(|c| **c == "cuLaunchKernel").count(), 46, "launches besides the cases");
        // No timing: the one event is the handoff from the buffers' stream
        // to the launches' (a sync marker, recorded once).
        let events: Vec<_> = ours.iter().filter(|c| c.starts_with("cuEvent")).collect();
        assert!(
            events.iter().filter(|c| ***c == "cuEventRecord").count() <= 1
                && !events.iter().any(|c| c.contains("ElapsedTime") || c.contains("Synchronize")),
            "launch-only made timing event calls: {events:?}"
        );
        assert!(report.records.is_empty() && report.clock.is_none() && report.resolution.is_none());
        assert!(report.notes[0].contains("46 launches"), "{:?}", report.notes);
        // Two streams, the buffers' and then the launches' (placed as the
        // timed run's timer makes its stream), every launch after the second.
        let made: Vec<usize> = (0..ours.len()).filter(|&i| ours[i].starts_with("cuStreamCreate")).collect();
        assert_eq!(made.len(), 2, "streams made: {made:?}");
        let first_launch = ours.iter().position(|c| *c == "cuLaunchKernel");
        assert!(first_launch.is_some_and(|l| l > made[1]), "a launch before the second stream was made");
        Ok(())
    }

    /// Each spin launch writes the next slot: on the simulator every case
    /// run once leaves the spins' cycles (at least one) in slots 0 to 6
    /// (the one-cycle spin and six spins), the rest untouched; the three
    /// sums in slots 0 to 2, adding up to the three sizes' sums; the slots
    /// wrap.
    #[test]
    fn each_spin_and_sum_launch_writes_the_next_slot() -> Result<(), Failure> {
        let _session = cuda_sim::Session::new(28);
        let ctx = Ctx::open(gpu_sync::DriverChoice::Sim, 0, gpu_bench::Settings::sim(), true)?;
        let (stream, mut b) = stream_and_buffers(&ctx)?;
        cases(&ctx, &mut b, 1_000.0, &mut || 1_000.0, &mut |_, work| Ok(work(&stream)?))?;
        let spins = b.spin.read(&stream)?;
        let written: Vec<usize> = (0..SLOTS).filter(|&i| spins[i] != 0).collect();
        assert_eq!(written, (0..7).collect::<Vec<_>>(), "the slots the spins wrote");
        assert_eq!(b.spin.last, 6);
        let sums = b.sum.read(&stream)?;
        for (i, &(n, _)) in SIZES.iter().filter(|(n, _)| *n <= b.max).enumerate() {
            let want = (0..n).fold(0u64, |a, j| a.wrapping_add(u64::from(word_at(j))));
            assert_eq!(sums[i], want, "slot {i}: the sum of {n} words");
        }
        assert!(sums[3..].iter().all(|&w| w == 0), "a sum past the third slot");
        // Every word outside the slots stays untouched.
        let all = stream.to_vec(&b.spin.words)?;
        assert!(all.iter().enumerate().all(|(i, &w)| i % SLOT_STRIDE == 0 || w == 0));
        for _ in 0..SLOTS - 7 {
            b.spin.next()?;
        }
        assert_eq!(b.spin.next, 0, "the slots wrap after {SLOTS}");
        Ok(())
    }

    /// The spins run the same cycles whatever the measured clock (the timed
    /// run measures one, launch-only does not): cycles from the device's
    /// clock, only the expected length from the measured one.
    #[test]
    fn the_spins_cycles_do_not_follow_the_measured_clock() -> Result<(), Failure> {
        let _session = cuda_sim::Session::new(29);
        let ctx = Ctx::open(gpu_sync::DriverChoice::Sim, 0, gpu_bench::Settings::sim(), true)?;
        let mut runs = Vec::new();
        for measured in [1_000.0, 1_900.0] {
            let (stream, mut b) = stream_and_buffers(&ctx)?;
            let mut expected = Vec::new();
            cases(&ctx, &mut b, 1_500.0, &mut || measured, &mut |case, work| {
                expected.extend(case.expected);
                Ok(work(&stream)?)
            })?;
            // The simulated spin writes the cycles it was given.
            runs.push((b.spin.read(&stream)?, expected));
        }
        assert_eq!(runs[0].0, runs[1].0, "the spins' cycles moved with the measured clock");
        assert_eq!(runs[0].0[1], Ctx::cycles(SPINS[0], 1_500.0), "the 250 ns spin's cycles");
        assert!(runs[0].1[0] > runs[1].1[0], "the expected lengths follow the measured clock");
        Ok(())
    }

    /// The host-cost record enables the kernel kind kernel mode used and
    /// says which: with the serialized kind it runs, and beside a consumer
    /// of the concurrent kind the simulator refuses it (as it refuses the
    /// two kernel kinds together), so the kind reached CUPTI.
    #[test]
    fn the_cupti_host_cost_enables_the_kernel_records_kernel_mode_used() -> Result<(), Failure> {
        use gpu_sync::cuda_sys::cupti::{ActivityKind, activity};
        let cupti = |e: gpu_sync::cuda_sys::cupti::CuptiError| {
            Failure::Bench(gpu_bench::Error::Kernel(e.to_string()))
        };
        let _session = cuda_sim::Session::new(27);
        let ctx = Ctx::open(gpu_sync::DriverChoice::Sim, 0, gpu_bench::Settings::sim(), true)?;
        let stream = Stream::new(&ctx.device)?;
        let mut out = DeviceBuffer::<u64>::zeroed(&stream, 1)?;
        let r = cupti_host_cost(&ctx, &stream, &mut out, KernelRecords::Serialized)?;
        assert_eq!(r.params.get("kernel records").map(String::as_str), Some("serial"), "{:?}", r.params);
        assert!(r.counter("host submit, CUPTI on").is_some_and(|c| c.value > 0.0));
        let concurrent = activity().map_err(cupti)?.consumer(&[ActivityKind::Kernel]).map_err(cupti)?;
        match cupti_host_cost(&ctx, &stream, &mut out, KernelRecords::Serialized) {
            Err(e) => assert!(e.to_string().contains("CUPTI_ERROR_NOT_COMPATIBLE"), "{e}"),
            Ok(r) => panic!("the serialized kind beside a concurrent consumer was not refused: {r:?}"),
        }
        drop(concurrent);
        // The profiler's host cost: every launch of each "on" round one of
        // its ranges (else the record fails), and no activity records.
        let r = cupti_host_cost(&ctx, &stream, &mut out, KernelRecords::Profiler)?;
        assert_eq!(r.params.get("kernel records").map(String::as_str), Some("profiler"), "{:?}", r.params);
        assert!(r.counter("host submit, CUPTI on").is_some_and(|c| c.value > 0.0));
        assert!(r.counter("records dropped (process)").is_none(), "activity records were read");
        // Beside a consumer of memcpy records the profiler records nothing,
        // as on the GPUs: the record says so instead of a host cost.
        let copies = activity().map_err(cupti)?.consumer(&[ActivityKind::Memcpy]).map_err(cupti)?;
        match cupti_host_cost(&ctx, &stream, &mut out, KernelRecords::Profiler) {
            Err(e) => assert!(e.to_string().contains("read 0 kernels of 2000"), "{e}"),
            Ok(r) => panic!("the profiler beside memcpy records read every launch: {r:?}"),
        }
        drop(copies);
        Ok(())
    }
}

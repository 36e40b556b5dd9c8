//! Kernel mode's readings of small kernels, launch by launch (issue 26):
//! `truth`'s empty spin (one cycle), `scale_f32` over 1 Ki, and a probe that
//! writes the SM it ran on (`%smid`), on CUPTI's range profiler, through
//! gpu-sync's launch path, in a fresh process.
//!
//!     cargo run --release -p gpu-bench --features kernels --example kernel_cycle
//!     ncu … target/release/examples/kernel_cycle plain   # the launches alone, for ncu
//!
//! First on a range profiler of its own (no `Timer`; room for
//! `KC_MAX_KERNELS` kernels a pass, 1,024 unless set), one variant at a
//! time: 512 launches in one range-profiler pass, passes of 256, passes of
//! 256 with a clock probe between them (as kernel mode takes them); the
//! spin from a module loaded here, through gpu-sync and through a raw
//! `cuLaunchKernel`, writing to the pool buffer or to `cuMemAlloc` memory;
//! the raw spin writing its word at offsets 0 B to 2 MiB; the SM probe after
//! a `Timer` is made, on this stream and on the timer's. Then through
//! gpu-bench's kernel mode (`Bench` with `Mode::Kernel`). What it found on
//! an H200 (the output word's place moves the spin by up to 128 ns; launch
//! path and module placement do not):
//! `docs/results/h200/2026-11-28-placement.md`.
//!
//! Per row: the lower and upper level the readings sit on (a reading is
//! upper when it lies more than 64 ns above the minimum), the share on the
//! upper one, how often a reading is on the level of the one 4 and 8
//! launches before, and the median. For the SM probe, a second line gives
//! the median reading per SM it ran on. `truth` on an H200 read small
//! kernels on two levels in an 8-launch cycle; a raw `cuLaunchKernel` probe
//! in a fresh process read one (`docs/results/scripts/idle_gap_probe.cu …
//! cycle`). Without a GPU it runs on the simulator, whose times are exact.
use gpu_bench::{Bench, KernelRecords, Mode, Settings, Timer};
use gpu_sync::cuda_sys::cupti::KernelDurations;
use gpu_sync::cuda_sys::result::{launch, memory};
use gpu_sync::cuda_sys::{BorrowedFunction, BorrowedStream, CUdeviceptr, Driver};
use gpu_sync::{Device, DeviceBuffer, Kernel, LaunchConfig, Module, Out, Stream};
use std::collections::BTreeMap;

/// One thread writes `%smid` to `out[i]`.
const SMID_PTX: &std::ffi::CStr = c"
.version 7.8
.target sm_90
.address_size 64
.visible .entry smid_probe(.param .u64 out, .param .u64 i)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [i];
    cvta.to.global.u64 %rd3, %rd1;
    shl.b64 %rd4, %rd2, 2;
    add.s64 %rd5, %rd3, %rd4;
    mov.u32 %r1, %smid;
    st.global.u32 [%rd5], %r1;
    ret;
}
";

/// Slots of the SM probe's output (launches wrap around it).
const SLOTS: usize = 1 << 16;

type Run<'a> = Box<dyn FnMut(&Stream) -> gpu_sync::Result<()> + 'a>;

/// Levels, share, agreement at lags 4 and 8, median (ns) of `ns`.
fn cycle(ns: &[f64]) -> String {
    let floor = ns.iter().copied().fold(f64::INFINITY, f64::min);
    let up: Vec<bool> = ns.iter().map(|&x| x > floor + 64.0).collect();
    let (hi, lo): (Vec<f64>, Vec<f64>) = ns.iter().partition(|&&x| x > floor + 64.0);
    let same = |k: usize| {
        let n = up.len().saturating_sub(k).max(1);
        (k..up.len()).filter(|&i| up[i] == up[i - k]).count() as f64 / n as f64
    };
    let med = |v: &[f64]| if v.is_empty() { f64::NAN } else { gpu_bench::stats::median(v) };
    format!(
        "{:>6.0} {:>6.0} {:>6.2} {:>6.2} {:>6.2} {:>7.0} {:>6}",
        med(&lo),
        med(&hi),
        hi.len() as f64 / ns.len().max(1) as f64,
        same(4),
        same(8),
        med(ns),
        ns.len()
    )
}

/// The median reading (ns) per SM, and the first 16 SMs in launch order.
fn by_sm(ns: &[f64], sms: &[u32]) -> String {
    let mut per: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (t, sm) in ns.iter().zip(sms) {
        per.entry(*sm).or_default().push(*t);
    }
    let each: Vec<String> =
        per.iter().map(|(sm, v)| format!("{sm}:{:.0}x{}", gpu_bench::stats::median(v), v.len())).collect();
    let first: Vec<String> = sms.iter().take(16).map(u32::to_string).collect();
    format!("    SMs in order [{}]; median ns x launches per SM: {}", first.join(" "), each.join(" "))
}

/// `launches` runs on a range profiler of this process, in passes of
/// `per_pass`, `between` run between passes (outside them); ns in order.
/// The stream is synchronized after every pass.
fn direct(
    profiler: &mut KernelDurations<'static>,
    stream: &Stream,
    run: &mut Run<'_>,
    launches: usize,
    per_pass: usize,
    between: &mut dyn FnMut(&Stream) -> gpu_sync::Result<()>,
) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let mut ns = Vec::with_capacity(launches);
    while ns.len() < launches {
        between(stream)?;
        stream.synchronize()?;
        stream.device().make_current()?;
        profiler.start()?;
        let n = per_pass.min(launches - ns.len());
        let ran = (0..n).try_for_each(|_| run(stream));
        let synced = stream.synchronize();
        stream.device().make_current()?;
        let read = profiler.stop();
        ran?;
        synced?;
        ns.extend(read?);
    }
    Ok(ns)
}

/// One raw `cuLaunchKernel` of `spin` (`spin_cycles`, one cycle, one
/// thread) on `s`, writing its word to `out`: the launch a program without
/// gpu-sync makes.
///
/// # Safety
/// `out` must point to 8 bytes of `s`'s device that nothing else uses while
/// the kernel runs, and stay allocated until the kernel has finished (the
/// caller synchronizes `s` before freeing or reusing them).
unsafe fn raw_spin(
    drv: &'static Driver,
    spin: &Kernel<kernels::SpinSig>,
    s: &Stream,
    out: CUdeviceptr,
) -> gpu_sync::Result<()> {
    let (mut cycles, mut ptr) = (1u64, out);
    let mut params = [
        std::ptr::from_mut(&mut cycles).cast::<std::ffi::c_void>(),
        std::ptr::from_mut(&mut ptr).cast::<std::ffi::c_void>(),
    ];
    // SAFETY: `spin` comes from a module gpu-sync loaded through the
    // process-wide table (`drv`, `cuda_sys::driver()`), and the `Kernel`
    // keeps its module loaded for the borrow of `spin`.
    let f = unsafe { BorrowedFunction::borrow_raw(drv, spin.as_raw()) };
    // SAFETY: gpu-sync made `s` through the same table, and the `Stream`
    // keeps its `CUstream` alive for the borrow of `s`.
    let st = unsafe { BorrowedStream::borrow_raw(drv, s.as_raw()) };
    // SAFETY: `spin_cycles(u64 cycles, u64* out)` takes two 8-byte
    // parameters, and `params` points to one slot for each; it writes
    // `out[0]` only, 8 bytes the caller vouches for (this function's
    // `# Safety`).
    unsafe { launch::launch_kernel(f, [1, 1, 1], [1, 1, 1], 0, st, &mut params) }
        .map_err(gpu_sync::Error::from)
}

/// The kernels this example launches and their buffers.
struct Smalls<'k> {
    k: &'k kernels::Kernels,
    smid: Kernel<(Out<u32>, u64)>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    /// The spin's word.
    out: DeviceBuffer<u64>,
    /// The SM probe's words, one per launch ([`SLOTS`], wrapping).
    sms: DeviceBuffer<u32>,
    /// The SM probe's launches so far.
    next: usize,
}

/// The kernels [`Smalls::run`] launches, by name.
const NAMES: [&str; 3] = ["spin_cycles 1 cycle", "scale_f32 1 Ki", "smid_probe"];

impl Smalls<'_> {
    /// One run of the kernel named `name` (one of [`NAMES`]).
    fn run(&mut self, name: &str) -> Run<'_> {
        let Smalls { k, smid, x, y, out, sms, next } = self;
        match name {
            "spin_cycles 1 cycle" => Box::new(move |s: &Stream| k.spin(s, 1, out)),
            "scale_f32 1 Ki" => Box::new(move |s: &Stream| k.scale(s, &*x, y, 2.0)),
            _ => Box::new(move |s: &Stream| {
                let i = (*next % SLOTS) as u64;
                *next += 1;
                smid.launch(s, LaunchConfig::new(1, 1), (&mut *sms, i))
            }),
        }
    }

    /// The SMs of the probe's launches `start..start + n`.
    fn sms(&self, stream: &Stream, start: usize, n: usize) -> gpu_sync::Result<Vec<u32>> {
        let all = stream.to_vec(&self.sms)?;
        Ok((start..start + n).map(|i| all[i % SLOTS]).collect())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = gpu_sync::select_driver()?.is_sim();
    if sim {
        kernels::register_sim_kernels();
        gpu_sync::sim::register::<(Out<u32>, u64)>("smid_probe", |(out, i)| out[i as usize] = 0);
    }
    let device = Device::get(0)?;
    let stream = Stream::new(&device)?;
    let k = kernels::Kernels::load(&device)?;
    let module = Module::load_ptx(&device, SMID_PTX)?;
    let mut m = Smalls {
        k: &k,
        // SAFETY: `smid_probe` takes (u32*, u64) and writes `out[i]` only;
        // every launch (`Smalls::run`) passes `i < SLOTS`, the length of
        // the one `Out` view.
        smid: unsafe { module.kernel("smid_probe")? },
        x: DeviceBuffer::from_slice(&stream, &vec![1.0f32; 1024])?,
        y: DeviceBuffer::<f32>::zeroed(&stream, 1024)?,
        out: DeviceBuffer::<u64>::zeroed(&stream, 1)?,
        sms: DeviceBuffer::<u32>::zeroed(&stream, SLOTS)?,
        next: 0,
    };
    let mut probe_out = DeviceBuffer::<u64>::zeroed(&stream, 2)?;
    let inst = gpu_bench::instruments::load(&device)?;
    // `plain`: only the launches (the spin, then scale_f32, 100 each), for
    // Nsight Compute to time in this process as the probe's `smallplain`.
    if std::env::args().nth(1).as_deref() == Some("plain") {
        for name in &NAMES[..2] {
            let mut run = m.run(name);
            (0..100).try_for_each(|_| run(&stream))?;
        }
        stream.synchronize()?;
        return Ok(());
    }
    let header = format!(
        "{:<52} {:>6} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6}",
        "kernel, how (ns)", "lower", "upper", "share", "same4", "same8", "median", "n"
    );

    println!("On a range profiler of this process (no Timer):\n{header}");
    {
        device.make_current()?;
        let ordinal = usize::try_from(device.ordinal())?;
        // Room for 1,024 kernels per pass (kernel mode's), or KC_MAX_KERNELS.
        let room = std::env::var("KC_MAX_KERNELS").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
        println!("# the profiler made for {room} kernels per pass");
        let mut profiler = KernelDurations::new(device.context(), ordinal, room)?;
        for name in NAMES {
            for (how, per_pass, probe) in [
                ("512 in one pass", 512, false),
                ("passes of 256", 256, false),
                ("256, probe between", 256, true),
            ] {
                let first = m.next;
                let mut between =
                    |s: &Stream| if probe { inst.clock_probe(s, 1_000, &mut probe_out) } else { Ok(()) };
                let ns = direct(&mut profiler, &stream, &mut m.run(name), 512, per_pass, &mut between)?;
                println!("{:<52} {}", format!("{name}, {how}"), cycle(&ns));
                if name == "smid_probe" {
                    println!("{}", by_sm(&ns, &m.sms(&stream, first, ns.len())?));
                }
            }
        }
        // The spin of a module loaded here (its code elsewhere), through
        // gpu-sync and through a raw `cuLaunchKernel`, writing to the pool
        // buffer or to one from `cuMemAlloc`: which of launch path, code
        // placement and output buffer moves the reading?
        let drv = gpu_sync::cuda_sys::driver()?;
        let own = Module::load(&device, kernels::ModuleId::Spin.fatbin())?;
        // SAFETY: `spin_cycles` takes (u64 cycles, u64* out) and writes
        // `out[0]` only (kernels/cu/spin.cu); every launch gives it a
        // one-element `out`.
        let own_spin: Kernel<kernels::SpinSig> = unsafe { own.kernel("spin_cycles")? };
        device.make_current()?;
        let raw_out = memory::alloc(drv, 8)?;
        // 4 MiB, where the raw spin writes its word at offsets 0 B to 2 MiB.
        let big = memory::alloc(drv, 4 << 20)?;
        let pool_out = m.out.as_raw();
        for (how, target) in [
            ("the crate's module (gpu-sync launch, pool out)", 0),
            ("a module loaded here, gpu-sync launch, pool out", 1),
            ("a module loaded here, raw launch, cuMemAlloc out", 2),
            ("a module loaded here, raw launch, pool out", 3),
            ("the crate's module again (gpu-sync launch, pool out)", 0),
        ] {
            let out = &mut m.out;
            let mut run: Run<'_> = Box::new(|s: &Stream| match target {
                0 => k.spin(s, 1, out),
                1 => own_spin.launch(s, LaunchConfig::new(1, 1), (1u64, &mut *out)),
                // SAFETY: `raw_out` (8 bytes from `cuMemAlloc`, used by
                // nothing else) or `out`'s pool memory (8 bytes, borrowed
                // mutably for these launches); `direct` synchronizes the
                // stream after each pass, before either is freed or used
                // again.
                _ => unsafe { raw_spin(drv, &own_spin, s, if target == 2 { raw_out } else { pool_out }) },
            });
            let ns = direct(&mut profiler, &stream, &mut run, 512, 512, &mut |_| Ok(()))?;
            println!("{:<52} {}", format!("spin, {how}"), cycle(&ns));
        }
        // Where the word lies: 256 launches at each offset into `big`.
        let mut line = Vec::new();
        for off in [0u64, 8, 64, 128, 256, 512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 64 << 10]
            .into_iter()
            .chain([256 << 10, 1 << 20, 2 << 20])
        {
            // SAFETY: `big + off` lies 8 bytes or more inside `big`'s 4 MiB
            // (`off` at most 2 MiB), used by nothing else; `direct`
            // synchronizes the stream after each pass, before `big` is freed.
            let mut run: Run<'_> = Box::new(|s: &Stream| unsafe { raw_spin(drv, &own_spin, s, big + off) });
            let ns = direct(&mut profiler, &stream, &mut run, 256, 256, &mut |_| Ok(()))?;
            let lo = ns.iter().copied().fold(f64::INFINITY, f64::min);
            line.push(format!("{off}:{:.0}/{lo:.0}", gpu_bench::stats::median(&ns)));
        }
        println!("spin, raw, the word at offset B into cuMemAlloc memory, median/min ns: {}", line.join(" "));
        stream.synchronize()?;
        for ptr in [big, raw_out] {
            // SAFETY: `ptr` came from `cuMemAlloc` above, once, and every
            // launch that used it has finished (the stream is synchronized).
            unsafe { memory::free(drv, ptr)? };
        }
        // The SM probe after a Timer is made (its event pairs, gate and
        // clock probes), on this stream and on the timer's.
        let timer = Timer::new(&stream, Some(inst.clone()))?;
        for (how, on) in [("after Timer::new", &stream), ("after Timer::new, timer's stream", timer.stream())]
        {
            let first = m.next;
            let ns = direct(&mut profiler, on, &mut m.run("smid_probe"), 512, 512, &mut |_| Ok(()))?;
            println!("{:<52} {}", format!("smid_probe, 512 in one pass, {how}"), cycle(&ns));
            println!("{}", by_sm(&ns, &m.sms(&stream, first, ns.len())?));
        }
    }

    println!("\nThrough gpu-bench's kernel mode:\n{header}");
    let mut timer = Timer::new(&stream, Some(inst.clone()))?;
    timer.set_kernel_records(KernelRecords::Profiler);
    for name in NAMES {
        let first = m.next;
        let rec = Bench::new(name).modes(&[Mode::Kernel]).settings(Settings::default()).run_on(
            &mut timer,
            None,
            &mut m.run(name),
        )?;
        let ns: Vec<f64> =
            rec.mode(Mode::Kernel).map(|r| r.samples.iter().map(|s| s * 1e9).collect()).unwrap_or_default();
        println!("{:<52} {}", format!("{name}, kernel mode"), cycle(&ns));
        if name == "smid_probe" {
            // The samples are the last runs launched (every run after the
            // first, watched one, is profiled).
            let launched = m.next - first;
            let start = first + launched.saturating_sub(ns.len());
            println!("{}", by_sm(&ns, &m.sms(&stream, start, ns.len().min(launched))?));
        }
    }
    Ok(())
}

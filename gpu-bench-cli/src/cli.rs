//! The command line of `gpu-bench`: every subcommand, flag and value
//! parser, as clap defines them ([`command`] is the command the binary
//! parses, each numeric flag's range shown in its help). A library target so
//! that tests can enumerate the flags from the same definition.

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use gpu_bench::Settings;
use gpu_bench::profile::Column;
use std::path::PathBuf;

/// The whole command line: the global flags and one subcommand.
#[derive(Parser)]
#[command(
    name = "gpu-bench",
    long_about = None,
    version,
    about = "GPU measurement you can trust",
    allow_negative_numbers = true
)]
pub struct Cli {
    /// Device ordinal.
    #[arg(long, global = true, default_value_t = 0, env = "GPU_BENCH_DEVICE", value_parser = crate::bounds::ordinal)]
    pub device: i32,
    /// Which driver: the real CUDA driver, the simulator (simulated times),
    /// or auto (the GPU when libcuda loads, else the simulator). Without the
    /// flag, `GPU_BENCH_DRIVER`, then `GPU_SYNC_DRIVER` (the variable the
    /// library reads) decide; else cuda.
    #[arg(long, global = true, value_enum, env = "GPU_BENCH_DRIVER")]
    pub driver: Option<DriverKind>,
    /// Output format on stdout.
    #[arg(long, global = true, value_enum, default_value_t = FormatArg::Md, env = "GPU_BENCH_FORMAT")]
    pub format: FormatArg,
    /// Also write report.md, results.json and results.csv into this folder.
    #[arg(long, global = true, env = "GPU_BENCH_OUT")]
    pub out: Option<PathBuf>,
    /// A short smoke run: small sizes, few samples.
    #[arg(long, global = true, env = "GPU_BENCH_QUICK")]
    pub quick: bool,
    /// The sampling settings.
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The sampling settings: one name per setting (see `gpu_bench::Settings::NAMES`).
#[derive(clap::Args)]
pub struct SettingsArgs {
    /// Fewest samples per mode.
    #[arg(long, global = true, env = "GPU_BENCH_MIN_SAMPLES", value_parser = crate::bounds::count)]
    pub min_samples: Option<usize>,
    /// Least measured device time per mode, seconds.
    #[arg(long, global = true, env = "GPU_BENCH_MIN_TIME_S", value_parser = crate::bounds::secs)]
    pub min_time_s: Option<f64>,
    /// Stop once the median's noise is below this many percent.
    #[arg(long, global = true, env = "GPU_BENCH_MAX_NOISE_PCT", value_parser = crate::bounds::pct)]
    pub max_noise_pct: Option<f64>,
    /// Give up on a mode after this many seconds.
    #[arg(long, global = true, env = "GPU_BENCH_TIMEOUT_S", value_parser = crate::bounds::positive_secs)]
    pub timeout_s: Option<f64>,
    /// Most samples per mode.
    #[arg(long, global = true, env = "GPU_BENCH_MAX_SAMPLES", value_parser = crate::bounds::count)]
    pub max_samples: Option<usize>,
    /// Fewest warmup runs.
    #[arg(long, global = true, env = "GPU_BENCH_WARMUP_MIN", value_parser = crate::bounds::count)]
    pub warmup_min: Option<usize>,
    /// Most warmup runs.
    #[arg(long, global = true, env = "GPU_BENCH_WARMUP_MAX", value_parser = crate::bounds::count)]
    pub warmup_max: Option<usize>,
    /// Runs per sample in batch mode.
    #[arg(long, global = true, env = "GPU_BENCH_BATCH_RUNS", value_parser = crate::bounds::batch_runs)]
    pub batch_runs: Option<usize>,
}

impl SettingsArgs {
    /// The settings `base` with every flag given applied.
    pub fn apply(&self, base: Settings) -> Settings {
        let mut s = base;
        macro_rules! take {
            ($($f:ident),*) => {$(if let Some(v) = self.$f { s.$f = v; })*};
        }
        take!(
            min_samples,
            min_time_s,
            max_noise_pct,
            timeout_s,
            max_samples,
            warmup_min,
            warmup_max,
            batch_runs
        );
        s
    }
}

/// `--driver`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DriverKind {
    /// libcuda.so.1.
    Cuda,
    /// The software driver cuda-sim: simulated times.
    Sim,
    /// libcuda.so.1 when it loads, else cuda-sim.
    Auto,
}

/// `truth --kernel-records`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelRecordsArg {
    /// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` (kernels keep their
    /// concurrency; CUPTI instruments each kernel).
    Concurrent,
    /// `CUPTI_ACTIVITY_KIND_KERNEL` (CUPTI serializes every kernel).
    Serial,
    /// CUPTI's range profiler, `gpu__time_duration.sum` per kernel (the
    /// duration Nsight Compute reports; no code added to the kernel, every
    /// kernel serialized; kernels only).
    Profiler,
}

impl KernelRecordsArg {
    /// The timer's setting.
    pub fn records(self) -> gpu_bench::KernelRecords {
        match self {
            KernelRecordsArg::Concurrent => gpu_bench::KernelRecords::Concurrent,
            KernelRecordsArg::Serial => gpu_bench::KernelRecords::Serialized,
            KernelRecordsArg::Profiler => gpu_bench::KernelRecords::Profiler,
        }
    }
}

/// `--format`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Markdown tables.
    Md,
    /// JSON (schema gpu-bench.report, versioned).
    Json,
    /// CSV, one row per counter.
    Csv,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Device name, SMs, clocks, memory bus, L2, PCIe link, driver.
    Info,
    /// The timer checked on a spin kernel of known length (10 µs … 10 ms) in
    /// every mode, with an A/A calibration and a paired A/B run.
    Timer {
        /// Threshold of the A/A calibration and the A/B verdict, percent.
        #[arg(long, default_value_t = 2.0, value_parser = crate::bounds::pct)]
        threshold_pct: f64,
    },
    /// The roofline: every ceiling (HBM, L2, L1/shared, FMA per precision),
    /// the sweeps, the kernels placed; report.md, results.json, roofline.svg.
    Roofline(RooflineArgs),
    /// Host cost per launch: raw driver vs gpu-sync, one stream and a handoff;
    /// batches queued behind a spin gate unless --free-running.
    Overhead {
        /// Batches per variant (interleaved batch by batch) in each repetition;
        /// default 40, 5 with --quick.
        #[arg(long, value_parser = crate::bounds::batches)]
        batches: Option<usize>,
        /// Submissions per batch, default 200, 20 with --quick (a handoff batch is queued in gated segments
        /// that fit the driver's queue).
        #[arg(long, value_parser = crate::bounds::batches)]
        per_batch: Option<usize>,
        /// Repeat the whole interleaved comparison this many times and report
        /// each repetition's ratios and their min/median/max.
        #[arg(long, default_value_t = 1, value_parser = crate::bounds::repeat)]
        repeat: usize,
        /// Time batches with nothing holding the GPU (the first reports'
        /// method) instead of behind a spin gate.
        #[arg(long, visible_alias = "no-gate")]
        free_running: bool,
    },
    /// The timer against the GPU's own clock: four memory kernels at five
    /// sizes, a spin kernel at five lengths and scale_f32 in other launch
    /// shapes (one thread per element, an odd size), in every mode, each
    /// event mode's excess over kernel mode (CUPTI) reported.
    Truth {
        /// Only launch each case this many times (no timing), for an external
        /// profiler such as Nsight Compute to time the same launches.
        #[arg(long, value_parser = crate::bounds::launches)]
        launch_only: Option<usize>,
        /// Which CUPTI source kernel mode reads (and the CUPTI host-cost
        /// record enables): profiler (CUPTI's range profiler, the default:
        /// the duration counter Nsight Compute reads, no code added to the
        /// kernels, each kernel serialized), concurrent (CUPTI's kernel
        /// records; CUPTI instruments each kernel to time it, which slows
        /// grids of many short blocks) or serial (CUPTI serializes the
        /// kernels). Not with --launch-only, which builds no timer.
        #[arg(long, value_enum, default_value_t = KernelRecordsArg::Profiler, conflicts_with = "launch_only")]
        kernel_records: KernelRecordsArg,
    },
    /// The right and wrong ways to time, and what synchronization costs.
    SyncCosts,
    /// H2D, D2H and both at once; pinned vs pageable; copy engine vs SM copy.
    Bandwidth {
        /// Largest transfer, MiB (sizes go from 4 KiB up by 4x); default 1024,
        /// 1 with --quick or on the simulator.
        #[arg(long, value_parser = crate::bounds::mib)]
        max_mib: Option<usize>,
    },
    /// Copy/compute overlap with the prefetcher: pinned vs pageable.
    Overlap {
        /// Bytes per chunk, MiB (fractions allowed); default 32, 0.25 with
        /// --quick or on the simulator.
        #[arg(long = "chunk-mib", value_parser = crate::bounds::chunk_bytes, value_name = "MIB")]
        chunk_bytes: Option<usize>,
        /// Chunks, at least 2; default 16, 4 with --quick or on the simulator.
        #[arg(long, value_parser = crate::bounds::count2)]
        chunks: Option<usize>,
    },
    /// The profiler on a demonstration pipeline (H2D, compute, D2H on three
    /// streams; pinned, then pageable): trace.json for Perfetto, table.md,
    /// table.json, timeline.svg and summary.json in --out (default ./timeline).
    Timeline(TimelineArgs),
    /// Every ordered pair of devices: copy bandwidth one way and both ways,
    /// peer access off and on, SM copy push and pull, 4-byte latency, the
    /// NVLink count, the raw cuMemcpyPeerAsync loop beside; heatmap.svg in --out.
    P2p(P2pArgs),
    /// NCCL collectives over every GPU from one process, as nccl-tests
    /// (`-b -e -f`, `-g N`): all-reduce, all-gather, reduce-scatter,
    /// broadcast, ring send/recv, all-to-all; time, algbw, busbw, #wrong per
    /// size; busbw.svg in --out. Needs NCCL_NVLS_ENABLE=0 exported.
    ///
    /// Exit 0: every row checked and right; 1: a collective's average busbw
    /// below --min-busbw; 2: bad arguments or NCCL_NVLS_ENABLE not 0; 4: a
    /// row with wrong elements or a busbw above the measured peer peak.
    #[command(verbatim_doc_comment)]
    Nccl(NcclArgs),
    /// Compares two results.json files (timer reports, or two rooflines
    /// per ceiling): a CI gate that exits 1 only on a regression.
    ///
    /// Each row (benchmark x mode, or ceiling) gets an interval of new/old
    /// at 1 - 5%/m for m rows (Bonferroni), so two runs of the same code get
    /// any verdict in at most 5% of reports however many rows they have.
    /// Times: distribution-free intervals of each median (order statistics);
    /// ceilings: from each one's noise. SLOWER only when the whole interval
    /// lies above 1 + threshold (a ceiling: below 1 - threshold); a mode with
    /// too few samples for an interval (a one-sample first call) is shown as
    /// such and never decides.
    ///
    /// Exit 0: something was compared and nothing regressed; 1: a regression;
    /// 2: bad arguments, a NaN/infinite/zero/negative time (named), nothing
    /// in common or nothing with enough samples, or files of different GPUs,
    /// drivers or schema versions (unless --allow-different-env).
    #[command(verbatim_doc_comment)]
    Compare {
        /// The baseline results.json.
        old: PathBuf,
        /// The new results.json.
        new: PathBuf,
        /// The change that counts: a percentage (`5%`) or a fraction in
        /// (0, 1) (`0.05`); a bare `5` is refused as ambiguous.
        #[arg(long, default_value = "5%", allow_hyphen_values = true)]
        threshold: String,
        /// Compare results of different GPUs, drivers or schema versions,
        /// the differences listed in the report, instead of refusing.
        #[arg(long)]
        allow_different_env: bool,
    },
}

/// `gpu-bench roofline`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct RooflineArgs {
    /// Size of each HBM array in MiB (use several times the L2); default
    /// 4096, 4 with --quick or on the simulator, where a value given is
    /// honoured if three arrays fit the simulated device's memory (16 GiB)
    /// and five the host's. 4 GiB: on an H100 the ceilings read 0.3–0.6 %
    /// higher than over 1 GiB (the launch's ramp is a smaller share of a
    /// longer kernel), and the main job stays under a minute.
    #[arg(long, value_parser = crate::bounds::mib)]
    pub array_mib: Option<usize>,
    /// Also run the tuning search of the HBM probes (variants × grids) and
    /// the L2 sweep in per-block slices (each block re-reading its own part
    /// of the working set).
    #[arg(long)]
    pub tune: bool,
    /// Stop after the HBM and FMA phases (for tuning calls and array-size
    /// comparisons; the report holds those ceilings only).
    #[arg(long)]
    pub only_hbm_fma: bool,
    /// Run the tensor phase alone (the report holds the tensor ceilings
    /// only, and no chart).
    #[arg(long, conflicts_with = "only_hbm_fma")]
    pub only_tensor: bool,
    /// Which tensor-core instructions measure the tensor ceilings: `auto`
    /// (`wgmma` on sm_90, `mma.sync` elsewhere), or one forced (`mma` on an
    /// sm_90 GPU checks the fallback; `wgmma` elsewhere fails to load).
    #[arg(long, value_enum, default_value_t = TensorPath::Auto)]
    pub tensor_path: TensorPath,
    /// The read-tuning sweep (L2 working sets and HBM array sizes × load
    /// shapes × grids) alone: a table, no report (tuning calls).
    #[arg(long, hide = true, conflicts_with_all = ["only_hbm_fma", "only_tensor"])]
    pub tune_reads: bool,
    /// Re-render a saved results.json (no GPU needed; nothing is measured,
    /// so no flag of a measurement goes with it).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["array_mib", "tune", "only_hbm_fma", "only_tensor", "tensor_path", "tune_reads", "keep_going"]
    )]
    pub replay: Option<PathBuf>,
    /// PyTorch figures from the same device call (JSON list of
    /// {name, value, unit}, unit `B/s` or `FLOP/s`) to show beside ours.
    #[arg(long, value_name = "FILE")]
    pub peers: Option<PathBuf>,
    /// On a failed result check, note it and go on with the next phase
    /// (the exit status is still 4).
    #[arg(long)]
    pub keep_going: bool,
}

/// The tensor-core instructions of the tensor phase.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorPath {
    /// `wgmma` where the device is sm_90 (its module loads), else `mma.sync`.
    Auto,
    /// `wgmma` (sm_90a), however the device is.
    Wgmma,
    /// `mma.sync` (sm_80 and newer), however the device is.
    Mma,
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// Timing events around each operation.
    Events,
    /// CUPTI activity records.
    Cupti,
    /// CUPTI where it loads, else events.
    Auto,
    /// Both, one after the other, into events/ and cupti/.
    Both,
}

/// `gpu-bench timeline`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct TimelineArgs {
    /// Device-span backend.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Chunks per run, at least 2; default 8, 4 with --quick or on the
    /// simulator.
    #[arg(long, value_parser = crate::bounds::count2)]
    pub chunks: Option<usize>,
    /// Bytes per chunk, MiB (fractions allowed); default 32, 0.25 with
    /// --quick or on the simulator.
    #[arg(long = "chunk-mib", value_parser = crate::bounds::chunk_bytes, value_name = "MIB")]
    pub chunk_bytes: Option<usize>,
    /// Sort the table by this column (name, calls, device_total,
    /// device_self, device_avg, device_min, device_max, device_pct,
    /// host_total, host_self).
    #[arg(long, default_value = "device_total", value_parser = column)]
    pub sort_by: Column,
    /// Group the table by shape (grid/block, bytes) as well as name.
    #[arg(long)]
    pub group_by_shape: bool,
    /// Also time the pipeline's kernels with the timer's kernel mode and
    /// compare (compare.md, compare.json).
    #[arg(long)]
    pub check_timer: bool,
}

/// `gpu-bench p2p`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct P2pArgs {
    /// Bytes per bandwidth copy (a multiple of 16, at most 16 GiB); default
    /// 256 MiB, 1 MiB with --quick or on the simulator.
    #[arg(long, value_parser = crate::bounds::copy_bytes)]
    pub bytes: Option<usize>,
    /// Timed runs per figure (the median is reported), 1 to 1000; default
    /// 20, 5 with --quick or on the simulator.
    #[arg(long, value_parser = crate::bounds::repeat)]
    pub repeat: Option<usize>,
    /// Hops of the cross-device handoff A → B → A … (tiny kernels handing
    /// a buffer between two devices, gpu-sync's waits against raw events
    /// and waits): an even number from 2 to 128; default 64.
    #[arg(long, value_parser = crate::bounds::handoff_hops)]
    pub handoff_hops: Option<usize>,
}

/// `gpu-bench nccl`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct NcclArgs {
    /// The devices, in rank order, comma separated (`0,1`); default every
    /// device.
    #[arg(long, value_delimiter = ',', value_parser = crate::bounds::ordinal)]
    pub devices: Vec<i32>,
    /// The collectives, comma separated; default all.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub collectives: Vec<CollectiveArg>,
    /// The element kind (nccl-tests' `-d`); sums of the inputs are exact in
    /// every kind, so every output is checked for equality.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// The first size, bytes, `K`, `M`, `G` (binary) allowed (nccl-tests'
    /// `-b`); default 8.
    #[arg(long, value_parser = crate::bounds::nccl_bytes)]
    pub min_bytes: Option<usize>,
    /// The last size (`-e`); default 4G, 1M with --quick or on the
    /// simulator.
    #[arg(long, value_parser = crate::bounds::nccl_bytes)]
    pub max_bytes: Option<usize>,
    /// The factor between sizes (`-f`); default 2.
    #[arg(long, value_parser = crate::bounds::factor)]
    pub factor: Option<usize>,
    /// Untimed iterations per size (`-w`), at every size before any is
    /// timed (as nccl-tests warms up) and again before each; default 5, 1
    /// with --quick or on the simulator.
    #[arg(long, value_parser = crate::bounds::iters0)]
    pub warmup_iters: Option<usize>,
    /// Timed iterations per size (`-n`); default 20, 5 with --quick or on
    /// the simulator.
    #[arg(long, value_parser = crate::bounds::iters)]
    pub iters: Option<usize>,
    /// Checked iterations per size, after the timed ones, outputs cleared
    /// first (`-c`); 0 checks nothing. Default 1.
    #[arg(long, value_parser = crate::bounds::iters0)]
    pub check_iters: Option<usize>,
    /// Exit 1 when a collective's average busbw (nccl-tests' "Avg bus
    /// bandwidth") is below this, GB/s.
    #[arg(long, value_parser = crate::bounds::gbps)]
    pub min_busbw: Option<f64>,
    /// The copy engine's measured one-way peer peak, GB/s: a row whose
    /// busbw exceeds it is an error, not a result.
    #[arg(long, value_parser = crate::bounds::gbps, conflicts_with = "peers")]
    pub peer_peak: Option<f64>,
    /// A `gpu-bench p2p` results.json: its fastest one-way copy with peer
    /// access is the peer peak (as --peer-peak).
    #[arg(long, value_name = "FILE")]
    pub peers: Option<PathBuf>,
    /// Capture the timed iterations of each size into one CUDA graph per
    /// device and time this many launches of every rank's graph (nccl-tests'
    /// `-G`), 0 to 10000; default 0, eager.
    #[arg(long, value_name = "LAUNCHES", value_parser = crate::bounds::graph_launches)]
    pub graph: Option<usize>,
    /// Alter this many elements of rank 0's reference in every checked
    /// output (a test of the check: the rows must count them).
    #[arg(long, hide = true, default_value_t = 0, value_parser = crate::bounds::plant)]
    pub plant_wrong: usize,
    /// Blocking communicators (nccl-tests' default): no NCCL thread per
    /// group; gpu-sync's default is non-blocking. With --procs: the ranks
    /// run with NCCL_RUNTIME_CONNECT=0 (connections made at init), and
    /// send-recv and all-to-all are refused (they connect on first use).
    #[arg(long)]
    pub blocking: bool,
    /// All-reduce in place (its input and output one buffer), as
    /// `torch.distributed.all_reduce` runs it and as nccl-tests' in-place
    /// pass; default out of place. Only with all-reduce alone
    /// (`--collectives all-reduce`) and eager: each timed iteration sums
    /// the last one's output, so a captured graph's result is not checked.
    #[arg(long, conflicts_with_all = ["graph", "host_cost"])]
    pub in_place: bool,
    /// Instead of the sweep: the host cost and GPU time of one all-reduce
    /// group, gpu-sync's tracked one against the same written on NCCL's C
    /// API (on the same communicators), interleaved batches of --iters at
    /// each size (f32, sum). With --procs: each rank's raw `ncclAllReduce`
    /// call against its tracked all-reduce, every rank's rows in the table.
    #[arg(long, conflicts_with_all = ["collectives", "dtype", "peers", "peer_peak", "min_busbw", "plant_wrong"])]
    pub host_cost: bool,
    /// With --host-cost: interleaved rounds per size, each one raw and one
    /// tracked batch of --iters (default 11); refused without it.
    #[arg(long, value_parser = crate::bounds::batches)]
    pub batches: Option<usize>,
    /// Leave NCCL's tuning log off: the rows name no algorithm ("—").
    /// Without it, unless NCCL_DEBUG is already set, NCCL_DEBUG=INFO,
    /// NCCL_DEBUG_SUBSYS=TUNING and NCCL_DEBUG_FILE (a temporary file) are
    /// set before NCCL loads, and each row names the algorithm and protocol
    /// NCCL's rank 0 logged for its calls (one line written per call).
    #[arg(long)]
    pub no_algorithms: bool,
    /// The CUPTI check of the event times: each row also gets, from
    /// CUPTI's kernel records of the timed iterations, the NCCL kernels'
    /// span per iteration (gpu µs: per device first start to last end, the
    /// longest device's), their summed durations (busy µs) and event ÷ gpu
    /// (above 1: event time with no kernel running). Every stream is
    /// synchronized after the warmup. Fails with the reason where CUPTI
    /// cannot be used (not found, a profiler attached).
    #[arg(long, conflicts_with = "host_cost")]
    pub cupti: bool,
    /// Which CUPTI kernel records --cupti reads: concurrent (CUPTI
    /// instruments each kernel to time it) or serial (CUPTI serializes each
    /// device's kernels instead).
    #[arg(long, value_enum, default_value_t = KernelRecordsArg::Concurrent, requires = "cupti")]
    pub kernel_records: KernelRecordsArg,
    /// One process per GPU: this command re-run as N ranks on this machine
    /// (`--procs` alone: one per device), rank i on device i, each with a
    /// communicator from its environment (RANK, WORLD_SIZE, LOCAL_RANK,
    /// NCCL_COMM_ID); under `torchrun --no-python` (RANK set) the
    /// launcher's ranks, N ignored. Per size the ranks' spans and wrong
    /// elements are reduced over the ranks by NCCL; rank 0 writes the
    /// report. Not on the simulator (its NCCL joins no other process).
    #[arg(long, value_name = "N", num_args = 0..=1, conflicts_with = "devices", value_parser = crate::bounds::procs)]
    pub procs: Option<Option<usize>>,
}

/// `--collectives`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CollectiveArg {
    /// ncclAllReduce (sum).
    #[value(alias = "all_reduce")]
    AllReduce,
    /// ncclAllGather.
    #[value(alias = "all_gather")]
    AllGather,
    /// ncclReduceScatter (sum).
    #[value(alias = "reduce_scatter")]
    ReduceScatter,
    /// ncclBroadcast from rank 0.
    Broadcast,
    /// ncclSend/ncclRecv in a ring (rank i to i + 1), as nccl-tests' sendrecv_perf.
    #[value(name = "sendrecv", alias = "send-recv")]
    SendRecv,
    /// Grouped ncclSend/ncclRecv, every rank to every rank, as alltoall_perf.
    #[value(name = "alltoall", alias = "all-to-all")]
    AllToAll,
}

/// `--dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DtypeArg {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Byte.
    U8,
}

fn column(s: &str) -> Result<Column, String> {
    Column::from_name(s)
        .ok_or_else(|| format!("{s:?} is not a column ({})", Column::ALL.map(|c| c.name()).join(", ")))
}

/// The global flags that choose a device or how to sample it: refused with
/// `compare` and `roofline --replay`, which measure nothing
/// ([`measuring_flags_given`]).
pub const MEASURING_GLOBALS: &[&str] = &[
    "device",
    "driver",
    "quick",
    "min_samples",
    "min_time_s",
    "max_noise_pct",
    "timeout_s",
    "max_samples",
    "warmup_min",
    "warmup_max",
    "batch_runs",
];

/// The measuring global flags given on the command line (not from a
/// variable: `GPU_BENCH_*` set for other runs stay harmless), as `--name`.
pub fn measuring_flags_given(matches: &clap::ArgMatches) -> Vec<String> {
    MEASURING_GLOBALS
        .iter()
        .filter(|id| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| format!("--{}", id.replace('_', "-")))
        .collect()
}

/// The command the binary parses: [`Cli`]'s, negative numbers taken as
/// values everywhere (refused by each flag's range with a message, never
/// taken for unknown flags; `-inf` too), and each numeric flag's range
/// ([`crate::bounds::RANGES`]) appended to its help.
pub fn command() -> clap::Command {
    fn document(cmd: clap::Command) -> clap::Command {
        let ids: Vec<(String, crate::bounds::Range)> = cmd
            .get_arguments()
            .filter_map(|a| Some((a.get_id().to_string(), crate::bounds::range_of(a.get_long()?)?)))
            .collect();
        let cmd = ids.into_iter().fold(cmd, |cmd, (id, range)| {
            cmd.mut_arg(id, |a| {
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                let sep = if help.is_empty() { "" } else { " " };
                let long = a.get_long_help().map(|h| format!("{h} [{}]", range.expected()));
                // `-inf` is a value to refuse by range, not a flag `-i`;
                // but a flag whose value is optional (`--procs [N]`) must
                // not take the next flag for its value (`--procs
                // --blocking`): negative numbers still reach its range
                // (`allow_negative_numbers` below).
                let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
                let a = a.help(format!("{help}{sep}[{}]", range.expected())).allow_hyphen_values(!optional);
                match long {
                    Some(l) => a.long_help(l),
                    None => a,
                }
            })
        });
        cmd.allow_negative_numbers(true).mut_subcommands(document)
    }
    document(Cli::command())
}

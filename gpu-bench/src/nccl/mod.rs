//! NCCL collectives over every GPU of one process, after nccl-tests
//! (`all_reduce_perf -b 8 -e 4G -f 2 -g N`): all-reduce, all-gather,
//! reduce-scatter, broadcast, send/recv in a ring and all-to-all (grouped
//! send/recv), through gpu-sync's tracked collectives
//! ([`gpu_sync::nccl::group`]), over sizes from `min_bytes` to `max_bytes`
//! by `factor`.
//!
//! # Method
//! - **One process, every GPU**: one communicator per device
//!   ([`gpu_sync::nccl::Communicator::init_all`]) and one stream each; an
//!   iteration is one NCCL group holding every rank's part ([`run`]).
//! - **One process per GPU** ([`run_rank`]; `gpu-bench nccl --procs`):
//!   each rank runs the same sweep on its own device with a communicator
//!   from its environment ([`gpu_sync::nccl::Communicator::from_env`]),
//!   an iteration is its own part; per size, each rank's longest and
//!   shortest span and its wrong elements are reduced over the ranks by an
//!   NCCL all-reduce (max, min, sum), so the rows are computed as one
//!   process computes them over its devices.
//! - **Time**: first every collective at every size, `warmup_iters`
//!   iterations each (nccl-tests' warm-up of every size before it times
//!   any); then per size `warmup_iters` iterations, then per device an event recorded
//!   on its stream before and after `iters` iterations. Events of two
//!   devices cannot be subtracted: each device's span is taken alone, the
//!   time per iteration is the longest span over `iters`, and the spread is
//!   how much shorter the shortest span is (percent of the longest).
//!   (nccl-tests times the same loop with the host clock around it and a
//!   stream synchronize.)
//! - **Bandwidth**, as nccl-tests' `doc/PERFORMANCE.md` defines it
//!   (`src/*.cu`, `*GetBw`): algbw = S / t, with S the size nccl-tests
//!   reports (the whole array: all-gather's receive, reduce-scatter's send,
//!   all-to-all's buffer per rank), and busbw = algbw × all-reduce
//!   2(n−1)/n, all-gather and reduce-scatter (n−1)/n, broadcast and
//!   send/recv 1, all-to-all (n−1)/n ([`Collective::bus_factor`]). Per-rank
//!   counts are rounded down to 16 bytes as nccl-tests does
//!   (`*GetCollByteCount`); a size whose per-rank count rounds to nothing
//!   is skipped.
//! - **#wrong**: each rank's input is a pattern of whole numbers
//!   ([`Dtype`]: sums exact in every kind), uploaded once. After the timed
//!   iterations, `check_iters` more run with every output cleared first
//!   (every byte `0xFF`); each output is read back and compared element by
//!   element with a CPU reference. A row's count is the wrong elements over
//!   every rank and checked iteration.
//! - **A bound from the hardware**: with `peer_peak_gbs` (the copy
//!   engine's measured one-way peer bandwidth, `gpu-bench p2p`), a row
//!   whose busbw exceeds it carries an error instead of being a result.
//! - **Captured** ([`NcclOptions::graph_launches`], nccl-tests' `-G`):
//!   after the warmup, the `iters` iterations of a size are captured into
//!   one graph per device ([`gpu_sync::capture_each`], each graph holding
//!   its rank's part of every iteration), and the timed loop launches every
//!   rank's graph `graph_launches` times between the same events; the time
//!   per iteration is the longest span over `iters × graph_launches`. The
//!   checked iterations launch the graphs once each (every iteration they
//!   hold writes the same outputs). Rows say which ([`Launch`]).
//! - **Algorithm and protocol** ([`NcclOptions::tuning_log`], [`algo`]):
//!   where NCCL writes its tuning log (`NCCL_DEBUG=INFO`,
//!   `NCCL_DEBUG_SUBSYS=TUNING`, `NCCL_DEBUG_FILE`), the lines each size's
//!   calls added (warmup, timed, checked) are read after its checked
//!   iterations and the row names the choice most of them made
//!   (`RING/LL (2 ch)`); NCCL's rank 0 logs them, so with one process per
//!   GPU rank 0's report has them. Send/recv and all-to-all have none
//!   (NCCL logs no line), nor has cuda-sim's NCCL (it writes no log).
//! - **The CUPTI check** ([`NcclOptions::cupti`], `gpu-bench nccl
//!   --cupti`): the event time is checked against the GPU's own clock.
//!   After the warmup (and the capture) every rank's stream is
//!   synchronized — as nccl-tests waits for its warmup — and CUPTI's kernel
//!   records so far dropped; after the timed iterations each stream's
//!   kernel records (kernel mode's per-stream filters: NCCL launches its
//!   kernels on the rank's stream; a graph's kernels carry the stream it
//!   was launched on) give, per device, the kernels' **span** (first start
//!   to last end, on CUPTI's clock) and their **busy** time (the sum of
//!   their durations). As the event time, each device is taken on its own
//!   and the row has the longest device's, per iteration: `gpu µs` and
//!   `busy µs` ([`Row::gpu_us`], [`Row::busy_us`]). How to read it: on one
//!   device the kernels lie between its two events, so gpu ≤ event (up to
//!   the events' resolution); `event ÷ gpu` ([`Row::event_per_gpu`]) above
//!   1 is time the events saw with no NCCL kernel running before the first
//!   or after the last (the host issuing the first iteration, the events'
//!   own latency), and `gpu − busy` is the gaps between kernels (each
//!   iteration's launch latency, host issue slower than the kernels). A
//!   small-message row whose event time is mostly gaps is bound by the
//!   host and the launch path, not by NCCL's kernels. CUPTI costs each
//!   launch something itself: compare a run's event times with a run
//!   without the check. Where CUPTI cannot be used (not found, another
//!   tool owns the profiling interface) the run fails with the reason.
//!
//! [`run`] is the method; [`NcclReport`] renders it (markdown, CSV, JSON
//! through serde, an SVG of busbw against size).

pub mod algo;
mod element;
mod gpu_check;
mod render;
mod sweep;
mod twin;

pub use render::size_name;

pub use element::Dtype;
pub use twin::{HostCostOptions, HostCostRow, host_cost, host_cost_rank};

use gpu_sync::Device;
use serde::{Deserialize, Serialize};

/// A collective of the sweep.
///
/// ```
/// use gpu_bench::nccl::Collective;
/// // nccl-tests' busbw factor over 4 ranks: all-reduce moves 2(n-1)/n of the size.
/// assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
/// // All-gather of 1 MiB of f32 over 4 ranks: each rank sends a quarter.
/// let shape = Collective::AllGather.shape(1 << 20, 4, 4).unwrap();
/// assert_eq!((shape.count, shape.bytes), (1 << 16, 1 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    /// `ncclAllReduce`, sum, out of place.
    AllReduce,
    /// `ncclAllGather`, out of place.
    AllGather,
    /// `ncclReduceScatter`, sum, out of place.
    ReduceScatter,
    /// `ncclBroadcast` from rank 0, in place.
    Broadcast,
    /// `ncclSend`/`ncclRecv` in a ring: rank i sends to i + 1 and receives
    /// from i − 1, in one group (nccl-tests' `sendrecv_perf`).
    SendRecv,
    /// All-to-all as grouped `ncclSend`/`ncclRecv`: rank i's block j goes
    /// to rank j's block i (nccl-tests' `alltoall_perf`).
    AllToAll,
}

impl Collective {
    /// Every collective, in the report's order.
    pub const ALL: [Collective; 6] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::SendRecv,
        Collective::AllToAll,
    ];

    /// nccl-tests' name (`all_reduce`, as in `all_reduce_perf`).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::Broadcast => "broadcast",
            Collective::SendRecv => "sendrecv",
            Collective::AllToAll => "alltoall",
        }
    }

    /// busbw / algbw over `n` ranks (nccl-tests' `doc/PERFORMANCE.md`,
    /// "Summary").
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (n - 1.0) / n,
            Collective::Broadcast | Collective::SendRecv => 1.0,
        }
    }

    /// The shape of a run at `bytes` of elements of `elt` bytes over `n`
    /// ranks, as nccl-tests' `*GetCollByteCount` makes it; `None` when the
    /// count rounds to nothing.
    pub fn shape(self, bytes: usize, elt: usize, n: usize) -> Option<Shape> {
        let count = bytes / elt;
        // Per-rank blocks are whole 16-byte multiples.
        let block = (count / n.max(1)) & !(16 / elt - 1);
        let (param, elements) = match self {
            Collective::AllReduce | Collective::Broadcast | Collective::SendRecv => (count, count),
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (block, block * n),
        };
        (param > 0).then_some(Shape { count: param, bytes: (elements * elt) as u64 })
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A collective's size at one step of the sweep; [`Collective`]'s example
/// makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The count given to NCCL per call (per rank and block for all-gather,
    /// reduce-scatter and all-to-all).
    pub count: usize,
    /// S, the bytes nccl-tests reports and divides by the time.
    pub bytes: u64,
}

/// How a row's timed iterations were issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Launch {
    /// Each iteration one NCCL group, issued from the host.
    #[default]
    Eager,
    /// The iterations captured into one CUDA graph per device, the graphs
    /// launched ([`NcclOptions::graph_launches`]).
    Graph,
}

impl Launch {
    /// Its name in the report (`eager`, `graph`).
    pub fn name(self) -> &'static str {
        match self {
            Launch::Eager => "eager",
            Launch::Graph => "graph",
        }
    }
}

/// What to measure; [`NcclReport`]'s example passes one to [`run`].
#[derive(Debug, Clone, PartialEq)]
pub struct NcclOptions {
    /// The collectives, in order.
    pub collectives: Vec<Collective>,
    /// The element kind.
    pub dtype: Dtype,
    /// The first size, bytes (nccl-tests' `-b`).
    pub min_bytes: usize,
    /// The last size, bytes (`-e`).
    pub max_bytes: usize,
    /// The step between sizes, a factor of at least 2 (`-f`).
    pub factor: usize,
    /// Untimed iterations per size (`-w`): at every size once before any
    /// is timed, as nccl-tests does, and again just before each size.
    pub warmup_iters: usize,
    /// Timed iterations per size (`-n`).
    pub iters: usize,
    /// Checked iterations per size, after the timed ones (`-c`); 0 checks
    /// nothing (`#wrong` is then not reported).
    pub check_iters: usize,
    /// The copy engine's one-way peer peak, GB/s: a row above it is an
    /// error.
    pub peer_peak_gbs: Option<f64>,
    /// For testing the check: this many elements of rank 0's reference are
    /// altered, in every checked output, so the rows must count them.
    pub plant_wrong: usize,
    /// Blocking communicators ([`gpu_sync::nccl::CommOptions::blocking`]);
    /// nccl-tests' default, and without NCCL's thread per group that a
    /// non-blocking communicator (gpu-sync's default) costs.
    pub blocking: bool,
    /// 0: eager. Else the `iters` timed iterations of a size are captured
    /// into one CUDA graph per device and the graphs launched this many
    /// times (nccl-tests' `-G`; see the module docs).
    pub graph_launches: usize,
    /// NCCL's tuning log of this process, as `NCCL_DEBUG_FILE` names it
    /// (`%p`, `%h` unexpanded: [`algo::resolve`]); NCCL writes it when
    /// `NCCL_DEBUG=INFO` and `NCCL_DEBUG_SUBSYS` includes `TUNING` were
    /// set before it loaded. `None`: the rows name no algorithm. A missing
    /// or unreadable file leaves them unnamed, never fails the run.
    pub tuning_log: Option<std::path::PathBuf>,
    /// The CUPTI check (see the module docs): each row also gets the
    /// kernels' span and busy time per iteration from CUPTI's records
    /// ([`Row::gpu_us`], [`Row::busy_us`]). Where CUPTI cannot be used the
    /// run fails with the reason.
    pub cupti: bool,
    /// Which CUPTI kernel records the CUPTI check reads: concurrent ones
    /// instrument the kernels they time, serialized ones serialize the
    /// kernels of each device (see [`crate::KernelRecords`]).
    pub kernel_records: crate::KernelRecords,
    /// All-reduce in place (`ncclAllReduce` with one buffer for its input
    /// and output), as `torch.distributed.all_reduce` runs it; refused with
    /// any other collective and with graphs ([`NcclOptions::validate`]).
    /// Each timed iteration sums the last one's output; the checked one
    /// starts from the input again.
    pub in_place: bool,
}

impl Default for NcclOptions {
    /// nccl-tests' sweep `-b 8 -e 4G -f 2`, every collective, `f32`, 5
    /// warmup, 20 timed and 1 checked iteration per size.
    fn default() -> NcclOptions {
        NcclOptions {
            collectives: Collective::ALL.to_vec(),
            dtype: Dtype::F32,
            min_bytes: 8,
            max_bytes: 4 << 30,
            factor: 2,
            warmup_iters: 5,
            iters: 20,
            check_iters: 1,
            peer_peak_gbs: None,
            plant_wrong: 0,
            blocking: false,
            graph_launches: 0,
            tuning_log: None,
            cupti: false,
            kernel_records: crate::KernelRecords::Concurrent,
            in_place: false,
        }
    }
}

impl NcclOptions {
    /// Refuses options that cannot run together: [`NcclOptions::in_place`]
    /// with a collective other than all-reduce, or with graphs (each
    /// captured iteration would sum the last one's output, so the graph's
    /// result could not be checked against one all-reduce).
    ///
    /// # Errors
    /// [`crate::Error::Gpu`] holding [`gpu_sync::Error::InvalidArgument`],
    /// naming the option.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(gpu_sync::Error::InvalidArgument(m).into());
        if self.in_place {
            if let Some(c) = self.collectives.iter().find(|&&c| c != Collective::AllReduce) {
                return bad(format!(
                    "in place: all-reduce only, and {c} was asked for (broadcast always runs in place)"
                ));
            }
            if self.graph_launches > 0 {
                return bad("in place: eager only (a captured graph's iterations would sum each other's \
                            output, which no check can follow)"
                    .to_owned());
            }
        }
        Ok(())
    }

    /// The sizes of the sweep: `min_bytes`, times `factor`, up to
    /// `max_bytes` (empty when `min_bytes > max_bytes`).
    pub fn sizes(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut s = self.min_bytes.max(1);
        while s <= self.max_bytes {
            v.push(s);
            match s.checked_mul(self.factor.max(2)) {
                Some(n) => s = n,
                None => break,
            }
        }
        v
    }
}

/// One collective at one size; [`NcclReport`]'s example reads the rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The collective.
    pub collective: Collective,
    /// How its timed iterations were issued (absent in older reports:
    /// eager).
    #[serde(default)]
    pub launch: Launch,
    /// S: the bytes nccl-tests reports for this size.
    pub bytes: u64,
    /// The count per NCCL call.
    pub count: usize,
    /// Time per iteration, µs: the longest device span over the iterations.
    pub time_us: f64,
    /// How much shorter the shortest device span was, percent of the
    /// longest.
    pub spread_pct: f64,
    /// Algorithm bandwidth, GB/s (10^9 B/s).
    pub algbw_gbs: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gbs: f64,
    /// Wrong elements over every rank and checked iteration; `None` when
    /// nothing was checked.
    pub wrong: Option<u64>,
    /// Why this row is not a result (a wrong element, a busbw above the
    /// measured peer peak).
    pub error: Option<String>,
    /// The algorithm and protocol NCCL chose, from its tuning log
    /// (`RING/LL (2 ch)`, [`algo::choose`]); `None` when it did not say
    /// (no log, send/recv and all-to-all, the simulator; absent in older
    /// reports).
    #[serde(default)]
    pub algorithm: Option<String>,
    /// The CUPTI check ([`NcclOptions::cupti`]): the NCCL kernels' span per
    /// iteration, µs — per device its first kernel's start to its last
    /// kernel's end over the timed iterations, the longest device's, over
    /// the iterations. `None` (absent from the JSON) without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_us: Option<f64>,
    /// The CUPTI check: the NCCL kernels' summed durations per iteration,
    /// µs (the longest device's): the part of an iteration spent inside
    /// NCCL's kernels. `None` (absent from the JSON) without the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<f64>,
}

impl Row {
    /// The event time over the kernels' span (`event ÷ gpu`): 1 when the
    /// events see nothing but the kernels, above 1 by the gaps between them
    /// (host issue, launch latency); `None` without the CUPTI check.
    pub fn event_per_gpu(&self) -> Option<f64> {
        self.gpu_us.filter(|&g| g > 0.0).map(|g| self.time_us / g)
    }
}

/// One collective over the whole sweep; [`NcclReport`]'s example reads
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The collective.
    pub collective: Collective,
    /// The mean busbw over its rows, GB/s (nccl-tests' "Avg bus bandwidth",
    /// which `NCCL_TESTS_MIN_BW` is checked against).
    pub avg_busbw_gbs: f64,
    /// The highest busbw, GB/s, and the size it was reached at.
    pub peak_busbw_gbs: f64,
    /// The size of the peak, bytes.
    pub peak_bytes: u64,
    /// Rows measured.
    pub rows: usize,
}

/// A whole run: what [`run`] returns.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::nccl::{Collective, NcclOptions, run};
/// let devices = gpu_sync::Device::all()?; // the simulator has two, and a simulated NCCL
/// let opts = NcclOptions {
///     collectives: vec![Collective::AllReduce],
///     max_bytes: 4 << 10, factor: 4, warmup_iters: 1, iters: 2,
///     ..NcclOptions::default()
/// };
/// let report = run(&devices[..2], &opts, &mut |_step| {})?;
/// assert_eq!(report.rows.len(), opts.sizes().len()); // 8 B … 2 KiB, by 4
/// assert!(report.rows.iter().all(|r| r.wrong == Some(0) && r.error.is_none()));
/// assert_eq!(report.summaries[0].collective, Collective::AllReduce);
/// assert!(report.simulated && report.failed_rows().next().is_none());
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclReport {
    /// The schema of this JSON.
    pub schema: String,
    /// Device names, rank order.
    pub devices: Vec<String>,
    /// Ranks of the clique (every process's); 0 in reports written before
    /// this field (read it as `devices.len()`).
    #[serde(default)]
    pub ranks: usize,
    /// One process per GPU (this report is rank 0's); false: one process
    /// drove every rank.
    #[serde(default)]
    pub per_process: bool,
    /// Device ordinals, rank order.
    pub ordinals: Vec<i32>,
    /// Whether the simulator ran it (every figure is then simulated).
    pub simulated: bool,
    /// The NCCL in use (version and where it came from).
    pub nccl: String,
    /// The element kind.
    pub dtype: Dtype,
    /// Untimed iterations per size.
    pub warmup_iters: usize,
    /// Timed iterations per size.
    pub iters: usize,
    /// Checked iterations per size.
    pub check_iters: usize,
    /// The one-way peer peak rows were held to, GB/s.
    pub peer_peak_gbs: Option<f64>,
    /// Whether the communicators were blocking ([`NcclOptions::blocking`]).
    #[serde(default)]
    pub blocking: bool,
    /// Whether the all-reduce ran in place ([`NcclOptions::in_place`]);
    /// false in reports written before the option.
    #[serde(default)]
    pub in_place: bool,
    /// The run captured in a CUDA graph: its state.
    pub graph: String,
    /// Where the rows' algorithms and protocols came from (NCCL's tuning
    /// log), or why they have none.
    pub algorithm: String,
    /// Every row, by collective then size.
    pub rows: Vec<Row>,
    /// Per collective.
    pub summaries: Vec<Summary>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// The schema name of [`NcclReport`]'s JSON.
pub const SCHEMA: &str = "gpu-bench.nccl/1";

impl NcclReport {
    /// The rows that are errors, not results.
    pub fn failed_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.error.is_some())
    }

    /// The collectives whose average busbw is below `gbs`, with it.
    pub fn below(&self, gbs: f64) -> Vec<(Collective, f64)> {
        self.summaries
            .iter()
            .filter(|s| s.avg_busbw_gbs < gbs)
            .map(|s| (s.collective, s.avg_busbw_gbs))
            .collect()
    }
}

/// Runs the sweep over `devices` (rank `i` on `devices[i]`), calling
/// `progress` with each step.
///
/// # Errors
/// [`crate::Error::Gpu`] for a driver or NCCL error (including NCCL not
/// found); a check failure is a row's error, not this.
pub fn run(
    devices: &[Device],
    opts: &NcclOptions,
    progress: &mut dyn FnMut(&str),
) -> crate::Result<NcclReport> {
    let mode = if opts.blocking { "blocking" } else { "non-blocking" };
    progress(&format!("nccl: {} {mode} communicators (ncclCommInitRankConfig, one group)", devices.len()));
    let options = gpu_sync::nccl::CommOptions { blocking: opts.blocking, ..Default::default() };
    let comms = gpu_sync::nccl::Communicator::init_all_with(devices, options)?;
    sweep_report(comms, opts, progress)
}

/// Runs this process's rank of the sweep, one process per GPU: every rank
/// of `comm`'s clique calls it with the same `opts` (the same collectives
/// in the same order). Every rank gets the same rows, reduced over the
/// ranks; `devices` and `ordinals` name this rank's device only.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::nccl::{Collective, NcclOptions, run_rank};
/// use gpu_sync::{Device, nccl::Communicator};
/// // One rank is a clique of one (cuda-sim joins no other process).
/// let comm = Communicator::init_all(&[Device::get(0)?])?.remove(0);
/// let opts = NcclOptions { collectives: vec![Collective::AllReduce], max_bytes: 64, ..NcclOptions::default() };
/// let report = run_rank(comm, &opts, &mut |_| {})?;
/// assert!(report.rows.iter().all(|r| r.wrong == Some(0)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// As [`run`].
pub fn run_rank(
    comm: gpu_sync::nccl::Communicator,
    opts: &NcclOptions,
    progress: &mut dyn FnMut(&str),
) -> crate::Result<NcclReport> {
    sweep_report(vec![comm], opts, progress)
}

/// The sweep over `comms` (this process's ranks) and its report.
fn sweep_report(
    comms: Vec<gpu_sync::nccl::Communicator>,
    opts: &NcclOptions,
    progress: &mut dyn FnMut(&str),
) -> crate::Result<NcclReport> {
    opts.validate()?;
    let n = comms.first().map_or(0, gpu_sync::nccl::Communicator::size);
    let per_process = comms.len() < n;
    let devices: Vec<Device> = comms.iter().map(|c| c.device().clone()).collect();
    let mut log = opts.tuning_log.as_deref().map(algo::TuningLog::new);
    let l = log.as_mut();
    let rows = match opts.dtype {
        Dtype::F32 => sweep::run::<f32>(comms, opts, l, progress)?,
        Dtype::F64 => sweep::run::<f64>(comms, opts, l, progress)?,
        Dtype::F16 => sweep::run::<half::f16>(comms, opts, l, progress)?,
        Dtype::Bf16 => sweep::run::<half::bf16>(comms, opts, l, progress)?,
        Dtype::I32 => sweep::run::<i32>(comms, opts, l, progress)?,
        Dtype::I64 => sweep::run::<i64>(comms, opts, l, progress)?,
        Dtype::U8 => sweep::run::<u8>(comms, opts, l, progress)?,
    };
    let simulated = gpu_sync::cuda_sys::installed().is_some_and(|d| d.origin() == "cuda-sim");
    let nccl = nccl_in_use();
    let mut notes = vec![
        "time: per device, events on its stream around the timed iterations; the longest span / iterations \
         (events of two devices cannot be subtracted); spread: the shortest span's shortfall, % of the longest"
            .to_owned(),
        if opts.in_place {
            "all-reduce in place (one buffer, as torch.distributed.all_reduce): each timed iteration sums the \
             last one's output; the checked one starts from the input"
                .to_owned()
        } else {
            "out of place (broadcast in place); nccl-tests also reports an in-place pass, not run here".to_owned()
        },
    ];
    if per_process {
        notes.push(format!(
            "one process per GPU: {n} ranks, each its own part; per size, the longest span and the shortest \
             are the max and min over the ranks, #wrong their sum (NCCL all-reduces); devices and ordinals \
             are this rank's"
        ));
    }
    if simulated {
        notes.push("simulated: every time comes from cuda-sim's model of NCCL, not a GPU".into());
    }
    if opts.cupti {
        notes.push(format!(
            "CUPTI check: every stream synchronized after the warmup; per device, the NCCL kernels' span (first \
             start to last end) and busy time (summed durations) over the timed iterations on CUPTI's clock, the \
             longest device's / iterations; event ÷ gpu above 1 is event time with no kernel running; CUPTI's \
             {} records on (their cost is in every time of the run)",
            opts.kernel_records.cupti_name()
        ));
    }
    let skipped: Vec<String> = opts
        .collectives
        .iter()
        .filter_map(|c| {
            let n = opts.sizes().iter().filter(|&&b| c.shape(b, opts.dtype.size(), n).is_none()).count();
            (n > 0).then(|| format!("{c}: {n} sizes below one 16-byte block per rank"))
        })
        .collect();
    if !skipped.is_empty() {
        notes.push(format!("skipped (nothing to move): {}", skipped.join("; ")));
    }
    let summaries = summarize(&opts.collectives, &rows);
    Ok(NcclReport {
        schema: SCHEMA.into(),
        ranks: n,
        per_process,
        devices: devices.iter().map(|d| d.name().unwrap_or_else(|e| format!("unknown ({e})"))).collect(),
        ordinals: devices.iter().map(Device::ordinal).collect(),
        simulated,
        nccl,
        dtype: opts.dtype,
        warmup_iters: opts.warmup_iters,
        iters: opts.iters,
        check_iters: opts.check_iters,
        peer_peak_gbs: opts.peer_peak_gbs,
        blocking: opts.blocking,
        in_place: opts.in_place,
        graph: match opts.graph_launches {
            0 => "not measured in this run (eager; graph_launches, gpu-bench nccl --graph N, captures the timed \
                  iterations into one graph per device)"
                .into(),
            n => format!(
                "measured: the {} timed iterations of each size captured into one graph per device, every rank's \
                 graph launched {n} times; time = longest span / ({} × {n})",
                opts.iters, opts.iters
            ),
        },
        algorithm: algorithm_state(log.as_ref(), &rows),
        rows,
        summaries,
        notes,
    })
}

/// Where the rows' algorithms came from, or why they have none.
fn algorithm_state(log: Option<&algo::TuningLog>, rows: &[Row]) -> String {
    let Some(log) = log else {
        return "not read (no NCCL tuning log given)".into();
    };
    let named = rows.iter().filter(|r| r.algorithm.is_some()).count();
    match (log.path(), &log.error) {
        (_, Some(e)) if named == 0 => format!("not read: {e}"),
        (None, _) => "not reported: NCCL wrote no tuning log (cuda-sim's NCCL writes none)".into(),
        (Some(p), _) if log.lines == 0 => {
            format!("not reported: no tuning line in {} (NCCL_DEBUG_SUBSYS without TUNING?)", p.display())
        }
        (Some(p), _) => format!(
            "NCCL's tuning log (rank 0), {}: per row, the choice most of its calls made (algorithm/protocol, \
             channels), {named} of {} rows named (send/recv and all-to-all have none)",
            p.display(),
            rows.len()
        ),
    }
}

/// The NCCL gpu-sync uses here: the simulator's when it installed one, else
/// the loaded library's.
fn nccl_in_use() -> String {
    use gpu_sync::cuda_sys::nccl;
    match nccl::installed_nccl().map(Ok).unwrap_or_else(nccl::nccl) {
        Ok(t) => format!("{} ({})", nccl::nccl_version_string(t.version), t.origin),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Each collective's average and peak busbw.
fn summarize(collectives: &[Collective], rows: &[Row]) -> Vec<Summary> {
    collectives
        .iter()
        .filter_map(|&c| {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.collective == c).collect();
            let peak = mine.iter().max_by(|a, b| a.busbw_gbs.total_cmp(&b.busbw_gbs))?;
            Some(Summary {
                collective: c,
                avg_busbw_gbs: mine.iter().map(|r| r.busbw_gbs).sum::<f64>() / mine.len() as f64,
                peak_busbw_gbs: peak.busbw_gbs,
                peak_bytes: peak.bytes,
                rows: mine.len(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_are_nccl_tests() {
        assert_eq!(Collective::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllGather.bus_factor(4), 0.75);
        assert_eq!(Collective::ReduceScatter.bus_factor(8), 0.875);
        assert_eq!(Collective::AllToAll.bus_factor(2), 0.5);
        assert_eq!(Collective::Broadcast.bus_factor(8), 1.0);
        assert_eq!(Collective::SendRecv.bus_factor(8), 1.0);
    }

    #[test]
    fn shapes_round_per_rank_blocks_to_16_bytes() {
        // 8 B of f32 over 2 ranks: one element each, below a 16-byte block.
        assert_eq!(Collective::AllGather.shape(8, 4, 2), None);
        assert_eq!(Collective::AllReduce.shape(8, 4, 2), Some(Shape { count: 2, bytes: 8 }));
        // 1000 B of f32 over 3 ranks: 250 elements, 83 per rank, 80 kept.
        assert_eq!(Collective::ReduceScatter.shape(1000, 4, 3), Some(Shape { count: 80, bytes: 960 }));
        assert_eq!(Collective::AllToAll.shape(1 << 20, 1, 4), Some(Shape { count: 1 << 18, bytes: 1 << 20 }));
        assert_eq!(Collective::SendRecv.shape(7, 4, 2), Some(Shape { count: 1, bytes: 4 }));
    }

    #[test]
    fn rows_of_older_reports_read_without_an_algorithm() {
        let old = r#"{"collective":"all_reduce","bytes":8,"count":2,"time_us":1.0,"spread_pct":0.0,
            "algbw_gbs":0.008,"busbw_gbs":0.008,"wrong":0,"error":null}"#;
        let r: Row = serde_json::from_str(old).expect("an older row");
        assert_eq!((r.algorithm, r.launch), (None, Launch::Eager));
        let new =
            serde_json::to_string(&Row { algorithm: Some("RING/LL (1 ch)".into()), ..r }).expect("json");
        assert!(new.contains(r#""algorithm":"RING/LL (1 ch)""#), "{new}");
    }

    #[test]
    fn sizes_step_by_the_factor() {
        let o = NcclOptions { min_bytes: 8, max_bytes: 100, factor: 2, ..NcclOptions::default() };
        assert_eq!(o.sizes(), [8, 16, 32, 64]);
        let o = NcclOptions { min_bytes: 8, max_bytes: 8 << 30, factor: 4, ..NcclOptions::default() };
        assert_eq!(o.sizes().len(), 16);
        assert_eq!(NcclOptions { min_bytes: 9, max_bytes: 8, ..NcclOptions::default() }.sizes(), [0usize; 0]);
    }
}

//! What every subcommand shares: the driver and device, the kernels and
//! instruments, the settings, the progress bar, failures with their exit
//! codes, and host-clock sampling on the engine's one stopping rule.

use gpu_bench::{Instruments, Report, Settings, Timer};
use gpu_sync::{Device, DriverChoice, Stream};
use indicatif::{ProgressBar, ProgressStyle};
use kernels::Kernels;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// Why a subcommand failed; each maps to an exit code.
#[derive(Debug)]
pub enum Failure {
    /// No CUDA driver could be loaded.
    NoDriver(String),
    /// Bad arguments or input files.
    Usage(String),
    /// A measured kernel computed a wrong result: the figures mean nothing.
    Check(String),
    /// A driver or API error.
    Gpu(gpu_sync::Error),
    /// The timer could not measure what was asked (a mode unavailable here,
    /// CUPTI records that do not fit the runs).
    Bench(gpu_bench::Error),
    /// Writing the output.
    Io(String),
    /// A rank of `nccl --procs` failed, was killed or outlived its time
    /// (the error names it).
    Ranks(gpu_sync::nccl::SpawnError),
}

impl Failure {
    /// The process exit code (see the crate docs).
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::NoDriver(_) => crate::EXIT_NO_DRIVER,
            Failure::Usage(_) => crate::EXIT_USAGE,
            Failure::Check(_) => crate::EXIT_CHECK,
            Failure::Gpu(_) | Failure::Bench(_) | Failure::Io(_) | Failure::Ranks(_) => crate::EXIT_ERROR,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoDriver(m) => write!(
                f,
                "{m}\n(for a first look without a GPU: {} --driver sim; times are then simulated)",
                invoked_as()
            ),
            Failure::Usage(m) => write!(f, "{m}"),
            Failure::Check(m) => write!(f, "result check failed: {m}"),
            Failure::Gpu(e) => write!(f, "{e}"),
            Failure::Bench(e) => write!(f, "{e}"),
            Failure::Io(m) => write!(f, "{m}"),
            Failure::Ranks(e) => write!(f, "{e}"),
        }
    }
}

/// The variable through which a wrapper (`cargo xtask roofline`) tells
/// gpu-bench the command a user typed, so the no-driver hint names that
/// command instead of `gpu-bench roofline`.
pub const INVOKED_AS_ENV: &str = "GPU_BENCH_INVOKED_AS";

/// The subcommand being run, as parsed (set once by `main`), for hints.
pub static SUBCOMMAND: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The command to name in hints: [`INVOKED_AS_ENV`] when set, else
/// `gpu-bench` and the subcommand.
fn invoked_as() -> String {
    match (std::env::var(INVOKED_AS_ENV), SUBCOMMAND.get()) {
        (Ok(v), _) if !v.trim().is_empty() => v,
        (_, Some(sub)) => format!("gpu-bench {sub}"),
        _ => "gpu-bench".into(),
    }
}

impl From<gpu_bench::Error> for Failure {
    fn from(e: gpu_bench::Error) -> Failure {
        match e {
            gpu_bench::Error::Gpu(e) => Failure::Gpu(e),
            e => Failure::Bench(e),
        }
    }
}

impl From<gpu_sync::Error> for Failure {
    fn from(e: gpu_sync::Error) -> Failure {
        Failure::Gpu(e)
    }
}

/// A spinner on stderr with the current step, shown only while stdout is
/// a terminal (quiet in pipes, CI and the GPU bundle's logs).
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    fn new() -> Progress {
        let bar = if std::io::stdout().is_terminal() && std::io::stderr().is_terminal() {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b
        } else {
            ProgressBar::hidden()
        };
        Progress { bar }
    }

    /// Shows what runs now (and logs it at `info`).
    pub fn step(&self, msg: impl Into<String>) {
        let msg = msg.into();
        log::info!("{msg}");
        self.bar.set_message(msg);
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The context of one run.
pub struct Ctx {
    /// The device.
    pub device: Device,
    /// The workspace's kernels, loaded.
    pub kernels: Kernels,
    /// The instruments (clock probe, spin gate, mapped copy).
    pub bench: Arc<kernels::BenchKernels>,
    /// Sampling settings.
    pub settings: Settings,
    /// `--quick`.
    pub quick: bool,
    /// Whether the simulator runs it.
    pub sim: bool,
    /// The progress bar.
    pub progress: Progress,
}

impl Ctx {
    /// Loads the driver (`sim`: installs cuda-sim and registers the
    /// kernels' CPU references), gets the device, loads the kernels.
    ///
    /// # Errors
    /// [`Failure::NoDriver`] when libcuda cannot be loaded; a driver error.
    pub fn open(choice: DriverChoice, ordinal: i32, settings: Settings, quick: bool) -> Result<Ctx, Failure> {
        let backend = gpu_sync::select_driver_with(choice).map_err(|e| Failure::NoDriver(e.to_string()))?;
        let sim = backend.is_sim();
        if sim {
            kernels::register_sim_kernels();
        }
        crate::args::device_in_range(ordinal)?;
        let device = Device::get(ordinal)?;
        let kernels = Kernels::load(&device)?;
        let bench = Arc::new(kernels::BenchKernels::load(&device)?);
        Ok(Ctx { device, kernels, bench, settings, quick, sim, progress: Progress::new() })
    }

    /// The instruments as the engine takes them.
    pub fn instruments(&self) -> Arc<dyn Instruments> {
        self.bench.clone()
    }

    /// A timer for `stream` with the instruments.
    ///
    /// # Errors
    /// A driver error.
    pub fn timer(&self, stream: &Stream) -> Result<Timer, Failure> {
        Ok(Timer::new(stream, Some(self.instruments()))?)
    }

    /// An empty report titled `title` for this device and settings.
    ///
    /// # Errors
    /// A driver error reading the device's facts.
    pub fn report(&self, title: &str) -> Result<Report, Failure> {
        Ok(Report::new(title, gpu_bench::device_info(&self.device)?, self.settings))
    }

    /// SM cycles in `seconds` at `mhz`.
    pub fn cycles(seconds: f64, mhz: f64) -> u64 {
        (seconds * mhz * 1e6).round().max(1.0) as u64
    }
}

/// Fills the report's clock and resolution from `timer`.
pub fn finish_report(report: &mut Report, timer: &Timer) {
    report.clock = timer.clock();
    report.resolution = Some(timer.resolution().clone());
}

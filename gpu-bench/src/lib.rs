//! Measurement you can trust, for CUDA work driven through gpu-sync: a
//! timer a Rust user reaches for to time their own GPU code, as a PyTorch
//! user reaches for `torch.utils.benchmark` or `triton.testing.do_bench`.
//!
//! - [`Bench`] / [`Timer`] (`bench`): a closure given a
//!   [`gpu_sync::Stream`], timed in several [`Mode`]s side by side (first
//!   call, cold with the L2 flushed, hot, batch behind a spin gate, graph
//!   replay), with warmup until steady state, clock and resolution checks;
//! - [`stop`]: when to stop sampling — nvbench's shape with a robust noise
//!   of the median that converges, a drift check, and the rule that ended
//!   sampling named;
//! - [`stats`]: median, quartiles, IQR, mean, stdev, noise, outliers,
//!   bootstrap intervals;
//! - [`record`](mod@record): the data model — [`Unit`], [`Counter`],
//!   keyed [`Record`]s, the versioned [`Report`];
//! - [`compare`]: [`Compare`] tables (variants × parameters), regression
//!   verdicts between two reports with a confidence interval, A/A
//!   calibration and paired, interleaved A/B runs;
//! - [`render`]: markdown, CSV and JSON — renderers only format;
//! - [`info`]: the device facts every report carries;
//! - [`instruments`]: the clock probe and spin gate the engine uses (the
//!   `kernels` feature provides them);
//! - [`spans`]: one event pair per stream, read as per-device spans (the
//!   longest, the spread), for work over several devices;
//! - `overhead` (with the `kernels` feature): the launch-overhead method,
//!   raw driver launches and handoffs against gpu-sync's, interleaved batch
//!   by batch, gated or free-running.
//!
//! # Timing your own kernel
//! ```
//! use gpu_bench::{Bench, Mode, Settings, render};
//! use gpu_sync::{Device, DeviceBuffer, Stream};
//! # gpu_sync::sim::install().unwrap();
//! let device = Device::get(0)?;
//! let stream = Stream::new(&device)?;
//! let src = DeviceBuffer::<f32>::zeroed(&stream, 1 << 20)?;
//! let mut dst = DeviceBuffer::<f32>::zeroed(&stream, 1 << 20)?;
//! let record = Bench::new("copy 4 MiB")
//!     .bytes(2 * 4 << 20) // read + write
//!     .modes(&[Mode::Cold, Mode::Hot])
//!     .settings(Settings::quick())
//!     .run(&stream, |s| s.copy(&src, &mut dst))?;
//! let simulated = gpu_bench::device_info(&device)?.simulated; // headers say so
//! println!("{}", render::records_markdown(&[record], simulated));
//! # Ok::<(), gpu_bench::Error>(())
//! ```
//! A kernel of your own is the same: load it with
//! `gpu_sync::Module::load` and launch it inside the closure.
//!
//! # Timing several devices
//! [`Bench::run_streams`] times a closure given one timing stream per
//! stream you pass (on one device or several). What each time source can
//! tell there:
//! - **events** (hot, cold, batch): a start and an end event on every
//!   stream around each run, each stamped by its own device. Events of two
//!   devices cannot be subtracted (`cuEventElapsedTime` refuses events of
//!   two contexts), so a run's time is the *longest per-device span* —
//!   each stream's own start to its own end — and the record carries every
//!   stream's median span (mode counters `span of stream i (GPU d)`) and
//!   the spread, (longest − shortest) / longest (record counter `<mode>
//!   device spread`, in the counters table, CSV and JSON). The spans cannot
//!   tell when one device started relative to another, and a device that
//!   waits for another inside the run counts the wait in its span. Runs
//!   are back to back on each device: a device's span is its period, so a
//!   device that waits each run for another's longer work reads that
//!   work's time. With instruments (loaded for the first stream's device),
//!   every round is released at once by the first device's spin gate, the
//!   other timing streams waiting for it on the device.
//! - **CUPTI** (kernel): CUPTI's records of every timing stream, on
//!   CUPTI's one clock: a run is its first start to its last end over all
//!   devices, each run starting on every device once all finished the last
//!   one. Whether the devices' timestamps agree is checked and bounded:
//!   the counter `cross-device order slack` is negative (with a warning)
//!   only when a device seems to start before work it waited for ended, and
//!   `device j - device 0 clock, at least` / `at most` bound each device's
//!   clock against the first from both sides (the barrier's two directions).
//! - First-call and graph mode are refused over several streams
//!   ([`Error::Unavailable`]); one stream is exactly [`Bench::run`].
//!
//! In the profiler ([`profile`]), run one [`profile::Profiler`] per device
//! and [`profile::Trace::merge`] their traces: the Chrome trace shows each
//! device as a process "GPU n (name)" and the host as another; each
//! device-side wait of one stream for another's work (`Stream::wait_stream`,
//! an event wait, or the wait gpu-sync makes for a buffer used across
//! streams) is drawn as an arrow from the operation waited for to the one
//! that waited, across devices as within one. With the
//! events backend each device is aligned to the host clock on its own
//! (within its [`profile::ClockAlignment`]), so cross-device order in the
//! picture is as good as those alignments.
//!
//! ```
//! use gpu_bench::{Bench, Mode, Settings};
//! use gpu_sync::{Device, DeviceBuffer, Stream};
//! # gpu_sync::sim::install().unwrap();
//! let s0 = Stream::new(&Device::get(0)?)?;
//! let s1 = Stream::new(&Device::get(1)?)?;
//! let mut a = DeviceBuffer::<f32>::zeroed(&s0, 1 << 20)?;
//! let mut b = DeviceBuffer::<f32>::zeroed(&s1, 1 << 20)?;
//! let record = Bench::new("fill on two GPUs")
//!     .modes(&[Mode::Hot, Mode::Kernel])
//!     .settings(Settings::quick())
//!     .best_effort(true) // kernel mode needs CUPTI
//!     .run_streams(&[&s0, &s1], |s| {
//!         s[0].fill_u32(&mut a, 1)?;
//!         s[1].fill_u32(&mut b, 2)
//!     })?;
//! assert!(record.counter("hot device spread").is_some());
//! # Ok::<(), gpu_bench::Error>(())
//! ```
//!
//! The `gpu-bench` command-line tool (crate `gpu-bench-cli`) runs the
//! workspace's benchmarks on this engine.
#![deny(unsafe_code)]

pub mod bench;
mod clock;
pub mod compare;
pub mod error;
pub mod info;
pub mod instruments;
mod method;
mod multi;
pub mod nccl;
#[cfg(feature = "kernels")]
pub mod overhead;
pub mod p2p;
pub mod profile;
pub mod record;
pub mod render;
pub mod roofline;
pub mod settings;
pub mod spans;
pub mod stats;
pub mod stop;
pub mod timer;
pub mod warmup;

pub use bench::{Bench, KernelRecords, PROFILER_IDLE_S, Timer};
pub use clock::host;
pub use compare::{Compare, Verdict};
pub use error::{Error, Result};
pub use info::{ClockCheck, DeviceInfo, PcieLink, Resolution, device_info};
pub use instruments::{GateFlag, Instruments, SpinGate};
pub use record::{Counter, Mode, ModeResult, Record, Report, TimedBy, Unit, Warning};
pub use settings::Settings;
pub use stop::{Rule, StopReason};

/// The element counts `gpu-bench truth` times its memory kernels at (and
/// the `event_anatomy` example compares hot and graph mode with raw event
/// pairs at), each with its label: 1 Ki to 256 Mi, from one small block to
/// well past the L2.
pub const TRUTH_SIZES: [(usize, &str); 5] =
    [(1 << 10, "1Ki"), (1 << 15, "32Ki"), (1 << 20, "1Mi"), (1 << 25, "32Mi"), (1 << 28, "256Mi")];

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
pub mod nccl;
#[cfg(feature = "kernels")]
pub mod overhead;
pub mod p2p;
pub mod profile;
pub mod record;
pub mod render;
pub mod roofline;
pub mod settings;
pub mod stats;
pub mod stop;
pub mod timer;
pub mod warmup;

pub use bench::{Bench, Timer};
pub use clock::host;
pub use compare::{Compare, Verdict};
pub use error::{Error, Result};
pub use info::{ClockCheck, DeviceInfo, PcieLink, Resolution, device_info};
pub use instruments::{GateFlag, Instruments, SpinGate};
pub use record::{Counter, Mode, ModeResult, Record, Report, TimedBy, Unit, Warning};
pub use settings::Settings;
pub use stop::{Rule, StopReason};

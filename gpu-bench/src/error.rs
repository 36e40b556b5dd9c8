//! gpu-bench's error: a driver error from the work or the engine, a mode
//! that cannot run here (said, never silently dropped), or CUPTI.

use crate::record::Mode;

/// What can go wrong while measuring. `Debug` prints the `Display` text
/// (no variant name before it), so an error returned from `main` reads as
/// a sentence.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::{Bench, Error, Mode, Settings};
/// use gpu_sync::{Device, Stream};
/// let stream = Stream::new(&Device::get(0)?)?;
/// let bad = Settings { min_samples: 9, max_samples: 3, ..Settings::quick() };
/// let err = Bench::new("noop").settings(bad).run(&stream, |_| Ok(())).unwrap_err();
/// assert!(matches!(err, Error::Settings(_)));
/// assert!(format!("{err:?}").starts_with("invalid settings: ")); // no variant name
/// let skipped = Error::Unavailable { mode: Mode::Batch, why: "no instruments".into() };
/// assert_eq!(skipped.to_string(), "mode batch cannot run here: no instruments");
/// # Ok::<(), gpu_bench::Error>(())
/// ```
#[derive(thiserror::Error)]
pub enum Error {
    /// A driver error, from the timed work or from the engine's own calls.
    #[error(transparent)]
    Gpu(#[from] gpu_sync::Error),
    /// A requested mode cannot run here; ask for
    /// [`Bench::best_effort`](crate::Bench::best_effort) to have it skipped
    /// with a warning instead.
    #[error("mode {} cannot run here: {why}", mode.name())]
    Unavailable {
        /// The mode.
        mode: Mode,
        /// Why (no instruments loaded, no CUPTI, not capturable), with the
        /// cause's own message.
        why: String,
    },
    /// The sampling settings cannot be sampled with
    /// ([`Settings::validate`](crate::Settings::validate)).
    #[error("invalid settings: {0}")]
    Settings(String),
    /// The kernel-time source (CUPTI) failed while measuring.
    #[error("kernel mode: {0}")]
    Kernel(String),
    /// A measured operation produced wrong data: its figures mean nothing.
    #[error("result check failed: {0}")]
    Check(String),
    /// On the simulator, a mode's bandwidth above the simulated device's
    /// memory bandwidth, the fastest path the device model has for the
    /// work a benchmark declares bytes for: the declared bytes overstate
    /// what the work moves, or the simulator prices it wrong (a bug in its
    /// model or a kernel's cost). Either way the figure means nothing.
    #[error(
        "{benchmark} ({}): {rate_gbs:.1} GB/s on the simulator, above the simulated device's \
         {roof_gbs:.1} GB/s: the declared bytes overstate what the work moves, or the \
         simulator's cost model is wrong",
        mode.name()
    )]
    AboveSimulatedRoof {
        /// The benchmark's key.
        benchmark: String,
        /// The mode.
        mode: Mode,
        /// Its rate, GB/s.
        rate_gbs: f64,
        /// The simulated device's memory bandwidth, GB/s.
        roof_gbs: f64,
    },
    /// A picture could not be rendered (the SVG → PNG path).
    #[error("rendering: {0}")]
    Render(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

/// gpu-bench's result: [`Error`]'s example returns one.
pub type Result<T, E = Error> = std::result::Result<T, E>;

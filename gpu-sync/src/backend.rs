//! Which driver a program runs on: the real CUDA driver or the software
//! driver `cuda-sim` (feature `sim`), chosen by the program or by the
//! `GPU_SYNC_DRIVER` environment variable.
//!
//! gpu-sync loads the real driver (`libcuda.so.1`) on first use, unless
//! `GPU_SYNC_DRIVER` is set: then the first device use picks the driver it
//! names, as [`select_driver`] would. A program that should also run where
//! there is no GPU — an example, a CI job, a first look on a laptop — calls
//! [`select_driver`] once at start-up: it honours `GPU_SYNC_DRIVER` (`sim`,
//! `cuda`, or `auto`/unset: the GPU when the driver loads, else the
//! simulator).

use crate::error::{Error, Result};

/// The environment variable [`select_driver`] reads: `sim`, `cuda` or `auto`.
pub const DRIVER_ENV: &str = "GPU_SYNC_DRIVER";

/// The driver a program runs on.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::Backend;
/// // The driver chosen (or installed) is asked without loading anything.
/// assert_eq!(Backend::current(), Some(Backend::Sim));
/// assert!(Backend::Sim.is_sim());
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The software driver `cuda-sim` (feature `sim`).
    Sim,
    /// The real CUDA driver.
    Cuda,
}

impl Backend {
    /// Whether this is the simulator.
    pub fn is_sim(self) -> bool {
        self == Backend::Sim
    }

    /// The driver in use now, if one is loaded or installed (never loads).
    pub fn current() -> Option<Backend> {
        cuda_sys::installed().map(Backend::of)
    }

    /// Which driver `table` is, by its origin.
    fn of(table: &cuda_sys::Driver) -> Backend {
        if table.origin() == SIM_ORIGIN { Backend::Sim } else { Backend::Cuda }
    }
}

/// `cuda_sim::ORIGIN`, spelled here so [`Backend::current`] works without
/// the `sim` feature (a test with the feature checks they agree).
pub(crate) const SIM_ORIGIN: &str = "cuda-sim";

/// What a program asks for.
///
/// ```
/// use gpu_sync::{Backend, DriverChoice, select_driver_with};
/// // What GPU_SYNC_DRIVER holds, parsed; the empty string means `auto`.
/// assert_eq!("sim".parse::<DriverChoice>()?, DriverChoice::Sim);
/// assert_eq!("".parse::<DriverChoice>()?, DriverChoice::Auto);
/// assert!("gpu".parse::<DriverChoice>().is_err());
/// // A test that must run on the simulator whatever the machine has:
/// assert_eq!(select_driver_with(DriverChoice::Sim)?, Backend::Sim);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DriverChoice {
    /// The simulator; an error without the `sim` feature.
    Sim,
    /// The real driver; an error when it does not load.
    Cuda,
    /// The real driver when it loads, else the simulator (with the `sim`
    /// feature; without it, the load error).
    #[default]
    Auto,
}

impl std::str::FromStr for DriverChoice {
    type Err = Error;

    /// Parses `sim`, `cuda`, `auto` or the empty string (= `auto`).
    fn from_str(s: &str) -> Result<DriverChoice> {
        match s.trim() {
            "sim" => Ok(DriverChoice::Sim),
            "cuda" => Ok(DriverChoice::Cuda),
            "" | "auto" => Ok(DriverChoice::Auto),
            other => {
                Err(Error::DriverSelection(format!("{DRIVER_ENV}={other:?}: expected sim, cuda or auto")))
            }
        }
    }
}

impl DriverChoice {
    /// The choice `GPU_SYNC_DRIVER` names (unset: [`DriverChoice::Auto`]).
    ///
    /// # Errors
    /// [`Error::DriverSelection`] for any other value.
    pub fn from_env() -> Result<DriverChoice> {
        match std::env::var(DRIVER_ENV) {
            Ok(v) => v.parse(),
            Err(std::env::VarError::NotPresent) => Ok(DriverChoice::Auto),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(Error::DriverSelection(format!("{DRIVER_ENV}={v:?} is not UTF-8")))
            }
        }
    }
}

/// Picks the process's driver as `GPU_SYNC_DRIVER` says (see
/// [`select_driver_with`]); call it once at start-up, before any other
/// gpu-sync call. Calling it again returns the driver already chosen.
///
/// ```
/// let backend = gpu_sync::select_driver()?;
/// let device = gpu_sync::Device::get(0)?;
/// println!("{} on {backend:?}", device.name()?);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
///
/// # Errors
/// As [`select_driver_with`], and [`Error::DriverSelection`] for a value of
/// `GPU_SYNC_DRIVER` other than `sim`, `cuda` or `auto`.
pub fn select_driver() -> Result<Backend> {
    select_driver_with(DriverChoice::from_env()?)
}

/// At the first device use, a program that set `GPU_SYNC_DRIVER` but never
/// called [`select_driver`] gets the driver it named; without the variable
/// nothing changes (the real driver loads, as before). Decided once per
/// process.
///
/// # Errors
/// [`select_driver`]'s, when the variable names a driver that cannot be had
/// (the error says which variable asked for it).
pub(crate) fn honour_env_on_first_use() -> Result<()> {
    static DONE: std::sync::OnceLock<Result<()>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        if cuda_sys::installed().is_some() || std::env::var_os(DRIVER_ENV).is_none_or(|v| v.is_empty()) {
            return Ok(());
        }
        select_driver().map(|b| log::info!("{DRIVER_ENV} chose the {b:?} driver at the first device use"))
    })
    .clone()
}

/// Picks the process's driver: loads the real one (`cuda_sys::driver`,
/// which runs `cuInit`) or installs the simulator (`cuda_sim::install`).
/// When a driver is already in place it is kept and returned if it is what
/// `choice` allows.
///
/// # Errors
/// - [`Error::Load`] when `choice` is [`DriverChoice::Cuda`] (or `Auto`
///   without the `sim` feature) and the real driver does not load;
/// - [`Error::DriverSelection`] when the simulator is asked for without the
///   `sim` feature, or the other driver is already in use (a process has one
///   driver for its whole life).
pub fn select_driver_with(choice: DriverChoice) -> Result<Backend> {
    if let Some(current) = Backend::current() {
        return keep(choice, current);
    }
    // Another thread may put a driver in place between the check above and
    // the load below: `pick` reports the driver that is in place after it,
    // and `keep` checks it against `choice` again.
    keep(choice, pick(choice)?)
}

/// `current` if `choice` allows it, else the error that says why not.
fn keep(choice: DriverChoice, current: Backend) -> Result<Backend> {
    match (choice, current) {
        (DriverChoice::Auto, b)
        | (DriverChoice::Sim, b @ Backend::Sim)
        | (DriverChoice::Cuda, b @ Backend::Cuda) => Ok(b),
        (_, b) => Err(Error::DriverSelection(format!(
            "{choice:?} was asked for, but this process already uses the {b:?} driver"
        ))),
    }
}

/// Loads or installs the driver `choice` names, and returns the one in
/// place afterwards: `cuda_sys::driver` hands back whatever table another
/// thread installed meanwhile, the simulator included, so the backend is
/// read from the table's origin, never assumed from the call that got it.
fn pick(choice: DriverChoice) -> Result<Backend> {
    // Miri cannot open a shared library: the simulator it is.
    if cfg!(miri) && choice == DriverChoice::Auto {
        return install_sim();
    }
    match choice {
        DriverChoice::Sim => install_sim(),
        DriverChoice::Cuda => cuda_sys::driver().map(Backend::of).map_err(Error::Load),
        DriverChoice::Auto => match cuda_sys::driver() {
            Ok(d) => Ok(Backend::of(d)),
            Err(e) if cfg!(feature = "sim") => {
                log::info!("the CUDA driver does not load ({e}); using the simulator cuda-sim");
                install_sim()
            }
            Err(e) => Err(Error::Load(e)),
        },
    }
}

#[cfg(feature = "sim")]
fn install_sim() -> Result<Backend> {
    // `sim::install` is this call; made here so the driver door, below the
    // simulator's API in the layers, can choose it at first use.
    match cuda_sim::install() {
        Ok(_) => Ok(Backend::Sim),
        Err(e) => Err(Error::DriverSelection(format!("cannot install the simulator cuda-sim: {e}"))),
    }
}

#[cfg(not(feature = "sim"))]
fn install_sim() -> Result<Backend> {
    Err(Error::DriverSelection(
        "the simulator was asked for, but gpu-sync was built without its `sim` feature \
         (gpu-sync = { features = [\"sim\"] })"
            .into(),
    ))
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::*;

    #[test]
    fn origin_matches_cuda_sim() {
        assert_eq!(super::SIM_ORIGIN, cuda_sim::ORIGIN);
    }

    /// The race two test threads hit in CI: one thread installs the
    /// simulator after another found no driver in place; the late thread's
    /// `cuda_sys::driver` then returns the simulator's table, which was read
    /// as the real driver (so the examples skipped registering their CPU
    /// kernels and failed to find them). `pick` is the step after the
    /// check, run here with the simulator already in place.
    #[test]
    fn a_driver_installed_meanwhile_is_read_from_its_origin() {
        select_driver_with(DriverChoice::Sim).expect("the simulator");
        assert_eq!(pick(DriverChoice::Auto).expect("auto"), Backend::Sim);
        let e = pick(DriverChoice::Cuda)
            .and_then(|b| keep(DriverChoice::Cuda, b))
            .expect_err("cuda over the simulator");
        assert!(e.to_string().contains("already uses the Sim driver"), "{e}");
    }
}

#[cfg(test)]
mod text_tests {
    use super::DRIVER_ENV;
    use crate::error::Error;
    use cuda_sys::LoadError;

    /// `Error::Load`'s text writes the variable out (`error` sits below this
    /// module): it must name this one.
    #[test]
    fn the_no_driver_text_names_this_variable() {
        let e = Error::Load(LoadError::LibraryNotFound { tried: vec![] });
        assert!(e.to_string().contains(&format!("{DRIVER_ENV}=sim")), "{e}");
    }
}

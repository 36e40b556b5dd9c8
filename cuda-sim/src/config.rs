//! Process-wide configuration of the simulated machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex};

/// Environment variable that sets the number of simulated devices (when
/// [`configure`] is not called, or through [`Config::default`]).
pub const DEVICES_ENV: &str = "CUDA_SIM_DEVICES";

/// The simulated machine: how many devices, how much memory each, and the
/// CUDA version the driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Number of devices (`cuDeviceGetCount`); 0 makes `cuInit` fail with
    /// `CUDA_ERROR_NO_DEVICE`. Default: `$CUDA_SIM_DEVICES`, else 2.
    pub devices: u32,
    /// Device memory budget of each device in bytes (`cuDeviceTotalMem`,
    /// `cuMemGetInfo`); allocations beyond it fail with
    /// `CUDA_ERROR_OUT_OF_MEMORY`. Default: 16 GiB.
    pub memory_per_device: u64,
    /// What `cuDriverGetVersion` reports (`major * 1000 + minor * 10`).
    /// Default: 13000.
    pub version: i32,
}

/// The most devices the simulator models.
pub const MAX_DEVICES: u32 = 64;

impl Default for Config {
    fn default() -> Config {
        let devices = std::env::var(DEVICES_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|&n| n <= MAX_DEVICES)
            .unwrap_or(2);
        Config { devices, memory_per_device: 16 << 30, version: 13000 }
    }
}

/// Why [`configure`] refused a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `cuInit` has already run in this process; the machine is fixed.
    #[error("cuda-sim is already initialized (cuInit ran); configure it before the first cuInit")]
    AlreadyInitialized,
    /// A field is out of range.
    #[error("invalid cuda-sim configuration: {0}")]
    Invalid(&'static str),
}

/// Sets the simulated machine. Only allowed before the first `cuInit` of the
/// process (tests that need another machine run in their own test binary).
///
/// # Errors
/// [`ConfigError::AlreadyInitialized`] after `cuInit`;
/// [`ConfigError::Invalid`] for more than [`MAX_DEVICES`] devices, a zero
/// memory budget, or a version below 12000.
pub fn configure(config: Config) -> Result<(), ConfigError> {
    if config.devices > MAX_DEVICES {
        return Err(ConfigError::Invalid("more than 64 devices"));
    }
    if config.memory_per_device == 0 {
        return Err(ConfigError::Invalid("memory_per_device is 0"));
    }
    if config.version < 12000 {
        return Err(ConfigError::Invalid("version below 12000 (the table needs CUDA 12 entry points)"));
    }
    let mut c = CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    if FROZEN.load(Ordering::SeqCst) {
        return Err(ConfigError::AlreadyInitialized);
    }
    *c = config;
    Ok(())
}

/// The configuration in effect (or to take effect at the first `cuInit`).
pub fn current_config() -> Config {
    CONFIG.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The configuration, kept apart from the simulator state so that reading
/// it never waits for the state lock (host functions run under it).
static CONFIG: LazyLock<Mutex<Config>> = LazyLock::new(|| Mutex::new(Config::default()));
/// Set by the first `cuInit`: the configuration is final.
static FROZEN: AtomicBool = AtomicBool::new(false);

/// Makes the configuration final (at `cuInit`) and returns it.
pub(crate) fn freeze() -> Config {
    let c = CONFIG.lock().unwrap_or_else(|p| p.into_inner());
    FROZEN.store(true, Ordering::SeqCst);
    c.clone()
}

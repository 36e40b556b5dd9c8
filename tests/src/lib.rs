//! Shared setup of the integration tests: which driver they run against.
//!
//! `GPU_SYNC_DRIVER` picks it: `sim` (the software driver `cuda-sim`), `cuda`
//! (the real libcuda; a test fails if it cannot load), or unset/`auto` (the
//! real driver when it loads, else the simulator). CI has no GPU and runs on
//! the simulator; the GPU bundle sets `GPU_SYNC_DRIVER=cuda`.
//!
//! On the simulator every test runs in its own [`cuda_sim::Session`]
//! (seeded scheduler, race oracle, fault injection), and [`Ctx::finish`]
//! asserts the oracle saw no race: every test of the safe API is also a
//! check that gpu-sync's automatic synchronization is complete.

use gpu_sync::Device;
use std::sync::OnceLock;

pub mod logs;
pub mod program;
pub mod program_devices;
pub mod raw;

/// Environment variable choosing the driver.
pub use gpu_sync::DRIVER_ENV;

pub use gpu_sync::Backend;

/// Loads or installs the driver once per test process, through gpu-sync's
/// public [`gpu_sync::select_driver`] (the same choice a user's program
/// makes); on the simulator also registers the `kernels` crate's CPU
/// references.
pub fn backend() -> Backend {
    static BACKEND: OnceLock<Backend> = OnceLock::new();
    *BACKEND.get_or_init(|| {
        let backend = match gpu_sync::select_driver() {
            Ok(b) => b,
            Err(e) => panic!("{DRIVER_ENV}: {e}"),
        };
        if backend.is_sim() {
            kernels::register_sim_kernels();
        }
        backend
    })
}

/// The resident set of this process (`VmRSS` of `/proc/self/status`), in
/// MiB; NaN where that file cannot be read. The soaks print it.
pub fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Whether the tests run on the simulator.
pub fn on_sim() -> bool {
    backend() == Backend::Sim
}

/// One test's context: device 0 and, on the simulator, the test's session.
pub struct Ctx {
    /// Device 0.
    pub device: Device,
    /// The simulator session (`None` on a GPU).
    pub session: Option<gpu_sync::sim::Session>,
}

/// Sets up a test: picks the driver, opens a simulator session seeded with
/// `seed` (on a GPU the seed is unused), and gets device 0.
pub fn ctx(seed: u64) -> Ctx {
    let session = on_sim().then(|| match gpu_sync::sim::session(seed) {
        Ok(s) => s,
        Err(e) => panic!("simulator session: {e}"),
    });
    let device = match Device::get(0) {
        Ok(d) => d,
        Err(e) => panic!("device 0: {e}"),
    };
    Ctx { device, session }
}

impl Ctx {
    /// Ends the test: on the simulator, asserts that the race oracle saw no
    /// race, use-after-free or double free in this session.
    pub fn finish(self) {
        if let Some(s) = &self.session {
            let races = s.races();
            assert!(races.is_empty(), "the race oracle reported:\n{}", fmt_races(&races));
        }
    }

    /// Whether this test runs on the simulator.
    pub fn sim(&self) -> bool {
        self.session.is_some()
    }

    /// SM cycles in about `ms` milliseconds at the device's peak clock.
    pub fn cycles_for_ms(&self, ms: f64) -> u64 {
        let khz = self
            .device
            .attribute(cuda_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .unwrap_or(1_980_000);
        (f64::from(khz) * ms) as u64
    }
}

/// A process-wide lock for tests that plant an unsynchronized access and
/// expect the oracle to flag it: a device synchronization by a test running
/// beside them (every session's work completes, and every host learns of it)
/// could order the planted access, so such tests run one at a time.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Race reports, one per line.
pub fn fmt_races(races: &[cuda_sim::RaceReport]) -> String {
    races.iter().map(|r| format!("  {r}")).collect::<Vec<_>>().join("\n")
}

/// Aborts the test process with a message unless dropped within `secs`
/// seconds: a deadlock fails the run instead of hanging it. The body runs on
/// the test's own thread (where the simulator session is current); abort,
/// not a panic, because a hung thread may hold the simulator's global lock
/// and would hang every later test of the binary too.
pub struct Watchdog(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Watchdog {
    /// Arms a watchdog for `what`, firing after `secs` seconds.
    pub fn arm(secs: u64, what: &'static str) -> Watchdog {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = done.clone();
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            while std::time::Instant::now() < deadline {
                if seen.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // Straight to the process's stderr: the test harness's capture
            // of `eprintln!` would be lost with the abort.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "watchdog: {what}: no return within {secs} s (deadlock)");
            std::process::abort();
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Devices `0..n`, or `None` (and a note on stderr) when the machine has
/// fewer: the tests of several devices skip, saying why.
pub fn devices(n: i32) -> Option<Vec<gpu_sync::Device>> {
    let count = match gpu_sync::Device::count() {
        Ok(c) => c,
        Err(e) => panic!("Device::count: {e}"),
    };
    if count < usize::try_from(n).unwrap_or(usize::MAX) {
        eprintln!("{count} device(s), {n} needed: nothing to test");
        return None;
    }
    Some(
        (0..n)
            .map(|i| match gpu_sync::Device::get(i) {
                Ok(d) => d,
                Err(e) => panic!("device {i}: {e}"),
            })
            .collect(),
    )
}

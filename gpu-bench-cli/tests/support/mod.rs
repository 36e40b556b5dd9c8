//! What the CLI's integration tests share.

use std::path::PathBuf;

/// The `gpu-bench` binary the tests run: `GPU_BENCH_BIN` when it is set,
/// else the one Cargo built beside the test. The GPU bundle's `run.sh`
/// (and `docs/results/scripts/device-call.sh`) set it to the bundle's copy:
/// a test binary carried to the GPU machine names a path of the build
/// machine, which is not there.
pub fn gpu_bench() -> PathBuf {
    std::env::var_os("GPU_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_gpu-bench")), PathBuf::from)
}

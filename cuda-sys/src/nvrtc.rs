//! NVRTC, the CUDA C++ run-time compiler: `libnvrtc` loaded at run time like
//! libcuda, so building needs no CUDA toolkit.
//!
//! [`nvrtc`] loads it once per process from, in order: the path in
//! `CUDA_SYS_LIBNVRTC`; the pinned `nvidia-cuda-nvrtc` wheel under this
//! workspace's `target/cuda-wheels/` (installed by `cargo xtask bindgen`);
//! the dynamic loader's path (`libnvrtc.so.13`, then `libnvrtc.so`). The
//! function table and types are generated (`nvrtc_bindings.rs`).

use crate::nvrtc_bindings::{NvrtcLib, nvrtcResult};
use std::sync::OnceLock;

/// Environment variable naming the libnvrtc to load.
pub const LIBNVRTC_ENV: &str = "CUDA_SYS_LIBNVRTC";

/// The pinned wheel's library, where `cargo xtask bindgen` installs it in
/// this workspace (a development convenience; deployed programs use the
/// environment variable or the loader path).
const WHEEL_LIB: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../target/cuda-wheels/nvidia/cu13/lib/libnvrtc.so.13");

/// Library names tried on the dynamic loader's path.
const SONAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so"];

/// libnvrtc could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "could not load NVRTC (libnvrtc.so.13): {}. Install it — `pip install nvidia-cuda-nvrtc==13.0.88` \
     (or `cargo xtask bindgen`, which installs it under target/cuda-wheels/), or the CUDA toolkit — \
     and set {} to the library's path",
    tried.iter().map(|(p, e)| format!("tried {p} ({e})")).collect::<Vec<_>>().join(", "),
    LIBNVRTC_ENV
)]
pub struct NvrtcLoadError {
    /// Each path tried, with the loader's message for it.
    pub tried: Vec<(String, String)>,
}

/// The candidates [`nvrtc`] tries, in order.
pub fn nvrtc_candidates() -> Vec<String> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os(LIBNVRTC_ENV) {
        c.push(p.to_string_lossy().into_owned());
    }
    c.push(WHEEL_LIB.to_owned());
    c.extend(SONAMES.iter().map(|s| (*s).to_owned()));
    c
}

/// Loads libnvrtc from the first of `candidates` that opens and has every
/// NVRTC entry point of the 13.0 header.
///
/// # Errors
/// [`NvrtcLoadError`] listing each candidate and why it failed.
pub fn load_nvrtc(candidates: &[String]) -> Result<NvrtcLib, NvrtcLoadError> {
    let mut tried = Vec::new();
    for path in candidates {
        preload_builtins(path);
        // SAFETY: opening libnvrtc runs its initializers, which have no
        // preconditions; `NvrtcLib` resolves each symbol with the signature
        // nvrtc.h declares (generated from the pinned header), and keeps the
        // library loaded as long as the table lives.
        match unsafe { NvrtcLib::new(path) } {
            Ok(lib) => return Ok(lib),
            Err(e) => tried.push((path.clone(), e.to_string())),
        }
    }
    Err(NvrtcLoadError { tried })
}

/// libnvrtc opens `libnvrtc-builtins.so.13.0` by name at compile time; a
/// libnvrtc loaded by full path (the wheel's folder is not on the loader
/// path) would not find it. Loading the one beside it first makes that
/// name resolve to the already loaded library.
fn preload_builtins(path: &str) {
    let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) else {
        return;
    };
    let builtins = dir.join("libnvrtc-builtins.so.13.0");
    if builtins.exists() {
        // SAFETY: the builtins library has no initializer preconditions and
        // is only loaded here, never called through this handle.
        if let Ok(lib) = unsafe { libloading::Library::new(&builtins) } {
            // Kept loaded for the process: libnvrtc refers to it by name.
            std::mem::forget(lib);
        }
    }
}

/// The process-wide NVRTC table, loaded on first use (see the module docs).
///
/// # Errors
/// [`NvrtcLoadError`]; a failed load is retried on the next call.
pub fn nvrtc() -> Result<&'static NvrtcLib, NvrtcLoadError> {
    static NVRTC: OnceLock<NvrtcLib> = OnceLock::new();
    if let Some(l) = NVRTC.get() {
        return Ok(l);
    }
    let lib = load_nvrtc(&nvrtc_candidates())?;
    Ok(NVRTC.get_or_init(|| lib))
}

/// The name of an `nvrtcResult` (`NVRTC_ERROR_COMPILATION`), without a call
/// into the library.
pub fn nvrtc_result_name(r: nvrtcResult) -> &'static str {
    match r.0 {
        0 => "NVRTC_SUCCESS",
        1 => "NVRTC_ERROR_OUT_OF_MEMORY",
        2 => "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "NVRTC_ERROR_INVALID_INPUT",
        4 => "NVRTC_ERROR_INVALID_PROGRAM",
        5 => "NVRTC_ERROR_INVALID_OPTION",
        6 => "NVRTC_ERROR_COMPILATION",
        7 => "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        8 => "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        9 => "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        10 => "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        11 => "NVRTC_ERROR_INTERNAL_ERROR",
        12 => "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
        13 => "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
        14 => "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
        15 => "NVRTC_ERROR_PCH_CREATE",
        16 => "NVRTC_ERROR_CANCELLED",
        17 => "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
        _ => "NVRTC_ERROR_UNKNOWN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_what_to_install() {
        let err = match load_nvrtc(&["/nonexistent/libnvrtc.so.13".to_owned()]) {
            Ok(_) => panic!("a library that does not exist loaded"),
            Err(e) => e,
        };
        assert_eq!(err.tried.len(), 1);
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/libnvrtc.so.13"), "{msg}");
        assert!(msg.contains("nvidia-cuda-nvrtc==13.0.88") && msg.contains(LIBNVRTC_ENV), "{msg}");
    }

    #[test]
    fn result_names_match_the_header() {
        use crate::nvrtc_bindings::nvrtcResult as R;
        assert_eq!(nvrtc_result_name(R::NVRTC_SUCCESS), "NVRTC_SUCCESS");
        assert_eq!(nvrtc_result_name(R::NVRTC_ERROR_COMPILATION), "NVRTC_ERROR_COMPILATION");
        assert_eq!(nvrtc_result_name(R::NVRTC_ERROR_CANCELLED), "NVRTC_ERROR_CANCELLED");
    }
}

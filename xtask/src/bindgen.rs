//! `cargo xtask bindgen`: regenerates `cuda-sys/src/bindings.rs` (types and
//! function-pointer typedefs) and `cuda-sys/src/entry_points.rs` (the list the
//! loader resolves) from the pinned CUDA 13.0 `cuda.h` / `cudaTypedefs.h`.
//!
//! bindgen and libclang are needed only here, never by a normal build. Without
//! the `codegen` feature this task re-runs xtask with it, so everyday xtask
//! runs (CI's `kernels --check`) do not compile bindgen.

use anyhow::Result;

#[cfg(any(feature = "codegen", test))]
/// Entry points the workspace uses, by base name. An optional ABI version pins
/// an older signature where CUDA 13.0 introduced a new one that older drivers
/// lack (13.0's `cuCtxSynchronize(CUcontext)` vs the classic `cuCtxSynchronize(void)`).
pub const ENTRY_POINTS: &[(&str, Option<u32>)] = &[
    ("cuGetErrorName", None),
    ("cuGetErrorString", None),
    ("cuInit", None),
    ("cuDriverGetVersion", None),
    ("cuDeviceGet", None),
    ("cuDeviceGetCount", None),
    ("cuDeviceGetName", None),
    ("cuDeviceGetAttribute", None),
    ("cuDeviceTotalMem", None),
    ("cuDeviceGetUuid", None),
    ("cuDeviceGetPCIBusId", None),
    ("cuDeviceCanAccessPeer", None),
    ("cuDeviceGetDefaultMemPool", None),
    ("cuDevicePrimaryCtxRetain", None),
    ("cuDevicePrimaryCtxRelease", None),
    ("cuCtxSetCurrent", None),
    ("cuCtxGetCurrent", None),
    ("cuCtxGetDevice", Some(2000)),
    ("cuCtxSynchronize", Some(2000)),
    ("cuCtxGetStreamPriorityRange", None),
    ("cuCtxEnablePeerAccess", None),
    ("cuStreamCreateWithPriority", None),
    ("cuStreamDestroy", None),
    ("cuStreamQuery", None),
    ("cuStreamSynchronize", None),
    ("cuStreamWaitEvent", None),
    ("cuStreamGetPriority", None),
    ("cuStreamGetFlags", None),
    ("cuLaunchHostFunc", None),
    ("cuStreamBeginCapture", None),
    ("cuStreamEndCapture", None),
    ("cuStreamIsCapturing", None),
    ("cuEventCreate", None),
    ("cuEventDestroy", None),
    ("cuEventRecord", None),
    ("cuEventQuery", None),
    ("cuEventSynchronize", None),
    ("cuEventElapsedTime", None),
    ("cuMemAlloc", None),
    ("cuMemFree", None),
    ("cuMemAllocAsync", None),
    ("cuMemFreeAsync", None),
    ("cuMemGetInfo", None),
    ("cuMemHostAlloc", None),
    ("cuMemFreeHost", None),
    ("cuMemHostGetDevicePointer", None),
    ("cuMemcpyHtoDAsync", None),
    ("cuMemcpyDtoHAsync", None),
    ("cuMemcpyDtoDAsync", None),
    ("cuMemcpyPeerAsync", None),
    ("cuMemsetD8Async", None),
    ("cuMemsetD32Async", None),
    ("cuMemPoolGetAttribute", None),
    ("cuMemPoolSetAttribute", None),
    ("cuMemPoolTrimTo", None),
    ("cuModuleLoadData", None),
    ("cuModuleUnload", None),
    ("cuModuleGetFunction", None),
    ("cuFuncGetParamInfo", None),
    ("cuFuncGetAttribute", None),
    ("cuFuncSetAttribute", None),
    ("cuFuncGetName", None),
    ("cuLaunchKernel", None),
    ("cuGraphInstantiateWithFlags", None),
    ("cuGraphLaunch", None),
    ("cuGraphDestroy", None),
    ("cuGraphExecDestroy", None),
    ("cuGraphGetNodes", None),
];

#[cfg(any(feature = "codegen", test))]
/// One versioned typedef: `PFN_<name>_v<version>` with its parameter text.
#[derive(Debug, Clone)]
struct Typedef {
    version: u32,
    params: String,
}

#[cfg(any(feature = "codegen", test))]
/// The chosen ABI of one entry point.
#[derive(Debug)]
pub struct Chosen {
    /// Base name (`cuMemAlloc`).
    pub name: String,
    /// The typedef bound (`PFN_cuMemAlloc_v3020`).
    pub typedef: String,
    /// First CUDA version whose `name` has exactly this signature.
    pub since: u32,
    /// Version to pass to `cuGetProcAddress` at most (just before the next ABI).
    pub request_at_most: u32,
}

#[cfg(any(feature = "codegen", test))]
/// Picks each entry point's ABI from the `cudaTypedefs.h` text.
pub fn choose(typedefs_h: &str, cuda_version: u32) -> Result<Vec<Chosen>> {
    use std::collections::BTreeMap;
    let mut by_name: BTreeMap<String, Vec<Typedef>> = BTreeMap::new();
    for line in typedefs_h.lines() {
        let Some(rest) = line.trim().strip_prefix("typedef CUresult (CUDAAPI *PFN_") else {
            continue;
        };
        let Some((head, tail)) = rest.split_once(")(") else { continue };
        if head.ends_with("_ptds") || head.ends_with("_ptsz") {
            continue;
        }
        let Some((name, ver)) = head.rsplit_once("_v") else { continue };
        let Ok(version) = ver.parse::<u32>() else { continue };
        let params = tail.trim_end_matches(';').trim_end_matches(')').to_owned();
        by_name.entry(name.to_owned()).or_default().push(Typedef { version, params });
    }
    let mut out = Vec::new();
    for (name, pinned) in ENTRY_POINTS {
        let Some(list) = by_name.get_mut(*name) else {
            anyhow::bail!("cudaTypedefs.h has no PFN_{name}_v* typedef");
        };
        list.sort_by_key(|t| t.version);
        let idx = match pinned {
            Some(v) => list
                .iter()
                .position(|t| t.version == *v)
                .ok_or_else(|| anyhow::anyhow!("PFN_{name}_v{v} is not in cudaTypedefs.h"))?,
            None => list.len() - 1,
        };
        let chosen = &list[idx];
        // Walk back while older versions share the exact signature.
        let mut first = idx;
        while first > 0 && list[first - 1].params == chosen.params {
            first -= 1;
        }
        let next_abi = list[idx + 1..].iter().find(|t| t.params != chosen.params);
        let request_at_most = match next_abi {
            Some(t) => t.version - 1,
            None => cuda_version,
        };
        out.push(Chosen {
            name: (*name).to_owned(),
            typedef: format!("PFN_{name}_v{}", chosen.version),
            since: list[first].version,
            request_at_most,
        });
    }
    Ok(out)
}

/// Runs the task (re-running xtask with the `codegen` feature if needed).
pub fn run() -> Result<()> {
    #[cfg(feature = "codegen")]
    {
        generate::generate()
    }
    #[cfg(not(feature = "codegen"))]
    {
        crate::util::run(
            std::process::Command::new(crate::util::cargo()).current_dir(crate::util::root()).args([
                "run",
                "--quiet",
                "--package",
                "xtask",
                "--features",
                "codegen",
                "--",
                "bindgen",
            ]),
        )
    }
}

#[cfg(feature = "codegen")]
mod generate {
    use super::choose;
    use crate::util::{root, sha256_hex};
    use crate::wheels;
    use anyhow::{Context, Result, bail};
    use std::fmt::Write as _;

    /// `cc -print-file-name=include`: the compiler's builtin header folder.
    fn compiler_include_dir() -> Option<std::path::PathBuf> {
        let compiler = cc::Build::new()
            .opt_level(0)
            .target("x86_64-unknown-linux-gnu")
            .host("x86_64-unknown-linux-gnu")
            .cargo_metadata(false)
            .try_get_compiler()
            .ok()?;
        let out =
            std::process::Command::new(compiler.path()).arg("-print-file-name=include").output().ok()?;
        let dir = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
        dir.join("stddef.h").exists().then_some(dir)
    }

    pub fn generate() -> Result<()> {
        let home = wheels::ensure(&["nvidia-cuda-runtime"])?;
        let include = home.join("include");
        let cuda_h = std::fs::read(include.join("cuda.h")).context("reading cuda.h")?;
        let typedefs_path = include.join("cudaTypedefs.h");
        let typedefs_h = std::fs::read_to_string(&typedefs_path).context("reading cudaTypedefs.h")?;
        let cuda_version = std::str::from_utf8(&cuda_h)?
            .lines()
            .find_map(|l| l.strip_prefix("#define CUDA_VERSION "))
            .and_then(|v| v.trim().parse::<u32>().ok())
            .context("cuda.h has no CUDA_VERSION")?;
        let chosen = choose(&typedefs_h, cuda_version)?;

        if let Err(e) = clang_sys::load() {
            bail!(
                "libclang could not be loaded ({e}); bindgen needs it only for this task. \
                 Install it: `apt install libclang1-14` (Debian 12) or `libclang-dev`, \
                 or point LIBCLANG_PATH at libclang.so"
            );
        }

        let mut builder = bindgen::Builder::default()
            .header(typedefs_path.to_string_lossy())
            .clang_arg(format!("-I{}", include.display()));
        // libclang without its resource headers (Debian's libclang1 alone)
        // lacks stddef.h; the host C compiler's own include dir has it.
        if let Some(dir) = compiler_include_dir() {
            builder = builder.clang_arg(format!("-isystem{}", dir.display()));
        }
        builder = builder
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .derive_default(true)
            .derive_eq(true)
            .derive_hash(true)
            .layout_tests(false)
            .generate_comments(false)
            .use_core()
            .prepend_enum_name(false)
            .allowlist_var("CUDA_VERSION")
            .allowlist_var("CU_MEMHOSTALLOC_.*")
            .allowlist_var("CU_EVENT_.*")
            .allowlist_type("CUresult")
            .allowlist_type("CUdevice_attribute")
            .allowlist_type("CUdriverProcAddress_flags")
            .allowlist_type("CUdriverProcAddressQueryResult")
            .allowlist_type("CUstream_flags")
            .allowlist_type("CUevent_flags")
            .allowlist_type("CUevent_wait_flags")
            .allowlist_type("CUevent_record_flags")
            .allowlist_type("CUmemPool_attribute")
            .allowlist_type("CUstreamCaptureMode")
            .allowlist_type("CUstreamCaptureStatus")
            .allowlist_type("CUfunction_attribute")
            .allowlist_type("CUgraphInstantiate_flags")
            .allowlist_type("CUhostFn")
            .allowlist_type("CUdevice")
            .allowlist_type("CUdeviceptr")
            // The loader's own bootstrap entry point, taken by dlsym.
            .allowlist_type("PFN_cuGetProcAddress_v12000");
        for c in &chosen {
            builder = builder.allowlist_type(&c.typedef);
        }
        let bindings = builder.generate().map_err(|e| anyhow::anyhow!("bindgen failed: {e}"))?.to_string();

        let header_hash = sha256_hex(&cuda_h);
        let typedefs_hash = sha256_hex(typedefs_h.as_bytes());
        let banner = format!(
            "// Generated by `cargo xtask bindgen` from the CUDA {v} headers (PyPI wheel\n\
             // nvidia-cuda-runtime=={w}: cuda.h sha256 {header_hash},\n\
             // cudaTypedefs.h sha256 {typedefs_hash}). Do not edit.\n",
            v = crate::wheels::CUDA_WHEEL_VERSION,
            w = crate::wheels::CUDA_WHEEL_VERSION,
        );
        let out = root().join("cuda-sys").join("src");
        std::fs::write(out.join("bindings.rs"), format!("{banner}\n{bindings}"))?;

        let mut list = String::new();
        writeln!(list, "{banner}")?;
        writeln!(list, "// Each row: field (driver base name), bound typedef, first CUDA version with")?;
        writeln!(list, "// that exact signature, highest version to ask cuGetProcAddress for.")?;
        writeln!(list, "driver_table! {{")?;
        for c in &chosen {
            writeln!(list, "    {}: {} = {}, {};", c.name, c.typedef, c.since, c.request_at_most)?;
        }
        writeln!(list, "}}")?;
        std::fs::write(out.join("entry_points.rs"), list)?;

        // Result names, for messages when no driver is loaded to ask.
        let mut names = String::new();
        writeln!(names, "{banner}")?;
        writeln!(names, "/// Every `CUresult` value named in the headers, with its name.")?;
        writeln!(names, "pub(crate) const RESULT_NAMES: &[(u32, &str)] = &[")?;
        for line in bindings.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("pub const ") else { continue };
            let Some((name, value)) = rest.split_once(": cudaError_enum = cudaError_enum(") else {
                continue;
            };
            let value = value.trim_end_matches(");");
            writeln!(names, "    ({value}, \"{name}\"),")?;
        }
        writeln!(names, "];")?;
        std::fs::write(out.join("result_names.rs"), names)?;
        eprintln!("wrote cuda-sys/src/bindings.rs and entry_points.rs ({} entry points)", chosen.len());
        generate_nvrtc()
    }

    /// `cuda-sys/src/nvrtc_bindings.rs`: NVRTC's types and a run-time
    /// loaded function table (bindgen's `dynamic_library_name`, over
    /// libloading) from the pinned `nvidia-cuda-nvrtc` wheel's `nvrtc.h`.
    fn generate_nvrtc() -> Result<()> {
        let home = wheels::ensure(&["nvidia-cuda-runtime", "nvidia-cuda-nvrtc"])?;
        let header = home.join("include").join("nvrtc.h");
        let nvrtc_h = std::fs::read(&header).context("reading nvrtc.h (wheel nvidia-cuda-nvrtc)")?;
        let mut builder = bindgen::Builder::default().header(header.to_string_lossy());
        if let Some(dir) = compiler_include_dir() {
            builder = builder.clang_arg(format!("-isystem{}", dir.display()));
        }
        let bindings = builder
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .derive_default(true)
            .derive_eq(true)
            .derive_hash(true)
            .layout_tests(false)
            .generate_comments(false)
            .prepend_enum_name(false)
            .allowlist_function("nvrtc.*")
            .allowlist_type("nvrtcResult")
            .allowlist_type("nvrtcProgram")
            .dynamic_library_name("NvrtcLib")
            .dynamic_link_require_all(true)
            .generate()
            .map_err(|e| anyhow::anyhow!("bindgen failed on nvrtc.h: {e}"))?
            .to_string();
        let banner = format!(
            "// Generated by `cargo xtask bindgen` from nvrtc.h of the PyPI wheel\n\
             // nvidia-cuda-nvrtc=={w} (sha256 {hash}). Do not edit.\n",
            w = crate::wheels::CUDA_WHEEL_VERSION,
            hash = sha256_hex(&nvrtc_h),
        );
        let out = root().join("cuda-sys").join("src").join("nvrtc_bindings.rs");
        std::fs::write(&out, format!("{banner}\n{bindings}"))?;
        eprintln!("wrote cuda-sys/src/nvrtc_bindings.rs");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::choose;

    const SAMPLE: &str = "\
typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v2000)(void);
typedef CUresult (CUDAAPI *PFN_cuCtxSynchronize_v13000)(CUcontext ctx);
typedef CUresult (CUDAAPI *PFN_cuEventElapsedTime_v2000)(float *pMilliseconds, CUevent hStart, CUevent hEnd);
typedef CUresult (CUDAAPI *PFN_cuEventElapsedTime_v12080)(float *pMilliseconds, CUevent hStart, CUevent hEnd);
typedef CUresult (CUDAAPI *PFN_cuStreamWaitEvent_v7000_ptsz)(CUstream hStream, CUevent hEvent, unsigned int Flags);
typedef CUresult (CUDAAPI *PFN_cuStreamWaitEvent_v3020)(CUstream hStream, CUevent hEvent, unsigned int Flags);
";

    #[test]
    fn picks_the_newest_abi_and_the_first_version_with_its_signature() {
        // Only the three names above matter; the rest of ENTRY_POINTS is
        // missing from the sample, so check the error names the first one.
        let err = choose(SAMPLE, 13000).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("PFN_cuGetErrorName"), "{err}");
        let full: String = super::ENTRY_POINTS
            .iter()
            .filter(|(n, _)| !SAMPLE.contains(&format!("PFN_{n}_v")))
            .map(|(n, _)| format!("typedef CUresult (CUDAAPI *PFN_{n}_v2000)(void);\n"))
            .collect::<String>()
            + SAMPLE;
        let chosen = choose(&full, 13000).expect("complete sample");
        let get = |n: &str| chosen.iter().find(|c| c.name == n).expect(n);
        let elapsed = get("cuEventElapsedTime");
        assert_eq!(elapsed.typedef, "PFN_cuEventElapsedTime_v12080");
        assert_eq!((elapsed.since, elapsed.request_at_most), (2000, 13000));
        // Pinned to the classic ABI, and never asked for at 13.0.
        let sync = get("cuCtxSynchronize");
        assert_eq!(sync.typedef, "PFN_cuCtxSynchronize_v2000");
        assert_eq!((sync.since, sync.request_at_most), (2000, 12999));
        // _ptsz variants are never bound.
        assert_eq!(get("cuStreamWaitEvent").typedef, "PFN_cuStreamWaitEvent_v3020");
    }
}

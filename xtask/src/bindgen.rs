//! `cargo xtask bindgen [--check]`: regenerates `cuda-sys/src/generated/`
//! from the pinned CUDA 13.0 headers: `bindings.rs` (types and
//! function-pointer typedefs), `entry_points.rs` (the one entry-point list,
//! as the `for_each_entry_point!` macro the loader, `Driver::missing` and
//! cuda-sim's table expand), `result_names.rs`, `nvrtc_bindings.rs`,
//! `cupti_bindings.rs` (CUPTI's activity types and one `PFN_` typedef per
//! function the table uses, from the pinned `nvidia-cuda-cupti` wheel),
//! `nccl_bindings.rs` (NCCL's types, `NCCL_CONFIG_INITIALIZER` and one `PFN_`
//! typedef per function the table uses, from the pinned `nvidia-nccl-cu13`
//! wheel; see `bindgen/nccl.rs`), and `MANIFEST` (the sha256 of each, checked by a cuda-sys unit test so a hand
//! edit fails `cargo test`). `--check` regenerates into a temporary folder and
//! fails when any committed file differs (stale or hand-edited).
//!
//! bindgen and libclang are needed only here, never by a normal build. Without
//! the `codegen` feature this task re-runs xtask with it, so everyday xtask
//! runs (CI's `kernels --check`) do not compile bindgen.

use anyhow::Result;

#[cfg(any(feature = "codegen", test))]
pub mod nccl;

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
    ("cuDeviceGetP2PAttribute", None),
    ("cuDeviceGetDefaultMemPool", None),
    ("cuDevicePrimaryCtxRetain", None),
    ("cuDevicePrimaryCtxRelease", None),
    ("cuCtxSetCurrent", None),
    ("cuCtxGetCurrent", None),
    ("cuCtxGetDevice", Some(2000)),
    ("cuCtxSynchronize", Some(2000)),
    ("cuCtxGetStreamPriorityRange", None),
    ("cuCtxEnablePeerAccess", None),
    ("cuCtxDisablePeerAccess", None),
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
    ("cuEventRecordWithFlags", None),
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
    ("cuMemPoolSetAccess", None),
    ("cuMemPoolGetAccess", None),
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

#[cfg(any(feature = "codegen", test))]
/// The folder of generated files, relative to the workspace root.
pub const GENERATED_DIR: &str = "cuda-sys/src/generated";

#[cfg(any(feature = "codegen", test))]
/// The manifest's name inside [`GENERATED_DIR`].
pub const MANIFEST: &str = "MANIFEST";

#[cfg(any(feature = "codegen", test))]
/// The generated files, in the order the manifest lists them.
pub const GENERATED_FILES: &[&str] = &[
    "bindings.rs",
    "entry_points.rs",
    "result_names.rs",
    "nvrtc_bindings.rs",
    "cupti_bindings.rs",
    "nccl_bindings.rs",
];

#[cfg(any(feature = "codegen", test))]
/// The text of `MANIFEST` for these `(file, contents)` pairs: a header and
/// one `<sha256>  <file>` line each (the format of `sha256sum`).
pub fn manifest(files: &[(&str, &[u8])]) -> String {
    let mut m = String::from(
        "# Generated by `cargo xtask bindgen`. Do not edit.\n\
         # sha256 of each generated file; cuda-sys's unit test `generated_files_match_the_manifest`\n\
         # fails when a file differs (hand-edited), `cargo xtask bindgen --check` when one is stale.\n",
    );
    for (name, bytes) in files {
        m.push_str(&format!("{}  {name}\n", crate::util::sha256_hex(bytes)));
    }
    m
}

/// Runs the task (re-running xtask with the `codegen` feature if needed):
/// writes `cuda-sys/src/generated` (`GENERATED_DIR`), or with `check` regenerates into a temporary
/// folder and fails naming each committed file that differs.
pub fn run(check: bool) -> Result<()> {
    #[cfg(feature = "codegen")]
    {
        if check { generate::check() } else { generate::generate(&crate::util::root().join(GENERATED_DIR)) }
    }
    #[cfg(not(feature = "codegen"))]
    {
        let mut cmd = std::process::Command::new(crate::util::cargo());
        cmd.current_dir(crate::util::root()).args([
            "run",
            "--quiet",
            "--package",
            "xtask",
            "--features",
            "codegen",
            "--",
            "bindgen",
        ]);
        if check {
            cmd.arg("--check");
        }
        crate::util::run(&mut cmd)
    }
}

#[cfg(any(feature = "codegen", test))]
/// The text of `entry_points.rs`: the one list of entry points, as a macro
/// that hands every row to a macro of the caller's (`driver_table` in
/// cuda-sys, the simulator's table in cuda-sim).
pub fn entry_points(banner: &str, chosen: &[Chosen]) -> Result<String> {
    use std::fmt::Write as _;
    let mut list = String::new();
    writeln!(list, "{banner}")?;
    writeln!(list, "/// The driver entry points of the table, defined once: calls `$m!` with one")?;
    writeln!(list, "/// row per entry point — field (driver base name), bound typedef, first CUDA")?;
    writeln!(list, "/// version with that exact signature, highest version to ask")?;
    writeln!(list, "/// `cuGetProcAddress` for — as `name: PFN_typedef = since, request_at_most;`.")?;
    writeln!(list, "/// The loader's `Driver` struct, `Driver::ENTRY_POINTS`, `Driver::missing`")?;
    writeln!(list, "/// and cuda-sim's table are all expanded from it.")?;
    writeln!(list, "#[macro_export]")?;
    writeln!(list, "macro_rules! for_each_entry_point {{")?;
    writeln!(list, "    ($m:ident) => {{")?;
    writeln!(list, "        $m! {{")?;
    for c in chosen {
        writeln!(list, "            {}: {} = {}, {};", c.name, c.typedef, c.since, c.request_at_most)?;
    }
    writeln!(list, "        }}")?;
    writeln!(list, "    }};")?;
    writeln!(list, "}}")?;
    Ok(list)
}

#[cfg(feature = "codegen")]
mod generate {
    use super::{GENERATED_DIR, GENERATED_FILES, MANIFEST, choose, entry_points, manifest};
    use crate::util::{root, sha256_hex};
    use crate::wheels;
    use anyhow::{Context, Result, bail};
    use std::fmt::Write as _;

    /// The settings every generated file shares: the host compiler's include
    /// folder (libclang without its resource headers, Debian's libclang1 alone,
    /// lacks stddef.h), C enums as newtypes over the integer (an unknown code
    /// from a newer library is never undefined behaviour), `Default` derived,
    /// no layout tests, no comments, enum names not prefixed.
    pub(super) fn common(builder: bindgen::Builder) -> bindgen::Builder {
        let builder = match compiler_include_dir() {
            Some(dir) => builder.clang_arg(format!("-isystem{}", dir.display())),
            None => builder,
        };
        builder
            .default_enum_style(bindgen::EnumVariation::NewType { is_bitfield: false, is_global: false })
            .derive_default(true)
            .layout_tests(false)
            .generate_comments(false)
            .prepend_enum_name(false)
    }

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

    /// Regenerates into `target/bindgen-check/` and compares with the
    /// committed folder byte for byte.
    pub fn check() -> Result<()> {
        let tmp = root().join("target").join("bindgen-check");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        generate(&tmp)?;
        let committed = root().join(GENERATED_DIR);
        let mut differ = Vec::new();
        for name in GENERATED_FILES.iter().chain([&MANIFEST]) {
            let fresh = std::fs::read(tmp.join(name))?;
            if std::fs::read(committed.join(name)).ok().as_deref() != Some(fresh.as_slice()) {
                differ.push(*name);
            }
        }
        if !differ.is_empty() {
            bail!(
                "{GENERATED_DIR}: {} differ from what the generator writes (stale or hand-edited); \
                 run `cargo xtask bindgen` and commit the result (fresh copies are in {})",
                differ.join(", "),
                tmp.display()
            );
        }
        eprintln!("{GENERATED_DIR}: every generated file is fresh");
        Ok(())
    }

    /// Writes every generated file and the manifest into `out`.
    pub fn generate(out: &std::path::Path) -> Result<()> {
        std::fs::create_dir_all(out)?;
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

        let mut builder = common(
            bindgen::Builder::default()
                .header(typedefs_path.to_string_lossy())
                .clang_arg(format!("-I{}", include.display())),
        )
        .derive_eq(true)
        .derive_hash(true)
        .use_core()
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
        .allowlist_type("CUdevice_P2PAttribute")
        .allowlist_type("CUmemAccess_flags")
        .allowlist_type("CUmemLocationType")
        .allowlist_type("CUmemAccessDesc")
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
        std::fs::write(out.join("bindings.rs"), format!("{banner}\n{bindings}"))?;
        std::fs::write(out.join("entry_points.rs"), entry_points(&banner, &chosen)?)?;

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
        generate_nvrtc(out)?;
        generate_cupti(out)?;
        super::nccl::generate_nccl(out)?;

        let mut files = Vec::new();
        for name in GENERATED_FILES {
            files.push((*name, std::fs::read(out.join(name))?));
        }
        let pairs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        std::fs::write(out.join(MANIFEST), manifest(&pairs))?;
        eprintln!("wrote {} ({} entry points) and its MANIFEST", out.display(), chosen.len());
        Ok(())
    }

    /// `cuda-sys/src/nvrtc_bindings.rs`: NVRTC's types and a run-time
    /// loaded function table (bindgen's `dynamic_library_name`, over
    /// libloading) from the pinned `nvidia-cuda-nvrtc` wheel's `nvrtc.h`.
    fn generate_nvrtc(out: &std::path::Path) -> Result<()> {
        let home = wheels::ensure(&["nvidia-cuda-runtime", "nvidia-cuda-nvrtc"])?;
        let header = home.join("include").join("nvrtc.h");
        let nvrtc_h = std::fs::read(&header).context("reading nvrtc.h (wheel nvidia-cuda-nvrtc)")?;
        let bindings = common(bindgen::Builder::default().header(header.to_string_lossy()))
            .derive_eq(true)
            .derive_hash(true)
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
        std::fs::write(out.join("nvrtc_bindings.rs"), format!("{banner}\n{bindings}"))?;
        Ok(())
    }

    /// The pinned CUPTI wheel: the CUDA 13.0 line's release (CUPTI has no
    /// 13.0.88; 13.0.85 is its 13.0 release, CUPTI API version 130001).
    pub const CUPTI_WHEEL: &str = "nvidia-cuda-cupti==13.0.85";

    /// The CUPTI functions the table in `cuda-sys/src/cupti/mod.rs` binds; each
    /// gets a `PFN_<name>` typedef taken from its declaration with
    /// `__typeof__`, so no signature is written by hand.
    pub const CUPTI_FUNCTIONS: &[&str] = &[
        "cuptiGetVersion",
        "cuptiGetResultString",
        "cuptiGetTimestamp",
        "cuptiSubscribe",
        "cuptiUnsubscribe",
        "cuptiGetStreamIdEx",
        "cuptiActivityEnable",
        "cuptiActivityDisable",
        "cuptiActivityRegisterCallbacks",
        "cuptiActivityFlushAll",
        "cuptiActivityGetNextRecord",
        "cuptiActivityGetNumDroppedRecords",
        "cuptiActivityPushExternalCorrelationId",
        "cuptiActivityPopExternalCorrelationId",
        // The range profiler (kernel mode's `profiler` records): one
        // counter, `gpu__time_duration.sum`, per kernel.
        "cuptiProfilerInitialize",
        "cuptiDeviceGetChipName",
        "cuptiProfilerGetCounterAvailability",
        "cuptiProfilerHostInitialize",
        "cuptiProfilerHostDeinitialize",
        "cuptiProfilerHostConfigAddMetrics",
        "cuptiProfilerHostGetConfigImageSize",
        "cuptiProfilerHostGetConfigImage",
        "cuptiProfilerHostGetNumOfPasses",
        "cuptiProfilerHostEvaluateToGpuValues",
        "cuptiRangeProfilerEnable",
        "cuptiRangeProfilerDisable",
        "cuptiRangeProfilerGetCounterDataSize",
        "cuptiRangeProfilerCounterDataImageInitialize",
        "cuptiRangeProfilerSetConfig",
        "cuptiRangeProfilerStart",
        "cuptiRangeProfilerStop",
        "cuptiRangeProfilerDecodeData",
        "cuptiRangeProfilerGetCounterDataInfo",
    ];

    /// `cuda-sys/src/cupti_bindings.rs`: CUPTI's activity record types
    /// (kernel, memcpy, memset, external correlation, synchronization,
    /// overhead), result and kind enums, callback types, the range
    /// profiler's and profiler host's parameter structs, and a
    /// `PFN_` typedef per [`CUPTI_FUNCTIONS`] entry, from the pinned wheel's
    /// headers. The table itself is hand-written in cuda-sys over these
    /// typedefs, so cuda-sim can fill it as it fills the driver's.
    fn generate_cupti(out: &std::path::Path) -> Result<()> {
        let home = wheels::ensure(&["nvidia-cuda-runtime", "nvidia-cuda-crt", CUPTI_WHEEL])?;
        let include = home.join("include");
        let mut hashes = String::new();
        for h in [
            "cupti_activity.h",
            "cupti_callbacks.h",
            "cupti_result.h",
            "cupti_version.h",
            "cupti_target.h",
            "cupti_profiler_target.h",
            "cupti_profiler_host.h",
            "cupti_range_profiler.h",
        ] {
            let bytes = std::fs::read(include.join(h))
                .with_context(|| format!("reading {h} (wheel {CUPTI_WHEEL})"))?;
            writeln!(hashes, "// {h} sha256 {}", sha256_hex(&bytes))?;
        }
        let mut wrapper = String::from(
            "#include <cupti.h>\n#include <cupti_target.h>\n#include <cupti_profiler_target.h>\n\
             #include <cupti_profiler_host.h>\n#include <cupti_range_profiler.h>\n",
        );
        for f in CUPTI_FUNCTIONS {
            writeln!(wrapper, "typedef __typeof__({f}) *PFN_{f};")?;
        }
        // cupti_profiler_host.h includes C++'s <string> though it declares
        // only C: an empty one, first on the include path, lets it parse
        // as C.
        let shim = std::env::temp_dir().join("xtask-cupti-shim");
        std::fs::create_dir_all(&shim)?;
        std::fs::write(shim.join("string"), "/* empty: see xtask's generate_cupti */\n")?;
        let mut builder = common(
            bindgen::Builder::default()
                .header_contents("cupti_table.h", &wrapper)
                .clang_arg(format!("-I{}", shim.display()))
                .clang_arg(format!("-I{}", include.display())),
        )
        .use_core()
        .allowlist_var("CUPTI_API_VERSION")
        .allowlist_type("CUptiResult")
        .allowlist_type("CUpti_ActivityKind")
        .allowlist_type("CUpti_Activity")
        .allowlist_type("CUpti_ActivityKernel10")
        .allowlist_type("CUpti_ActivityMemcpy6")
        .allowlist_type("CUpti_ActivityMemset4")
        .allowlist_type("CUpti_ActivityExternalCorrelation")
        .allowlist_type("CUpti_ExternalCorrelationKind")
        .allowlist_type("CUpti_ActivitySynchronization2")
        .allowlist_type("CUpti_ActivitySynchronizationType")
        .allowlist_type("CUpti_ActivityOverhead3")
        .allowlist_type("CUpti_ActivityOverheadKind")
        .allowlist_type("CUpti_ActivityObjectKind")
        .allowlist_type("CUpti_ActivityMemcpyKind")
        .allowlist_type("CUpti_ActivityFlag")
        .allowlist_type("CUpti_CallbackDomain")
        .allowlist_type("CUpti_CallbackId")
        .allowlist_type("CUpti_ProfilerType")
        .allowlist_type("CUpti_ProfilerRange")
        .allowlist_type("CUpti_ProfilerReplayMode");
        for f in CUPTI_FUNCTIONS {
            builder = builder.allowlist_type(format!("PFN_{f}"));
        }
        let bindings = builder
            .generate()
            .map_err(|e| anyhow::anyhow!("bindgen failed on the CUPTI headers: {e}"))?
            .to_string();
        let banner = format!(
            "// Generated by `cargo xtask bindgen` from the CUPTI headers of the PyPI wheel\n\
             // {CUPTI_WHEEL}. Do not edit.\n{hashes}"
        );
        let file = out.join("cupti_bindings.rs");
        std::fs::write(&file, format!("{banner}\n{bindings}"))?;
        // Formatted again with the workspace's own settings (bindgen's
        // rustfmt pass does not read them), so `cargo fmt` leaves the file,
        // and the hash the manifest records, as written.
        crate::util::run(
            std::process::Command::new("rustfmt")
                .args(["--edition", "2024", "--config-path"])
                .arg(root().join("rustfmt.toml"))
                .arg(&file),
        )
        .context("rustfmt on cupti_bindings.rs")?;
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

    /// The committed `cuda-sys/src/generated/` folder.
    fn generated(name: &str) -> Vec<u8> {
        std::fs::read(crate::util::root().join(super::GENERATED_DIR).join(name)).expect(name)
    }

    #[test]
    fn the_committed_manifest_is_what_the_generator_writes_for_the_committed_files() {
        let files: Vec<(&str, Vec<u8>)> = super::GENERATED_FILES.iter().map(|n| (*n, generated(n))).collect();
        let pairs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        let committed = String::from_utf8(generated(super::MANIFEST)).expect("utf-8");
        assert_eq!(super::manifest(&pairs), committed);
    }

    #[test]
    fn the_committed_entry_point_list_is_in_the_generators_format() {
        // Rebuild the rows from the committed file and write them again: the
        // text must come back byte for byte (the generator's format, not a
        // hand-kept one), in the order of the generator's input list.
        let text = String::from_utf8(generated("entry_points.rs")).expect("utf-8");
        let banner: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
        let chosen: Vec<super::Chosen> = text
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.trim().split_once(": PFN_")?;
                let (typedef, versions) = rest.split_once(" = ")?;
                let (since, req) = versions.trim_end_matches(';').split_once(", ")?;
                Some(super::Chosen {
                    name: name.to_owned(),
                    typedef: format!("PFN_{typedef}"),
                    since: since.parse().ok()?,
                    request_at_most: req.parse().ok()?,
                })
            })
            .collect();
        let names: Vec<&str> = chosen.iter().map(|c| c.name.as_str()).collect();
        let input: Vec<&str> = super::ENTRY_POINTS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, input, "entry_points.rs does not list the generator's ENTRY_POINTS");
        assert_eq!(super::entry_points(&banner, &chosen).expect("formats"), text);
    }
}

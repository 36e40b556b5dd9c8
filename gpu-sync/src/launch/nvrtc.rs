//! Run-time compilation of CUDA C++ with NVRTC (`libnvrtc`, loaded at run
//! time by `cuda_sys::nvrtc`; no toolkit at build time).
//!
//! [`Program::compile`] turns source into an [`Image`] — PTX for a virtual
//! architecture (`compute_XY`, JIT-compiled by the driver at load) or a
//! cubin for a real one (`sm_XY`) — with the compile log in the error when
//! it fails. [`Program::load`] compiles for a device's own architecture and
//! loads the result with [`Module::load`], so its kernels follow the same
//! contract as any other module's (declaring a typed kernel is the caller's
//! promise about what the kernel reads and writes). Compiled images are
//! cached per process, keyed by source, options and target.
//!
//! Unsafe code (allowed by `launch`): NVRTC is called through its function
//! table.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::module::Module;
use cuda_sys::nvrtc::{nvrtc, nvrtc_result_name};
use cuda_sys::nvrtc_bindings::{NvrtcLib, nvrtcProgram, nvrtcResult};
use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::sync::{Arc, Mutex, OnceLock};

/// What NVRTC produces.
///
/// Chosen by [`Program::target_for`], or by hand: [`Image`]'s example compiles PTX for `compute_90`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// PTX for virtual architecture `compute_{major}{minor}`: loads on that
    /// architecture and newer (the driver JIT-compiles it).
    Ptx {
        /// Compute capability major.
        major: i32,
        /// Compute capability minor.
        minor: i32,
    },
    /// A cubin for real architecture `sm_{major}{minor}`: loads only there.
    Cubin {
        /// Compute capability major.
        major: i32,
        /// Compute capability minor.
        minor: i32,
    },
}

impl Target {
    /// The `--gpu-architecture=` option for this target.
    pub fn arch_option(&self) -> String {
        match *self {
            Target::Ptx { major, minor } => format!("--gpu-architecture=compute_{major}{minor}"),
            Target::Cubin { major, minor } => format!("--gpu-architecture=sm_{major}{minor}"),
        }
    }
}

/// A compiled program, ready for [`Module::load`].
///
/// ```
/// use gpu_sync::nvrtc::{Program, Target};
/// let src = r#"extern "C" __global__ void nop() {}"#;
/// let image = match Program::compile(src, &[], Target::Ptx { major: 9, minor: 0 }) {
///     Err(e @ gpu_sync::Error::NvrtcLoad(_)) => { eprintln!("{e}"); return Ok(()) }
///     other => other?,
/// };
/// assert_eq!(image.target().arch_option(), "--gpu-architecture=compute_90");
/// assert!(image.ptx().is_some_and(|ptx| ptx.contains(".entry nop")));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    bytes: Vec<u8>,
    target: Target,
    log: String,
}

impl Image {
    /// The image: PTX text with its terminating NUL, or cubin bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The PTX text (without the NUL), for a [`Target::Ptx`] image.
    pub fn ptx(&self) -> Option<&str> {
        match self.target {
            Target::Ptx { .. } => {
                std::str::from_utf8(self.bytes.strip_suffix(&[0]).unwrap_or(&self.bytes)).ok()
            }
            Target::Cubin { .. } => None,
        }
    }
    /// What it was compiled for.
    pub fn target(&self) -> Target {
        self.target
    }
    /// The compiler's log (warnings), often empty.
    pub fn log(&self) -> &str {
        &self.log
    }
}

type CacheKey = (String, Vec<String>, Target);

fn cache() -> &'static Mutex<HashMap<CacheKey, Arc<Image>>> {
    static CACHE: OnceLock<Mutex<HashMap<CacheKey, Arc<Image>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// CUDA C++ source compiled at run time.
///
/// ```
/// use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Len, Out, Stream, nvrtc::Program, sim};
/// const SRC: &str = r#"extern "C" __global__ void ones(float* y, unsigned long long n) {
///     unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
///     if (i < n) y[i] = 1.0f;
/// }"#;
/// let _session = sim::session(0)?; // the simulator runs this CPU version in its place:
/// sim::register::<(Out<f32>, Len)>("ones", |(y, n)| y[..n as usize].fill(1.0));
/// let device = Device::get(0)?;
/// let module = match Program::load(&device, SRC, &["--use_fast_math"]) {
///     // Nothing to compile with: the error names what to install.
///     Err(e @ gpu_sync::Error::NvrtcLoad(_)) => { eprintln!("{e}"); return Ok(()) }
///     other => other?,
/// };
/// // SAFETY: `ones` writes y[i] for i < n only, n a Len checked against y.
/// let ones = unsafe { module.kernel::<(Out<f32>, Len)>("ones")? };
/// let stream = Stream::new(&device)?;
/// let mut y = DeviceBuffer::<f32>::zeroed(&stream, 100)?;
/// ones.launch(&stream, LaunchConfig::for_elements(100, 64), (&mut y, 100u64))?;
/// assert_eq!(stream.to_vec(&y)?, [1.0; 100]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
/// Without libnvrtc the example prints the load error and stops; the
/// `nvrtc_kernel` example in `examples/` goes further (the compile cache, a
/// kernel without `extern "C"`).
#[derive(Debug, Clone, Copy)]
pub struct Program;

impl Program {
    /// Compiles `source` for `target` with NVRTC (`nvrtcCreateProgram`,
    /// `nvrtcCompileProgram`, `nvrtcGetPTX`/`nvrtcGetCUBIN`). `options` are
    /// NVRTC options (`--use_fast_math`, `-DN=4`, `-lineinfo`; NVRTC
    /// optimizes by default and rejects nvcc's `-O3`); the architecture
    /// option comes from `target`. A kernel is found in the loaded module by
    /// its plain name only when the source declares it `extern "C"` (else
    /// its name is mangled C++). A source compiled before with the same
    /// options and target is returned from the process's cache.
    ///
    /// # Errors
    /// [`Error::NvrtcLoad`] when libnvrtc cannot be loaded (it names what to
    /// install); [`Error::Nvrtc`] for a failed call — a compile error
    /// (`NVRTC_ERROR_COMPILATION`) carries the compiler's log;
    /// [`Error::InvalidArgument`] for a NUL byte in the source or an option.
    pub fn compile(source: &str, options: &[&str], target: Target) -> Result<Arc<Image>> {
        let key: CacheKey = (source.to_owned(), options.iter().map(|o| (*o).to_owned()).collect(), target);
        if let Some(img) = cache().lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(img.clone());
        }
        let lib = nvrtc()?;
        let image = Arc::new(compile_uncached(lib, source, options, target)?);
        cache().lock().unwrap_or_else(|p| p.into_inner()).insert(key, image.clone());
        Ok(image)
    }

    /// The target for `device`: a cubin for its own architecture
    /// (`cuDeviceGetAttribute` compute capability), which needs no JIT. On
    /// the simulator, PTX for that architecture: the simulator runs no
    /// device code, but it reads PTX's `.entry` names, so asking for a
    /// kernel the source did not declare `extern "C"` fails there as on a
    /// GPU.
    ///
    /// # Errors
    /// A driver error reading the compute capability.
    pub fn target_for(device: &Device) -> Result<Target> {
        let (major, minor) = device.compute_capability()?;
        if cuda_sys::installed().is_some_and(|d| d.origin() == "cuda-sim") {
            return Ok(Target::Ptx { major, minor });
        }
        Ok(Target::Cubin { major, minor })
    }

    /// Compiles `source` for `device`'s architecture ([`Program::target_for`])
    /// and loads it into the device ([`Module::load`]).
    ///
    /// # Errors
    /// As [`Program::compile`] and [`Module::load`].
    pub fn load(device: &Device, source: &str, options: &[&str]) -> Result<Module> {
        let image = Program::compile(source, options, Program::target_for(device)?)?;
        Module::load(device, image.bytes())
    }
}

fn check(call: &'static str, r: nvrtcResult, log: String) -> Result<()> {
    if r == nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::Nvrtc { call, result: nvrtc_result_name(r), log })
    }
}

fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument(format!("{what} contains a NUL byte")))
}

/// Destroys the program on every path out of [`compile_uncached`].
struct ProgramHandle<'a> {
    lib: &'a NvrtcLib,
    raw: nvrtcProgram,
}

impl Drop for ProgramHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from a successful nvrtcCreateProgram and is
        // destroyed exactly once, here.
        let r = unsafe { self.lib.nvrtcDestroyProgram(&mut self.raw) };
        if r != nvrtcResult::NVRTC_SUCCESS {
            log::warn!("nvrtcDestroyProgram failed: {}", nvrtc_result_name(r));
        }
    }
}

impl ProgramHandle<'_> {
    /// The program log (empty if it cannot be read).
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: live program; writes one size_t.
        if unsafe { self.lib.nvrtcGetProgramLogSize(self.raw, &mut size) } != nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        let mut buf = vec![0u8; size.max(1)];
        // SAFETY: `buf` has the `size` bytes (NUL included) NVRTC reported.
        if unsafe { self.lib.nvrtcGetProgramLog(self.raw, buf.as_mut_ptr().cast::<c_char>()) }
            != nvrtcResult::NVRTC_SUCCESS
        {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim_end().to_owned()
    }
}

fn compile_uncached(lib: &NvrtcLib, source: &str, options: &[&str], target: Target) -> Result<Image> {
    let src = cstring("the source", source)?;
    let name = cstring("the program name", "gpu_sync_nvrtc.cu")?;
    let mut opts: Vec<CString> =
        options.iter().map(|o| cstring(&format!("option {o:?}"), o)).collect::<Result<_>>()?;
    opts.push(cstring("the architecture option", &target.arch_option())?);
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let n_opts = i32::try_from(opt_ptrs.len())
        .map_err(|_| Error::InvalidArgument(format!("{} options are too many", opt_ptrs.len())))?;

    let mut raw: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: `src` and `name` are NUL-terminated and live for the call; no
    // headers are passed (count 0, null arrays); NVRTC copies the source.
    let r = unsafe {
        lib.nvrtcCreateProgram(&mut raw, src.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null())
    };
    check("nvrtcCreateProgram", r, String::new())?;
    let prog = ProgramHandle { lib, raw };
    // SAFETY: live program; `opt_ptrs` holds `n_opts` NUL-terminated
    // strings kept alive by `opts` for the whole call.
    let r = unsafe { lib.nvrtcCompileProgram(prog.raw, n_opts, opt_ptrs.as_ptr()) };
    let log = prog.log();
    check("nvrtcCompileProgram", r, log.clone())?;

    let mut size = 0usize;
    let bytes = match target {
        Target::Ptx { .. } => {
            // SAFETY: live, compiled program; writes one size_t.
            check("nvrtcGetPTXSize", unsafe { lib.nvrtcGetPTXSize(prog.raw, &mut size) }, String::new())?;
            let mut ptx = vec![0u8; size];
            // SAFETY: `ptx` has the `size` bytes (NUL included) NVRTC reported.
            let r = unsafe { lib.nvrtcGetPTX(prog.raw, ptx.as_mut_ptr().cast::<c_char>()) };
            check("nvrtcGetPTX", r, String::new())?;
            if ptx.last() != Some(&0) {
                ptx.push(0);
            }
            ptx
        }
        Target::Cubin { .. } => {
            // SAFETY: live, compiled program; writes one size_t.
            check("nvrtcGetCUBINSize", unsafe { lib.nvrtcGetCUBINSize(prog.raw, &mut size) }, String::new())?;
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` has the `size` bytes NVRTC reported.
            let r = unsafe { lib.nvrtcGetCUBIN(prog.raw, cubin.as_mut_ptr().cast::<c_char>()) };
            check("nvrtcGetCUBIN", r, String::new())?;
            cubin
        }
    };
    if bytes.is_empty() || bytes == [0] {
        return Err(Error::Nvrtc { call: "nvrtcGetPTX/nvrtcGetCUBIN", result: "an empty image", log });
    }
    Ok(Image { bytes, target, log })
}

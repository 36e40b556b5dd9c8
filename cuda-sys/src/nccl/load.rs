//! Loading libnccl: the function table, where the library is looked for,
//! the version check, and the process-wide table.

use super::error::{NcclLoadError, nccl_version_string};
use crate::nccl_bindings as sys;
use libloading::Library;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Environment variable naming the libnccl to load (a path).
pub const LIBNCCL_ENV: &str = "CUDA_SYS_LIBNCCL";

/// The library's name: the only one NVIDIA's wheels ship
/// (`nvidia/nccl/lib/libnccl.so.2`), and the soname of every NCCL 2.
pub const NCCL_SONAME: &str = "libnccl.so.2";

/// The oldest NCCL accepted, as `NCCL_VERSION_CODE` (2.19.0).
///
/// The table's newest calls set the floor: `ncclCommSplit` appeared in 2.18,
/// non-blocking communicators (`ncclConfig_t.blocking = 0`,
/// `ncclCommInitRankConfig`, `ncclCommFinalize`, `ncclInProgress`) in 2.14,
/// `ncclGetLastError` in 2.13. 2.19 is the floor (issue 30 asks for at least
/// that): the first release after `ncclCommSplit`'s own. FP8 element kinds
/// need 2.24 ([`NCCL_FP8_MIN_VERSION`]); they are not a load requirement,
/// since refusing every NCCL from 2.19 to 2.23 would refuse the NCCL of
/// PyTorch releases that still ship it, but [`Nccl::supports`] says whether
/// the loaded library has them.
pub const NCCL_MIN_VERSION: i32 = 21900;

/// The first NCCL with the FP8 element kinds (`ncclFloat8e4m3`,
/// `ncclFloat8e5m2`): 2.24.0.
pub const NCCL_FP8_MIN_VERSION: i32 = 22400;

/// The pinned wheel's library, where `cargo xtask bindgen` installs it in
/// this workspace (a development convenience; deployed programs find NCCL
/// beside their Python, through the environment variable, or on the loader
/// path).
const WORKSPACE_WHEEL_LIB: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../target/cuda-wheels/nvidia/nccl/lib/libnccl.so.2");

macro_rules! nccl_table {
    ($($name:ident: $pfn:ident,)*) => {
        /// NCCL's function table: each field the function of that name,
        /// `None` where a software implementation lacks it. Built by
        /// [`load_nccl`] from libnccl (every function present), or by a
        /// software NCCL (cuda-sim's) from [`Nccl::empty`] and then
        /// [`install_nccl`]ed.
        #[allow(non_snake_case)]
        pub struct Nccl {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: sys::$pfn,
            )*
            /// The library's `NCCL_VERSION_CODE` (`ncclGetVersion` at load).
            pub version: i32,
            /// Where the table came from (a library path, or `cuda-sim`).
            pub origin: String,
            /// The library the pointers live in, kept loaded with the table.
            _library: Option<Library>,
        }

        #[allow(non_snake_case)]
        impl Nccl {
            /// Every function this table binds, by name.
            pub const FUNCTIONS: &'static [&'static str] = &[$(stringify!($name),)*];

            /// A table with every function `None`, for a software
            /// implementation to fill in.
            pub fn empty(version: i32, origin: &str) -> Nccl {
                Nccl { $($name: None,)* version, origin: origin.to_owned(), _library: None }
            }

            /// The functions this table lacks.
            pub fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(
                    if self.$name.is_none() {
                        out.push(stringify!($name));
                    }
                )*
                out
            }

            /// Resolves every function from `library`, whose version is
            /// `version`.
            ///
            /// # Safety
            /// `library` must be an NCCL 2 whose exported functions have the
            /// signatures of the pinned `nccl.h` (the version check in
            /// [`load_nccl`] establishes a release whose API these are).
            unsafe fn from_library(library: Library, version: i32, origin: &str) -> Result<Nccl, String> {
                $(
                    // SAFETY: `sys::$pfn` is the generated pointer type of
                    // the function of this name (its declaration's
                    // `__typeof__`), so the symbol's type is right by the
                    // caller's promise; the pointer is copied out and the
                    // library is kept alive in the table beside it.
                    let $name: sys::$pfn = unsafe {
                        library
                            .get::<sys::$pfn>(concat!(stringify!($name), "\0").as_bytes())
                            .map(|s| *s)
                            .map_err(|e| format!("{} missing: {e}", stringify!($name)))?
                    };
                )*
                Ok(Nccl { $($name,)* version, origin: origin.to_owned(), _library: Some(library) })
            }
        }
    };
}

nccl_table! {
    ncclGetVersion: PFN_ncclGetVersion,
    ncclGetUniqueId: PFN_ncclGetUniqueId,
    ncclCommInitRankConfig: PFN_ncclCommInitRankConfig,
    ncclCommInitAll: PFN_ncclCommInitAll,
    ncclCommSplit: PFN_ncclCommSplit,
    ncclCommFinalize: PFN_ncclCommFinalize,
    ncclCommDestroy: PFN_ncclCommDestroy,
    ncclCommAbort: PFN_ncclCommAbort,
    ncclCommGetAsyncError: PFN_ncclCommGetAsyncError,
    ncclCommCount: PFN_ncclCommCount,
    ncclCommCuDevice: PFN_ncclCommCuDevice,
    ncclCommUserRank: PFN_ncclCommUserRank,
    ncclGetErrorString: PFN_ncclGetErrorString,
    ncclGetLastError: PFN_ncclGetLastError,
    ncclGroupStart: PFN_ncclGroupStart,
    ncclGroupEnd: PFN_ncclGroupEnd,
    ncclAllReduce: PFN_ncclAllReduce,
    ncclBroadcast: PFN_ncclBroadcast,
    ncclReduce: PFN_ncclReduce,
    ncclAllGather: PFN_ncclAllGather,
    ncclReduceScatter: PFN_ncclReduceScatter,
    ncclSend: PFN_ncclSend,
    ncclRecv: PFN_ncclRecv,
}

impl Nccl {
    /// Whether the library takes element kind `ty`: the kinds of the pinned
    /// header, the FP8 ones only from [`NCCL_FP8_MIN_VERSION`].
    pub fn supports(&self, ty: sys::ncclDataType_t) -> bool {
        use sys::ncclDataType_t as T;
        match ty {
            T::ncclFloat8e4m3 | T::ncclFloat8e5m2 => self.version >= NCCL_FP8_MIN_VERSION,
            t => t.0 < T::ncclFloat8e4m3.0,
        }
    }
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("origin", &self.origin)
            .field("version", &nccl_version_string(self.version))
            .field("missing", &self.missing())
            .finish()
    }
}

/// One place [`load_nccl`] looks for libnccl, in the order of
/// [`nccl_candidates`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NcclCandidate {
    /// The path in [`LIBNCCL_ENV`].
    Env(PathBuf),
    /// A library of this soname already loaded in the process (by PyTorch,
    /// say): `dlopen` with `RTLD_NOLOAD`, so the process keeps one NCCL.
    AlreadyLoaded(String),
    /// `lib/libnccl.so.2` of the run host's Python package `nvidia.nccl`
    /// (the `nvidia-nccl-cu13` wheel), or why there is none.
    PythonPackage(Result<PathBuf, String>),
    /// A library at a path (the workspace's pinned wheel).
    Path(PathBuf),
    /// A soname on the dynamic loader's search path.
    LoaderPath(String),
}

impl std::fmt::Display for NcclCandidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NcclCandidate::Env(p) => write!(f, "{LIBNCCL_ENV}={}", p.display()),
            NcclCandidate::AlreadyLoaded(s) => write!(f, "{s} already loaded in this process"),
            NcclCandidate::PythonPackage(Ok(p)) => {
                write!(f, "python3's nvidia.nccl package: {}", p.display())
            }
            NcclCandidate::PythonPackage(Err(_)) => write!(f, "python3's nvidia.nccl package"),
            NcclCandidate::Path(p) => write!(f, "{}", p.display()),
            NcclCandidate::LoaderPath(s) => write!(f, "{s} on the dynamic loader's path"),
        }
    }
}

/// The places [`nccl`] looks, in order: [`LIBNCCL_ENV`]; an NCCL already
/// loaded in the process; the run host's Python `nvidia.nccl` package
/// (asked of `python3` on the `PATH`); the workspace's pinned wheel (where
/// it exists: a development convenience); the dynamic loader's path.
pub fn nccl_candidates() -> Vec<NcclCandidate> {
    let wheel = Path::new(WORKSPACE_WHEEL_LIB);
    nccl_candidates_from(
        std::env::var_os(LIBNCCL_ENV).filter(|v| !v.is_empty()).map(PathBuf::from),
        python_nccl_lib("python3", None),
        wheel.exists().then(|| wheel.to_path_buf()),
    )
}

/// [`nccl_candidates`] with each environment-dependent part given.
pub fn nccl_candidates_from(
    env: Option<PathBuf>,
    python: Result<PathBuf, String>,
    workspace_wheel: Option<PathBuf>,
) -> Vec<NcclCandidate> {
    let mut c = Vec::new();
    c.extend(env.map(NcclCandidate::Env));
    c.push(NcclCandidate::AlreadyLoaded(NCCL_SONAME.to_owned()));
    c.push(NcclCandidate::PythonPackage(python));
    c.extend(workspace_wheel.map(NcclCandidate::Path));
    c.push(NcclCandidate::LoaderPath(NCCL_SONAME.to_owned()));
    c
}

/// Asks `python` (with `pythonpath` prepended to its `PYTHONPATH`, if
/// given) where its `nvidia.nccl` package is, and returns the package's
/// `lib/libnccl.so.2`.
///
/// # Errors
/// Why there is none: no such Python, no such package, or a package
/// without the library.
pub fn python_nccl_lib(python: &str, pythonpath: Option<&Path>) -> Result<PathBuf, String> {
    const ASK: &str = "import importlib.util as u\n\
        try:\n    s = u.find_spec('nvidia.nccl')\n\
        except ImportError:\n    s = None\n\
        print('\\n'.join(s.submodule_search_locations or []) if s else '')\n";
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-c", ASK]).stdin(std::process::Stdio::null());
    if let Some(p) = pythonpath {
        let mut path = p.as_os_str().to_owned();
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|v| !v.is_empty()) {
            path.push(":");
            path.push(old);
        }
        cmd.env("PYTHONPATH", path);
    }
    let out = cmd.output().map_err(|e| format!("{python} could not be run: {e}"))?;
    if !out.status.success() {
        return Err(format!("{python} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let dirs: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).collect();
    if dirs.is_empty() {
        return Err(format!("{python} has no nvidia.nccl package"));
    }
    dirs.iter().map(|d| d.join("lib").join(NCCL_SONAME)).find(|l| l.exists()).ok_or_else(|| {
        format!("{python}'s nvidia.nccl package ({}) has no lib/{NCCL_SONAME}", dirs[0].display())
    })
}

/// Opens one candidate.
fn open(candidate: &NcclCandidate) -> Result<Library, String> {
    let path = match candidate {
        NcclCandidate::PythonPackage(Err(why)) => return Err(why.clone()),
        NcclCandidate::AlreadyLoaded(soname) => {
            // SAFETY: with RTLD_NOLOAD dlopen only returns a new reference
            // to a library already loaded (its initializers have run), or
            // fails; nothing is loaded.
            return unsafe {
                libloading::os::unix::Library::open(Some(soname), libc::RTLD_NOW | libc::RTLD_NOLOAD)
            }
            .map(Library::from)
            .map_err(|_| "not loaded in this process".to_owned());
        }
        NcclCandidate::Env(p) | NcclCandidate::PythonPackage(Ok(p)) | NcclCandidate::Path(p) => {
            p.as_os_str().to_owned()
        }
        NcclCandidate::LoaderPath(soname) => soname.into(),
    };
    // SAFETY: opening libnccl runs its initializers, which have no
    // preconditions (NCCL reads its environment and binds to CUDA at the
    // first communicator, not at load).
    unsafe { Library::new(&path) }.map_err(|e| e.to_string())
}

/// `Err` naming the versions when `version` is below [`NCCL_MIN_VERSION`].
pub fn check_version(version: i32) -> Result<(), String> {
    if version < NCCL_MIN_VERSION {
        return Err(format!(
            "NCCL {} is older than {}, the oldest this table's calls work with",
            nccl_version_string(version),
            nccl_version_string(NCCL_MIN_VERSION)
        ));
    }
    Ok(())
}

/// `ncclGetVersion` of `library`, taken alone (its signature is the same in
/// every NCCL 2), so an old library is refused by version rather than by a
/// missing newer function.
fn version_of(library: &Library) -> Result<i32, String> {
    // SAFETY: `ncclGetVersion(int*)` has had this signature since NCCL 2.0;
    // the pointer is used while `library` is borrowed.
    let f = unsafe { library.get::<sys::PFN_ncclGetVersion>(b"ncclGetVersion\0") }
        .map(|s| *s)
        .map_err(|e| format!("ncclGetVersion missing: {e}"))?
        .ok_or("ncclGetVersion is null")?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer for the call's duration.
    let r = unsafe { f(&mut v) };
    if r != sys::ncclResult_t::ncclSuccess {
        return Err(format!("ncclGetVersion returned {}", super::nccl_result_name(r)));
    }
    Ok(v)
}

/// Loads libnccl from the first of `candidates` that opens, reports a
/// version of at least [`NCCL_MIN_VERSION`] and has every function of the
/// table.
///
/// # Errors
/// [`NcclLoadError`] listing each candidate and why it failed.
pub fn load_nccl(candidates: &[NcclCandidate]) -> Result<Nccl, NcclLoadError> {
    let mut tried = Vec::new();
    for candidate in candidates {
        let accepted = open(candidate).and_then(|lib| {
            let version = version_of(&lib)?;
            check_version(version)?;
            // SAFETY: an NCCL of at least the minimum version, whose API
            // has the signatures of the pinned header (NCCL keeps its C
            // API's signatures within major version 2).
            unsafe { Nccl::from_library(lib, version, &candidate.to_string()) }
        });
        match accepted {
            Ok(table) => return Ok(table),
            Err(why) => tried.push((candidate.to_string(), why)),
        }
    }
    Err(NcclLoadError { tried })
}

static NCCL: OnceLock<Nccl> = OnceLock::new();
static NCCL_INIT: Mutex<()> = Mutex::new(());

/// The process-wide NCCL table: the [`install_nccl`]ed one, else libnccl
/// loaded on first use from [`nccl_candidates`].
///
/// # Errors
/// [`NcclLoadError`]; a failed load is retried on the next call (or finds a
/// table installed meanwhile).
pub fn nccl() -> Result<&'static Nccl, NcclLoadError> {
    if let Some(n) = NCCL.get() {
        return Ok(n);
    }
    let _guard = NCCL_INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = NCCL.get() {
        return Ok(n);
    }
    let table = load_nccl(&nccl_candidates())?;
    Ok(NCCL.get_or_init(|| table))
}

/// The process-wide NCCL table if one is loaded or installed; never loads.
pub fn installed_nccl() -> Option<&'static Nccl> {
    NCCL.get()
}

/// [`install_nccl`] found a table already in place.
#[derive(Debug, Clone, thiserror::Error)]
#[error("an NCCL table is already in place ({origin})")]
pub struct NcclInstallError {
    /// Origin of the table already in place.
    pub origin: String,
}

/// Makes `table` the process-wide NCCL (a software NCCL such as cuda-sim's,
/// installed beside its driver, as [`crate::install`] and
/// [`crate::cupti::install_cupti`] are).
///
/// # Errors
/// [`NcclInstallError`] if a table is already loaded or installed (a
/// process has one NCCL for its whole life).
///
/// # Safety
/// 1. Every `Some` function of `table` must behave as NCCL's documentation
///    says for the pinned header's types: a collective reads and writes only
///    the `count` elements of its buffers, in stream order on the stream it
///    is given; a communicator it hands out stays valid until destroyed or
///    aborted; strings it returns are NUL-terminated and outlive the call.
/// 2. `table.version` must be what its `ncclGetVersion` reports.
pub unsafe fn install_nccl(table: Nccl) -> Result<&'static Nccl, NcclInstallError> {
    let _guard = NCCL_INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(n) = NCCL.get() {
        return Err(NcclInstallError { origin: n.origin.clone() });
    }
    Ok(NCCL.get_or_init(|| table))
}

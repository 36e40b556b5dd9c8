//! Loading libcupti: the function table, where the library is looked for,
//! and the process-wide table.

use super::error::{CuptiError, check};
use crate::cupti_bindings as sys;
use libloading::Library;
use std::sync::{Mutex, OnceLock};

/// Environment variable naming the libcupti to load.
pub const LIBCUPTI_ENV: &str = "CUDA_SYS_LIBCUPTI";

/// The CUPTI API version the record layouts were generated for.
pub const CUPTI_HEADER_VERSION: u32 = sys::CUPTI_API_VERSION;

/// The pinned wheel's library, where `cargo xtask bindgen` installs it.
const WHEEL_LIB: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../target/cuda-wheels/nvidia/cu13/lib/libcupti.so.13");

/// Where a CUDA toolkit keeps libcupti.
const TOOLKIT_LIBS: &[&str] = &[
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
    "/usr/local/cuda/lib64/libcupti.so.13",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
];

/// Library names tried on the dynamic loader's path.
const SONAMES: &[&str] = &["libcupti.so.13", "libcupti.so"];

macro_rules! cupti_table {
    ($($name:ident: $pfn:ident,)*) => {
        /// CUPTI's function table: each field the function of that name,
        /// `None` where the library (or a software implementation) lacks it.
        /// Built by [`load_cupti`] from libcupti, or by a software driver
        /// from [`Cupti::empty`].
        #[allow(non_snake_case)]
        pub struct Cupti {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub $name: sys::$pfn,
            )*
            /// Where the table came from (a library path, or `cuda-sim`).
            pub origin: String,
            /// The library the pointers live in, kept loaded with the table.
            _library: Option<Library>,
        }

        #[allow(non_snake_case)]
        impl Cupti {
            /// Every function this table binds, by name.
            pub const FUNCTIONS: &'static [&'static str] = &[$(stringify!($name),)*];

            /// A table with every function `None`, for a software
            /// implementation to fill in.
            pub fn empty(origin: &str) -> Cupti {
                Cupti { $($name: None,)* origin: origin.to_owned(), _library: None }
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

            /// Resolves every function from `library`.
            ///
            /// # Safety
            /// `library` must be a libcupti whose exported functions have
            /// the signatures of the pinned headers (the version check in
            /// [`load_cupti`] establishes the 13.0 line).
            unsafe fn from_library(library: Library, origin: &str) -> Result<Cupti, String> {
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
                Ok(Cupti { $($name,)* origin: origin.to_owned(), _library: Some(library) })
            }
        }
    };
}

cupti_table! {
    cuptiGetVersion: PFN_cuptiGetVersion,
    cuptiGetResultString: PFN_cuptiGetResultString,
    cuptiGetTimestamp: PFN_cuptiGetTimestamp,
    cuptiSubscribe: PFN_cuptiSubscribe,
    cuptiUnsubscribe: PFN_cuptiUnsubscribe,
    cuptiGetStreamIdEx: PFN_cuptiGetStreamIdEx,
    cuptiActivityEnable: PFN_cuptiActivityEnable,
    cuptiActivityDisable: PFN_cuptiActivityDisable,
    cuptiActivityRegisterCallbacks: PFN_cuptiActivityRegisterCallbacks,
    cuptiActivityFlushAll: PFN_cuptiActivityFlushAll,
    cuptiActivityGetNextRecord: PFN_cuptiActivityGetNextRecord,
    cuptiActivityGetNumDroppedRecords: PFN_cuptiActivityGetNumDroppedRecords,
    cuptiActivityPushExternalCorrelationId: PFN_cuptiActivityPushExternalCorrelationId,
    cuptiActivityPopExternalCorrelationId: PFN_cuptiActivityPopExternalCorrelationId,
    cuptiProfilerInitialize: PFN_cuptiProfilerInitialize,
    cuptiDeviceGetChipName: PFN_cuptiDeviceGetChipName,
    cuptiProfilerGetCounterAvailability: PFN_cuptiProfilerGetCounterAvailability,
    cuptiProfilerHostInitialize: PFN_cuptiProfilerHostInitialize,
    cuptiProfilerHostDeinitialize: PFN_cuptiProfilerHostDeinitialize,
    cuptiProfilerHostConfigAddMetrics: PFN_cuptiProfilerHostConfigAddMetrics,
    cuptiProfilerHostGetConfigImageSize: PFN_cuptiProfilerHostGetConfigImageSize,
    cuptiProfilerHostGetConfigImage: PFN_cuptiProfilerHostGetConfigImage,
    cuptiProfilerHostGetNumOfPasses: PFN_cuptiProfilerHostGetNumOfPasses,
    cuptiProfilerHostEvaluateToGpuValues: PFN_cuptiProfilerHostEvaluateToGpuValues,
    cuptiRangeProfilerEnable: PFN_cuptiRangeProfilerEnable,
    cuptiRangeProfilerDisable: PFN_cuptiRangeProfilerDisable,
    cuptiRangeProfilerGetCounterDataSize: PFN_cuptiRangeProfilerGetCounterDataSize,
    cuptiRangeProfilerCounterDataImageInitialize: PFN_cuptiRangeProfilerCounterDataImageInitialize,
    cuptiRangeProfilerSetConfig: PFN_cuptiRangeProfilerSetConfig,
    cuptiRangeProfilerStart: PFN_cuptiRangeProfilerStart,
    cuptiRangeProfilerStop: PFN_cuptiRangeProfilerStop,
    cuptiRangeProfilerDecodeData: PFN_cuptiRangeProfilerDecodeData,
    cuptiRangeProfilerGetCounterDataInfo: PFN_cuptiRangeProfilerGetCounterDataInfo,
}

impl std::fmt::Debug for Cupti {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cupti").field("origin", &self.origin).field("missing", &self.missing()).finish()
    }
}
/// The candidates [`cupti`] tries, in order.
pub fn cupti_candidates() -> Vec<String> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os(LIBCUPTI_ENV) {
        c.push(p.to_string_lossy().into_owned());
    }
    c.push(WHEEL_LIB.to_owned());
    c.extend(TOOLKIT_LIBS.iter().map(|s| (*s).to_owned()));
    c.extend(SONAMES.iter().map(|s| (*s).to_owned()));
    c
}

/// Loads libcupti from the first of `candidates` that opens, has every
/// function of the table and reports a version of the headers' 13.0 line.
///
/// # Errors
/// [`CuptiError::NotFound`] listing each candidate and why it failed.
pub fn load_cupti(candidates: &[String]) -> Result<Cupti, CuptiError> {
    let mut tried = Vec::new();
    for path in candidates {
        // SAFETY: opening libcupti runs its initializers, which have no
        // preconditions (it attaches to the driver lazily, at the first
        // CUPTI call).
        let lib = match unsafe { Library::new(path) } {
            Ok(l) => l,
            Err(e) => {
                tried.push((path.clone(), e.to_string()));
                continue;
            }
        };
        // SAFETY: the version is checked right below, before any other
        // function of the table is called; `cuptiGetVersion`'s signature
        // has been the same since CUPTI 1.
        let table = match unsafe { Cupti::from_library(lib, path) } {
            Ok(t) => t,
            Err(e) => {
                tried.push((path.clone(), e));
                continue;
            }
        };
        match version_of(&table) {
            Ok(v) if v / 100 == CUPTI_HEADER_VERSION / 100 => return Ok(table),
            Ok(v) => tried.push((
                path.clone(),
                format!(
                    "CUPTI API version {v}, but the record layouts are of {CUPTI_HEADER_VERSION} (13.0 line)"
                ),
            )),
            Err(e) => tried.push((path.clone(), e.to_string())),
        }
    }
    Err(CuptiError::NotFound { tried })
}

/// `cuptiGetVersion` through `table`.
fn version_of(table: &Cupti) -> Result<u32, CuptiError> {
    let f = table.cuptiGetVersion.ok_or(CuptiError::Call { call: "cuptiGetVersion", name: "missing" })?;
    let mut v = 0u32;
    // SAFETY: `v` is a valid out-pointer for the call's duration.
    check("cuptiGetVersion", unsafe { f(&mut v) })?;
    Ok(v)
}

static CUPTI: OnceLock<Cupti> = OnceLock::new();
static CUPTI_INIT: Mutex<()> = Mutex::new(());

/// The process-wide CUPTI table: the [`install_cupti`]ed one, else
/// libcupti loaded on first use (see the module docs).
///
/// # Errors
/// [`CuptiError::NotFound`]; a failed load is retried on the next call.
pub fn cupti() -> Result<&'static Cupti, CuptiError> {
    if let Some(c) = CUPTI.get() {
        return Ok(c);
    }
    let _guard = CUPTI_INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = CUPTI.get() {
        return Ok(c);
    }
    let table = load_cupti(&cupti_candidates())?;
    Ok(CUPTI.get_or_init(|| table))
}

/// Makes `table` the process-wide CUPTI table; returns the table already in
/// place if there is one (the first wins, as for the driver).
///
/// # Safety
/// Every function in `table` must behave as CUPTI documents it for the
/// record layouts of the pinned headers: in particular records handed to
/// the buffer-completed callback must be `CUpti_ActivityKernel10`,
/// `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemset4`,
/// `CUpti_ActivityExternalCorrelation`, `CUpti_ActivitySynchronization2` or
/// `CUpti_ActivityOverhead3` as their `kind` says (an overhead record's
/// `overheadData` null or a `malloc`ed block the consumer frees),
/// and `cuptiActivityGetNextRecord` must only return pointers inside the
/// buffer it was given.
pub unsafe fn install_cupti(table: Cupti) -> &'static Cupti {
    let _guard = CUPTI_INIT.lock().unwrap_or_else(|p| p.into_inner());
    CUPTI.get_or_init(|| table)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::cupti::cupti_result_name;
    use crate::cupti_bindings::CUptiResult;

    #[test]
    fn a_missing_library_is_an_error_naming_what_was_tried_and_what_to_install() {
        let e = load_cupti(&["/nonexistent/libcupti.so.13".to_owned()]).unwrap_err();
        let CuptiError::NotFound { tried } = &e else { panic!("{e:?}") };
        assert_eq!(tried.len(), 1);
        let text = e.to_string();
        assert!(text.contains("/nonexistent/libcupti.so.13"), "{text}");
        assert!(text.contains("nvidia-cuda-cupti==13.0.85") && text.contains(LIBCUPTI_ENV), "{text}");
    }

    #[test]
    fn a_library_without_cuptis_functions_is_skipped_with_the_missing_one_named() {
        // libc opens but exports none of CUPTI's functions.
        let e = load_cupti(&["libc.so.6".to_owned()]).unwrap_err();
        let CuptiError::NotFound { tried } = &e else { panic!("{e:?}") };
        assert!(tried[0].1.contains("cuptiGetVersion missing"), "{tried:?}");
    }

    #[test]
    fn the_table_names_every_function_and_an_empty_one_lacks_them_all() {
        let t = Cupti::empty("test");
        assert_eq!(t.missing(), Cupti::FUNCTIONS);
        assert!(Cupti::FUNCTIONS.contains(&"cuptiActivityGetNextRecord"));
        assert_eq!(cupti_result_name(CUptiResult::CUPTI_SUCCESS), "CUPTI_SUCCESS");
        assert_eq!(cupti_result_name(CUptiResult(987_654)), "CUPTI_ERROR (unnamed code)");
    }
}

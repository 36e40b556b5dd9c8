//! The loader's search order and errors, the version floor, the per-call
//! layer over a table of test functions, and (where the pinned wheel is
//! installed) the real libnccl.

use super::result;
use super::*;
use crate::nccl_bindings::{
    NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_UNDEF_INT, ncclComm, ncclComm_t, ncclDataType_t as T, ncclRedOp_t,
    ncclResult_t,
};
use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};

/// The pinned wheel's library, where `cargo xtask bindgen` (or CI's pip
/// step) installs it.
fn wheel_lib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/cuda-wheels/nvidia/nccl/lib/libnccl.so.2")
}

#[test]
fn candidates_come_in_the_documented_order() {
    let c = nccl_candidates_from(
        Some("/opt/mine/libnccl.so.2".into()),
        Err("no python".into()),
        Some("/ws/target/cuda-wheels/nvidia/nccl/lib/libnccl.so.2".into()),
    );
    assert_eq!(
        c,
        vec![
            NcclCandidate::Env("/opt/mine/libnccl.so.2".into()),
            NcclCandidate::AlreadyLoaded(NCCL_SONAME.into()),
            NcclCandidate::PythonPackage(Err("no python".into())),
            NcclCandidate::Path("/ws/target/cuda-wheels/nvidia/nccl/lib/libnccl.so.2".into()),
            NcclCandidate::LoaderPath("libnccl.so.2".into()),
        ]
    );
    // Without the variable and the workspace wheel, those two drop out.
    let c = nccl_candidates_from(None, Ok("/py/nvidia/nccl/lib/libnccl.so.2".into()), None);
    let shown: Vec<String> = c.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "libnccl.so.2 already loaded in this process",
            "python3's nvidia.nccl package: /py/nvidia/nccl/lib/libnccl.so.2",
            "libnccl.so.2 on the dynamic loader's path",
        ]
    );
}

/// Set by [`the_process_wide_candidates_read_the_variable_first`] in the
/// child it starts.
const CHILD: &str = "CUDA_SYS_NCCL_TEST_CHILD";

#[test]
fn child_prints_the_process_wide_candidates() {
    // A helper run by the test below in a child process (it changes the
    // environment); on its own it checks nothing and says so.
    if std::env::var_os(CHILD).is_none() {
        eprintln!("skipped: run by the_process_wide_candidates_read_the_variable_first");
        return;
    }
    let candidates = nccl_candidates();
    for c in &candidates {
        println!("candidate: {c}");
    }
    // What this host would load (environment-dependent, so only printed:
    // on the GPU machine it names the image's Python NCCL).
    match load_nccl(&candidates) {
        Ok(t) => println!("would load: {} (NCCL {})", t.origin, nccl_version_string(t.version)),
        Err(e) => println!("would load nothing: {e}"),
    }
}

#[test]
fn the_process_wide_candidates_read_the_variable_first() {
    let me = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(me)
        .args(["--exact", "nccl::tests::child_prints_the_process_wide_candidates", "--nocapture"])
        .env(CHILD, "1")
        .env(LIBNCCL_ENV, "/nonexistent/dir/libnccl.so.2")
        // No python3 to ask: the package step must say so, not vanish.
        .env("PATH", "")
        .output()
        .expect("the test binary runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("candidate: ")).collect();
    assert_eq!(lines.first(), Some(&"CUDA_SYS_LIBNCCL=/nonexistent/dir/libnccl.so.2"), "{text}");
    assert_eq!(lines.get(1), Some(&"libnccl.so.2 already loaded in this process"), "{text}");
    assert_eq!(lines.get(2), Some(&"python3's nvidia.nccl package"), "{text}");
    assert_eq!(lines.last(), Some(&"libnccl.so.2 on the dynamic loader's path"), "{text}");
}

#[test]
fn nothing_found_is_an_error_naming_each_place_and_what_to_install() {
    let dir = std::env::temp_dir().join(format!("cuda-sys-nccl-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let missing = dir.join("libnccl.so.2");
    let candidates = [
        NcclCandidate::Env(missing.clone()),
        NcclCandidate::AlreadyLoaded("libnccl-never-loaded-here.so.2".into()),
        NcclCandidate::PythonPackage(python_nccl_lib("python3-that-does-not-exist", None)),
        NcclCandidate::Path(missing.clone()),
    ];
    let err = match load_nccl(&candidates) {
        Ok(t) => panic!("nothing there, yet {t:?} loaded"),
        Err(e) => e,
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(err.tried.len(), 4, "{err}");
    assert_eq!(err.tried[0].0, format!("{LIBNCCL_ENV}={}", missing.display()));
    assert_eq!(err.tried[1].1, "not loaded in this process");
    assert!(err.tried[2].1.contains("python3-that-does-not-exist could not be run"), "{err}");
    let text = err.to_string();
    assert!(text.contains("pip install nvidia-nccl-cu13") && text.contains(LIBNCCL_ENV), "{text}");
    assert!(text.contains("at least 2.19.0"), "{text}");
    // In the order looked.
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} not in {text}"));
    assert!(at("CUDA_SYS_LIBNCCL=") < at("already loaded") && at("already loaded") < at("python3's"));
}

#[test]
fn an_already_loaded_library_is_taken_without_loading_and_checked_like_the_others() {
    // libc is loaded in every process: RTLD_NOLOAD opens it, and it is then
    // refused for lacking ncclGetVersion (proof it was opened, not skipped).
    let err = load_nccl(&[NcclCandidate::AlreadyLoaded("libc.so.6".into())]).unwrap_err();
    assert!(err.tried[0].1.contains("ncclGetVersion missing"), "{err}");
}

#[test]
fn an_old_nccl_is_refused_by_version() {
    let e = check_version(21803).unwrap_err();
    assert!(e.contains("NCCL 2.18.3 is older than 2.19.0"), "{e}");
    assert!(check_version(2708).is_err(), "the pre-2.9 encoding reads as old");
    assert_eq!(check_version(NCCL_MIN_VERSION), Ok(()));
    assert_eq!(check_version(22809), Ok(()));
}

#[test]
fn fp8_is_supported_from_2_24_only() {
    let old = Nccl::empty(22303, "test");
    let new = Nccl::empty(22400, "test");
    assert!(!old.supports(T::ncclFloat8e4m3) && !old.supports(T::ncclFloat8e5m2));
    assert!(new.supports(T::ncclFloat8e4m3) && new.supports(T::ncclFloat8e5m2));
    assert!(old.supports(T::ncclBfloat16) && old.supports(T::ncclUint8));
    assert!(!new.supports(T::ncclNumTypes) && !new.supports(T(99)));
}

#[test]
fn the_config_initializer_is_the_headers() {
    let c = NCCL_CONFIG_INITIALIZER;
    assert_eq!(c.size, std::mem::size_of::<crate::nccl_bindings::ncclConfig_t>());
    assert_eq!((c.magic, c.version), (0xcafe_beef, 22809));
    assert_eq!((c.blocking, c.splitShare, c.CTAPolicy), (i32::MIN, i32::MIN, i32::MIN));
    assert_eq!(NCCL_CONFIG_UNDEF_INT, i32::MIN);
    assert!(c.netName.is_null() && c.commName.is_null());
}

#[test]
fn the_table_names_every_function_and_an_empty_one_lacks_them_all() {
    let t = Nccl::empty(22809, "test");
    assert_eq!(t.missing(), Nccl::FUNCTIONS);
    assert_eq!(Nccl::FUNCTIONS.len(), 23);
    assert!(Nccl::FUNCTIONS.contains(&"ncclCommSplit") && Nccl::FUNCTIONS.contains(&"ncclRecv"));
}

// A table of test functions for the per-call layer.
unsafe extern "C" fn version(v: *mut c_int) -> ncclResult_t {
    // SAFETY: the layer passes a valid out-pointer.
    unsafe { *v = 22809 };
    ncclResult_t::ncclSuccess
}
unsafe extern "C" fn in_progress() -> ncclResult_t {
    ncclResult_t::ncclInProgress
}
unsafe extern "C" fn refuse_all_reduce(
    _: *const std::ffi::c_void,
    _: *mut std::ffi::c_void,
    _: usize,
    _: T,
    _: ncclRedOp_t,
    _: ncclComm_t,
    _: crate::nccl_bindings::cudaStream_t,
) -> ncclResult_t {
    ncclResult_t::ncclInvalidArgument
}
unsafe extern "C" fn last_error(_: ncclComm_t) -> *const c_char {
    c"count 0 is not allowed".as_ptr()
}
/// A communicator handle that is never dereferenced (the test functions
/// only compare it).
static mut FAKE_COMM: u8 = 0;
unsafe extern "C" fn init_in_progress(
    comm: *mut ncclComm_t,
    _: c_int,
    _: crate::nccl_bindings::ncclUniqueId,
    _: c_int,
    _: *mut crate::nccl_bindings::ncclConfig_t,
) -> ncclResult_t {
    // SAFETY: the layer passes a valid out-pointer; the handle is only an
    // address to compare.
    unsafe { *comm = (&raw mut FAKE_COMM).cast::<ncclComm>() };
    ncclResult_t::ncclInProgress
}

fn test_table() -> Nccl {
    let mut t = Nccl::empty(22809, "test");
    t.ncclGetVersion = Some(version);
    t.ncclGroupEnd = Some(in_progress);
    t.ncclAllReduce = Some(refuse_all_reduce);
    t.ncclGetLastError = Some(last_error);
    t.ncclCommInitRankConfig = Some(init_in_progress);
    t
}

#[test]
fn the_per_call_layer_names_the_call_and_keeps_in_progress_apart() {
    let t = test_table();
    assert_eq!(result::get_version(&t), Ok(22809));
    assert_eq!(result::group_end(&t), Err(NcclError::InProgress { call: "ncclGroupEnd" }));
    // SAFETY: the test function reads none of its arguments.
    let e = unsafe {
        result::all_reduce(
            &t,
            std::ptr::null(),
            std::ptr::null_mut(),
            0,
            T::ncclFloat32,
            ncclRedOp_t::ncclSum,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert_eq!(e.to_string(), "ncclAllReduce failed: ncclInvalidArgument (4): count 0 is not allowed");
    assert_eq!(e.result(), Some(ncclResult_t::ncclInvalidArgument));
    let e = result::group_start(&t).unwrap_err();
    assert_eq!(e, NcclError::Unsupported { call: "ncclGroupStart", origin: "test".into() });
    assert_eq!(result::comm_init_all(&t, &[]).unwrap_err().to_string(), "ncclCommInitAll: no device given");
}

#[test]
fn a_non_blocking_init_hands_back_its_communicator_with_in_progress() {
    let t = test_table();
    let mut comm: ncclComm_t = std::ptr::null_mut();
    let mut config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // SAFETY: the test function touches nothing but the out-pointer.
    let r = unsafe { result::comm_init_rank_config(&t, &mut comm, 2, Default::default(), 0, &mut config) };
    assert_eq!(r, Err(NcclError::InProgress { call: "ncclCommInitRankConfig" }));
    assert_eq!(comm, (&raw mut FAKE_COMM).cast::<ncclComm>());
}

#[test]
fn the_pinned_wheels_libnccl_loads_and_reports_its_version() {
    let lib = wheel_lib();
    if !lib.exists() {
        eprintln!(
            "skipped: {} is absent (`pip install --target target/cuda-wheels --no-deps nvidia-nccl-cu13==2.28.9`, \
             or `cargo xtask bindgen`)",
            lib.display()
        );
        return;
    }
    let t = load_nccl(&[NcclCandidate::Path(lib.clone())]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.version, 22809, "{t:?}");
    assert!(t.missing().is_empty(), "{t:?}");
    assert_eq!(result::get_version(&t), Ok(22809));
    assert!(t.supports(T::ncclFloat8e5m2));
    let text = result::get_error_string(&t, ncclResult_t::ncclInvalidUsage).unwrap_or_default();
    assert!(!text.is_empty() && text != "unknown result code", "{text:?}");
    // The Python package step finds the same library through Python.
    let prefix = lib.ancestors().nth(4).expect("…/target/cuda-wheels");
    match python_nccl_lib("python3", Some(prefix)) {
        Ok(found) => assert_eq!(found.canonicalize().ok(), lib.canonicalize().ok()),
        Err(why) => eprintln!("python3's lookup not checked: {why}"),
    }
}

#[test]
fn an_installed_table_is_the_process_wide_one_and_the_first_wins() {
    // SAFETY: the test table's functions keep NCCL's contract for what they
    // do (they touch only their out-pointers).
    let first = unsafe { install_nccl(test_table()) }.expect("nothing installed before in this binary");
    assert_eq!(first.origin, "test");
    assert!(std::ptr::eq(nccl().expect("the installed table"), first));
    assert!(std::ptr::eq(installed_nccl().expect("installed"), first));
    // SAFETY: as above.
    let again = unsafe { install_nccl(Nccl::empty(22809, "second")) }.unwrap_err();
    assert_eq!(again.origin, "test");
}

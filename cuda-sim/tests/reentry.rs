//! Every simulated table refuses a call made from inside the simulator: a
//! host function or a registered kernel's CPU version runs with the global
//! lock held by the very thread that would call back, so each table
//! (the driver's, CUPTI's, NCCL's) must answer its refusal code instead of
//! deadlocking on that lock. Each test runs under a watchdog: a regression
//! aborts the binary with the test's name instead of hanging CI.

mod common;
use common::*;
use cuda_sys::cupti::cupti_result_name;
use cuda_sys::cupti_bindings::{CUpti_ActivityKind, CUptiResult};
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

const NB: u32 = CUstream_flags::CU_STREAM_NON_BLOCKING.0;

/// Aborts the process if not dropped within `secs` seconds (a deadlock
/// would otherwise hang the test binary).
struct Watchdog(std::sync::Arc<AtomicBool>);

impl Watchdog {
    fn arm(secs: u64, what: &'static str) -> Watchdog {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let seen = done.clone();
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
            while std::time::Instant::now() < deadline {
                if seen.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "watchdog: {what}: no return within {secs} s (deadlock)");
            std::process::abort();
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Which table the probe calls back into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Table {
    Driver,
    Cupti,
    Nccl,
}

/// The table the next probe calls, and what each of its calls returned
/// (by result name). Tests take [`serial`] first, so one probe runs at a
/// time.
static TARGET: Mutex<Option<Table>> = Mutex::new(None);
static SEEN: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

fn driver_name(r: CUresult) -> String {
    if r == CUresult::CUDA_ERROR_NOT_PERMITTED {
        "CUDA_ERROR_NOT_PERMITTED".to_owned()
    } else {
        format!("{r:?}")
    }
}

/// Calls back into the table named by [`TARGET`] and records each result.
fn probe() {
    let table = *TARGET.lock().unwrap_or_else(|p| p.into_inner());
    let mut seen = Vec::new();
    match table {
        Some(Table::Driver) => {
            seen.push(("cuCtxSynchronize", driver_name(raw!(cuCtxSynchronize()))));
            let mut s: CUstream = std::ptr::null_mut();
            seen.push((
                "cuStreamCreateWithPriority",
                driver_name(raw!(cuStreamCreateWithPriority(&mut s, 0, 0))),
            ));
        }
        Some(Table::Cupti) => {
            let t = cuda_sim::cupti::table();
            let mut now = 0u64;
            // SAFETY: a valid out-pointer.
            let r = unsafe { (t.cuptiGetTimestamp.expect("timestamp"))(&mut now) };
            seen.push(("cuptiGetTimestamp", cupti_result_name(r).to_owned()));
            // SAFETY: a plain call with a valid flag.
            let r = unsafe { (t.cuptiActivityFlushAll.expect("flush"))(1) };
            seen.push(("cuptiActivityFlushAll", cupti_result_name(r).to_owned()));
            // SAFETY: a plain call.
            let r = unsafe {
                (t.cuptiActivityEnable.expect("enable"))(CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET)
            };
            seen.push(("cuptiActivityEnable", cupti_result_name(r).to_owned()));
            let mut h = std::ptr::null_mut();
            // SAFETY: a valid out-pointer, no callback.
            let r = unsafe { (t.cuptiSubscribe.expect("subscribe"))(&mut h, None, std::ptr::null_mut()) };
            seen.push(("cuptiSubscribe", cupti_result_name(r).to_owned()));
            let mut id = 0u32;
            // SAFETY: a valid out-pointer; the stream handle is only looked up.
            let r = unsafe {
                (t.cuptiGetStreamIdEx.expect("stream id"))(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                    &mut id,
                )
            };
            seen.push(("cuptiGetStreamIdEx", cupti_result_name(r).to_owned()));
            // Through cuda-sys's safe layer (the process-wide subscriber,
            // started outside by the test).
            let a = cuda_sys::cupti::activity().expect("activity");
            let ts = a.timestamp().map(drop).map_err(|e| e.to_string());
            seen.push(("Activity::timestamp", format!("{ts:?}")));
            let fl = a.flush().map_err(|e| e.to_string());
            seen.push(("Activity::flush", format!("{fl:?}")));
        }
        Some(Table::Nccl) => {
            let t = cuda_sim::nccl::table();
            let name = |r| cuda_sys::nccl::nccl_result_name(r).to_owned();
            let mut id = cuda_sys::nccl_bindings::ncclUniqueId::default();
            // SAFETY: a valid out-pointer.
            seen.push(("ncclGetUniqueId", name(unsafe { (t.ncclGetUniqueId.expect("id"))(&mut id) })));
            // SAFETY: takes no argument.
            seen.push(("ncclGroupStart", name(unsafe { (t.ncclGroupStart.expect("start"))() })));
            // SAFETY: takes no argument.
            seen.push(("ncclGroupEnd", name(unsafe { (t.ncclGroupEnd.expect("end"))() })));
            let mut comms = [std::ptr::null_mut(); 2];
            // SAFETY: room for two handles; a null device list means 0 and 1.
            let r =
                unsafe { (t.ncclCommInitAll.expect("init all"))(comms.as_mut_ptr(), 2, std::ptr::null()) };
            seen.push(("ncclCommInitAll", name(r)));
            // Through cuda-sys's per-call layer.
            let n = cuda_sys::nccl::nccl().expect("the simulator's NCCL");
            let r = cuda_sys::nccl::result::get_unique_id(n).map(drop).map_err(|e| e.to_string());
            seen.push(("result::get_unique_id", format!("{r:?}")));
        }
        None => {}
    }
    SEEN.lock().unwrap_or_else(|p| p.into_inner()).extend(seen);
}

unsafe extern "C" fn host_probe(_: *mut c_void) {
    probe();
}

fn kernel_probe(_: &mut cuda_sim::KernelCall<'_>) -> Result<(), cuda_sim::KernelFault> {
    probe();
    Ok(())
}

static NO_PARAMS: [cuda_sim::ParamSpec; 0] = [];

/// Runs the probe for `table` inside a host function (`kernel` false) or a
/// registered kernel, and returns what each call answered.
fn probe_inside(table: Table, kernel: bool, seed: u64) -> Vec<(&'static str, String)> {
    let _serial = serial();
    let e = env(seed);
    if table == Table::Cupti {
        cuda_sys::cupti::activity().expect("the simulator's CUPTI");
    }
    cuda_sim::register_kernel(cuda_sim::KernelSpec {
        name: "sim_reenter",
        params: &NO_PARAMS,
        run: kernel_probe,
        duration: None,
    });
    *TARGET.lock().unwrap_or_else(|p| p.into_inner()) = Some(table);
    SEEN.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let what = match (table, kernel) {
        (Table::Driver, false) => "driver call in a host function",
        (Table::Driver, true) => "driver call in a registered kernel",
        (Table::Cupti, false) => "CUPTI call in a host function",
        (Table::Cupti, true) => "CUPTI call in a registered kernel",
        (Table::Nccl, false) => "NCCL call in a host function",
        (Table::Nccl, true) => "NCCL call in a registered kernel",
    };
    let dog = Watchdog::arm(20, what);
    let s = e.stream(NB);
    if kernel {
        let f = e.function("sim_reenter");
        assert_eq!(e.launch(f, &s, &mut []), OK);
    } else {
        // SAFETY: `host_probe` ignores its user data.
        let r = unsafe { stream::launch_host_func(&s, Some(host_probe), std::ptr::null_mut()) };
        assert_eq!(code(r), OK);
    }
    stream::synchronize(&s).expect("the probe returns, and the stream completes");
    drop(dog);
    *TARGET.lock().unwrap_or_else(|p| p.into_inner()) = None;
    // Everything still works once outside.
    let mut now = 0u64;
    let t = cuda_sim::cupti::table();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (t.cuptiGetTimestamp.expect("timestamp"))(&mut now) }, CUptiResult::CUPTI_SUCCESS);
    context::synchronize(d()).expect("the driver outside");
    drop(s);
    teardown(e);
    std::mem::take(&mut *SEEN.lock().unwrap_or_else(|p| p.into_inner()))
}

fn assert_all_refused(seen: &[(&'static str, String)], code: &str, calls: usize) {
    assert_eq!(seen.len(), calls, "{seen:?}");
    for (call, got) in seen {
        assert!(got.contains(code), "{call} answered {got}, not {code}");
    }
}

#[test]
fn driver_calls_from_a_host_function_are_refused() {
    let seen = probe_inside(Table::Driver, false, 0x2e01);
    assert_all_refused(&seen, "CUDA_ERROR_NOT_PERMITTED", 2);
}

#[test]
fn driver_calls_from_a_registered_kernel_are_refused() {
    let seen = probe_inside(Table::Driver, true, 0x2e02);
    assert_all_refused(&seen, "CUDA_ERROR_NOT_PERMITTED", 2);
}

#[test]
fn cupti_calls_from_a_host_function_are_refused() {
    let seen = probe_inside(Table::Cupti, false, 0x2e03);
    assert_all_refused(&seen, "CUPTI_ERROR_INVALID_OPERATION", 7);
}

#[test]
fn cupti_calls_from_a_registered_kernel_are_refused() {
    let seen = probe_inside(Table::Cupti, true, 0x2e04);
    assert_all_refused(&seen, "CUPTI_ERROR_INVALID_OPERATION", 7);
}

#[test]
fn nccl_calls_from_a_host_function_are_refused() {
    let seen = probe_inside(Table::Nccl, false, 0x2e05);
    assert_all_refused(&seen, "ncclInvalidUsage", 5);
}

#[test]
fn nccl_calls_from_a_registered_kernel_are_refused() {
    let seen = probe_inside(Table::Nccl, true, 0x2e06);
    assert_all_refused(&seen, "ncclInvalidUsage", 5);
}

//! A driver older than some entry points: the simulator's table with the
//! CUDA 11.2 stream-ordered allocator, the CUDA 12.4 parameter query and the
//! CUDA 10.0 host function removed. The features that need them report `Unsupported` naming the
//! version; the rest works — buffers fall back to `cuMemAlloc`/`cuMemFree`,
//! signatures go unchecked — and random programs stay race-free on it.
//! Its own test binary: it installs its own table.

use gpu_sync::{DeviceBuffer, Error, In, Len, Module, Out, Stream};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::Once;
use sync_tests::program;

fn setup() -> cuda_sim::Session {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let mut t = cuda_sim::table();
        t.cuMemAllocAsync = None;
        t.cuMemFreeAsync = None;
        t.cuDeviceGetDefaultMemPool = None;
        t.cuMemPoolGetAttribute = None;
        t.cuMemPoolSetAttribute = None;
        t.cuMemPoolTrimTo = None;
        t.cuFuncGetParamInfo = None;
        t.cuLaunchHostFunc = None;
        // SAFETY: the simulator's own entry points, some removed: a driver
        // lacking them, as an older one does.
        if let Err(e) = unsafe { cuda_sys::install(t) } {
            panic!("{e}");
        }
        kernels::register_sim_kernels();
    });
    cuda_sim::Session::new(5)
}

#[test]
fn missing_entry_points_are_unsupported_and_the_rest_works() {
    let session = setup();
    let dev = gpu_sync::Device::get(0).expect("device");
    assert!(!dev.has_memory_pools());
    match dev.trim_memory_pool(0) {
        Ok(()) => {}
        other => panic!("without pools trimming is a no-op, got {other:?}"),
    }
    let stats = dev.memory_stats().expect("stats");
    assert!(stats.pool.is_none());
    let s = Stream::new(&dev).expect("stream");
    let mut x = DeviceBuffer::<f32>::zeroed(&s, 64).expect("cuMemAlloc fallback");
    let m = Module::load(&dev, kernels::ModuleId::Elementwise.fatbin()).expect("module");
    // SAFETY: scale_f32(const float* in, float* out, float a, u64 n) in
    // kernels/cu/elementwise.cu: reads `in`, stores to `out`, at i < n only,
    // n a `Len` checked against both views; nothing else. Race-free in 1-D
    // launches, the only kind this test makes (`k` stays here).
    let k = unsafe { m.kernel::<(In<f32>, Out<f32>, f32, Len)>("scale_f32") }.expect("kernel");
    assert!(!k.signature_checked(), "no cuFuncGetParamInfo: nothing to check against");
    let y = DeviceBuffer::from_slice(&s, &[2.0f32; 64]).expect("y");
    k.launch(&s, gpu_sync::LaunchConfig::new(1, 64), (&y, &mut x, 3.0f32, 64u64)).expect("launch");
    assert_eq!(s.to_vec(&x).expect("x"), vec![6.0f32; 64]);
    drop((x, y));
    assert!(session.races().is_empty(), "{}", sync_tests::fmt_races(&session.races()));
}

#[test]
fn unsupported_names_the_version_that_introduced_the_call() {
    let session = setup();
    let dev = gpu_sync::Device::get(0).expect("device");
    let s = Stream::new(&dev).expect("stream");
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    match s.launch_host_fn(move || flag.store(true, std::sync::atomic::Ordering::SeqCst)) {
        Err(Error::Unsupported { call, needs, have }) => {
            assert_eq!(call, "cuLaunchHostFunc");
            assert_eq!(needs, "10.0");
            assert_eq!(have, "13.0");
            let msg = Error::Unsupported { call, needs, have }.to_string();
            assert!(msg.contains("needs a CUDA 10.0 driver"), "{msg}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // The closure was dropped, not run; the stream still works.
    let x = DeviceBuffer::from_slice(&s, &[7u32; 16]).expect("upload");
    assert_eq!(s.to_vec(&x).expect("read"), vec![7u32; 16]);
    s.synchronize().expect("sync");
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    drop(x);
    assert!(session.races().is_empty());
}

#[test]
fn random_programs_stay_race_free_without_memory_pools() {
    let _ = setup();
    let r = TestRunner::new(Config { cases: 16, failure_persistence: None, ..Config::default() }).run(
        &(any::<u64>(), program::program(24)),
        |(seed, ops)| {
            let session = cuda_sim::Session::new(seed);
            let dev = gpu_sync::Device::get(0).map_err(|e| TestCaseError::fail(e.to_string()))?;
            program::run(&dev, &ops).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let races = session.races();
            prop_assert!(races.is_empty(), "{}", sync_tests::fmt_races(&races));
            prop_assert!(session.live().is_empty(), "{:?}", session.live());
            Ok(())
        },
    );
    if let Err(e) = r {
        panic!("{e}");
    }
}

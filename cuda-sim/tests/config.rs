//! Process-wide configuration (its own test binary: it must run before the
//! first cuInit of the process).

mod common;
use common::*;

#[test]
fn configuration_applies_before_init_only() {
    let _serial = serial();
    // SAFETY: this binary's only test; no other thread reads the environment.
    unsafe { std::env::set_var(cuda_sim::DEVICES_ENV, "5") };
    assert_eq!(cuda_sim::Config::default().devices, 5);
    let _s = cuda_sim::Session::new(1);
    let mut n = 0;
    assert_eq!(cu!(cuDeviceGetCount(&mut n)), CUresult::CUDA_ERROR_NOT_INITIALIZED);
    let bad = cuda_sim::Config { devices: 65, ..Default::default() };
    assert!(matches!(cuda_sim::configure(bad), Err(cuda_sim::ConfigError::Invalid(_))));
    let cfg = cuda_sim::Config { devices: 3, memory_per_device: 1 << 30, version: 12080 };
    cuda_sim::configure(cfg).unwrap();
    let mut v = 0;
    ck!(cuDriverGetVersion(&mut v));
    assert_eq!(v, 12080);
    ck!(cuInit(0));
    ck!(cuDeviceGetCount(&mut n));
    assert_eq!(n, 3);
    assert_eq!(
        cuda_sim::configure(cuda_sim::Config::default()),
        Err(cuda_sim::ConfigError::AlreadyInitialized)
    );
    let mut total = 0;
    ck!(cuDeviceTotalMem(&mut total, 2));
    assert_eq!(total, 1 << 30);
    let mut ctx: CUcontext = std::ptr::null_mut();
    ck!(cuDevicePrimaryCtxRetain(&mut ctx, 2));
    ck!(cuCtxSetCurrent(ctx));
    let mut p = 0;
    assert_eq!(cu!(cuMemAlloc(&mut p, (1 << 30) + 1)), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    // install() again returns the installed simulator table.
    let a = cuda_sim::install().unwrap();
    let b = cuda_sim::install().unwrap();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.origin(), "cuda-sim");
    assert_eq!(cuda_sim::table().version(), 12080);
}

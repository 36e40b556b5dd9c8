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
    assert_eq!(code(device::get_count(d())), CUresult::CUDA_ERROR_NOT_INITIALIZED);
    let bad = cuda_sim::Config { devices: 65, ..Default::default() };
    assert!(matches!(cuda_sim::configure(bad), Err(cuda_sim::ConfigError::Invalid(_))));
    let cfg = cuda_sim::Config { devices: 3, memory_per_device: 1 << 30, version: 12080 };
    cuda_sim::configure(cfg).unwrap();
    assert_eq!(init::driver_get_version(d()), Ok(12080));
    init::init(d(), 0).unwrap();
    assert_eq!(device::get_count(d()), Ok(3));
    assert_eq!(
        cuda_sim::configure(cuda_sim::Config::default()),
        Err(cuda_sim::ConfigError::AlreadyInitialized)
    );
    assert_eq!(device::total_mem(d(), 2), Ok(1 << 30));
    let ctx = primary_ctx::retain(d(), 2).unwrap();
    context::set_current(d(), Some(ctx)).unwrap();
    assert_eq!(code(memory::alloc(d(), (1 << 30) + 1)), CUresult::CUDA_ERROR_OUT_OF_MEMORY);
    // install() again returns the installed simulator table.
    let a = cuda_sim::install().unwrap();
    let b = cuda_sim::install().unwrap();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.origin(), "cuda-sim");
    assert_eq!(cuda_sim::table().version(), 12080);
}

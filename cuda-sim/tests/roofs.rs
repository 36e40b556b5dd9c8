//! The device model bounds every simulated kernel rate: a kernel priced by
//! the bytes its pointers may touch reads no faster than the roof of the
//! path each pointer takes — a read-write pointer's bytes counted read and
//! written, another device's memory over the peer link. Its own test binary:
//! it runs two simulated devices.

mod common;
use common::*;
use cuda_sim::model::{HBM_BYTES_PER_NS, NVLINK_BYTES_PER_NS};

/// Two devices, configured before this binary's first `cuInit`.
fn two_devices() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cfg = cuda_sim::Config { devices: 2, ..Default::default() };
        cuda_sim::configure(cfg).expect("configured before the first cuInit");
    });
}

/// Simulated ns of the launch `enqueue` makes on `s`, between two events.
fn simulated_ns(s: &OwnedStream, enqueue: impl FnOnce()) -> f64 {
    let (a, b) = (event::create(d(), 0).unwrap(), event::create(d(), 0).unwrap());
    event::record(&a, s).unwrap();
    enqueue();
    event::record(&b, s).unwrap();
    event::synchronize(&b).unwrap();
    let ms = event::elapsed_time(&a, &b).unwrap();
    event::destroy(a).unwrap();
    event::destroy(b).unwrap();
    f64::from(ms) * 1e6
}

#[test]
fn a_read_write_pointer_moves_its_bytes_twice() {
    two_devices();
    let _serial = serial();
    let e = env(400);
    let n = 4u64 << 20;
    let bytes = 4 * n;
    let (a, b) = (e.alloc(bytes as usize), e.alloc(bytes as usize));
    let s = e.stream(0);
    e.fill(&s, a, 1, n);
    e.fill(&s, b, 2, n);
    // `sim_add_u32(a, b, n)`: reads `a`, reads and writes `b`: 3 × 16 MiB.
    let ns = simulated_ns(&s, || e.add(&s, a, b, n));
    let rate = 3.0 * bytes as f64 / ns;
    // Events read in f32 milliseconds: 0.01 % of slack.
    assert!(rate <= HBM_BYTES_PER_NS * 1.0001, "{rate:.0} B/ns above the HBM roof {HBM_BYTES_PER_NS:.0}");
    assert_eq!(e.read_u32(b, 4), vec![3; 4], "the kernel ran");
    stream::destroy(s).unwrap();
    sim::free(a).unwrap();
    sim::free(b).unwrap();
    teardown(e);
}

#[test]
fn a_kernel_on_a_peers_memory_runs_at_the_link() {
    two_devices();
    let _serial = serial();
    let e = env(401);
    let n = 4u64 << 20;
    let bytes = 4 * n;
    let ptr = e.alloc(bytes as usize);
    let ctx1 = primary_ctx::retain(d(), 1).unwrap();
    context::set_current(d(), Some(ctx1)).unwrap();
    context::enable_peer_access(e.ctx, 0).unwrap();
    // SAFETY: a NUL-terminated PTX image.
    let m1 = unsafe { module::load_data(d(), PTX.as_ptr().cast()) }.unwrap();
    let f = module::get_function(m1.as_borrowed(), c"sim_fill_u32").unwrap();
    let s1 = stream::create_with_priority(d(), 0, 0).unwrap();
    let (mut p, mut v, mut len) = (ptr, 7u32, n);
    let ns = simulated_ns(&s1, || {
        let mut args = [arg(&mut p), arg(&mut v), arg(&mut len)];
        assert_eq!(e.launch(f, &s1, &mut args), OK);
    });
    let rate = bytes as f64 / ns;
    assert!(
        rate <= NVLINK_BYTES_PER_NS * 1.0001,
        "a kernel on device 1 writing device 0's memory: {rate:.0} B/ns above the link's {NVLINK_BYTES_PER_NS:.0}"
    );
    assert!(rate > 0.9 * NVLINK_BYTES_PER_NS, "at the link, not slower: {rate:.0} B/ns");
    stream::destroy(s1).unwrap();
    module::unload(m1).unwrap();
    context::set_current(d(), Some(e.ctx)).unwrap();
    assert_eq!(e.read_u32(ptr, 4), vec![7; 4], "the kernel ran");
    sim::free(ptr).unwrap();
    // SAFETY: the test is done with device 1's context and its handles.
    unsafe { primary_ctx::release(d(), 1) }.unwrap();
    teardown(e);
}

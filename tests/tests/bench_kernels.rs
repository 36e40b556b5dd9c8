//! gpu-bench's instrument kernels (`kernels::BenchKernels`), on the
//! simulator and, from the GPU bundle, on a GPU: the clock probe reports a
//! plausible SM clock, the stamp's entry and exit bracket its spin, the spin gate opens when the host writes its flag
//! and times out when it does not, and the SM copy from mapped pinned memory
//! copies exactly.
#![allow(unsafe_code)]

use gpu_sync::{DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use kernels::BenchKernels;
use sync_tests::ctx;

#[test]
fn clock_probe_reports_a_plausible_clock() {
    let t = ctx(11);
    let k = BenchKernels::load(&t.device).expect("load");
    let s = Stream::new(&t.device).expect("stream");
    let mut out = DeviceBuffer::<u64>::zeroed(&s, 2).expect("out");
    k.clock_probe(&s, 2_000_000, &mut out).expect("probe");
    let v = s.to_vec(&out).expect("read");
    assert!(v[0] >= 2_000_000, "waited {} cycles", v[0]);
    let mhz = v[0] as f64 / v[1] as f64 * 1e3;
    assert!((200.0..4000.0).contains(&mhz), "clock {mhz} MHz");
    if t.sim() {
        assert!((mhz - 1980.0).abs() < 1.0, "the simulator's clock is 1980 MHz, got {mhz}");
    }
    let mut wrong = DeviceBuffer::<u64>::zeroed(&s, 1).expect("out");
    assert!(matches!(k.clock_probe(&s, 1, &mut wrong), Err(gpu_sync::Error::InvalidArgument(_))));
    t.finish();
}

#[test]
fn stamp_writes_the_bodys_entry_and_exit_on_the_global_timer() {
    let t = ctx(14);
    let k = BenchKernels::load(&t.device).expect("load");
    let s = Stream::new(&t.device).expect("stream");
    let mut out = DeviceBuffer::<u64>::from_slice(&s, &[u64::MAX, 0]).expect("out");
    // ~1 ms of spin at any clock from 200 MHz to 4 GHz.
    k.stamp(&s, 2_000_000, &mut out).expect("stamp");
    let v = s.to_vec(&out).expect("read");
    assert!(v[1] > v[0], "exit {} not after entry {}", v[1], v[0]);
    let ns = v[1] - v[0];
    assert!((500_000..10_000_000).contains(&ns), "2M cycles took {ns} ns");
    if t.sim() {
        // The simulator's clock is 1980 MHz and its timer starts at 0.
        assert_eq!(v, [0, 1_010_102]);
    }
    let mut wrong = DeviceBuffer::<u64>::zeroed(&s, 1).expect("out");
    assert!(matches!(k.stamp(&s, 1, &mut wrong), Err(gpu_sync::Error::InvalidArgument(_))));
    t.finish();
}

#[test]
fn spin_gate_opens_on_the_flag_and_times_out_without_it() {
    // A device synchronization beside this test would run the gate before
    // the host opens it (the simulator runs queued work at host waits).
    let _one_at_a_time = sync_tests::exclusive();
    let t = ctx(12);
    let k = BenchKernels::load(&t.device).expect("load");
    let s = Stream::new(&t.device).expect("stream");
    let mut flag = PinnedBuffer::<u32>::new(&t.device, 1, HostAllocFlags::DEVICE_MAP).expect("flag");
    let addr = flag.device_ptr().expect("mapped");
    let mut out = DeviceBuffer::<u64>::zeroed(&s, 1).expect("out");
    // SAFETY: `flag` is a live DEVICE_MAP allocation, kept until the stream
    // is synchronized below.
    unsafe { k.spin_gate(&s, addr, 10_000_000_000, &mut out) }.expect("arm");
    flag.as_mut_slice().expect("flag")[0] = 1;
    assert_eq!(s.to_vec(&out).expect("read"), [1], "opened by the flag");
    if !t.sim() {
        // On a GPU, a closed gate gives up after its timeout (the simulator
        // runs the gate only when the host waits, so it cannot be closed then).
        flag.as_mut_slice().expect("flag")[0] = 0;
        // SAFETY: as above.
        unsafe { k.spin_gate(&s, addr, 1_000_000, &mut out) }.expect("arm");
        assert_eq!(s.to_vec(&out).expect("read"), [0], "timed out");
    }
    // SAFETY: as above; the address check comes first.
    let r = unsafe { k.spin_gate(&s, addr + 1, 1, &mut out) };
    assert!(matches!(r, Err(gpu_sync::Error::InvalidArgument(_))), "{r:?}");
    s.synchronize().expect("sync");
    drop(flag);
    t.finish();
}

#[test]
fn sm_copy_from_mapped_memory_copies_exactly() {
    let t = ctx(13);
    let k = BenchKernels::load(&t.device).expect("load");
    let s = Stream::new(&t.device).expect("stream");
    let data: Vec<u32> = (0..4096u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let src = PinnedBuffer::from_slice(&t.device, &data, HostAllocFlags::DEVICE_MAP).expect("src");
    let mut dst = DeviceBuffer::<u32>::zeroed(&s, data.len()).expect("dst");
    // SAFETY: `src` is neither written nor dropped before the stream is
    // synchronized (`to_vec`).
    unsafe { k.copy_mapped(&s, &src, &mut dst) }.expect("copy");
    assert_eq!(s.to_vec(&dst).expect("read"), data);
    let plain = PinnedBuffer::<u32>::new(&t.device, 4096, HostAllocFlags::empty()).expect("plain");
    // SAFETY: rejected before any launch (not DEVICE_MAP).
    let r = unsafe { k.copy_mapped(&s, &plain, &mut dst) };
    assert!(r.is_err(), "a buffer that is not mapped must be refused");
    let mut short = DeviceBuffer::<u32>::zeroed(&s, 8).expect("short");
    // SAFETY: rejected before any launch (lengths differ).
    let r = unsafe { k.copy_mapped(&s, &src, &mut short) };
    assert!(matches!(r, Err(gpu_sync::Error::InvalidArgument(_))), "{r:?}");
    s.synchronize().expect("sync");
    t.finish();
}

//! Several devices through the engine (issue 29): the one device rule (a
//! kernel's buffers are reached from its stream's device, else
//! `DeviceMismatch` naming both devices), copies between devices ordered
//! against both devices' work, and submissions from several threads over
//! two and three devices with the race oracle clean.
//!
//! On the simulator (`CUDA_SIM_DEVICES`, default 2; three for the
//! three-device test when set) each test also asserts the race oracle saw
//! nothing; on a GPU the same tests check the data.

use gpu_sync::{DeviceBuffer, Error, Stream};
use kernels::{Kernels, reference};
use sync_tests::{ctx, devices};

const SEED: u32 = 0x5EED_0029;

#[test]
fn a_kernel_on_device_1_given_a_device_0_buffer_is_refused_naming_both() {
    let t = ctx(0x2901);
    let Some(d) = devices(2) else { return };
    let k1 = Kernels::load(&d[1]).expect("kernels on device 1");
    let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
    let mut x = DeviceBuffer::<u32>::zeroed(&s0, 256).expect("x on device 0");
    let r = k1.bump(&s1, &mut x, 1);
    assert!(
        matches!(r, Err(Error::DeviceMismatch { what: "a buffer argument", expected: 1, found: 0 })),
        "{r:?}"
    );
    let msg = r.expect_err("refused").to_string();
    assert!(msg.contains("device 0") && msg.contains("device 1"), "{msg}");
    // Nothing ran: x is still zero.
    assert!(s0.to_vec(&x).expect("x").iter().all(|&v| v == 0));
    // The same kernel on device 0 is fine.
    let k0 = Kernels::load(&d[0]).expect("kernels on device 0");
    k0.bump(&s0, &mut x, 1).expect("bump on device 0");
    assert!(s0.to_vec(&x).expect("x").iter().all(|&v| v == 1));
    t.finish();
}

#[test]
fn threads_copying_between_two_devices_and_launching_on_both_are_ordered() {
    let t = ctx(0x2902);
    let Some(d) = devices(2) else { return };
    let n = 1 << 12;
    let k0 = Kernels::load(&d[0]).expect("kernels 0");
    let main0 = Stream::new(&d[0]).expect("main0");
    let mut src = DeviceBuffer::<u32>::alloc(&main0, n).expect("src on device 0");
    k0.fill_pattern(&main0, &mut src, SEED).expect("fill");
    let session = t.session.as_ref();
    let results: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3u32)
            .map(|i| {
                let (d, src) = (&d, &src);
                scope.spawn(move || {
                    let _g = session.map(|s| s.enter());
                    let k1 = Kernels::load(&d[1]).expect("kernels 1");
                    let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
                    // Device 0 to device 1 on device 1's stream, a kernel on
                    // device 1, and back on device 0's stream: each step
                    // ordered after the last across the two devices' books.
                    let mut y = DeviceBuffer::<u32>::alloc(&s1, n).expect("y on device 1");
                    s1.copy(src, &mut y).expect("peer copy 0 -> 1");
                    k1.bump(&s1, &mut y, i + 1).expect("bump on device 1");
                    let mut z = DeviceBuffer::<u32>::alloc(&s0, n).expect("z on device 0");
                    s0.copy(&y, &mut z).expect("peer copy 1 -> 0");
                    drop(y);
                    s0.to_vec(&z).expect("z")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a thread")).collect()
    });
    // The source rewritten after the threads' copies read it: waits for
    // every reader on device 1's streams.
    k0.fill_pattern(&main0, &mut src, SEED ^ 1).expect("refill");
    for (i, got) in results.iter().enumerate() {
        let want: Vec<u32> =
            (0..n as u64).map(|j| reference::pattern(SEED, j).wrapping_add(i as u32 + 1)).collect();
        assert!(got == &want, "thread {i}: wrong data after two peer copies and a kernel");
    }
    main0.synchronize().expect("sync");
    t.finish();
}

//! Several devices through the engine (issue 29): the one device rule (a
//! kernel's buffers are reached from its stream's device, else
//! `DeviceMismatch` naming both devices), copies between devices ordered
//! against both devices' work, and submissions from several threads over
//! two and three devices with the race oracle clean.
//!
//! On the simulator (`CUDA_SIM_DEVICES`, default 2; three for the
//! three-device test when set) each test also asserts the race oracle saw
//! nothing; on a GPU the same tests check the data.

use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use kernels::{Kernels, reference};
use sync_tests::ctx;

const SEED: u32 = 0x5EED_0029;

/// Devices `0..n`, or `None` (and a note) when the machine has fewer.
fn devices(n: i32) -> Option<Vec<Device>> {
    let count = Device::count().expect("count");
    if count < n as usize {
        eprintln!("{count} device(s), {n} needed: nothing to test");
        return None;
    }
    Some((0..n).map(|i| Device::get(i).expect("device")).collect())
}

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
    let _ = reference::pattern(SEED, 0);
    t.finish();
}

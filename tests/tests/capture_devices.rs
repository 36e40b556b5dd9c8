//! Graph capture and several devices (issue 29 item 2): a copy from
//! another device's buffer captured on one device's stream replays ordered
//! after the other device's writes over the link (peer access on), and is
//! refused with `Error::Capturing` without peer access (the driver would
//! stage it through host memory, which invalidates a capture); a wait on another device's stream that is not in
//! the capture is refused with `Error::Capturing`; a kernel given a peer
//! buffer inside a capture is refused unless peer access is on. Its own
//! test binary with one test: peer access is process-wide state.

use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use kernels::{Kernels, reference};
use sync_tests::ctx;

const N: usize = 1 << 12;

/// Captures `dst = src` (src on `d[1]`) on a stream of `d[0]`, then three
/// times bumps `src` on device 1 and replays: `dst` follows each bump.
fn captured_copy_follows_the_other_devices_writes(d: &[Device], k1: &Kernels) {
    let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
    let mut src = DeviceBuffer::<u32>::alloc(&s1, N).expect("src on device 1");
    k1.fill_pattern(&s1, &mut src, 29).expect("fill");
    let mut dst = DeviceBuffer::<u32>::zeroed(&s0, N).expect("dst on device 0");
    let graph = s0.capture(|c| c.stream().copy(&src, &mut dst)).expect("capture of a copy between devices");
    let exec = graph.instantiate().expect("instantiate");
    let mut want: Vec<u32> = (0..N as u64).map(|i| reference::pattern(29, i)).collect();
    for round in 1..=3u32 {
        k1.bump(&s1, &mut src, round).expect("bump on device 1");
        reference::bump_u32(&mut want, round);
        exec.launch(&s0).expect("replay on device 0");
        assert_eq!(s0.to_vec(&dst).expect("dst"), want, "round {round}");
    }
}

#[test]
fn captures_across_devices_replay_in_order_or_are_refused() {
    let t = ctx(0x2920);
    let count = Device::count().expect("count");
    if count < 2 {
        eprintln!("{count} device(s), 2 needed: nothing to test");
        return;
    }
    let d: Vec<Device> = (0..2).map(|i| Device::get(i).expect("device")).collect();
    let (k0, k1) = (Kernels::load(&d[0]).expect("k0"), Kernels::load(&d[1]).expect("k1"));

    // Staged (device 0 does not reach device 1's memory): the driver would
    // stage the copy through host memory, which a graph cannot hold (on a
    // GPU the capture is invalidated at its end), so it is refused.
    assert!(!d[0].peer_access_enabled(&d[1]));
    {
        let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
        let src = DeviceBuffer::<u32>::zeroed(&s1, N).expect("src on device 1");
        let mut dst = DeviceBuffer::<u32>::zeroed(&s0, N).expect("dst on device 0");
        let graph = s0.capture(|c| {
            let r = c.stream().copy(&src, &mut dst);
            assert!(matches!(r, Err(Error::Capturing { .. })), "{r:?}");
            Ok(())
        });
        graph.expect("the capture ends cleanly");
        // Outside a capture the same copy is staged and correct.
        s0.copy(&src, &mut dst).expect("staged copy");
        assert!(s0.to_vec(&dst).expect("dst").iter().all(|&v| v == 0));
    }

    // A wait on a stream of another device, outside the capture: refused.
    let (s0, s1) = (Stream::new(&d[0]).expect("s0"), Stream::new(&d[1]).expect("s1"));
    let mut x1 = DeviceBuffer::<u32>::zeroed(&s1, N).expect("x1");
    k1.bump(&s1, &mut x1, 1).expect("bump");
    let graph = s0.capture(|c| {
        let r = c.stream().wait_stream(&s1);
        assert!(matches!(r, Err(Error::Capturing { .. })), "{r:?}");
        // A kernel of device 0 given device 1's buffer: refused while device
        // 0 does not reach device 1.
        let r = k0.bump(c.stream(), &mut x1, 1);
        assert!(matches!(r, Err(Error::DeviceMismatch { expected: 0, found: 1, .. })), "{r:?}");
        Ok(())
    });
    graph.expect("the capture ends cleanly");

    // Over the link, where the pair has one.
    if d[0].can_access_peer(&d[1]).expect("cuDeviceCanAccessPeer") {
        d[0].enable_peer_access(&d[1]).expect("enable");
        captured_copy_follows_the_other_devices_writes(&d, &k1);
        // Now a kernel of device 0 may touch device 1's buffer, captured:
        // the replay is ordered after device 1's bump and before the read.
        let graph = s0.capture(|c| k0.bump(c.stream(), &mut x1, 10)).expect("capture of a peer kernel");
        let exec = graph.instantiate().expect("instantiate");
        k1.bump(&s1, &mut x1, 5).expect("bump on device 1");
        exec.launch(&s0).expect("replay");
        assert!(s1.to_vec(&x1).expect("x1").iter().all(|&v| v == 16), "1 + 5 + 10");
        d[0].disable_peer_access(&d[1]).expect("disable");
    }
    t.finish();
}

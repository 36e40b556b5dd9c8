//! The live-recorder list stays bounded however many recorders come and go.

use super::live;
use crate::Device;
use crate::trace::{RecordOptions, Timing};

#[test]
fn recorders_gone_leave_no_entry_in_the_live_list() {
    let _one = crate::trace::one_recorder_at_a_time();
    let _session = crate::sim::session(0x5e).expect("session");
    let device = Device::get(0).expect("device");
    let mut most = 0;
    for _ in 0..20_000 {
        drop(device.record(RecordOptions::new(Timing::HostOnly)).expect("recorder"));
        most = most.max(live().len());
    }
    // One recorder lives at a time here; other tests of this binary
    // may start a few beside it.
    assert!(most <= 8, "the live-recorder list grew to {most} entries after 20,000 recorders");
}

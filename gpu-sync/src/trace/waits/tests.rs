//! Records name what their waits wait for: the engine's implicit waits for
//! a buffer used across streams (one device and two), `Stream::wait_stream`
//! and `Stream::wait`, each with the record of the operation waited for; an
//! operation with no cross-stream dependency names none.

use crate::trace::{OpKind, OpRecord, RecordOptions, Recording, Timing, WaitSource};
use crate::{Device, DeviceBuffer, Stream, SyncEvent};

/// The one record of `rec` made on `stream` after the one of id `after`
/// (0: any), named `name`.
fn find<'r>(rec: &'r Recording, stream: &Stream, name: &str, after: u64) -> &'r OpRecord {
    rec.ops
        .iter()
        .find(|o| o.stream == stream.id() && o.name == name && o.id > after)
        .unwrap_or_else(|| panic!("no {name} on stream {} after op {after}: {:#?}", stream.id(), rec.ops))
}

fn src(device: i32, stream: &Stream, op: &OpRecord) -> WaitSource {
    WaitSource { device, stream: stream.id(), op: Some(op.id) }
}

#[test]
fn trace_records_name_the_stream_and_operation_each_wait_follows() {
    let _one = crate::trace::one_recorder_at_a_time();
    let _session = crate::sim::session(0x3a).expect("session");
    let (d0, d1) = (Device::get(0).expect("device 0"), Device::get(1).expect("device 1"));
    let (a, b) = (Stream::new(&d0).expect("a"), Stream::new(&d0).expect("b"));
    let c = Stream::new(&d1).expect("c");
    let mut x = DeviceBuffer::<u32>::zeroed(&a, 1024).expect("x");
    let mut y = DeviceBuffer::<u32>::zeroed(&a, 1024).expect("y");
    let mut w = DeviceBuffer::<u32>::zeroed(&c, 1024).expect("w");
    let mut v = DeviceBuffer::<u32>::zeroed(&b, 1024).expect("v");
    d0.synchronize().expect("sync 0");
    d1.synchronize().expect("sync 1");
    let (r0, r1) = (
        d0.record(RecordOptions::new(Timing::Events)).expect("record 0"),
        d1.record(RecordOptions::new(Timing::Events)).expect("record 1"),
    );
    a.fill_u32(&mut x, 1).expect("fill x on a");
    // b writes x after a: the engine makes b wait for a's fill.
    b.fill_u32(&mut x, 2).expect("fill x on b");
    a.fill_u32(&mut y, 3).expect("fill y on a");
    // c (device 1) waits for all of a so far: a's fill of y.
    c.wait_stream(&a).expect("c waits for a");
    // Nothing crosses streams: no wait.
    c.fill_u32(&mut w, 4).expect("fill w on c");
    b.fill_u32(&mut v, 5).expect("fill v on b");
    // c reads x, last written on b (device 0): an implicit wait across devices.
    c.copy(&x, &mut w).expect("copy x to w on c");
    // An event recorded on a, waited for on b.
    let ev = SyncEvent::new(&d0).expect("event");
    a.fill_u32(&mut y, 6).expect("fill y on a again");
    ev.record(&a).expect("record on a");
    b.wait(&ev).expect("b waits for the event");
    let (rec0, rec1) = (r0.stop().expect("stop 0"), r1.stop().expect("stop 1"));

    let fill_x_a = find(&rec0, &a, "memset", 0);
    let fill_x_b = find(&rec0, &b, "memset", 0);
    assert_eq!(fill_x_a.after, [], "nothing before a's first fill");
    assert_eq!(fill_x_b.after, [src(0, &a, fill_x_a)], "b's write after a's");
    let fill_y_a = find(&rec0, &a, "memset", fill_x_a.id);
    assert_eq!(fill_y_a.after, []);
    let wait_c = find(&rec1, &c, "wait", 0);
    assert_eq!(wait_c.kind, OpKind::Wait);
    assert_eq!(wait_c.after, [src(0, &a, fill_y_a)], "c's wait_stream for a's last operation");
    let fill_w_c = find(&rec1, &c, "memset", 0);
    assert_eq!(fill_w_c.after, [], "c's own buffer: no wait");
    let fill_v_b = find(&rec0, &b, "memset", fill_x_b.id);
    assert_eq!(fill_v_b.after, [], "b's own buffer: no wait");
    let copy = rec1.ops.iter().find(|o| o.stream == c.id() && o.kind.category() == "memcpy").expect("copy");
    assert_eq!(copy.after, [src(0, &b, fill_x_b)], "c's read of x across devices waits for b's write");
    let fill_y_again = find(&rec0, &a, "memset", fill_v_b.id);
    let wait_b = find(&rec0, &b, "wait", 0);
    assert_eq!(wait_b.after, [src(0, &a, fill_y_again)], "b's event wait names a's fill before the record");
    // The records of a stream are numbered in submission order, so each
    // source precedes its wait.
    for op in rec0.ops.iter().chain(&rec1.ops) {
        assert!(op.after.iter().all(|s| s.op.is_some_and(|id| id < op.id)), "{op:?}");
    }
}

#[test]
fn trace_waits_made_before_recording_began_name_no_operation() {
    let _one = crate::trace::one_recorder_at_a_time();
    let _session = crate::sim::session(0x3b).expect("session");
    let d0 = Device::get(0).expect("device 0");
    let (a, b) = (Stream::new(&d0).expect("a"), Stream::new(&d0).expect("b"));
    let mut x = DeviceBuffer::<u32>::zeroed(&a, 1024).expect("x");
    a.fill_u32(&mut x, 1).expect("fill x on a, unrecorded");
    let r = d0.record(RecordOptions::new(Timing::HostOnly)).expect("record");
    b.fill_u32(&mut x, 2).expect("fill x on b");
    let rec = r.stop().expect("stop");
    let fill = find(&rec, &b, "memset", 0);
    assert_eq!(fill.after, [WaitSource { device: 0, stream: a.id(), op: None }]);
}

#[test]
fn trace_waits_keep_one_entry_per_stream_the_latest_and_none_for_the_waiter_itself() {
    use super::{Pending, Waits, merge};
    let w = |stream, at| Pending { waiter: 1, device: 0, stream, at };
    let mut waits = Waits::new();
    for p in [w(2, 5), w(3, 4), w(2, 9), w(2, 7), w(1, 8)] {
        merge(&mut waits, p);
    }
    assert_eq!(waits.as_slice(), [w(2, 9), w(3, 4)]);
}

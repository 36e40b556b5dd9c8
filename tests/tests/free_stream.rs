//! Where a buffer's stream-ordered free goes: on the stream of its latest
//! outstanding use (a copy or collective on a communication stream), not
//! on the stream that allocated it — so dropping a buffer right after
//! another stream used it never makes the allocating stream (busy with
//! other work) wait for that stream. The race oracle checks that the free
//! still comes after every use; the timing checks that the allocating
//! stream did not wait.

use gpu_sync::{DeviceBuffer, Stream, TimingEvent};
use kernels::Kernels;
use sync_tests::ctx;

const N: usize = 1 << 12;

#[test]
fn a_buffer_dropped_after_a_use_on_another_stream_is_freed_there_without_stalling_its_own_stream() {
    let t = ctx(0x2940);
    let k = Kernels::load(&t.device).expect("kernels");
    let (compute, comm) = (Stream::new(&t.device).expect("compute"), Stream::new(&t.device).expect("comm"));
    let mut x = DeviceBuffer::<u32>::zeroed(&compute, N).expect("x on compute");
    k.bump(&compute, &mut x, 1).expect("written on compute");
    // The communication stream is busy for ~20 ms, then reads x.
    let started = TimingEvent::new(&t.device).expect("event");
    started.record(&comm).expect("record");
    let mut spun = DeviceBuffer::<u64>::zeroed(&comm, 1).expect("spin out");
    k.spin(&comm, t.cycles_for_ms(20.0), &mut spun).expect("spin");
    let mut y = DeviceBuffer::<u32>::zeroed(&comm, N).expect("y");
    comm.copy(&x, &mut y).expect("read x on comm");
    drop(x);
    // The compute stream goes on at once: its next event is not held
    // behind the communication stream's 20 ms.
    let mut z = DeviceBuffer::<u32>::zeroed(&compute, N).expect("z");
    k.bump(&compute, &mut z, 1).expect("next work on compute");
    let next = TimingEvent::new(&t.device).expect("event");
    next.record(&compute).expect("record");
    next.synchronize().expect("sync");
    let waited = started.elapsed(&next).expect("elapsed");
    comm.synchronize().expect("sync comm");
    let spun_ms = started.elapsed(&{
        let e = TimingEvent::new(&t.device).expect("event");
        e.record(&comm).expect("record");
        e.synchronize().expect("sync");
        e
    });
    let spun_ms = spun_ms.expect("elapsed").as_secs_f64() * 1e3;
    assert!(spun_ms > 10.0, "the communication stream was busy ({spun_ms:.2} ms)");
    assert!(
        waited.as_secs_f64() * 1e3 < spun_ms / 2.0,
        "the compute stream waited {:.2} ms for the communication stream ({spun_ms:.2} ms busy): the free went on it",
        waited.as_secs_f64() * 1e3
    );
    assert!(comm.to_vec(&y).expect("y").iter().all(|&v| v == 1));
    t.finish();
}

//! The CUPTI subset on the simulator, through cuda-sys's one process-wide
//! subscriber: records of kernels, copies and memsets come back with the
//! simulated start and end of each operation, on the stream that ran it,
//! only for the kinds a consumer asked for, and only while it is alive.

mod common;
use common::*;
use cuda_sys::cupti::{ActivityKind, ActivityOp, SyncKind, activity};

#[test]
fn activity_records_carry_the_simulated_times_of_each_operation() {
    let _serial = serial();
    let e = env(901);
    let a = activity().expect("the simulator's CUPTI");
    assert_eq!(a.origin(), "cuda-sim");
    let s = e.stream(0);
    let sid = a.stream_id(e.ctx.as_raw(), s.as_raw()).expect("cuptiGetStreamIdEx");
    let buf = e.alloc(4096);
    {
        let c = a.consumer(&[ActivityKind::Kernel, ActivityKind::Memset]).expect("consumer");
        // Work before the flush of an earlier consumer is not this one's.
        assert!(c.take().expect("take").is_empty());
        sim::memset32(buf, 7, 1024, &s).expect("memset");
        e.fill(&s, buf, 3, 1024);
        e.fill(&s, buf, 4, 512);
        stream::synchronize(&s).expect("sync");
        let recs: Vec<_> = c.take().expect("take").into_iter().filter(|r| r.stream_id == sid).collect();
        assert_eq!(recs.len(), 3, "{recs:?}");
        assert!(matches!(recs[0].op, ActivityOp::Memset { bytes: 4096, value: 7 }), "{:?}", recs[0]);
        for r in &recs[1..] {
            let ActivityOp::Kernel { name, grid, block, graph_id, .. } = &r.op else { panic!("{r:?}") };
            assert_eq!(&**name, "sim_fill_u32");
            assert_eq!((*grid, *block, *graph_id), ([1, 1, 1], [1, 1, 1], 0));
            // A fill of 4 KiB: the device model's shortest kernel.
            assert_eq!(r.duration_ns(), cuda_sim::model::MIN_KERNEL_NS, "{r:?}");
        }
        // One after the other on one stream.
        assert!(recs.windows(2).all(|w| w[0].end_ns <= w[1].start_ns), "{recs:?}");
        assert_ne!(recs[1].correlation_id, recs[2].correlation_id);
        // A copy is not a kind this consumer asked for.
        let mut host = vec![0u32; 4];
        // SAFETY: `host` is valid for 16 bytes; a pageable copy completes
        // before the call returns.
        unsafe { memory::memcpy_dtoh_async(host.as_mut_ptr().cast(), buf, 16, &s) }.expect("copy");
        stream::synchronize(&s).expect("sync");
        assert!(c.take().expect("take").iter().all(|r| r.kind() != ActivityKind::Memcpy));
        assert_eq!(host, [4; 4]);
    }
    // No consumer: nothing is recorded (the kinds are disabled again).
    e.fill(&s, buf, 5, 16);
    stream::synchronize(&s).expect("sync");
    let c = a.consumer(&[ActivityKind::Kernel]).expect("consumer");
    assert!(c.take().expect("take").is_empty());
    assert_eq!(a.dropped(), 0);
    drop(c);
    sim::free(buf).expect("free");
    drop(s);
    teardown(e);
}

#[test]
fn a_second_subscriber_is_refused_as_a_profiling_tool_would_be() {
    let _serial = serial();
    let _ = d(); // installs the simulator, its CUPTI with it
    let _ = activity().expect("the simulator's CUPTI");
    let t = cuda_sim::cupti::table();
    let mut h = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; no callback.
    let r = unsafe { (t.cuptiSubscribe.expect("subscribe"))(&mut h, None, std::ptr::null_mut()) };
    assert_eq!(cuda_sys::cupti::cupti_result_name(r), "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
}

#[test]
fn external_correlation_ids_nest_per_thread_and_pair_with_each_operation() {
    let _serial = serial();
    let e = env(902);
    let a = activity().expect("the simulator's CUPTI");
    let s = e.stream(0);
    let buf = e.alloc(4096);
    let c = a
        .consumer(&[ActivityKind::Kernel, ActivityKind::ExternalCorrelation, ActivityKind::Synchronization])
        .expect("consumer");
    a.push_external_correlation(7).expect("push 7");
    e.fill(&s, buf, 1, 1024);
    a.push_external_correlation(9).expect("push 9");
    e.fill(&s, buf, 2, 1024);
    assert_eq!(a.pop_external_correlation().expect("pop"), 9);
    e.fill(&s, buf, 3, 1024);
    assert_eq!(a.pop_external_correlation().expect("pop"), 7);
    assert!(a.pop_external_correlation().is_err(), "nothing left to pop");
    e.fill(&s, buf, 4, 1024);
    stream::synchronize(&s).expect("sync");
    let recs = c.take().expect("take");
    let external: Vec<(u64, u32)> = recs
        .iter()
        .filter_map(|r| match r.op {
            ActivityOp::ExternalCorrelation { external_kind, external_id } => {
                assert_eq!(external_kind, cuda_sys::cupti::EXTERNAL_KIND_CUSTOM0);
                Some((external_id, r.correlation_id))
            }
            _ => None,
        })
        .collect();
    assert_eq!(external.iter().map(|x| x.0).collect::<Vec<_>>(), [7, 9, 7], "{recs:?}");
    let kernels: Vec<u32> =
        recs.iter().filter(|r| matches!(r.op, ActivityOp::Kernel { .. })).map(|r| r.correlation_id).collect();
    assert_eq!(kernels.len(), 4);
    // Each external record names the correlation of the fill made under it;
    // the last fill, made with nothing pushed, has none.
    assert_eq!(external.iter().map(|x| x.1).collect::<Vec<_>>(), kernels[..3]);
    assert!(
        recs.iter()
            .any(|r| matches!(r.op, ActivityOp::Synchronization { sync: SyncKind::StreamSynchronize, .. }))
    );
    drop(c);
    sim::free(buf).expect("free");
    drop(s);
    teardown(e);
}

/// The kernel records on stream `sid` among `c`'s records, as (name, ns).
fn kernels_on(c: &cuda_sys::cupti::Consumer, sid: u32) -> Vec<(String, u64)> {
    c.take()
        .expect("take")
        .into_iter()
        .filter(|r| r.stream_id == sid)
        .filter_map(|r| match &r.op {
            ActivityOp::Kernel { name, .. } => Some((name.to_string(), r.duration_ns())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_serialized_kernel_consumer_receives_the_kernels_simulated_times() {
    let _serial = serial();
    let e = env(903);
    let a = activity().expect("the simulator's CUPTI");
    let s = e.stream(0);
    let sid = a.stream_id(e.ctx.as_raw(), s.as_raw()).expect("cuptiGetStreamIdEx");
    let buf = e.alloc(4096);
    let c = a.consumer(&[ActivityKind::SerialKernel]).expect("consumer");
    e.fill(&s, buf, 1, 1024);
    e.fill(&s, buf, 2, 16);
    stream::synchronize(&s).expect("sync");
    let min = cuda_sim::model::MIN_KERNEL_NS;
    assert_eq!(kernels_on(&c, sid), [("sim_fill_u32".to_string(), min), ("sim_fill_u32".to_string(), min)]);
    drop(c);
    sim::free(buf).expect("free");
    drop(s);
    teardown(e);
}

#[test]
fn one_kernel_kind_is_refused_while_the_other_is_enabled_and_the_refusal_enables_nothing() {
    let _serial = serial();
    let e = env(904);
    let a = activity().expect("the simulator's CUPTI");
    let s = e.stream(0);
    let sid = a.stream_id(e.ctx.as_raw(), s.as_raw()).expect("cuptiGetStreamIdEx");
    let buf = e.alloc(4096);
    let concurrent = a.consumer(&[ActivityKind::Kernel]).expect("consumer");
    let refused = a.consumer(&[ActivityKind::Memset, ActivityKind::SerialKernel]);
    match refused {
        Err(cuda_sys::cupti::CuptiError::Unavailable { call, name, .. }) => {
            assert_eq!((call, name), ("cuptiActivityEnable", "CUPTI_ERROR_NOT_COMPATIBLE"));
        }
        other => panic!("expected CUPTI_ERROR_NOT_COMPATIBLE, got {other:?}"),
    }
    // The concurrent kind stays enabled for the consumer that asked first.
    e.fill(&s, buf, 1, 16);
    stream::synchronize(&s).expect("sync");
    assert_eq!(kernels_on(&concurrent, sid).len(), 1);
    drop(concurrent);
    // The refused consumer left the serialized kind uncounted: it is
    // enabled afresh for the next consumer (which records through it).
    let serial_only = a.consumer(&[ActivityKind::SerialKernel]).expect("consumer once the other is gone");
    assert!(a.consumer(&[ActivityKind::Kernel]).is_err(), "the other way round too");
    e.fill(&s, buf, 2, 16);
    stream::synchronize(&s).expect("sync");
    let recs: Vec<_> = serial_only.take().expect("take").into_iter().filter(|r| r.stream_id == sid).collect();
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].kind(), ActivityKind::Kernel);
    drop(serial_only);
    // One consumer asking for both: the concurrent kind, enabled first, is
    // undone when the serialized one is refused, so nothing stays on that
    // would refuse the serialized kind afterwards.
    assert!(a.consumer(&[ActivityKind::Kernel, ActivityKind::SerialKernel]).is_err());
    let after =
        a.consumer(&[ActivityKind::SerialKernel]).expect("nothing left enabled by the refused consumer");
    drop(after);
    sim::free(buf).expect("free");
    drop(s);
    teardown(e);
}

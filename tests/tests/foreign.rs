//! The door for foreign GPU code (`Stream::launch_foreign`): the race oracle
//! sees the declared uses — a foreign write on one stream read on another
//! is ordered by gpu-sync — and a missing declaration is caught as a race
//! (so the test is not vacuous). A raw driver call (`cuMemsetD32Async`)
//! stands in for the foreign library.

use gpu_sync::cuda_sys::result::memory::memset_d32_async;
use gpu_sync::{DeviceBuffer, Error, ForeignUses, Stream};
use sync_tests::{ctx, exclusive, on_sim};

const N: usize = 4096;

#[test]
fn a_declared_foreign_write_is_ordered_before_a_read_on_another_stream() {
    let t = ctx(0xf00);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let mut y = DeviceBuffer::<u32>::zeroed(&a, N).expect("y");
    for round in 0..8u32 {
        let mut uses = ForeignUses::new();
        let ptr = uses.output(&mut y);
        // SAFETY: one memset on the given stream over exactly the declared
        // output; nothing submitted on failure; stream and context untouched.
        unsafe {
            b.launch_foreign("foreign memset", uses, |raw| {
                // SAFETY: `ptr..ptr + 4N` is y's memory, ordered by the
                // engine after y's other uses (declared above).
                Ok(memset_d32_async(ptr, round, N, raw)?)
            })
        }
        .expect("foreign call");
        assert_eq!(a.to_vec(&y).expect("read on a"), vec![round; N]);
    }
    t.finish();
}

#[test]
fn a_foreign_read_is_ordered_after_a_write_on_another_stream() {
    let t = ctx(0xf01);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let x = DeviceBuffer::from_slice(&a, &[3u32; N]).expect("x");
    let mut y = DeviceBuffer::<u32>::zeroed(&b, N).expect("y");
    let mut x2 = DeviceBuffer::<u32>::zeroed(&a, N).expect("x2");
    a.fill_u32(&mut x2, 9).expect("write x2 on a");
    let mut uses = ForeignUses::new();
    let (src, dst) = (uses.input(&x2), uses.output(&mut y));
    // SAFETY: one device-to-device copy on the given stream, reading the
    // declared input and writing the declared output, both N words.
    unsafe {
        b.launch_foreign("foreign copy", uses, |raw| {
            // SAFETY: both ranges are the declared views, ordered by the
            // engine.
            Ok(gpu_sync::cuda_sys::result::memory::memcpy_dtod_async(dst, src, 4 * N, raw)?)
        })
    }
    .expect("foreign call");
    assert_eq!(b.to_vec(&y).expect("y"), vec![9u32; N]);
    drop(x);
    t.finish();
}

#[test]
fn a_gpu_sync_call_inside_the_foreign_closure_is_refused() {
    let t = ctx(0xf02);
    let a = Stream::new(&t.device).expect("a");
    // SAFETY: the closure submits nothing.
    let inner = unsafe { a.launch_foreign("nothing", ForeignUses::new(), |_| Ok(a.synchronize().map(drop))) }
        .expect("foreign call");
    assert!(
        matches!(&inner, Err(Error::Driver { error, .. }) if error.0 == gpu_sync::cuda_sys::CUresult::CUDA_ERROR_NOT_PERMITTED),
        "{inner:?}"
    );
    t.finish();
}

#[test]
fn an_undeclared_foreign_write_is_caught_as_a_race() {
    if !on_sim() {
        return;
    }
    let _one = exclusive();
    let t = ctx(0xf03);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let y = DeviceBuffer::<u32>::zeroed(&a, N).expect("y");
    let ptr = gpu_sync::AsDeviceSlice::device_ptr(&y);
    // The write is not declared: the engine does not order it after the
    // fill on a, nor the read on a after it.
    // SAFETY: deliberately broken (obligation 2): the oracle must see it.
    // The memory stays alive until the end of the test (`y` is dropped
    // after a device synchronization).
    unsafe {
        b.launch_foreign("undeclared foreign memset", ForeignUses::new(), |raw| {
            // SAFETY: y's memory, alive for the rest of the test.
            Ok(memset_d32_async(ptr, 1, N, raw)?)
        })
    }
    .expect("foreign call");
    let _ = a.to_vec(&y).expect("read on a");
    t.device.synchronize().expect("sync");
    let races = t.session.as_ref().expect("sim").races();
    assert!(!races.is_empty(), "an undeclared foreign write on another stream was not caught");
    drop(y);
}

//! The foreign door when its closure panics after queuing work: the
//! declared uses are recorded all the same (the work may be on the stream),
//! so a later read on another stream is ordered after the foreign write —
//! the race oracle reports nothing — and the panic reaches the caller.
//! A raw driver call (`cuMemsetD32Async`) stands in for the foreign library.

use gpu_sync::cuda_sys::result::memory::memset_d32_async;
use gpu_sync::{DeviceBuffer, ForeignUses, Stream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use sync_tests::{ctx, exclusive, fmt_races, on_sim};

const N: usize = 4096;

#[test]
fn a_foreign_write_queued_before_a_panic_is_ordered_before_a_read_on_another_stream() {
    if !on_sim() {
        return;
    }
    // A device synchronization by a test beside this one could order the
    // write and hide a missing record.
    let _one = exclusive();
    let t = ctx(0xf10);
    let (a, b) = (Stream::new(&t.device).expect("a"), Stream::new(&t.device).expect("b"));
    let mut y = DeviceBuffer::<u32>::zeroed(&a, N).expect("y");
    let mut uses = ForeignUses::new();
    let ptr = uses.output(&mut y);
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: one memset on the given stream over exactly the declared
        // output; the closure panics after queuing it (the case under test),
        // never returns an error; stream and context untouched.
        unsafe {
            b.launch_foreign("foreign memset, then a panic", uses, |raw| -> gpu_sync::Result<()> {
                // SAFETY: `ptr..ptr + 4N` is y's memory, ordered by the
                // engine after y's other uses (declared above).
                memset_d32_async(ptr, 6, N, raw)?;
                panic!("the foreign library panicked after queuing its work");
            })
        }
    }));
    let payload = unwound.expect_err("the closure's panic reaches the caller");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the foreign library panicked after queuing its work"),
        "the caller gets the closure's own panic"
    );
    let read = a.to_vec(&y).expect("read on a");
    // Everything has run: the oracle has seen both the write and the read.
    t.device.synchronize().expect("sync");
    let races = t.session.as_ref().expect("sim").races();
    assert!(races.is_empty(), "the write queued before the panic was not tracked:\n{}", fmt_races(&races));
    let sixes = read.iter().filter(|&&v| v == 6).count();
    assert_eq!(sixes, N, "the read on a saw {sixes} of {N} words of the foreign write");
    t.finish();
}

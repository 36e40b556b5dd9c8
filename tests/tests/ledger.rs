//! The memory ledger (`torch.cuda.memory_allocated` / `max_memory_allocated`
//! / `memory_reserved` / `reset_peak_memory_stats`). Its own test binary: no
//! other test allocates on the device meanwhile. Runs on the simulator and,
//! from the GPU bundle, on the real driver.

use gpu_sync::{DeviceBuffer, Stream};
use sync_tests::ctx;

#[test]
fn ledger_peak_equals_what_was_allocated() {
    let t = ctx(21);
    let s = Stream::new(&t.device).expect("stream");
    t.device.synchronize().expect("sync");
    t.device.reset_peak_memory().expect("reset");
    let base = t.device.memory_stats().expect("stats");
    assert_eq!(base.peak_allocated, base.allocated, "reset_peak_memory sets the peak to the current value");
    let sizes = [1usize << 20, 3 << 20, 5 << 20];
    let total: usize = sizes.iter().sum();
    let bufs: Vec<DeviceBuffer<u8>> =
        sizes.iter().map(|&n| DeviceBuffer::alloc(&s, n).expect("alloc")).collect();
    let during = t.device.memory_stats().expect("stats");
    assert_eq!(during.allocated - base.allocated, total as u64);
    assert_eq!(during.peak_allocated - base.allocated, total as u64, "the peak is what was allocated");
    assert_eq!(during.live_buffers - base.live_buffers, sizes.len() as u64);
    if let Some(pool) = during.pool {
        assert!(pool.used >= total as u64, "{pool:?}");
        assert!(pool.reserved >= pool.used, "{pool:?}");
        assert!(pool.used_peak >= pool.used && pool.reserved_peak >= pool.reserved, "{pool:?}");
    }
    // Freeing lowers `allocated`; the peak stays until reset.
    drop(bufs);
    let after = t.device.memory_stats().expect("stats");
    assert_eq!(after.allocated, base.allocated);
    assert_eq!(after.peak_allocated - base.allocated, total as u64);
    t.device.synchronize().expect("sync");
    t.device.reset_peak_memory().expect("reset");
    let reset = t.device.memory_stats().expect("stats");
    assert_eq!(reset.peak_allocated, reset.allocated);
    // A smaller second wave: the new peak is that wave alone.
    let one = DeviceBuffer::<u8>::alloc(&s, 2 << 20).expect("alloc");
    assert_eq!(t.device.memory_stats().expect("stats").peak_allocated - reset.allocated, 2 << 20);
    one.close().expect("close reports the free's result");
    t.device.trim_memory_pool(0).expect("trim");
    t.finish();
}

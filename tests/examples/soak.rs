//! A soak of tracked work (an operation: a launch, a copy, an allocation or
//! a free, each counted once): `THREADS` threads (default 4), each with its own
//! stream, for `SECONDS` (default 10): kernels bumping a counter shared by
//! every thread's stream (handoffs both ways), snapshots of it copied back
//! and checked, buffers dropped with work pending, pinned round trips. Every
//! second it prints the operations done, their rate and the process's
//! resident memory (`VmRSS`), so a simulator that grows or slows shows it.
//! On the simulator it also asserts at the end that the race oracle saw no
//! race.
//!
//! ```text
//! GPU_SYNC_DRIVER=sim cargo run --release -p sync-tests --example soak
//! ```

use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

fn env_u64(name: &str, default: u64) -> Result<u64, Error> {
    match std::env::var(name) {
        Ok(v) => v.parse().map_err(|e| format!("{name}={v}: {e}").into()),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<(), Error> {
    let backend = gpu_sync::select_driver()?;
    if backend.is_sim() {
        kernels::register_sim_kernels();
    }
    let threads = env_u64("THREADS", 4)? as usize;
    // Which kinds of work (bits): 1 shared-counter bumps and snapshots,
    // 2 buffers dropped with work pending, 4 pinned round trips.
    let work = env_u64("WORK", 7)?;
    let seconds = env_u64("SECONDS", 10)?;
    let device = Device::get(0)?;
    let k = Arc::new(kernels::Kernels::load(&device)?);
    let init = Stream::new(&device)?;
    let shared = Arc::new(Mutex::new(DeviceBuffer::<u32>::zeroed(&init, 1024)?));
    let ops = Arc::new(AtomicU64::new(0));
    let bumps = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + Duration::from_secs(seconds);
    let mut handles = Vec::new();
    for t in 0..threads {
        let (device, k, shared, ops, bumps) =
            (device.clone(), k.clone(), shared.clone(), ops.clone(), bumps.clone());
        handles.push(std::thread::spawn(move || -> Result<(), Error> {
            let s = Stream::new(&device)?;
            let mut pinned = PinnedBuffer::<u32>::new(&device, 256, HostAllocFlags::empty())?;
            let mut i = 0u64;
            while Instant::now() < stop {
                i += 1;
                if work & 1 != 0 {
                    // A bump of the shared counter on this thread's stream:
                    // a handoff from whichever stream bumped it last.
                    let mut c = shared.lock().map_err(|_| "poisoned")?;
                    k.bump(&s, &mut *c, 1)?;
                    bumps.fetch_add(1, Ordering::Relaxed);
                    ops.fetch_add(1, Ordering::Relaxed);
                    if i.is_multiple_of(8) {
                        let snap = s.to_vec(&*c)?;
                        ops.fetch_add(1, Ordering::Relaxed);
                        let n = bumps.load(Ordering::Relaxed) as u32;
                        if snap.iter().any(|&v| v != snap[0]) || snap[0] > n {
                            return Err(
                                format!("thread {t}: counter snapshot {} of {n} bumps", snap[0]).into()
                            );
                        }
                    }
                }
                // A buffer dropped with work pending on it.
                if work & 2 != 0 {
                    let mut tmp = DeviceBuffer::<u32>::alloc(&s, 4096)?;
                    k.bump(&s, &mut tmp, 3)?;
                    drop(tmp);
                    ops.fetch_add(3, Ordering::Relaxed);
                }
                // A pinned round trip.
                if work & 4 != 0 && i.is_multiple_of(4) {
                    let d = DeviceBuffer::<u32>::zeroed(&s, 256)?;
                    pinned = s.download(&d, pinned)?.wait()?;
                    ops.fetch_add(3, Ordering::Relaxed);
                    if pinned.iter().any(|&v| v != 0) {
                        return Err(format!("thread {t}: a zeroed buffer read back non-zero").into());
                    }
                }
            }
            s.synchronize()?;
            Ok(())
        }));
    }
    let t0 = Instant::now();
    let mut last = (0u64, Instant::now());
    while Instant::now() < stop {
        std::thread::sleep(Duration::from_secs(1));
        let n = ops.load(Ordering::Relaxed);
        let dt = last.1.elapsed().as_secs_f64();
        println!(
            "t={:>4.1} s  ops {:>9}  rate {:>9.0}/s  rss {:>7.1} MiB",
            t0.elapsed().as_secs_f64(),
            n,
            (n - last.0) as f64 / dt,
            sync_tests::rss_mib()
        );
        last = (n, Instant::now());
    }
    for h in handles {
        h.join().map_err(|_| "a worker panicked")??;
    }
    let c = init.to_vec(&*shared.lock().map_err(|_| "poisoned")?)?;
    let n = bumps.load(Ordering::Relaxed) as u32;
    if c.iter().any(|&v| v != n) {
        return Err(format!("the counter holds {} after {n} bumps", c[0]).into());
    }
    println!(
        "done: {} operations, counter {n}, rss {:.1} MiB",
        ops.load(Ordering::Relaxed),
        sync_tests::rss_mib()
    );
    Ok(())
}

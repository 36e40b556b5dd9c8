//! Calling foreign GPU code (cuBLAS, cuFFT, NCCL, your own raw launches) on
//! a gpu-sync stream without losing the tracking: declare the buffers the
//! call reads and writes, and make the call on the raw stream handed to the
//! closure. gpu-sync orders it after the conflicting work on other streams
//! and makes later work wait for it, as for its own launches.
//!
//! The simulator has no cuBLAS, so a raw driver call stands in for the
//! library: `cuMemsetD32Async` through cuda-sys's per-call layer.
use gpu_sync::cuda_sys::result::memory::memset_d32_async;
use gpu_sync::{Device, DeviceBuffer, ForeignUses, Stream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gpu_sync::select_driver()?;
    let device = Device::get(0)?;
    let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
    let mut y = DeviceBuffer::<u32>::zeroed(&a, 1024)?;

    // The foreign call writes `y` on stream b. Declared as an output, it is
    // ordered after `zeroed`'s fill on stream a (a device-side wait).
    let mut uses = ForeignUses::new();
    let (ptr, n) = (uses.output(&mut y), 1024);
    // SAFETY: the closure submits one memset on the stream it is given,
    // over exactly the declared output (`n` words from `ptr`, y's length);
    // it submits nothing when it fails, and leaves the stream and the
    // context as it found them.
    unsafe {
        b.launch_foreign("memset (standing in for a library call)", uses, |raw| {
            // SAFETY: `ptr..ptr + 4n` is `y`'s memory, alive and ordered
            // after its other uses by the engine (declared above).
            Ok(memset_d32_async(ptr, 7, n, raw)?)
        })?;
    }

    // Read on stream a: gpu-sync makes a wait for b's foreign write.
    let host = a.to_vec(&y)?;
    assert!(host.iter().all(|&v| v == 7));
    println!("y = [{}, {}, …] after the foreign call", host[0], host[1]);
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator.
    main().expect("the example failed");
}

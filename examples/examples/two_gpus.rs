//! A pipeline over every GPU in the machine: each chunk is uploaded to the
//! first GPU and scaled there, then handed to the next GPU by a peer copy
//! and scaled again, and so on; the last GPU's result comes back to the
//! host. Peer access is enabled between neighbours, so the hand-offs go
//! over the link (NVLink or PCIe peer-to-peer) instead of through host
//! memory. There is no event or wait in the code: gpu-sync orders each
//! peer copy after the kernel that wrote its source, on the GPU, and frees
//! nothing before every device is done with it. On a machine with one GPU
//! the pipeline has one stage, and says so.
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::Kernels;

const CHUNK: usize = 1 << 14;
const CHUNKS: usize = 6;

/// One stage: a GPU, its stream and its kernels.
struct Stage {
    device: Device,
    stream: Stream,
    kernels: Kernels,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    let devices = Device::all()?;
    if devices.len() == 1 {
        println!("one GPU in this machine: the pipeline runs as a single stage");
    }
    let mut stages = Vec::new();
    for device in devices {
        let stream = Stream::new(&device)?;
        let kernels = Kernels::load(&device)?;
        stages.push(Stage { device, stream, kernels });
    }
    // Each stage reads its predecessor's memory: open it (explicit, one way).
    for pair in stages.windows(2) {
        if pair[1].device.can_access_peer(&pair[0].device)? {
            pair[1].device.enable_peer_access(&pair[0].device)?;
        }
    }
    let input: Vec<f32> = (0..CHUNK * CHUNKS).map(|i| (i % 1000) as f32).collect();
    let mut output = Vec::with_capacity(input.len());
    for chunk in input.chunks(CHUNK) {
        let first = &stages[0];
        let x = DeviceBuffer::from_slice(&first.stream, chunk)?;
        let mut y = DeviceBuffer::alloc(&first.stream, CHUNK)?;
        first.kernels.scale(&first.stream, &x, &mut y, 2.0)?;
        for stage in &stages[1..] {
            // The peer copy runs on the receiving GPU's stream, after the
            // previous GPU's kernel: gpu-sync makes it wait there.
            let mut x = DeviceBuffer::alloc(&stage.stream, CHUNK)?;
            stage.stream.copy(&y, &mut x)?;
            let mut next = DeviceBuffer::alloc(&stage.stream, CHUNK)?;
            stage.kernels.scale(&stage.stream, &x, &mut next, 2.0)?;
            y = next; // the previous `y` is freed once the copy has read it
        }
        let last = &stages[stages.len() - 1];
        output.extend(last.stream.to_vec(&y)?);
    }
    let factor = 2f32.powi(stages.len() as i32);
    let wrong = output.iter().zip(&input).filter(|&(o, i)| *o != factor * i).count();
    println!("{CHUNKS} chunks through {} GPU stage(s): {wrong} wrong", stages.len());
    for pair in stages.windows(2) {
        pair[1].device.disable_peer_access(&pair[0].device)?;
    }
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from {factor} * input").into());
    }
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator (two devices).
    main().expect("the example failed");
}

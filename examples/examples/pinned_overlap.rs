//! Two streams with pinned staging: while one stream runs a kernel on its
//! chunk, the other copies, so copies and compute overlap. gpu-sync orders
//! every buffer's uses by itself: there is no event code here.
use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, Pending, PinnedBuffer, Stream};
use kernels::Kernels;

const CHUNK: usize = 1 << 14;
const CHUNKS: usize = 8;

/// One stream with its staging buffers and the download in flight.
struct Lane {
    stream: Stream,
    up: PinnedBuffer<f32>,
    x: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
    busy: Option<(usize, Pending<PinnedBuffer<f32>>)>,
    down: Option<PinnedBuffer<f32>>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    let device = Device::get(0)?;
    let kernels = Kernels::load(&device)?;
    let pinned = || PinnedBuffer::<f32>::new(&device, CHUNK, HostAllocFlags::empty());
    let mut lanes = Vec::new();
    for _ in 0..2 {
        let stream = Stream::new(&device)?;
        let (x, y) = (DeviceBuffer::alloc(&stream, CHUNK)?, DeviceBuffer::alloc(&stream, CHUNK)?);
        lanes.push(Lane { up: pinned()?, x, y, busy: None, down: Some(pinned()?), stream });
    }
    let input: Vec<f32> = (0..CHUNK * CHUNKS).map(|i| i as f32).collect();
    let mut output = vec![0.0f32; input.len()];
    let mut collect = |lane: &mut Lane| -> Result<(), gpu_sync::Error> {
        if let Some((c, pending)) = lane.busy.take() {
            let buf = pending.wait()?; // this lane's previous chunk
            output[c * CHUNK..][..CHUNK].copy_from_slice(&buf);
            lane.down = Some(buf);
        }
        Ok(())
    };
    for (c, chunk) in input.chunks(CHUNK).enumerate() {
        let lane = &mut lanes[c % 2];
        collect(lane)?;
        lane.up.as_mut_slice()?.copy_from_slice(chunk); // waits for its last upload
        lane.stream.upload(&lane.up, &mut lane.x)?; // async: pinned → device
        kernels.scale(&lane.stream, &lane.x, &mut lane.y, 2.0)?;
        let down = lane.down.take().ok_or("no staging buffer")?;
        lane.busy = Some((c, lane.stream.download(&lane.y, down)?)); // async
    }
    lanes.iter_mut().try_for_each(&mut collect)?;
    let wrong = output.iter().zip(&input).filter(|&(o, i)| *o != 2.0 * i).count();
    println!("{CHUNKS} chunks of {CHUNK} on 2 streams: {wrong} wrong");
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from 2 * input").into());
    }
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator.
    main().expect("the example failed");
}

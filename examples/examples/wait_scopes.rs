//! A tour of wait scopes: a `Pending` value (an asynchronous download) is
//! released by its own wait, or by the proof a larger host wait returns —
//! stream, then device — when that proof covers it. Checked, never hoped.
use gpu_sync::{
    Device, DeviceBuffer, DeviceSynced, HostAllocFlags, PinnedBuffer, Polled, Stream, StreamSynced,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gpu_sync::select_driver()?;
    let device = Device::get(0)?;
    let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
    let data = DeviceBuffer::from_slice(&a, &[1u32, 2, 3, 4])?;
    let pinned = || PinnedBuffer::<u32>::new(&device, 4, HostAllocFlags::empty());

    // 1. Event scope, the smallest: a Pending's own wait (cuEventSynchronize).
    let first = a.download(&data, pinned()?)?.wait()?;
    println!("own wait:       {:?}", &first[..]);

    // 2. Stream scope: one cuStreamSynchronize proves all of a's work so far.
    let (p1, p2) = (a.download(&data, pinned()?)?, a.download(&data, pinned()?)?);
    let on_a: StreamSynced = a.synchronize()?;
    let (v1, v2) = (p1.redeem(&on_a)?, p2.redeem(&on_a)?); // O(1) checks
    println!("stream proof:   {:?} {:?}", &v1[..], &v2[..]);

    // 3. A proof covers only what it saw: work on b, or on a after the wait,
    //    is handed back unchanged (b waited for a's upload device-side).
    let later = b.download(&data, pinned()?)?;
    let later = match later.redeem(&on_a) {
        Ok(_) => return Err("a proof for stream a covered work on stream b".into()),
        Err(not_covered) => {
            println!("not covered:    {not_covered}");
            not_covered.pending
        }
    };

    // 4. Device scope, the largest: cuCtxSynchronize covers every stream.
    let all: DeviceSynced = device.synchronize()?;
    println!("device proof:   {:?}", &later.redeem(&all)?[..]);

    // 5. Or poll without blocking (cuEventQuery).
    let mut pending = b.download(&data, pinned()?)?;
    let value = loop {
        match pending.poll()? {
            Polled::Ready(v) => break v,
            Polled::Waiting(p) => pending = p, // do other work here
        }
    };
    println!("polled:         {:?}", &value[..]);
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator.
    main().expect("the example failed");
}

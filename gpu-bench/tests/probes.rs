//! The roofline probes' wrappers on the simulator: `copy_bulk` refuses the
//! pipelines its kernel cannot run, naming why, and copies in the others
//! (their shared-memory edges on a GPU are tested in `gpu.rs`).
#![cfg(feature = "kernels")]

use gpu_sync::{Device, DeviceBuffer, Error, Stream};
use kernels::{Grid, RooflineKernels};

#[test]
fn copy_bulk_refuses_bad_pipelines_and_copies_in_good_ones() {
    gpu_sync::sim::install().expect("cuda-sim");
    kernels::register_sim_kernels();
    let device = Device::get(0).expect("device 0");
    let stream = Stream::new(&device).expect("stream");
    let probes = RooflineKernels::load(&device).expect("roofline probes");
    let host: Vec<u32> = (0..4096u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    let src = DeviceBuffer::from_slice(&stream, &host).expect("src");
    let mut dst = DeviceBuffer::<u32>::zeroed(&stream, host.len()).expect("dst");
    let grid = Grid { blocks: 4, threads: 128 };
    // One stage would wait for a chunk never issued; 17 has no barrier; a
    // chunk is 1 to 64 KiB.
    for (stages, kib) in [(1, 8), (0, 8), (17, 8), (2, 0), (2, 65)] {
        match probes.copy_bulk(&stream, grid, stages, kib, &src, &mut dst) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("copy_bulk") && m.contains("needs 2 to 16 stages of 1 to 64 KiB"), "{m}")
            }
            other => panic!("{stages} x {kib} KiB: expected a refusal, got {other:?}"),
        }
    }
    // Lengths that differ, and a length that is not whole uint4.
    let mut short = DeviceBuffer::<u32>::zeroed(&stream, host.len() - 4).expect("short");
    assert!(matches!(
        probes.copy_bulk(&stream, grid, 2, 8, &src, &mut short),
        Err(Error::InvalidArgument(_))
    ));
    for (stages, kib) in [(2, 1), (4, 16), (16, 2)] {
        stream.fill_bytes(&mut dst, 0xff).expect("poison");
        probes.copy_bulk(&stream, grid, stages, kib, &src, &mut dst).expect("copy_bulk");
        assert_eq!(stream.to_vec(&dst).expect("read back"), host, "{stages} x {kib} KiB");
    }
}

//! The roofline probes' wrappers on the simulator: `copy_bulk` refuses the
//! pipelines its kernel cannot run, naming why, and copies in the others
//! (their shared-memory edges on a GPU are tested in `gpu.rs`); `intensity`
//! holding an SM's shared memory computes what it computes without.
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

#[test]
fn intensity_holding_shared_memory_computes_the_same_and_refuses_beyond_the_opt_in_limit() {
    gpu_sync::sim::install().expect("cuda-sim");
    kernels::register_sim_kernels();
    let device = Device::get(0).expect("device 0");
    let stream = Stream::new(&device).expect("stream");
    let probes = RooflineKernels::load(&device).expect("roofline probes");
    let input: Vec<f32> = (0..4096u32).map(|i| (i % 97) as f32 / 64.0).collect();
    let mut want = vec![0f32; input.len()];
    kernels::reference::probes::intensity_f32(&input, &mut want, 37);
    let inp = DeviceBuffer::from_slice(&stream, &input).expect("input");
    let mut out = DeviceBuffer::<f32>::zeroed(&stream, input.len()).expect("out");
    let grid = Grid { blocks: 3, threads: 256 };
    let optin = device
        .attribute(
            gpu_sync::cuda_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )
        .expect("the opt-in limit") as u32;
    // Nothing held, then a whole SM's shared memory per block: the same bits.
    for held in [0, optin] {
        stream.fill_bytes(&mut out, 0xff).expect("poison");
        probes.intensity_holding_shared(&stream, grid, &inp, &mut out, 37, held).expect("intensity");
        let got = stream.to_vec(&out).expect("read back");
        assert!(got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits()), "holding {held} bytes");
    }
    // One byte past the device's opt-in limit is a launch-configuration error.
    match probes.intensity_holding_shared(&stream, grid, &inp, &mut out, 37, optin + 1) {
        Err(Error::LaunchConfig { reason, .. }) => assert!(reason.contains("opt-in limit"), "{reason}"),
        other => panic!("expected a refusal past the opt-in limit, got {other:?}"),
    }
}

//! A per-thread CPU version of a kernel (`sim::register_per_thread`) runs
//! once per GPU thread with CUDA's indices, so a grid too small for the data
//! leaves the same elements unwritten on the simulator as on a GPU (a
//! whole-range CPU version would hide the bug), and a grid-stride body
//! covers everything whatever the grid. Simulator only.

use gpu_sync::sim::{self, Thread};
use gpu_sync::{DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream};
use sync_tests::{ctx, on_sim};

type Scale = (In<f32>, Out<f32>, Len);

#[test]
fn a_grid_too_small_leaves_the_same_elements_unwritten_as_on_a_gpu() {
    if !on_sim() {
        return;
    }
    // One element a thread, with a bounds check (`if (i < n)`).
    sim::register_per_thread::<Scale>("pt_double", |t: Thread, (x, y, n)| {
        let i = t.global_x() as usize;
        if (i as u64) < n {
            y[i] = 2.0 * x[i];
        }
    });
    // The same, as a grid-stride loop.
    sim::register_per_thread::<Scale>("pt_double_stride", |t: Thread, (x, y, n)| {
        let mut i = t.global_x();
        while i < n {
            y[i as usize] = 2.0 * x[i as usize];
            i += t.stride_x();
        }
    });
    let t = ctx(41);
    let stream = Stream::new(&t.device).unwrap();
    let module = Module::load(&t.device, sim::PTX_STUB).unwrap();
    // SAFETY: both registered kernels read `x` and write `y` below `n`
    // only (a `Len`, checked against both views).
    let (one, stride) = unsafe {
        (module.kernel::<Scale>("pt_double").unwrap(), module.kernel::<Scale>("pt_double_stride").unwrap())
    };
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xs = DeviceBuffer::from_slice(&stream, &x).unwrap();
    // 2 blocks of 256 threads for 1000 elements: 512 written, 488 not.
    let mut ys = DeviceBuffer::from_slice(&stream, &vec![-1.0f32; n]).unwrap();
    one.launch(&stream, LaunchConfig::new(2, 256), (&xs, &mut ys, n as u64)).unwrap();
    let got = stream.to_vec(&ys).unwrap();
    assert!(got[..512].iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    assert!(got[512..].iter().all(|&v| v == -1.0), "the threads past the grid wrote nothing");
    // The grid-stride version covers all 1000 with the same small grid.
    let mut zs = DeviceBuffer::from_slice(&stream, &vec![-1.0f32; n]).unwrap();
    stride.launch(&stream, LaunchConfig::new(2, 256), (&xs, &mut zs, n as u64)).unwrap();
    let got = stream.to_vec(&zs).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    t.finish();
}

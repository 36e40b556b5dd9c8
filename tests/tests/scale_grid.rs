//! `Kernels::scale_f32_with_grid`: `scale_f32` over a grid of the caller's
//! choosing (the launch shapes `gpu-bench truth` checks the timer on)
//! computes what the tiled wrapper computes at an odd size, writes nothing
//! past the data, and refuses grids that are not 1-D, blocks past the
//! kernel's launch bounds and grids that do not cover the data, before the
//! driver.

use gpu_sync::{DeviceBuffer, LaunchConfig, Stream};
use kernels::Kernels;
use sync_tests::ctx;

#[test]
fn one_thread_per_element_at_an_odd_size_matches_the_reference_and_stops_at_the_data() {
    let t = ctx(31);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("stream");
    let n = 10_007;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let xs = DeviceBuffer::from_slice(&s, &x).expect("x");
    // Four elements more than the data, holding a sentinel no launch may touch.
    let mut out = DeviceBuffer::from_slice(&s, &vec![-1.0f32; n + 4]).expect("out");
    let cfg = LaunchConfig::for_elements(n as u64, 256);
    assert_eq!(cfg.grid.x, 40, "10,007 elements take 40 blocks of 256");
    k.scale_f32_with_grid(&s, cfg, &xs, &mut out.slice_mut(..n).expect("view"), 1.25).expect("launch");
    let got = s.to_vec(&out).expect("read");
    let mut want = vec![0.0f32; n];
    kernels::reference::scale_f32(&x, &mut want, 1.25);
    assert_eq!(&got[..n], &want[..], "one thread per element computes the reference");
    assert_eq!(&got[n..], &[-1.0; 4], "nothing written past the data");
    // A grid larger than the work (twice the blocks) gives the same result.
    let mut again = DeviceBuffer::<f32>::zeroed(&s, n).expect("again");
    k.scale_f32_with_grid(&s, LaunchConfig::new(80, 256), &xs, &mut again, 1.25).expect("launch");
    assert_eq!(s.to_vec(&again).expect("read"), want);
    t.finish();
}

#[test]
fn grids_the_kernel_cannot_take_or_that_leave_data_uncovered_are_refused() {
    let t = ctx(32);
    let k = Kernels::load(&t.device).expect("kernels");
    let s = Stream::new(&t.device).expect("stream");
    let n = 1000;
    let xs = DeviceBuffer::<f32>::zeroed(&s, n).expect("x");
    let mut out = DeviceBuffer::<f32>::zeroed(&s, n).expect("out");
    let cases = [
        (LaunchConfig::new((4, 2, 1), 256), "1-D"),
        (LaunchConfig::new(4, (128, 2, 1)), "1-D"),
        (LaunchConfig::new(2, 512), "launch bounds"),
        (LaunchConfig::new(3, 256), "do not cover"),
    ];
    for (cfg, why) in cases {
        match k.scale_f32_with_grid(&s, cfg, &xs, &mut out, 2.0) {
            Err(gpu_sync::Error::InvalidArgument(m)) => {
                assert!(m.contains("scale_f32") && m.contains(why), "{cfg:?}: {m}")
            }
            other => panic!("{cfg:?} ({why}) was not refused: {other:?}"),
        }
    }
    let mut short = DeviceBuffer::<f32>::zeroed(&s, n - 1).expect("short");
    assert!(matches!(
        k.scale_f32_with_grid(&s, LaunchConfig::new(4, 256), &xs, &mut short, 2.0),
        Err(gpu_sync::Error::InvalidArgument(_))
    ));
    t.finish();
}

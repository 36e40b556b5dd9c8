//! The prefetcher (`gpu_sync::Prefetcher`): double-buffered pinned staging
//! on a copy stream, handed to a compute stream through the tracker. Under
//! many scheduler seeds every chunk the compute stream sees is the right
//! one (the upload landed before the kernel read it, and the next upload
//! into the slot waited for the kernel), and the race oracle sees no race.

use gpu_sync::{DeviceBuffer, Prefetcher, Stream};
use kernels::Kernels;
use sync_tests::ctx;

fn run(seed: u64, total: usize, chunk: usize) {
    let t = ctx(seed);
    let k = Kernels::load(&t.device).expect("kernels");
    let compute = Stream::new(&t.device).expect("stream");
    let host: Vec<f32> = (0..total).map(|i| (i as f32) * 0.5 + seed as f32).collect();
    let mut out = DeviceBuffer::<f32>::zeroed(&compute, total).expect("out");
    let mut pf = Prefetcher::<f32>::new(&t.device, chunk).expect("prefetcher");
    let mut seen = Vec::new();
    pf.for_each(host.chunks(chunk), |i, view| {
        seen.push((i, view.len()));
        let start = i * chunk;
        let mut dst = out.slice_mut(start..start + view.len())?;
        k.scale(&compute, &view, &mut dst, 2.0)
    })
    .expect("prefetch loop");
    let got = compute.to_vec(&out).expect("download");
    let want: Vec<f32> = host.iter().map(|x| x * 2.0).collect();
    assert_eq!(got, want, "seed {seed}: a chunk was read before its upload or after being overwritten");
    let chunks = total.div_ceil(chunk);
    assert_eq!(seen.len(), chunks);
    assert!(seen.iter().enumerate().all(|(j, &(i, _))| i == j), "chunks in order");
    assert_eq!(seen.last().map(|s| s.1), Some(total - (chunks - 1) * chunk), "the short last chunk");
    drop(pf);
    t.finish();
}

#[test]
fn chunks_arrive_in_order_and_unraced_under_many_seeds() {
    for seed in 0..48 {
        run(seed, 10 * 256 + 17, 256);
    }
}

#[test]
fn one_chunk_and_exact_multiples() {
    run(7, 100, 256);
    run(8, 4 * 64, 64);
}

#[test]
fn a_chunk_too_long_is_an_error_not_a_panic() {
    let t = ctx(1);
    let mut pf = Prefetcher::<u32>::new(&t.device, 4).expect("prefetcher");
    let data = [1u32; 9];
    let r = pf.for_each(std::iter::once(&data[..]), |_, _| Ok(()));
    assert!(matches!(r, Err(gpu_sync::Error::InvalidArgument(_))), "{r:?}");
    assert!(matches!(Prefetcher::<u32>::new(&t.device, 0), Err(gpu_sync::Error::InvalidArgument(_))));
    t.finish();
}

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

/// The fill-in-place path: the producer writes each chunk straight into
/// pinned staging. Under many seeds each chunk the compute stream reads is
/// the one filled for it (the upload waited for nothing it should not have,
/// the refill of a slot waited for its upload, the next upload into a
/// device chunk waited for the kernel reading it), and the oracle sees no
/// race. Short chunks (a fill reporting fewer elements) are handed out at
/// their length.
fn run_filled(seed: u64, chunks: usize, chunk: usize, short_last: usize) {
    let t = ctx(seed);
    let k = Kernels::load(&t.device).expect("kernels");
    let compute = Stream::new(&t.device).expect("stream");
    let value = |i: usize, j: usize| (i * chunk + j) as f32 + seed as f32 * 0.25;
    let len = |i: usize| if i + 1 == chunks { short_last } else { chunk };
    let total: usize = (0..chunks).map(len).sum();
    let mut out = DeviceBuffer::<f32>::zeroed(&compute, total).expect("out");
    let mut pf = Prefetcher::<f32>::new(&t.device, chunk).expect("prefetcher");
    let (mut filled, mut seen) = (Vec::new(), Vec::new());
    pf.for_each_filled(
        chunks,
        |i, staging| {
            assert_eq!(staging.len(), chunk);
            filled.push(i);
            for (j, x) in staging.iter_mut().take(len(i)).enumerate() {
                *x = value(i, j);
            }
            Ok(len(i))
        },
        |i, view| {
            seen.push((i, view.len()));
            let mut dst = out.slice_mut(i * chunk..i * chunk + view.len())?;
            k.scale(&compute, &view, &mut dst, 2.0)
        },
    )
    .expect("prefetch loop");
    let got = compute.to_vec(&out).expect("download");
    let want: Vec<f32> = (0..chunks).flat_map(|i| (0..len(i)).map(move |j| value(i, j) * 2.0)).collect();
    assert_eq!(got, want, "seed {seed}: a chunk was read before its upload or after its slot was refilled");
    assert_eq!(filled, (0..chunks).collect::<Vec<_>>(), "each chunk filled once, in order");
    assert_eq!(
        seen,
        (0..chunks).map(|i| (i, len(i))).collect::<Vec<_>>(),
        "each chunk computed once, in order"
    );
    drop(pf);
    t.finish();
}

#[test]
fn filled_chunks_arrive_in_order_and_unraced_under_many_seeds() {
    for seed in 0..48 {
        run_filled(seed, 9, 256, 100);
    }
    run_filled(3, 1, 64, 64);
    run_filled(4, 0, 64, 64);
}

#[test]
fn a_fill_reporting_too_many_elements_is_an_error_and_errors_stop_the_loop() {
    let t = ctx(2);
    let mut pf = Prefetcher::<u32>::new(&t.device, 4).expect("prefetcher");
    let r = pf.for_each_filled(3, |_, s| Ok(s.len() + 1), |_, _| Ok(()));
    assert!(matches!(r, Err(gpu_sync::Error::InvalidArgument(_))), "{r:?}");
    let mut computed = 0;
    let r = pf.for_each_filled(
        5,
        |i, _| if i == 3 { Err(gpu_sync::Error::InvalidArgument("producer failed".into())) } else { Ok(4) },
        |_, _| {
            computed += 1;
            Ok(())
        },
    );
    assert!(matches!(r, Err(gpu_sync::Error::InvalidArgument(ref m)) if m == "producer failed"), "{r:?}");
    // Chunk 3 is staged before chunk 2 is computed: chunks 0 and 1 ran.
    assert_eq!(computed, 2);
    drop(pf);
    t.finish();
}

//! The kernels crate's CPU twins run per thread, as CUDA runs the `.cu`
//! kernels: a launch shape that gives a surprising answer on a GPU gives the
//! same answer on the simulator. The `.cu` grid-stride loops index by x
//! alone (`gs_first`, `gs_stride`), so every y (and z) row of blocks and of
//! threads walks the whole range again: `check_pattern_u32`, which counts
//! mismatches with one `atomicAdd` per thread, counts each once per row.
//! Before the twins ran per thread, the simulator counted each once.
//!
//! Runs on the simulator (CI) and on a GPU (the bundle), with the same
//! assertions.

use gpu_sync::{DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream};
use sync_tests::ctx;

/// `fill_pattern_u32(unsigned* dst, u64 n, unsigned seed)`.
type Fill = (Out<u32>, Len, u32);
/// `check_pattern_u32(const unsigned* src, u64 n, unsigned seed, u64* mismatches)`:
/// `n` bounds `src` only, so it is a plain `u64` here.
type Check = (In<u32>, u64, u32, Out<u64>);

const SEED: u32 = 0x5eed;

/// A launch shape (grid, block) and how many times its x range repeats.
type Shape = ((u32, u32, u32), (u32, u32, u32), u64);

fn pattern_module(t: &sync_tests::Ctx) -> Module {
    Module::load(&t.device, kernels::ModuleId::Pattern.fatbin()).expect("module")
}

#[test]
fn a_two_dimensional_grid_over_a_one_dimensional_kernel_counts_each_row() {
    let t = ctx(90);
    let s = Stream::new(&t.device).expect("stream");
    let m = pattern_module(&t);
    // SAFETY: check_pattern_u32 (kernels/cu/pattern.cu) reads src[i] for
    // i < n, n at most src's length (1000 here, the buffer's length), and
    // adds its count to mismatches[0] with atomicAdd (race-free for any
    // launch shape); it touches nothing else.
    let check = unsafe { m.kernel::<Check>("check_pattern_u32") }.expect("check");
    let n = 1000usize;
    let mut data: Vec<u32> = (0..n as u64).map(|i| kernels::reference::pattern(SEED, i)).collect();
    for i in (0..n).step_by(100) {
        data[i] ^= 1;
    }
    let src = DeviceBuffer::from_slice(&s, &data).expect("src");
    // 1-D, 2 y rows of blocks, 2 y rows of threads in a block, 2×2 (z too).
    let shapes: [Shape; 4] = [
        ((3, 1, 1), (64, 1, 1), 1),
        ((3, 2, 1), (64, 1, 1), 2),
        ((3, 1, 1), (32, 2, 1), 2),
        ((2, 1, 2), (32, 1, 2), 4),
    ];
    for (grid, block, rows) in shapes {
        let mut bad = DeviceBuffer::<u64>::zeroed(&s, 1).expect("mismatches");
        check.launch(&s, LaunchConfig::new(grid, block), (&src, n as u64, SEED, &mut bad)).expect("launch");
        let got = s.to_vec(&bad).expect("mismatches")[0];
        assert_eq!(
            got,
            10 * rows,
            "grid {grid:?} block {block:?}: each of the {rows} rows counts the 10 mismatches"
        );
    }
    t.finish();
}

#[test]
fn elements_past_n_keep_their_bytes_and_a_tiny_grid_still_covers_n() {
    let t = ctx(91);
    let s = Stream::new(&t.device).expect("stream");
    let m = pattern_module(&t);
    // SAFETY: fill_pattern_u32 (kernels/cu/pattern.cu) writes dst[i] for
    // i < n only, n a `Len` that gpu-sync checks against the view; a y row
    // of blocks rewrites the same values (no other effect).
    let fill = unsafe { m.kernel::<Fill>("fill_pattern_u32") }.expect("fill");
    let mut dst = DeviceBuffer::from_slice(&s, &[7u32; 1000]).expect("dst");
    let mut head = dst.slice_mut(..600).expect("head");
    // One block of one warp: each thread walks 19 strides of 32.
    fill.launch(&s, LaunchConfig::new(1, 32), (&mut head, 600u64, SEED)).expect("launch");
    let got = s.to_vec(&dst).expect("dst");
    for (i, &v) in got.iter().enumerate() {
        let want = if i < 600 { kernels::reference::pattern(SEED, i as u64) } else { 7 };
        assert_eq!(v, want, "element {i}");
    }
    t.finish();
}

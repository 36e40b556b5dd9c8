//! The launch-overhead method (`gpu_bench::overhead`) on the simulator:
//! every variant of both phases runs, each batch gives one sample, each
//! pair one ratio per repetition, and the recorded variants record (and
//! resolve) every timed launch, gated and free-running.
#![cfg(feature = "kernels")]

use gpu_bench::overhead::{self, Method, Options, PAIRS, Variant};
use gpu_sync::Device;

#[test]
fn both_methods_give_a_sample_per_batch_and_a_ratio_per_repetition() {
    gpu_sync::sim::install().expect("cuda-sim");
    kernels::register_sim_kernels();
    let device = Device::get(0).expect("device 0");
    let inst = gpu_bench::instruments::load(&device).expect("instruments");
    for method in [Method::Gated, Method::FreeRunning] {
        let opts = Options { batches: 3, per_batch: 7, repeat: 2, method };
        let steps = std::cell::Cell::new(0usize);
        let progress = |_: String| steps.set(steps.get() + 1);
        let o = overhead::run(&device, inst.clone(), true, opts, &progress).expect("overhead");
        // cuda-sim maps pinned memory and provides CUPTI: the gate and the
        // second phase both run there.
        assert_eq!(o.method, method);
        assert!(o.attached, "{:?}", o.notes);
        assert!(o.notes.is_empty(), "{:?}", o.notes);
        // One progress step per phase and repetition (batch 0 of 3).
        assert_eq!(steps.get(), 2 * 2);
        for v in Variant::ALL {
            assert!(o.ran(v));
            let s = &o.samples[v.index()];
            assert_eq!(s.len(), 3 * 2, "{method:?} {v:?}");
            assert!(s.iter().all(|x| x.is_finite() && *x >= 0.0), "{method:?} {v:?}: {s:?}");
            assert_eq!(o.timeouts[v.index()], 0, "{method:?} {v:?}");
        }
        for (i, (v, base, _)) in PAIRS.iter().enumerate() {
            assert_eq!(o.ratios[i].len(), 2, "{method:?} {v:?} / {base:?}");
        }
        // Timed batches only (the warm-up round is not counted).
        for c in [o.recorded.events, o.recorded.cupti] {
            assert_eq!(c.launches, 3 * 7 * 2, "{method:?}");
            assert_eq!(c.resolved, c.launches, "{method:?}");
            assert_eq!(c.dropped, 0, "{method:?}");
        }
    }
}

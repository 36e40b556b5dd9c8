//! The seven variants of the comparison, the pairs it compares, and how a
//! gated batch is split to fit the driver's queue.

use gpu_sync::trace::Timing;

/// Most driver queue entries one gated segment queues, over both streams
/// (see the module docs: half the ~1024 entries a stream was observed to
/// hold before a submission blocks).
pub const QUEUE_BUDGET: usize = 512;

/// Queue entries outside the submissions of a gated segment: the gate, and
/// B's wait for it (with the record behind the gate that B waits on).
const GATE_ENTRIES: usize = 2;

/// How many variants there are.
pub const VARIANTS: usize = 7;

/// The variants, in the order of their samples (see the module docs);
/// [`Overhead`](super::Overhead)'s example reads two of them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    /// `cuLaunchKernel` of `add_f32` through cuda-sys's per-call layer.
    RawLaunch,
    /// `Kernel::launch` of the same kernel with three tracked buffers.
    TrackedLaunch,
    /// The hand-written cross-stream handoff (waits, launches, records).
    RawHandoff,
    /// The same handoff with gpu-sync's automatic waits.
    TrackedHandoff,
    /// The tracked launch under a `trace::Recorder` with `Timing::Events`.
    RecordedEvents,
    /// The tracked launch under a `trace::Recorder` with `Timing::Cupti`
    /// and a CUPTI consumer.
    RecordedCupti,
    /// The raw launch with CUPTI attached (the second phase's baseline).
    RawLaunchCupti,
}

impl Variant {
    /// Every variant, in the order of [`Variant::index`].
    pub const ALL: [Variant; VARIANTS] = [
        Variant::RawLaunch,
        Variant::TrackedLaunch,
        Variant::RawHandoff,
        Variant::TrackedHandoff,
        Variant::RecordedEvents,
        Variant::RecordedCupti,
        Variant::RawLaunchCupti,
    ];

    /// The first phase's variants (CUPTI never loaded), in the order of even
    /// batches; odd batches swap each pair (`Variant::swapped`).
    pub const PLAIN: [Variant; 5] = [
        Variant::RawLaunch,
        Variant::TrackedLaunch,
        Variant::RawHandoff,
        Variant::TrackedHandoff,
        Variant::RecordedEvents,
    ];

    /// The second phase's variants (CUPTI attached).
    pub const ATTACHED: [Variant; 2] = [Variant::RawLaunchCupti, Variant::RecordedCupti];

    /// `order` with each compared pair's two variants swapped (the order of
    /// odd batches), so drift and order effects hit both alike.
    pub(crate) fn swapped(order: &[Variant]) -> Vec<Variant> {
        let mut v = order.to_vec();
        for pair in v.chunks_mut(2) {
            pair.reverse();
        }
        v
    }

    /// Its place in [`Variant::ALL`] (and in per-variant arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether it needs CUPTI (runs in the second phase only).
    pub fn needs_cupti(self) -> bool {
        matches!(self, Variant::RecordedCupti | Variant::RawLaunchCupti)
    }

    /// The report's name of it.
    pub fn name(self) -> &'static str {
        match self {
            Variant::RawLaunch => "raw launch",
            Variant::TrackedLaunch => "gpu-sync launch",
            Variant::RawHandoff => "raw handoff",
            Variant::TrackedHandoff => "gpu-sync handoff",
            Variant::RecordedEvents => "gpu-sync launch, recording (events)",
            Variant::RecordedCupti => "gpu-sync launch, recording (cupti)",
            Variant::RawLaunchCupti => "raw launch, CUPTI attached",
        }
    }

    /// What one submission of it is.
    pub fn what(self) -> &'static str {
        match self {
            Variant::RawLaunch => "cuLaunchKernel of add_f32 (3 buffers)",
            Variant::TrackedLaunch => "Kernel::launch of add_f32 with 3 tracked buffers",
            Variant::RawHandoff => {
                "A writes z, B reads z; on each stream: wait for the other's last use, launch, record"
            }
            Variant::TrackedHandoff => "A: launch writing z; B: launch reading z (automatic waits)",
            Variant::RecordedEvents => "Kernel::launch of add_f32, a trace::Recorder (Timing::Events) on",
            Variant::RecordedCupti => {
                "Kernel::launch of add_f32, a trace::Recorder (Timing::Cupti) and a CUPTI consumer on"
            }
            Variant::RawLaunchCupti => {
                "cuLaunchKernel of add_f32 (3 buffers), libcupti loaded and subscribed"
            }
        }
    }

    /// The recording a variant runs under.
    pub(crate) fn timing(self) -> Option<Timing> {
        match self {
            Variant::RecordedEvents => Some(Timing::Events),
            Variant::RecordedCupti => Some(Timing::Cupti),
            _ => None,
        }
    }

    /// Driver queue entries one submission adds, at most (see the module
    /// docs).
    fn queue_entries(self) -> usize {
        match self {
            Variant::RawHandoff | Variant::TrackedHandoff => 6,
            // The launch between its start and end events.
            Variant::RecordedEvents => 3,
            Variant::RawLaunch
            | Variant::TrackedLaunch
            | Variant::RecordedCupti
            | Variant::RawLaunchCupti => 1,
        }
    }
}

/// A compared pair: (variant, baseline, target ratio at most, if any).
/// The last one compares samples of the two phases (taken at different
/// times, so a drift between them is in it).
pub const PAIRS: [(Variant, Variant, Option<f64>); 5] = [
    (Variant::TrackedLaunch, Variant::RawLaunch, Some(1.03)),
    (Variant::TrackedHandoff, Variant::RawHandoff, Some(1.05)),
    (Variant::RecordedEvents, Variant::RawLaunch, None),
    (Variant::RecordedCupti, Variant::RawLaunchCupti, None),
    (Variant::RecordedCupti, Variant::RawLaunch, None),
];

/// Submissions per gated segment of `v`, at most: what fits
/// [`QUEUE_BUDGET`] with the gate's own entries.
pub(crate) fn segment_cap(v: Variant) -> usize {
    ((QUEUE_BUDGET - GATE_ENTRIES) / v.queue_entries()).max(1)
}

/// `total` split into the fewest segments of at most `cap`, as even as
/// possible (sizes differ by at most one, largest first).
pub(crate) fn split_even(total: usize, cap: usize) -> Vec<usize> {
    if total == 0 {
        return Vec::new();
    }
    let parts = total.div_ceil(cap.max(1));
    let (base, extra) = (total / parts, total % parts);
    (0..parts).map(|i| base + usize::from(i < extra)).collect()
}

/// How many gated segments a batch of `per_batch` submissions of `v` is
/// queued in (see the module docs' "Queue depth").
pub fn segments(v: Variant, per_batch: usize) -> usize {
    split_even(per_batch, segment_cap(v)).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_even_and_fit_the_budget() {
        assert_eq!(split_even(200, segment_cap(Variant::RawLaunch)), vec![200]);
        assert_eq!(segment_cap(Variant::RawHandoff), 85);
        assert_eq!(split_even(200, segment_cap(Variant::RawHandoff)), vec![67, 67, 66]);
        assert_eq!(segments(Variant::RawHandoff, 200), 3);
        assert_eq!(split_even(20, 85), vec![20]);
        assert_eq!(split_even(0, 85), Vec::<usize>::new());
        for v in Variant::ALL {
            for total in [1, 84, 85, 86, 200, 1000, 4097] {
                let segs = split_even(total, segment_cap(v));
                assert_eq!(segs.iter().sum::<usize>(), total, "{v:?} {total}");
                let (lo, hi) = (segs.iter().min().unwrap(), segs.iter().max().unwrap());
                assert!(hi - lo <= 1, "{v:?} {total}: {segs:?}");
                assert!(GATE_ENTRIES + hi * v.queue_entries() <= QUEUE_BUDGET, "{v:?} {total}");
            }
        }
    }

    #[test]
    fn the_two_phases_hold_every_variant_once_and_swap_each_pair() {
        for (i, v) in Variant::ALL.into_iter().enumerate() {
            assert_eq!(v.index(), i, "{v:?}");
            let n = Variant::PLAIN.iter().chain(&Variant::ATTACHED).filter(|&&x| x == v).count();
            assert_eq!(n, 1, "{v:?}");
            // Exactly the second phase's variants need CUPTI.
            assert_eq!(v.needs_cupti(), Variant::ATTACHED.contains(&v), "{v:?}");
        }
        assert_eq!(
            Variant::swapped(&Variant::PLAIN),
            [
                Variant::TrackedLaunch,
                Variant::RawLaunch,
                Variant::TrackedHandoff,
                Variant::RawHandoff,
                Variant::RecordedEvents
            ]
        );
        assert_eq!(Variant::swapped(&Variant::ATTACHED), [Variant::RecordedCupti, Variant::RawLaunchCupti]);
        // Every compared pair lies within one phase, but the last.
        for &(v, base, _) in &PAIRS[..PAIRS.len() - 1] {
            assert_eq!(Variant::PLAIN.contains(&v), Variant::PLAIN.contains(&base), "{v:?} / {base:?}");
        }
    }
}

//! `--trace-buckets 1`: events after every bucket on the first GPU, and
//! what they show.

use crate::{BoxResult, Rank};
use gpu_sync::TimingEvent;

/// Events on the first GPU, bucket by bucket (`--trace-buckets 1`): one at
/// the start on the stream the run starts on, then after each bucket's
/// compute (compute stream) and after each bucket's all-reduce
/// (communication stream). Events of one device subtract.
pub(crate) struct Trace {
    /// Recorded before the run.
    pub(crate) start: TimingEvent,
    /// After each bucket's compute, on the compute stream.
    pub(crate) compute: Vec<TimingEvent>,
    /// After each bucket's all-reduce, on the communication stream.
    pub(crate) comm: Vec<TimingEvent>,
}

impl Trace {
    /// A trace of `rank`'s device, its start recorded on the communication
    /// stream (`on_comm`) or the compute stream.
    pub(crate) fn begin(rank: &Rank, on_comm: bool) -> BoxResult<Trace> {
        let start = rank.event_on(if on_comm { &rank.comm_stream } else { &rank.compute })?;
        Ok(Trace { start, compute: Vec::new(), comm: Vec::new() })
    }

    /// Seconds from the start to each event of `v`.
    fn times(&self, v: &[TimingEvent]) -> BoxResult<Vec<f64>> {
        let mut out = Vec::with_capacity(v.len());
        for e in v {
            e.synchronize()?;
            out.push(self.start.elapsed(e)?.as_secs_f64());
        }
        Ok(out)
    }
}

/// Each step between consecutive times (the first from 0).
fn steps_of(t: &[f64]) -> Vec<f64> {
    t.iter().scan(0.0, |prev, &x| Some(x - std::mem::replace(prev, x))).collect()
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What the traces of the first GPU show, printed: per bucket, the
/// all-reduce's time alone (between consecutive ends) and in the step (from
/// when it could start, the later of the previous all-reduce's end and its
/// bucket's compute end, to its end); the compute's per bucket alone and in
/// the step; and how long, in all, the communication stream waited for
/// compute in the step.
pub(crate) fn report_traces(comm_alone: &Trace, compute_alone: &Trace, step: &Trace) -> BoxResult<()> {
    let ar_alone = steps_of(&comm_alone.times(&comm_alone.comm)?);
    let c_alone = steps_of(&compute_alone.times(&compute_alone.compute)?);
    let (ce, ae) = (step.times(&step.compute)?, step.times(&step.comm)?);
    let c_step = steps_of(&ce);
    let mut ar_step = Vec::new();
    let mut waited = 0.0;
    let mut prev_end = 0.0f64;
    for (&c, &a) in ce.iter().zip(&ae) {
        let could_start = prev_end.max(c);
        waited += (c - prev_end).max(0.0);
        ar_step.push(a - could_start);
        prev_end = a;
    }
    let ms = |v: f64| format!("{:.3} ms", v * 1e3);
    println!("  trace of GPU 0 (one more run of each, events after every bucket), median per bucket:");
    println!(
        "    all-reduce: {} alone, {} in the step; compute: {} alone, {} in the step",
        ms(median_of(ar_alone)),
        ms(median_of(ar_step)),
        ms(median_of(c_alone)),
        ms(median_of(c_step))
    );
    println!(
        "    the communication stream waited {} for compute in the step; the compute ended at {}, the last all-reduce at {}",
        ms(waited),
        ms(ce.last().copied().unwrap_or(f64::NAN)),
        ms(ae.last().copied().unwrap_or(f64::NAN))
    );
    Ok(())
}

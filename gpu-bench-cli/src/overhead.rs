//! `gpu-bench overhead`: the host cost of submitting work, a raw driver
//! launch against gpu-sync's tracked launch, a hand-written cross-stream
//! handoff against gpu-sync's automatic waits, and what recording
//! (`gpu_sync::trace`) adds to a tracked launch. The method (the seven
//! variants, the two phases, gated or free-running batches, the queue
//! budget) is [`gpu_bench::overhead`]'s; this command takes the flags, runs
//! it and renders its samples and ratios as the report.

use crate::common::{Ctx, Failure};
use gpu_bench::overhead::{self, Overhead, PAIRS, QUEUE_BUDGET, Variant};
use gpu_bench::record::{Counter, Record, Unit};
use gpu_bench::stats::{Summary, median};
use gpu_bench::{Report, Rule, Warning};

pub use gpu_bench::overhead::Method;

/// The command's options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Batches per variant and repetition (default 40, 5 with `--quick`).
    pub batches: Option<usize>,
    /// Submissions per batch (default 200, 20 with `--quick`).
    pub per_batch: Option<usize>,
    /// Repetitions of the whole interleaved comparison.
    pub repeat: usize,
    /// How batches are timed.
    pub method: Method,
}

/// (min, median, max) of `v`; NaNs when empty.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::NAN, f64::min);
    let max = v.iter().copied().fold(f64::NAN, f64::max);
    (min, median(v), max)
}

/// Runs the comparison ([`gpu_bench::overhead::run`]) and renders it.
///
/// # Errors
/// A driver error; the gate cannot be set up on a real GPU (use
/// `--free-running`).
pub fn run(ctx: &Ctx, opts: Options) -> std::result::Result<Report, Failure> {
    // `--quick` sets the defaults; explicit values win.
    let options = overhead::Options {
        batches: opts.batches.unwrap_or(if ctx.quick { 5 } else { 40 }),
        per_batch: opts.per_batch.unwrap_or(if ctx.quick { 20 } else { 200 }),
        repeat: opts.repeat,
        method: opts.method,
    };
    let mut report = ctx.report("Host cost per submission")?;
    let progress = |msg: String| ctx.progress.step(msg);
    let o = overhead::run(&ctx.device, ctx.instruments(), ctx.sim, options, &progress)?;
    render(&mut report, &o);
    Ok(report)
}

/// The report's records and notes of `o`.
fn render(report: &mut Report, o: &Overhead) {
    let overhead::Options { batches, per_batch, repeat, .. } = o.options;
    let variants: Vec<Variant> = Variant::PLAIN.iter().chain(&Variant::ATTACHED).copied().collect();
    let runs = |v: &Variant| o.ran(*v);
    let (pooled, ratios, timeouts, recorded) = (&o.samples, &o.ratios, &o.timeouts, &o.recorded);
    for &v in variants.iter().filter(|v| runs(v)) {
        let s = &pooled[v.index()];
        let sum = Summary::of(s).unwrap_or_else(Summary::empty);
        let mut r = Record::new(v.name(), &[("submission", v.what().to_owned())]);
        r.counters.push(
            Counter::new("median per submission", sum.median * 1e-9, Unit::Seconds)
                .with_noise(sum.median_noise()),
        );
        r.counters.push(Counter::new("IQR", sum.iqr() * 1e-9, Unit::Seconds));
        r.counters.push(Counter::new("batches", sum.n as f64, Unit::Count));
        let t = timeouts[v.index()];
        if t > 0 {
            r.warnings.push(Warning {
                rule: Rule::Gate,
                mode: None,
                message: format!(
                    "the spin gate timed out in {t} gated segments before the host opened it: \
                     those segments ran free (a submission may have blocked on a full queue)"
                ),
            });
        }
        report.records.push(r);
    }
    for (i, &(v, base, target)) in PAIRS.iter().enumerate() {
        if !runs(&v) || !runs(&base) {
            continue;
        }
        let name = format!("{} / {}", v.name(), base.name());
        for (k, &(ratio, ci)) in ratios[i].iter().enumerate() {
            let mut r = Record::new(name.clone(), &[("repetition", (k + 1).to_string())]);
            r.counters.push(Counter::new("ratio of medians", ratio, Unit::Ratio));
            r.counters.push(Counter::new("95% CI low", ci.0, Unit::Ratio));
            r.counters.push(Counter::new("95% CI high", ci.1, Unit::Ratio));
            report.records.push(r);
        }
        let values: Vec<f64> = ratios[i].iter().map(|(r, _)| *r).collect();
        let (lo, mid, hi) = spread(&values);
        let mut r = Record::new(name, &[("repetition", "all".to_owned())]);
        r.counters.push(Counter::new("repetitions", values.len() as f64, Unit::Count));
        r.counters.push(Counter::new("min ratio", lo, Unit::Ratio));
        r.counters.push(Counter::new("median ratio", mid, Unit::Ratio));
        r.counters.push(Counter::new("max ratio", hi, Unit::Ratio));
        if let Some(target) = target {
            let within = values.iter().filter(|&&r| r <= target).count();
            r.counters.push(Counter::new("target (at most)", target, Unit::Ratio));
            r.counters.push(Counter::new("repetitions within target", within as f64, Unit::Count));
        }
        report.records.push(r);
    }
    let how = match o.method {
        Method::Gated => {
            let segs = |v: Variant| overhead::segments(v, per_batch);
            format!(
                "gated: each batch queued behind a spin gate holding both streams, timed with the host clock \
                 while the GPU is held, the gate opened and the streams synchronized outside the timed region; \
                 a launch batch in {} gated segment(s), a handoff batch in {} (at most {QUEUE_BUDGET} queue \
                 entries per segment, see the module docs of gpu-bench's overhead module)",
                segs(Variant::RawLaunch),
                segs(Variant::RawHandoff)
            )
        }
        Method::FreeRunning => concat!(
            "free-running: host clock per batch with nothing holding the GPU, ",
            "the streams synchronized outside the timed region"
        )
        .to_owned(),
    };
    report.notes.push(format!(
        "{repeat} repetition(s) of {batches} batches of {per_batch} submissions per variant, interleaved batch \
         by batch (pair order alternating), in two phases: the first with CUPTI never loaded, the second \
         (raw launch and cupti recording) with it attached; {how}"
    ));
    report.notes.push(
        "targets: gpu-sync launch / raw launch at most 1.03, gpu-sync handoff / raw handoff at most 1.05 \
         (ratio of medians); the recording rows have none (their cost is what is measured)"
            .to_owned(),
    );
    for (v, r) in [(Variant::RecordedEvents, recorded.events), (Variant::RecordedCupti, recorded.cupti)] {
        if runs(&v) {
            report.notes.push(format!(
                "{}: {} launches recorded in the timed batches, {} with a device span or a CUPTI kernel record \
                 joined by its external correlation id, {} dropped",
                v.name(),
                r.launches,
                r.resolved,
                r.dropped
            ));
        }
    }
    report.notes.extend(o.notes.iter().cloned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(spread(&[1.04, 1.01, 1.02]), (1.01, 1.02, 1.04));
        let (lo, mid, hi) = spread(&[]);
        assert!(lo.is_nan() && mid.is_nan() && hi.is_nan());
    }
}

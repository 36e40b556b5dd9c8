//! Timing work on several streams and devices: [`Bench::run_streams`].
//! The time sources are in [`crate::clock::multi`]; the span logic, shared
//! with the NCCL sweep, in [`crate::spans`].

use crate::bench::Bench;
use crate::clock::multi::{Kind, MultiRuns};
use crate::clock::multi_cupti::MultiKernelRuns;
use crate::error::{Error as BenchError, Result as BenchResult};
use crate::record::{Counter, Mode, ModeResult, Record, Unit, Warning};
use crate::spans::SpanReading;
use crate::stop::Rule;
use crate::timer::{PIPELINE_AHEAD_S, Timer};
use gpu_sync::{Result, Stream};

impl Bench {
    /// Times `f`, work over several streams (on one device or several), in
    /// every requested mode: each sample records a start and an end event
    /// on every stream (each on its own device's clock), and its time is
    /// the longest stream's span. Events of two devices cannot be
    /// subtracted, so no span runs from one device's start to another's
    /// end (see [`crate::spans`]).
    ///
    /// `f` is given the engine's timing streams, one per stream of
    /// `streams`, in the same order (each on the same device and waiting,
    /// device-side, for its caller's stream). The record carries, per mode,
    /// the median span of every stream (mode counters `span of stream i
    /// (GPU d)`) and the spread, (longest − shortest) / longest, median
    /// over the samples (record counter `<mode> device spread`: rendered in
    /// the counters table, JSON and CSV).
    ///
    /// Modes: hot, cold (an L2 flush on every stream's device before each
    /// sample, outside the events) and batch (needs instruments, loaded for
    /// the first stream's device: its spin gate holds the first timing
    /// stream and every other waits for it, so the runs of all devices are
    /// released at once) and kernel (CUPTI's records of every stream, on
    /// CUPTI's one clock: a run is its first start to its last end over all
    /// devices, each run starting on every device once all have finished
    /// the last one; the mode counter `cross-device order slack` is the
    /// smallest gap between a device's start and the end, on another
    /// device, of work it waited for: below 0 the devices' timestamps
    /// disagree, and a [`Rule::Clock`] warning says by how much; the
    /// counters `device j - device 0 clock, at least` and `at most` bound
    /// each other device's clock against the first stream's from both
    /// sides, by the slacks of the two directions). First-call
    /// and graph are refused
    /// ([`BenchError::Unavailable`], or a warning with
    /// [`Bench::best_effort`]). With one stream this is [`Bench::run`],
    /// every mode included.
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_bench::{Bench, Mode, Settings};
    /// use gpu_sync::{Device, DeviceBuffer, Stream};
    /// let (s0, s1) = (Stream::new(&Device::get(0)?)?, Stream::new(&Device::get(1)?)?);
    /// let mut a = DeviceBuffer::<u8>::alloc(&s0, 1 << 20)?;
    /// let mut b = DeviceBuffer::<u8>::alloc(&s1, 16 << 20)?;
    /// let record = Bench::new("fill on two devices")
    ///     .modes(&[Mode::Hot])
    ///     .settings(Settings::quick())
    ///     .run_streams(&[&s0, &s1], |s| {
    ///         s[0].fill_bytes(&mut a, 1)?;
    ///         s[1].fill_bytes(&mut b, 1)
    ///     })?;
    /// let hot = record.mode(Mode::Hot).unwrap();
    /// let longest = hot.counters.iter().find(|c| c.name == "span of stream 1 (GPU 1)").unwrap();
    /// assert_eq!(hot.median(), longest.value); // the 16 MiB fill's device sets the time
    /// assert!(record.counter("hot device spread").unwrap().value > 0.5);
    /// # Ok::<(), gpu_bench::Error>(())
    /// ```
    ///
    /// # Errors
    /// No stream; a driver error, or `f`'s error; [`BenchError::Unavailable`]
    /// for a mode it cannot time (unless [`Bench::best_effort`]).
    pub fn run_streams(
        &self,
        streams: &[&Stream],
        mut f: impl FnMut(&[Stream]) -> Result<()>,
    ) -> BenchResult<Record> {
        match streams {
            [] => Err(BenchError::Settings("run_streams was given no stream".into())),
            [one] => self.run(one, |s| f(std::slice::from_ref(s))),
            [first, rest @ ..] => {
                let mut rec = self.new_record()?;
                let mut lead = Timer::new(first, self.instruments.clone())?;
                let mut others = rest.iter().map(|s| Timer::new(s, None)).collect::<Result<Vec<_>>>()?;
                self.measure_streams(&mut lead, &mut others, &mut rec, &mut f)?;
                Ok(rec)
            }
        }
    }

    /// The modes' loop of [`Bench::run_streams`] over several timers.
    fn measure_streams(
        &self,
        lead: &mut Timer,
        others: &mut [Timer],
        rec: &mut Record,
        f: &mut dyn FnMut(&[Stream]) -> Result<()>,
    ) -> BenchResult<()> {
        let mut devices: Vec<i32> =
            std::iter::once(&*lead).chain(others.iter()).map(|t| t.stream.device().ordinal()).collect();
        let names: Vec<String> =
            devices.iter().enumerate().map(|(i, d)| format!("span of stream {i} (GPU {d})")).collect();
        devices.sort_unstable();
        devices.dedup();
        for &mode in &self.modes {
            for t in std::iter::once(&*lead).chain(others.iter()) {
                t.stream.wait_stream(&t.caller)?;
            }
            lead.last_warmup.clear();
            let sampled = match mode {
                Mode::Kernel => self.kernel_streams(lead, others, rec, f)?,
                _ => self.events_streams(lead, others, rec, f, mode)?,
            };
            let Some((mut r, side, timeouts)) = sampled else { continue };
            add_spans(rec, &mut r, &side, &names);
            if timeouts > 0 {
                rec.warnings.push(Warning {
                    rule: Rule::Gate,
                    mode: Some(mode),
                    message: format!(
                        "the spin gate timed out in {timeouts} samples before their runs were queued: \
                         those include host launch gaps"
                    ),
                });
            }
            self.keep(lead, rec, r, devices.len() as f64)?;
        }
        rec.modes.sort_by_key(|m| m.mode);
        for t in std::iter::once(&*lead).chain(others.iter()) {
            t.caller.wait_stream(&t.stream)?;
        }
        crate::bench::derive(rec);
        Ok(())
    }

    /// Hot, cold or batch over several timers: the result, every sample's
    /// spans and the batch samples whose gate timed out; `None` when the
    /// mode cannot run (and the bench is best-effort).
    fn events_streams(
        &self,
        lead: &mut Timer,
        others: &mut [Timer],
        rec: &mut Record,
        f: &mut dyn FnMut(&[Stream]) -> Result<()>,
        mode: Mode,
    ) -> BenchResult<Option<Sampled>> {
        let kind = match mode {
            Mode::Hot => Kind::Hot,
            Mode::Cold => Kind::Cold(0),
            Mode::Batch if lead.instruments.is_some() => {
                // Samples of about PIPELINE_AHEAD_S of work, as batch mode
                // on one stream.
                let est = MultiRuns::new(lead, others, &mut *f, Kind::Hot).one(lead)?;
                let fit = if est > 0.0 { (PIPELINE_AHEAD_S / est).ceil() as usize } else { usize::MAX };
                Kind::Batch(self.settings_ref().batch_runs.max(1).min(fit.max(1)))
            }
            Mode::Batch => {
                let why = "no instruments loaded (the spin gate, on the first stream's device): \
                           Bench::instruments(gpu_bench::instruments::load(..))";
                self.unavailable(rec, mode, why.into())?;
                return Ok(None);
            }
            Mode::FirstCall | Mode::Graph | Mode::Kernel => {
                let why = match mode {
                    Mode::FirstCall => "first-call mode times one stream's first run (Bench::run)",
                    _ => {
                        "a graph is captured from one stream; several streams' work is not captured together"
                    }
                };
                self.unavailable(rec, mode, format!("{why}; run_streams times hot, cold, batch and kernel"))?;
                return Ok(None);
            }
        };
        let runs_per_sample = match kind {
            Kind::Batch(n) => n,
            _ => 1,
        };
        let mut runs = MultiRuns::new(lead, others, &mut *f, kind);
        let r = self.sample(lead, mode, runs_per_sample, &mut runs)?;
        Ok(Some((r, std::mem::take(&mut runs.readings.side), runs.gate_timeouts)))
    }

    /// Kernel mode over several timers: CUPTI's records of every timing
    /// stream ([`crate::clock::multi_cupti`]); `None` when CUPTI cannot be
    /// used here (and the bench is best-effort).
    fn kernel_streams(
        &self,
        lead: &mut Timer,
        others: &mut [Timer],
        rec: &mut Record,
        f: &mut dyn FnMut(&[Stream]) -> Result<()>,
    ) -> BenchResult<Option<Sampled>> {
        let runs = lead.kernel_clock().and_then(|()| MultiKernelRuns::new(lead, others, &mut *f));
        let mut runs = match runs {
            Ok(runs) => runs,
            Err(why) => {
                lead.drop_kernel_clock();
                self.unavailable(rec, Mode::Kernel, why)?;
                return Ok(None);
            }
        };
        let r = self.sample(lead, Mode::Kernel, 1, &mut runs);
        // CUPTI records only while kernel mode samples.
        lead.drop_kernel_clock();
        let mut r = r?;
        for (j, lo, hi) in runs.slack.skew_vs_first() {
            let dev = |k: usize| runs.streams.get(k).map_or(-1, |s| s.device().ordinal());
            let name = format!("device {} - device {} clock", dev(j), dev(0));
            r.counters.push(Counter::new(format!("{name}, at least"), lo as f64 * 1e-9, Unit::Seconds));
            r.counters.push(Counter::new(format!("{name}, at most"), hi as f64 * 1e-9, Unit::Seconds));
        }
        if let Some(ns) = runs.slack.smallest() {
            r.counters.push(Counter::new("cross-device order slack", ns as f64 * 1e-9, Unit::Seconds));
            if ns < 0 {
                rec.warnings.push(Warning {
                    rule: Rule::Clock,
                    mode: Some(Mode::Kernel),
                    message: format!(
                        "CUPTI's timestamps put a device's start {} before the end of work it waited for on \
                         another device: the devices' clocks disagree by at least that much",
                        crate::record::format_value(-ns as f64 * 1e-9, Unit::Seconds)
                    ),
                });
            }
        }
        Ok(Some((r, std::mem::take(&mut runs.readings.side), 0)))
    }
}

/// A mode's result, its samples' spans and its gate timeouts.
type Sampled = (ModeResult, Vec<SpanReading>, usize);

/// Each stream's median span (mode counters named `names`) and the median
/// spread (a record counter `<mode> device spread`) of the sampled readings.
fn add_spans(rec: &mut Record, r: &mut ModeResult, side: &[SpanReading], names: &[String]) {
    if side.is_empty() {
        return;
    }
    for (i, name) in names.iter().enumerate() {
        let v: Vec<f64> = side.iter().filter_map(|s| s.spans_s.get(i).copied()).collect();
        r.counters.push(Counter::new(name.clone(), crate::stats::median(&v), Unit::Seconds));
    }
    let spread: Vec<f64> = side.iter().map(SpanReading::spread).collect();
    let name = format!("{} device spread", r.mode.name());
    rec.counters.retain(|c| c.name != name);
    rec.counters.push(Counter::new(name, crate::stats::median(&spread), Unit::Fraction));
}

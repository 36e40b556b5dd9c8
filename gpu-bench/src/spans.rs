//! Per-device spans: one start/end event pair per stream, read as one span
//! per stream; the time of work spread over several streams and devices is
//! the longest span, and how far the spans differ is the spread.
//!
//! Events of two devices cannot be subtracted (`cuEventElapsedTime` of
//! events from different contexts fails: each device stamps its events on
//! its own clock), so a span is always one stream's own start to its own
//! end. What the spans cannot tell: when device B started relative to
//! device A, or whether B's span includes waiting for A (a cross-device
//! wait inside B's span is part of B's time). For one clock over every
//! device, kernel mode reads CUPTI's records instead.
//!
//! [`crate::Bench::run_streams`] uses it for every sample; the NCCL sweep
//! ([`crate::nccl`]) uses it around each size's iterations.

use gpu_sync::{Result, Stream, TimingEvent};

/// One start/end event pair per stream (each on its stream's device).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_bench::spans::DeviceSpans;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// let (s0, s1) = (Stream::new(&d0)?, Stream::new(&d1)?);
/// let mut small = DeviceBuffer::<u8>::alloc(&s0, 1 << 20)?;
/// let mut large = DeviceBuffer::<u8>::alloc(&s1, 64 << 20)?;
/// let spans = DeviceSpans::new([&s0, &s1])?;
/// spans.start_all([&s0, &s1])?;
/// s0.fill_bytes(&mut small, 1)?;
/// s1.fill_bytes(&mut large, 1)?;
/// spans.end_all([&s0, &s1])?;
/// let r = spans.read()?; // synchronizes every end event
/// assert_eq!(r.longest(), r.spans_s[1]); // 64 MiB takes longer than 1 MiB
/// assert!(r.spread() > 0.5);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct DeviceSpans {
    pairs: Vec<(TimingEvent, TimingEvent)>,
}

impl DeviceSpans {
    /// A start/end pair for each of `streams`, on its device.
    ///
    /// # Errors
    /// A driver error.
    pub fn new<'a>(streams: impl IntoIterator<Item = &'a Stream>) -> Result<DeviceSpans> {
        let pairs = streams
            .into_iter()
            .map(|s| Ok((TimingEvent::new(s.device())?, TimingEvent::new(s.device())?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(DeviceSpans { pairs })
    }

    /// How many streams it spans.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether it spans no stream.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Records the start event of stream `i` on `stream`.
    ///
    /// # Errors
    /// `i` out of range; a driver error (a stream of another device than
    /// the pair's).
    pub fn start(&self, i: usize, stream: &Stream) -> Result<()> {
        self.pair(i)?.0.record(stream)
    }

    /// Records the end event of stream `i` on `stream`.
    ///
    /// # Errors
    /// As [`DeviceSpans::start`].
    pub fn end(&self, i: usize, stream: &Stream) -> Result<()> {
        self.pair(i)?.1.record(stream)
    }

    /// Records every start event, the `i`th on the `i`th stream.
    ///
    /// # Errors
    /// As [`DeviceSpans::start`]; more streams than pairs.
    pub fn start_all<'a>(&self, streams: impl IntoIterator<Item = &'a Stream>) -> Result<()> {
        streams.into_iter().enumerate().try_for_each(|(i, s)| self.start(i, s))
    }

    /// Records every end event, the `i`th on the `i`th stream.
    ///
    /// # Errors
    /// As [`DeviceSpans::start_all`].
    pub fn end_all<'a>(&self, streams: impl IntoIterator<Item = &'a Stream>) -> Result<()> {
        streams.into_iter().enumerate().try_for_each(|(i, s)| self.end(i, s))
    }

    /// Waits for every end event and reads each stream's span.
    ///
    /// # Errors
    /// A driver error (an event never recorded).
    pub fn read(&self) -> Result<SpanReading> {
        let mut spans_s = Vec::with_capacity(self.pairs.len());
        for (a, b) in &self.pairs {
            b.synchronize()?;
            spans_s.push(a.elapsed(b)?.as_secs_f64());
        }
        Ok(SpanReading { spans_s })
    }

    fn pair(&self, i: usize) -> Result<&(TimingEvent, TimingEvent)> {
        self.pairs.get(i).ok_or_else(|| {
            gpu_sync::Error::InvalidArgument(format!("span {i} of {} streams", self.pairs.len()))
        })
    }
}

/// The spans of one reading of [`DeviceSpans`], seconds, one per stream.
///
/// ```
/// use gpu_bench::spans::SpanReading;
/// let r = SpanReading { spans_s: vec![2e-6, 8e-6] };
/// assert_eq!((r.longest(), r.shortest()), (8e-6, 2e-6));
/// assert_eq!(r.spread(), 0.75); // (8 − 2) / 8
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SpanReading {
    /// Each stream's span, seconds, in the streams' order.
    pub spans_s: Vec<f64>,
}

impl SpanReading {
    /// The longest span: the time of the work over every stream (0 for none).
    pub fn longest(&self) -> f64 {
        self.spans_s.iter().copied().fold(0.0, f64::max)
    }

    /// The shortest span (0 for none).
    pub fn shortest(&self) -> f64 {
        if self.spans_s.is_empty() {
            return 0.0;
        }
        self.spans_s.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// (longest − shortest) / longest: 0 when every stream took as long, 0
    /// when the longest is 0.
    pub fn spread(&self) -> f64 {
        let l = self.longest();
        if l > 0.0 { (l - self.shortest()) / l } else { 0.0 }
    }
}

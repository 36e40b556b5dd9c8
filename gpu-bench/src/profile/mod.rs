//! The profiler: named host ranges and every launch, copy and graph replay
//! of a gpu-sync program on one time axis, per host thread and per stream —
//! torch.profiler's two views for gpu-sync users.
//!
//! - [`Trace`] (`trace`): the model — host ranges, host operations, device
//!   spans tied back to the operation that enqueued them, device memory,
//!   dropped counts, clock alignments;
//! - [`Trace::chrome_json`] (`chrome`): Chrome trace-event JSON for
//!   Perfetto and chrome://tracing, a process per device, with launch→span
//!   flow arrows, wait arrows between streams (and devices) from the
//!   operations' [`OpRecord::after`], and a device-memory counter track;
//! - [`Trace::key_averages`] (`table`): the op table — calls, device total
//!   and self, average, min/max, % of device time, host time; sorted by
//!   any [`Column`], grouped by shape; markdown and JSON;
//! - [`Trace::svg`] (`svg`): the timeline as a picture (and, with the
//!   `png` feature, `Trace::png` through resvg);
//! - [`Schedule`] (`schedule`): skip_first / wait / warmup / active /
//!   repeat, driven by steps;
//! - [`Profiler`] (`profiler`): turns gpu-sync's recording
//!   (`gpu_sync::trace`) on for a device with a [`Backend`] — device events
//!   everywhere, CUPTI's activity records where libcupti loads (`cupti`:
//!   clock alignment, the join by external correlation id) — and hands each
//!   cycle's trace to a callback.
//!
//! Host ranges are gpu-sync's: [`range`] (a guard) and [`scope`] (a
//! closure), re-exported here.

mod adapt;
mod chrome;
mod cupti;
#[cfg(feature = "png")]
mod png;
mod profiler;
mod schedule;
mod svg;
mod table;
mod trace;

pub use chrome::{DEVICE_PID, HOST_PID};
pub use cupti::{Alignment, ClockMap};
pub use gpu_sync::trace::{range, scope};
#[cfg(feature = "png")]
pub use png::svg_to_png;
pub use profiler::{Backend, Profiler};
pub use schedule::{Action, Schedule};
pub use svg::colour;
pub use table::{Column, KeyAverages, Row, RowKind, TABLE_SCHEMA, TABLE_SCHEMA_VERSION};
pub use trace::DeviceTrack;
pub use trace::{
    ClockAlignment, CopyDir, DeviceSpan, Dropped, FOREIGN_STREAM, HostMem, MemorySample, OpKind, OpRecord,
    RangeRecord, Source, StreamTrack, ThreadTrack, Trace, WaitSource,
};

impl Trace {
    /// The trace as Chrome trace-event JSON (see the `chrome` module docs):
    /// what `torch.profiler`'s `export_chrome_trace` writes, for Perfetto.
    pub fn chrome_json(&self) -> String {
        chrome::chrome_json(self)
    }

    /// The same as a JSON value.
    pub fn chrome_value(&self) -> serde_json::Value {
        chrome::chrome_value(self)
    }

    /// The op table, grouped by name and sorted by device total.
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(self)
    }

    /// The timeline as an SVG document titled `title`.
    pub fn svg(&self, title: &str) -> String {
        svg::render(self, title)
    }

    /// The timeline as a PNG image (feature `png`: [`svg_to_png`] of
    /// [`Trace::svg`]).
    ///
    /// # Errors
    /// [`crate::Error::Render`].
    #[cfg(feature = "png")]
    pub fn png(&self, title: &str) -> crate::Result<Vec<u8>> {
        svg_to_png(&self.svg(title))
    }
}

#[cfg(test)]
mod tests;

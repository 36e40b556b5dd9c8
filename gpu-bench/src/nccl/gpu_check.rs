//! The CUPTI check of the sweep's event times ([`super::NcclOptions::cupti`]):
//! the kernels NCCL ran on each rank's stream during the timed iterations,
//! from CUPTI's activity records (cuda-sys's one process-wide subscriber,
//! read per stream through kernel mode's filters,
//! [`crate::clock::multi_cupti::StreamFilters`]).

use crate::clock::multi_cupti::{StreamFilters, bounds};
use crate::error::Error;
use crate::record::Mode;
use gpu_sync::Stream;
use gpu_sync::cuda_sys::cupti::Consumer;

/// A consumer of kernel records and each rank stream's filter.
pub(super) struct KernelCheck {
    consumer: Consumer,
    filters: StreamFilters,
}

/// One device's kernels over the timed iterations, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DeviceKernels {
    /// Its first kernel's start to its last kernel's end.
    pub(super) span_s: f64,
    /// The sum of its kernels' durations.
    pub(super) busy_s: f64,
}

impl KernelCheck {
    /// Kernel records of the kind `records` asks for from now on, for
    /// `streams` (rank order).
    ///
    /// # Errors
    /// [`Error::Unavailable`] (kernel mode's source) with CUPTI's reason
    /// when it cannot be used here: not loaded, or another tool owns the
    /// profiling interface.
    pub(super) fn new<'s>(
        streams: impl IntoIterator<Item = &'s Stream>,
        records: crate::KernelRecords,
    ) -> crate::Result<KernelCheck> {
        let unavailable = |why: String| Error::Unavailable {
            mode: Mode::Kernel,
            why: format!("gpu-bench nccl's CUPTI check (cupti) needs CUPTI's kernel records: {why}"),
        };
        let filters = StreamFilters::new(streams).map_err(unavailable)?;
        let a = gpu_sync::cuda_sys::cupti::activity().map_err(|e| unavailable(e.to_string()))?;
        let kind = records.activity_kind().ok_or_else(|| {
            unavailable(format!(
                "{} has no timestamps to span a collective over its ranks' streams: use concurrent or serial",
                records.cupti_name()
            ))
        })?;
        let consumer = a.consumer(&[kind]).map_err(|e| unavailable(e.to_string()))?;
        Ok(KernelCheck { consumer, filters })
    }

    /// Drops every record so far (the caller has synchronized the streams:
    /// every kernel before this point has finished and is flushed here).
    pub(super) fn clear(&self) -> crate::Result<()> {
        self.consumer.take().map(drop).map_err(|e| Error::Kernel(e.to_string()))
    }

    /// Each stream's kernels since [`KernelCheck::clear`] (the caller has
    /// synchronized the streams), in rank order.
    ///
    /// # Errors
    /// [`Error::Kernel`] when CUPTI's flush fails or a stream had no kernel.
    pub(super) fn read(&self) -> crate::Result<Vec<DeviceKernels>> {
        let all = self.consumer.take().map_err(|e| Error::Kernel(e.to_string()))?;
        self.filters.split(&all).iter().enumerate().map(|(r, recs)| device_kernels(r, recs)).collect()
    }
}

/// Rank `r`'s span and busy time from its stream's kernel records.
fn device_kernels(
    r: usize,
    recs: &[gpu_sync::cuda_sys::cupti::ActivityRecord],
) -> crate::Result<DeviceKernels> {
    let (start, end) = bounds(recs).ok_or_else(|| {
        Error::Kernel(format!(
            "nccl CUPTI check: CUPTI recorded no kernel on rank {r}'s stream during the timed iterations"
        ))
    })?;
    let busy: u64 = recs.iter().map(|k| k.duration_ns()).sum();
    Ok(DeviceKernels { span_s: end.saturating_sub(start) as f64 * 1e-9, busy_s: busy as f64 * 1e-9 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_sync::cuda_sys::cupti::{ActivityOp, ActivityRecord};

    fn kernel(start_ns: u64, end_ns: u64) -> ActivityRecord {
        ActivityRecord {
            start_ns,
            end_ns,
            device_id: 0,
            context_id: 1,
            stream_id: 7,
            correlation_id: 0,
            op: ActivityOp::Kernel {
                name: "ncclDevKernel_AllReduce".into(),
                grid: [1; 3],
                block: [1; 3],
                graph_id: 0,
                graph_node_id: 0,
            },
        }
    }

    #[test]
    fn span_is_first_start_to_last_end_and_busy_the_sum_of_kernels() {
        // Two kernels with a 30 ns gap: span 130 ns, busy 100 ns.
        let d = device_kernels(0, &[kernel(1_000, 1_050), kernel(1_080, 1_130)]).expect("kernels");
        assert!((d.span_s - 130e-9).abs() < 1e-15 && (d.busy_s - 100e-9).abs() < 1e-15, "{d:?}");
        let e = device_kernels(3, &[]).expect_err("no kernel");
        assert!(e.to_string().contains("no kernel on rank 3's stream"), "{e}");
    }
}

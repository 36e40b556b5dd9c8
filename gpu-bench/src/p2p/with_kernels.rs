//! The figures that need the workspace's kernels (gpu-bench's `kernels`
//! feature): the SM copy and its raw twin, pushing and pulling, and the
//! cross-device handoff of gpu-sync against its raw twin. Without the
//! feature they are reported missing, and why.

use super::{Figure, Pair};
#[cfg(feature = "kernels")]
use super::{figure, gbs};

/// The kernel figures of one ordered pair.
pub(super) struct KernelFigures {
    pub sm_push: Figure,
    pub sm_push_raw: Figure,
    pub sm_pull: Figure,
    pub sm_pull_raw: Figure,
    pub handoff_gpu: Figure,
    pub handoff_raw_gpu: Figure,
    pub handoff_host: Figure,
    pub handoff_raw_host: Figure,
}

impl KernelFigures {
    /// Every figure missing for `why`.
    pub(super) fn missing(why: &str) -> KernelFigures {
        let m = || Figure::Missing(why.to_owned());
        KernelFigures {
            sm_push: m(),
            sm_push_raw: m(),
            sm_pull: m(),
            sm_pull_raw: m(),
            handoff_gpu: m(),
            handoff_raw_gpu: m(),
            handoff_host: m(),
            handoff_raw_host: m(),
        }
    }
}

/// What each device (by its index in the run's list) needs: the kernels
/// with their raw twins, and the spin gate's instruments (`None`: the
/// handoff runs ungated, and the notes say so).
#[cfg(feature = "kernels")]
pub(super) struct Loaded(Vec<Result<PerDevice, String>>);

#[cfg(feature = "kernels")]
type PerDevice = (super::twin::Twins, Option<std::sync::Arc<dyn crate::Instruments>>);

/// Without the `kernels` feature: nothing to load.
#[cfg(not(feature = "kernels"))]
pub(super) struct Loaded;

#[cfg(not(feature = "kernels"))]
impl Loaded {
    pub(super) fn load(_: &[gpu_sync::Device]) -> Loaded {
        Loaded
    }

    pub(super) fn figures(
        &self,
        _: &mut Pair<'_>,
        _: (usize, usize),
        _: (usize, usize),
        _: &mut Vec<String>,
    ) -> crate::Result<KernelFigures> {
        Ok(KernelFigures::missing("gpu-bench built without its `kernels` feature"))
    }
}

#[cfg(feature = "kernels")]
impl Loaded {
    /// Loads the kernels and instruments into every device; a device that
    /// cannot load them keeps the error as the reason for its figures.
    pub(super) fn load(devices: &[gpu_sync::Device]) -> Loaded {
        Loaded(
            devices
                .iter()
                .map(|d| {
                    let twins =
                        super::twin::Twins::load(d).map_err(|e| format!("kernels not loaded: {e}"))?;
                    Ok((twins, crate::instruments::load(d).ok()))
                })
                .collect(),
        )
    }

    /// The figures of the pair `p` (devices at `(i, j)` of the run's list),
    /// with `(repeats, hops)`; peer access is on both ways. A remark about
    /// the handoff's gate goes to `notes`.
    ///
    /// # Errors
    /// [`crate::Error::Check`] when a copy's data or the handoff's count is
    /// wrong; a driver error clearing the pair.
    pub(super) fn figures(
        &self,
        p: &mut Pair<'_>,
        (i, j): (usize, usize),
        (repeats, hops): (usize, usize),
        notes: &mut Vec<String>,
    ) -> crate::Result<KernelFigures> {
        let (ta, tb) = match (&self.0[i], &self.0[j]) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(why), _) | (_, Err(why)) => return Ok(KernelFigures::missing(why)),
        };
        let bytes = p.a_src.len() * 4;
        let sm = |p: &mut Pair<'_>, twins: &super::twin::Twins, raw: bool| {
            let ms = if raw {
                super::raw::sm_ms(p, twins, repeats)
            } else {
                p.sm_ms(twins, repeats).map_err(Into::into)
            };
            let f = figure(ms.and_then(|ms| p.check(false).map(|()| gbs(bytes, ms))));
            p.clear()?;
            f
        };
        let (sm_push, sm_push_raw) = (sm(p, &ta.0, false)?, sm(p, &ta.0, true)?);
        let (sm_pull, sm_pull_raw) = (sm(p, &tb.0, false)?, sm(p, &tb.0, true)?);
        let mut k =
            KernelFigures { sm_push, sm_push_raw, sm_pull, sm_pull_raw, ..KernelFigures::missing("") };
        match super::handoff::measure(&ta.0, &tb.0, hops, repeats, ta.1.clone()) {
            Ok((h, why)) => {
                k.handoff_gpu = Figure::Value(h.gpu_us);
                k.handoff_raw_gpu = Figure::Value(h.raw_gpu_us);
                k.handoff_host = Figure::Value(h.host_us);
                k.handoff_raw_host = Figure::Value(h.raw_host_us);
                let pair = format!("handoff {} -> {} -> {}", p.a.ordinal(), p.b.ordinal(), p.a.ordinal());
                if let Some(why) = why {
                    notes.push(format!(
                        "{pair}: {why}: batches ran free, host submission inside the GPU time"
                    ));
                }
                if h.timeouts > 0 {
                    notes.push(format!(
                        "{pair}: the spin gate timed out in {} batches (they ran free)",
                        h.timeouts
                    ));
                }
            }
            Err(crate::Error::Check(m)) => return Err(crate::Error::Check(m)),
            Err(e) => {
                let m = KernelFigures::missing(&e.to_string());
                (k.handoff_gpu, k.handoff_raw_gpu, k.handoff_host, k.handoff_raw_host) =
                    (m.handoff_gpu, m.handoff_raw_gpu, m.handoff_host, m.handoff_raw_host);
            }
        }
        Ok(k)
    }
}

//! The raw-driver reference: a `cuMemcpyPeerAsync` loop through
//! `cuda_sys::result` on streams and events of its own, the same buffers,
//! bytes and repeats as gpu-sync's copies, timed the same way.
//!
//! Unsafe code: the loop hands the driver gpu-sync's buffers by address,
//! outside gpu-sync's tracking (see the SAFETY comments).
#![allow(unsafe_code)]

use super::{Pair, median};
use gpu_sync::Device;
use gpu_sync::cuda_sys::result as cu;
use gpu_sync::cuda_sys::{Borrowed, BorrowedContext, CUdeviceptr, CUstream_flags, OwnedEvent, OwnedStream};

/// A raw stream and two events on one device.
struct Raw {
    stream: OwnedStream,
    start: OwnedEvent,
    end: OwnedEvent,
}

impl Raw {
    fn new(dev: &Device) -> crate::Result<Raw> {
        let drv = driver()?;
        dev.make_current()?;
        let flags = CUstream_flags::CU_STREAM_NON_BLOCKING.0;
        let stream = cu::stream::create_with_priority(drv, flags, 0).map_err(gpu_sync::Error::from)?;
        let start = cu::event::create(drv, 0).map_err(gpu_sync::Error::from)?;
        let end = cu::event::create(drv, 0).map_err(gpu_sync::Error::from)?;
        Ok(Raw { stream, start, end })
    }

    fn ms(&self) -> crate::Result<f64> {
        cu::event::synchronize(&self.end).map_err(gpu_sync::Error::from)?;
        let ms = cu::event::elapsed_time(&self.start, &self.end).map_err(gpu_sync::Error::from)?;
        Ok(f64::from(ms))
    }

    fn close(self) {
        let _ = cu::event::destroy(self.start);
        let _ = cu::event::destroy(self.end);
        let _ = cu::stream::destroy(self.stream);
    }
}

fn driver() -> crate::Result<&'static gpu_sync::cuda_sys::Driver> {
    gpu_sync::cuda_sys::installed()
        .ok_or_else(|| gpu_sync::Error::InvalidArgument("no CUDA driver in use".into()).into())
}

/// `dev`'s primary context as a cuda-sys handle.
fn context(dev: &Device) -> crate::Result<BorrowedContext<'static>> {
    // SAFETY: gpu-sync retains every device's primary context for the life
    // of the process, so the handle stays valid.
    Ok(unsafe { Borrowed::borrow_raw(driver()?, dev.raw_context()) })
}

/// Queues `bytes` from `src` (memory of `sctx`) to `dst` (of `dctx`).
fn copy(
    r: &Raw,
    dst: CUdeviceptr,
    dctx: BorrowedContext<'static>,
    src: CUdeviceptr,
    sctx: BorrowedContext<'static>,
    bytes: usize,
) -> crate::Result<()> {
    // SAFETY: `dst` and `src` are the device addresses of two live gpu-sync
    // buffers of at least `bytes` on the devices of `dctx` and `sctx`
    // ([`copy_ms`] holds the pair, so they are not dropped); gpu-sync's own
    // work on them finished before the loop (its streams were synchronized
    // after the checks, `Pair::clear`) and none is queued until the loop's
    // streams are synchronized at its end, so nothing races the raw copies.
    unsafe { cu::memory::memcpy_peer_async(dst, dctx, src, sctx, bytes, &r.stream) }
        .map_err(gpu_sync::Error::from)?;
    Ok(())
}

/// Median ms of the raw loop a→b on a raw stream of `b` (and b→a at once
/// on one of `a` when `both`); the longer device span per run.
pub(super) fn copy_ms(p: &Pair<'_>, repeats: usize, both: bool) -> crate::Result<f64> {
    p.sa.synchronize()?;
    p.sb.synchronize()?;
    let bytes = p.a_src.len() * 4;
    let (ra, rb) = (Raw::new(p.a)?, Raw::new(p.b)?);
    let (ca, cb) = (context(p.a)?, context(p.b)?);
    let mut runs = Vec::with_capacity(repeats);
    let result = (|| {
        for i in 0..=repeats {
            cu::event::record(&rb.start, &rb.stream).map_err(gpu_sync::Error::from)?;
            if both {
                cu::event::record(&ra.start, &ra.stream).map_err(gpu_sync::Error::from)?;
            }
            copy(&rb, p.b_dst.as_raw(), cb, p.a_src.as_raw(), ca, bytes)?;
            cu::event::record(&rb.end, &rb.stream).map_err(gpu_sync::Error::from)?;
            if both {
                copy(&ra, p.a_dst.as_raw(), ca, p.b_src.as_raw(), cb, bytes)?;
                cu::event::record(&ra.end, &ra.stream).map_err(gpu_sync::Error::from)?;
            }
            let mut ms = rb.ms()?;
            if both {
                ms = ms.max(ra.ms()?);
            }
            if i > 0 {
                runs.push(ms);
            }
        }
        Ok::<(), crate::Error>(())
    })();
    // The raw copies finish before the buffers go back to gpu-sync.
    let _ = cu::stream::synchronize(&ra.stream);
    let _ = cu::stream::synchronize(&rb.stream);
    ra.close();
    rb.close();
    result?;
    Ok(median(&mut runs))
}

/// Median ms of the SM copy's raw twin a→b ([`super::twin::Twins::raw_copy`]:
/// the same function as gpu-sync's launch, from the same loaded module) on
/// a raw stream of `twins`' device (`a` to push, `b` to pull), each launch
/// between two raw events, as [`Pair::sm_ms`] times gpu-sync's.
#[cfg(feature = "kernels")]
pub(super) fn sm_ms(p: &Pair<'_>, twins: &super::twin::Twins, repeats: usize) -> crate::Result<f64> {
    p.sa.synchronize()?;
    p.sb.synchronize()?;
    let r = Raw::new(twins.device())?;
    let mut runs = Vec::with_capacity(repeats);
    let result = (|| {
        for i in 0..=repeats {
            cu::event::record(&r.start, &r.stream).map_err(gpu_sync::Error::from)?;
            // SAFETY: `a_src` and `b_dst` are live gpu-sync buffers of the
            // pair, held by `p` across the loop; gpu-sync's work on them
            // finished (both streams synchronized above) and none is queued
            // until this raw stream is synchronized below; the launches of
            // the loop are ordered among themselves by the raw stream. The
            // kernel on one device reaches the other's buffer because the
            // caller turned peer access on both ways first.
            unsafe { twins.raw_copy(r.stream.as_borrowed(), &p.a_src, &p.b_dst) }?;
            cu::event::record(&r.end, &r.stream).map_err(gpu_sync::Error::from)?;
            let ms = r.ms()?;
            if i > 0 {
                runs.push(ms);
            }
        }
        Ok::<(), crate::Error>(())
    })();
    // The raw launches finish before the buffers go back to gpu-sync.
    let _ = cu::stream::synchronize(&r.stream);
    r.close();
    result?;
    Ok(median(&mut runs))
}

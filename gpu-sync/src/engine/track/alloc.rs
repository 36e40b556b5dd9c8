//! The life of a device allocation: allocated stream-ordered
//! (`cuMemAllocAsync`, a write by its stream), freed stream-ordered after
//! every use not known complete (`cuMemFreeAsync` after device-side waits),
//! and the one decision whether its free happens now or later
//! ([`engine::free_now_or_later`]).
//!
//! Unsafe code: the frees (`cuMemFreeAsync`, `cuMemFree`) take a raw device
//! pointer.
#![allow(unsafe_code)]

use super::Allocation;
use crate::device::Device;
use crate::engine::{self, Kind, NO_USES, Op, Point, Resource, Timeline};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::trace::{OpDesc, OpKind};
use cuda_sys::CUdeviceptr;
use cuda_sys::result as cu;
use std::sync::Arc;

impl Allocation {
    /// Allocates `bytes` of device memory on `stream` (`cuMemAllocAsync`,
    /// a write by that stream; without memory pools `cuMemAlloc`).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function;
    /// [`Error::Capturing`] on a capturing stream or thread; a driver error.
    pub(crate) fn new(stream: &Arc<Timeline>, bytes: usize) -> Result<Allocation> {
        engine::refuse("DeviceBuffer::alloc")?;
        let device = stream.device().clone();
        let mut alloc =
            Allocation { ptr: 0, bytes, device: device.clone(), stream: None, res: Resource::new(&device) };
        if bytes == 0 {
            return Ok(alloc);
        }
        if stream.capture_hint() {
            return Err(Error::Capturing { op: "DeviceBuffer::alloc" });
        }
        let dev = &device.inner;
        if device.has_memory_pools() {
            let describe = || OpDesc { name: "alloc".into(), kind: OpKind::Alloc { bytes: bytes as u64 } };
            let op = Op::new("DeviceBuffer::alloc", Kind::After(&[]), NO_USES).describe(&describe);
            let (ptr, ticket) = engine::submit(stream, op, |raw| {
                call("cuMemAllocAsync", || cu::memory::alloc_async(bytes, raw))
            })?;
            alloc.ptr = ptr;
            alloc.stream = Some(stream.clone());
            // The allocation happens in stream order: a write by that stream.
            alloc.res.set_write(Point::new(stream.clone(), ticket));
        } else {
            engine::refuse_on_capturing_thread("DeviceBuffer::alloc (cuMemAlloc)")?;
            dev.bind()?;
            alloc.ptr = call("cuMemAlloc", || cu::memory::alloc(dev.drv, bytes))?;
        }
        dev.ledger.allocated(bytes as u64, &dev.trace);
        Ok(alloc)
    }

    /// Moves the allocation out, leaving an empty one (which frees nothing).
    fn take(&mut self) -> Allocation {
        Allocation {
            ptr: std::mem::take(&mut self.ptr),
            bytes: self.bytes,
            device: self.device.clone(),
            stream: self.stream.take(),
            res: {
                let empty = self.res.empty_like();
                std::mem::replace(&mut self.res, empty)
            },
        }
    }

    /// The device address (0 for an empty allocation).
    #[inline(always)]
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Its size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Its device.
    #[inline(always)]
    pub(crate) fn device(&self) -> &Device {
        &self.device
    }

    /// Frees the allocation now and reports a failure (`DeviceBuffer::close`);
    /// during a capture (of its stream or on this thread) it is freed when
    /// the capture ends, as by `Drop`.
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_PERMITTED` inside a host function (the free is then
    /// deferred); the driver error of a wait or of the free (the memory is
    /// then leaked, never freed while it may be in use).
    pub(in crate::engine) fn close(mut self) -> Result<()> {
        engine::refuse("DeviceBuffer::close")?;
        if self.ptr == 0 {
            return Ok(());
        }
        if engine::thread_is_capturing() || self.stream.as_ref().is_some_and(|s| s.capture_hint()) {
            // Freed when the capture ends, as `Drop` does.
            drop(self);
            return Ok(());
        }
        let r = self.free();
        if r.is_err() {
            // Leak rather than free memory that may be in use.
            self.ptr = 0;
        }
        r
    }

    /// Frees now: stream-ordered after the outstanding uses, or (without
    /// pools) after a host wait for them.
    fn free(&mut self) -> Result<()> {
        let dev = self.device.inner.clone();
        let ptr = self.ptr;
        let deps = self.res.outstanding();
        match &self.stream {
            Some(s) => {
                // On the stream of the latest outstanding use of this device
                // (its allocating stream when there is none): that stream
                // has most often waited for the other uses already (a
                // collective on a communication stream after the kernel that
                // wrote the buffer on the compute stream), so the free adds
                // no wait to a stream that is busy with other work — freeing
                // on the allocating stream would make it wait for the
                // collective. A capture that began there meanwhile sends the
                // free back to the allocating stream (decided under its book,
                // see `engine::free_now_or_later`).
                let latest = deps
                    .iter()
                    .filter(|p| Arc::ptr_eq(&p.timeline.book, &s.book) && !p.timeline.capture_hint())
                    .max_by_key(|p| p.ticket)
                    .map(|p| &p.timeline);
                let free_on = |stream: &Arc<Timeline>| {
                    let describe = || OpDesc { name: "free".into(), kind: OpKind::Free };
                    let op = Op::new("cuMemFreeAsync", Kind::After(&deps), NO_USES).describe(&describe);
                    engine::submit(stream, op, |raw| {
                        // SAFETY: `ptr` came from cuMemAllocAsync and is freed
                        // once (here); the free is ordered after every use
                        // recorded on other streams (the device-side waits
                        // `submit` issues for `deps`) and after same-stream
                        // uses by FIFO order. The pool may hand the memory to
                        // an allocation on another stream only after the free
                        // (its reuse follows the free's stream order).
                        call("cuMemFreeAsync", || unsafe { cu::memory::free_async(ptr, raw) })
                    })
                };
                match latest {
                    Some(t) if !Arc::ptr_eq(t, s) => match free_on(t) {
                        Err(crate::error::Error::Capturing { .. }) => free_on(s)?,
                        r => r?,
                    },
                    _ => free_on(s)?,
                };
            }
            None => {
                for p in &deps {
                    p.host_wait()?;
                }
                dev.bind()?;
                // SAFETY: `ptr` came from cuMemAlloc, is freed once, and every
                // recorded use has completed (host waits above).
                call("cuMemFree", || unsafe { cu::memory::free(dev.drv, ptr) })?;
            }
        }
        dev.ledger.freed(self.bytes as u64, &dev.trace);
        self.ptr = 0;
        Ok(())
    }
}

impl Drop for Allocation {
    /// Frees the memory now or later, as the engine decides
    /// ([`engine::free_now_or_later`]: later inside a host function, when
    /// the capture ends while its stream or this thread captures); a free
    /// that fails leaks the memory (never freed while it may be in use).
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let mut alloc = self.take();
        let stream = alloc.stream.clone();
        engine::free_now_or_later(
            stream.as_ref(),
            Box::new(move || {
                if let Err(e) = alloc.free() {
                    log::error!(
                        "leaking {} bytes of device memory at {:#x} on device {}: the free failed: {e}",
                        alloc.bytes,
                        alloc.ptr,
                        alloc.device.ordinal()
                    );
                    // Leaked: not freed again by `alloc`'s own drop.
                    alloc.ptr = 0;
                }
                drop(alloc);
            }),
        );
    }
}

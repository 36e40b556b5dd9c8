//! Copies and fills, as [`Stream`] methods.
//!
//! Host-to-device and device-to-host copies are asynchronous only with pinned
//! memory ([`PinnedBuffer`]); pageable slices get the synchronous copy the
//! driver performs for them anyway (the call returns when the copy is done).
//! An asynchronous download takes the pinned buffer by value and returns it
//! inside a [`Pending`], so its contents cannot be read before the copy is
//! waited — and forgetting the `Pending` only leaks the buffer.
//!
//! Unsafe code: this file calls the driver's copy and memset entry points
//! with host pointers it owns or borrows.
#![allow(unsafe_code)]

use crate::buffer::{AsDeviceSlice, AsDeviceSliceMut};
use crate::error::{Error, Result};
use crate::ffi::cu;
use crate::pinned::PinnedBuffer;
use crate::scope::Pending;
use crate::stream::{Point, Stream};
use crate::tracker::{Access, Target, run_tracked, run_tracked_across, same_device};
use bytemuck::Pod;

fn same_len(op: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst { Ok(()) } else { Err(Error::LengthMismatch { op, src, dst }) }
}

impl Stream {
    fn refuse_in_capture(&self, op: &'static str) -> Result<()> {
        if self.is_capturing() { Err(Error::Capturing { op }) } else { Ok(()) }
    }

    /// Copies a pinned host buffer into device memory, asynchronously
    /// (`cuMemcpyHtoDAsync`). The host buffer stays readable meanwhile;
    /// writing it ([`PinnedBuffer::as_mut_slice`]) waits for this copy.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::DeviceMismatch`] if `dst` is on
    /// another device; [`Error::Capturing`]; a driver error.
    pub fn upload<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &PinnedBuffer<T>,
        dst: &mut D,
    ) -> Result<()> {
        self.refuse_in_capture("Stream::upload")?;
        let v = dst.view();
        same_len("Stream::upload", src.len(), v.len)?;
        same_device(self, v.alloc, "the destination buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, hptr, bytes) = (v.ptr(), src.as_ptr(), v.bytes);
        run_tracked(
            self,
            "Stream::upload",
            &[(Target::Device(v.alloc), Access::Write), (Target::Host(&src.res), Access::Read)],
            None,
            |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: `hptr` is `bytes` of pinned memory owned by `src`, which
                // cannot be freed or written before this copy completes (its drop
                // and `as_mut_slice` wait for the read recorded here); `dptr` is
                // `bytes` inside a live allocation of this stream's device whose
                // free is ordered after this use.
                unsafe { cu!(drv, cuMemcpyHtoDAsync(dptr, hptr.cast(), bytes, raw)) }
            },
        )?;
        Ok(())
    }

    /// Copies a pageable host slice into device memory and returns when the
    /// copy is done (`cuMemcpyHtoDAsync`, then `cuStreamSynchronize`): the
    /// synchronous copy the driver performs for pageable memory anyway.
    ///
    /// # Errors
    /// As [`Stream::upload`].
    pub fn upload_pageable<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &[T],
        dst: &mut D,
    ) -> Result<()> {
        self.refuse_in_capture("Stream::upload_pageable")?;
        let v = dst.view();
        same_len("Stream::upload_pageable", src.len(), v.len)?;
        same_device(self, v.alloc, "the destination buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, hptr, bytes) = (v.ptr(), src.as_ptr(), v.bytes);
        run_tracked(
            self,
            "Stream::upload_pageable",
            &[(Target::Device(v.alloc), Access::Write)],
            None,
            |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: `hptr` is `bytes` of host memory borrowed for this whole
                // call, which returns only after the stream (and so this copy)
                // has completed; `dptr` as in `upload`.
                unsafe { cu!(drv, cuMemcpyHtoDAsync(dptr, hptr.cast(), bytes, raw)) }
            },
        )?;
        self.synchronize()?;
        Ok(())
    }

    /// Copies device memory into a pinned buffer, asynchronously
    /// (`cuMemcpyDtoHAsync`). The buffer comes back inside a [`Pending`]:
    /// its contents can be read only after a wait that covers the copy.
    ///
    /// # Errors
    /// As [`Stream::upload`] (on error `dst` is dropped).
    pub fn download<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        src: &S,
        mut dst: PinnedBuffer<T>,
    ) -> Result<Pending<PinnedBuffer<T>>> {
        self.refuse_in_capture("Stream::download")?;
        let v = src.view();
        same_len("Stream::download", v.len, dst.len())?;
        same_device(self, v.alloc, "the source buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, hptr, bytes) = (v.ptr(), dst.as_mut_ptr(), v.bytes);
        let ((), ticket) = run_tracked(
            self,
            "Stream::download",
            &[(Target::Device(v.alloc), Access::Read), (Target::Host(&dst.res), Access::Write)],
            None,
            |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: `hptr` is `bytes` of pinned memory owned by `dst`,
                // which moves into the returned Pending: no host access until
                // a wait covers this copy, and its drop waits for it; earlier
                // uploads still reading it were waited for device-side (the
                // recorded read). `dptr` as in `upload`.
                unsafe { cu!(drv, cuMemcpyDtoHAsync(hptr.cast(), dptr, bytes, raw)) }
            },
        )?;
        Pending::new(dst, Point { stream: self.inner.clone(), ticket })
    }

    /// Copies device memory into a pageable host slice and returns when the
    /// data is there (`cuMemcpyDtoHAsync`, then `cuStreamSynchronize`).
    ///
    /// # Errors
    /// As [`Stream::upload`].
    pub fn download_pageable<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        src: &S,
        dst: &mut [T],
    ) -> Result<()> {
        self.refuse_in_capture("Stream::download_pageable")?;
        let v = src.view();
        same_len("Stream::download_pageable", v.len, dst.len())?;
        same_device(self, v.alloc, "the source buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, hptr, bytes) = (v.ptr(), dst.as_mut_ptr(), v.bytes);
        run_tracked(
            self,
            "Stream::download_pageable",
            &[(Target::Device(v.alloc), Access::Read)],
            None,
            |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: `hptr` is `bytes` of host memory mutably borrowed for
                // this whole call, which returns only after the stream (and so
                // this copy) has completed; `dptr` as in `upload`.
                unsafe { cu!(drv, cuMemcpyDtoHAsync(hptr.cast(), dptr, bytes, raw)) }
            },
        )?;
        self.synchronize()?;
        Ok(())
    }

    /// Copies device memory into a new `Vec` (a synchronous pageable copy).
    ///
    /// # Errors
    /// As [`Stream::download_pageable`].
    pub fn to_vec<T: Pod, S: AsDeviceSlice<T> + ?Sized>(&self, src: &S) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); src.view().len];
        self.download_pageable(src, &mut out)?;
        Ok(out)
    }

    /// Copies device memory to device memory (`cuMemcpyDtoDAsync`; between two
    /// devices `cuMemcpyPeerAsync`, with the stream on either device).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::DeviceMismatch`] if neither buffer
    /// is on the stream's device; a driver error.
    pub fn copy<T: Pod, S: AsDeviceSlice<T> + ?Sized, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &S,
        dst: &mut D,
    ) -> Result<()> {
        let (s, d) = (src.view(), dst.view());
        same_len("Stream::copy", s.len, d.len)?;
        let drv = self.device().inner.drv;
        let (sptr, dptr, bytes) = (s.ptr(), d.ptr(), d.bytes);
        let uses = [(Target::Device(s.alloc), Access::Read), (Target::Device(d.alloc), Access::Write)];
        if s.alloc.device.same(&d.alloc.device) {
            same_device(self, d.alloc, "the buffers")?;
            run_tracked(self, "Stream::copy", &uses, None, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: both ranges lie inside live allocations of this
                // stream's device whose frees are ordered after this use; a
                // `&` and a `&mut` view never overlap.
                unsafe { cu!(drv, cuMemcpyDtoDAsync(dptr, sptr, bytes, raw)) }
            })?;
        } else {
            if !self.device().same(&s.alloc.device) && !self.device().same(&d.alloc.device) {
                return Err(Error::DeviceMismatch {
                    what: "both buffers",
                    expected: self.device().ordinal(),
                    found: d.alloc.device.ordinal(),
                });
            }
            let (sctx, dctx) = (s.alloc.device.raw_context(), d.alloc.device.raw_context());
            run_tracked_across(self, "Stream::copy", &uses, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: both ranges lie inside live allocations whose frees
                // are ordered after this use; the contexts are the devices'
                // retained primary contexts.
                unsafe { cu!(drv, cuMemcpyPeerAsync(dptr, dctx, sptr, sctx, bytes, raw)) }
            })?;
        }
        Ok(())
    }

    /// Sets every byte of `dst` to `value` (`cuMemsetD8Async`).
    ///
    /// # Errors
    /// [`Error::DeviceMismatch`]; a driver error.
    pub fn fill_bytes<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(&self, dst: &mut D, value: u8) -> Result<()> {
        let v = dst.view();
        same_device(self, v.alloc, "the buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, bytes) = (v.ptr(), v.bytes);
        run_tracked(self, "Stream::fill_bytes", &[(Target::Device(v.alloc), Access::Write)], None, |raw| {
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: the range lies inside a live allocation whose free is
            // ordered after this use.
            unsafe { cu!(drv, cuMemsetD8Async(dptr, value, bytes, raw)) }
        })?;
        Ok(())
    }

    /// Sets every 32-bit word of `dst` to `value` (`cuMemsetD32Async`); `T`'s
    /// size must be a multiple of 4.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for other element sizes; as
    /// [`Stream::fill_bytes`].
    pub fn fill_u32<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(&self, dst: &mut D, value: u32) -> Result<()> {
        if !std::mem::size_of::<T>().is_multiple_of(4) {
            return Err(Error::InvalidArgument(format!(
                "fill_u32 needs an element size that is a multiple of 4, not {}",
                std::mem::size_of::<T>()
            )));
        }
        let v = dst.view();
        same_device(self, v.alloc, "the buffer")?;
        let drv = self.device().inner.drv;
        let (dptr, words) = (v.ptr(), v.bytes / 4);
        run_tracked(self, "Stream::fill_u32", &[(Target::Device(v.alloc), Access::Write)], None, |raw| {
            if words == 0 {
                return Ok(());
            }
            // SAFETY: the range lies inside a live allocation whose free is
            // ordered after this use; it starts 4-byte aligned (allocations
            // are 256-byte aligned and views step by whole elements of a
            // multiple of 4 bytes).
            unsafe { cu!(drv, cuMemsetD32Async(dptr, value, words, raw)) }
        })?;
        Ok(())
    }
}

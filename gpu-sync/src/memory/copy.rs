//! Copies and fills, as [`Stream`] methods.
//!
//! Host-to-device and device-to-host copies are asynchronous only with pinned
//! memory ([`PinnedBuffer`]); pageable slices get the synchronous copy the
//! driver performs for them anyway (the call returns when the copy is done).
//! An asynchronous download takes the pinned buffer by value and returns it
//! inside a [`Pending`], so its contents cannot be read before the copy is
//! waited — and forgetting the `Pending` only leaks the buffer. Sub-ranges of
//! a pinned buffer ([`Stream::upload_range`], [`Stream::download_range`])
//! follow the same rules, the whole buffer being tracked.
//!
//! A copy from or to a borrowed slice (the `*_pageable` methods) blocks in
//! the driver. It first waits, with no lock held, until its stream and the
//! uses it depends on are complete, so the driver call waits for its own
//! transfer only (a host function queued earlier has run by then); and it
//! returns only once the copy is complete — also when a wait fails, since a
//! slice of page-locked memory is copied asynchronously by the driver — or
//! the context is lost (the engine's blocking flavor).
//!
//! Unsafe code (allowed by `memory`): the driver's copy and memset entry
//! points take raw device and host pointers it owns or borrows.

use crate::engine::{self, Access, Kind, Op, Pending, Point, Resource, Target, same_device};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut, resolve};
use crate::memory::pinned::PinnedBuffer;
use crate::stream::Stream;
use crate::trace::{CopyDir, HostMem, OpDesc};
use bytemuck::Pod;
use cuda_sys::BorrowedStream;
use cuda_sys::result as cu;
use std::ops::RangeBounds;

fn same_len(op: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst { Ok(()) } else { Err(Error::LengthMismatch { op, src, dst }) }
}

/// The host side of a copy.
#[derive(Clone, Copy)]
enum Host<'a> {
    /// Memory of a pinned buffer, tracked by its resource: the copy is
    /// asynchronous.
    Pinned(&'a Resource),
    /// A borrowed slice: the copy is complete (or the context lost) when the
    /// call returns.
    Borrowed,
}

impl Stream {
    /// `cuMemcpyHtoDAsync` from `hptr` into `dst`, tracked as a write of
    /// `dst` (and, for pinned memory, a read of the host buffer).
    ///
    /// # Safety
    /// 1. `hptr` must point to `len` initialized `T`s of host memory that
    ///    stays valid, and is not written, until the copy has completed —
    ///    for [`Host::Borrowed`], until this function returns (it returns
    ///    only after the copy completed or the context is lost).
    unsafe fn h2d<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        op: &'static str,
        hptr: *const T,
        len: usize,
        host: Host<'_>,
        dst: &mut D,
    ) -> Result<()> {
        let v = dst.view();
        same_len(op, len, v.len)?;
        same_device(&self.inner, v.alloc, "the destination buffer")?;
        let (dptr, bytes) = (v.ptr(), v.bytes);
        let device_use = (Target::Device(v.alloc), Access::Write);
        let copy = |raw: BorrowedStream<'_>| {
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: `hptr` is valid for `bytes` until the copy completes
            // (this function's contract); `dptr` is `bytes` inside a live
            // allocation of this stream's device whose free is ordered after
            // this use.
            call("cuMemcpyHtoDAsync", || unsafe {
                cu::memory::memcpy_htod_async(dptr, hptr.cast(), bytes, raw)
            })
        };
        match host {
            Host::Pinned(h) => {
                let uses = [device_use, (Target::Host(h), Access::Read)];
                engine::submit(
                    &self.inner,
                    Op {
                        name: op,
                        uses: &uses,
                        kind: Kind::Async,
                        keep: None,
                        describe: Some(&|| OpDesc::copy(CopyDir::HtoD, bytes, HostMem::Pinned)),
                    },
                    copy,
                )?;
            }
            Host::Borrowed => {
                let uses = [device_use];
                engine::submit(
                    &self.inner,
                    Op {
                        name: op,
                        uses: &uses,
                        kind: Kind::Blocking,
                        keep: None,
                        describe: Some(&|| OpDesc::copy(CopyDir::HtoD, bytes, HostMem::Pageable)),
                    },
                    copy,
                )?;
            }
        }
        Ok(())
    }

    /// `cuMemcpyDtoHAsync` from `src` into `hptr`, tracked as a read of `src`
    /// (and, for pinned memory, a write of the host buffer); returns the
    /// ticket.
    ///
    /// # Safety
    /// 1. `hptr` must point to `len` `T`s of host memory that stays valid,
    ///    and is neither read nor written by the host, until the copy has
    ///    completed — for [`Host::Borrowed`], until this function returns
    ///    (it returns only after the copy completed or the context is lost).
    unsafe fn d2h<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        op: &'static str,
        src: &S,
        hptr: *mut T,
        len: usize,
        host: Host<'_>,
    ) -> Result<u64> {
        let v = src.view();
        same_len(op, v.len, len)?;
        same_device(&self.inner, v.alloc, "the source buffer")?;
        let (dptr, bytes) = (v.ptr(), v.bytes);
        let device_use = (Target::Device(v.alloc), Access::Read);
        let copy = |raw: BorrowedStream<'_>| {
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: `hptr` is valid and untouched by the host for `bytes`
            // until the copy completes (this function's contract); `dptr` as
            // in `h2d`.
            call("cuMemcpyDtoHAsync", || unsafe {
                cu::memory::memcpy_dtoh_async(hptr.cast(), dptr, bytes, raw)
            })
        };
        let (uses, kind, mem) = match host {
            Host::Pinned(h) => ([device_use, (Target::Host(h), Access::Write)], Kind::Async, HostMem::Pinned),
            // The host side is borrowed, not tracked: listed twice, the
            // device use is recorded once more at the same ticket (no-op).
            Host::Borrowed => ([device_use, device_use], Kind::Blocking, HostMem::Pageable),
        };
        let describe = || OpDesc::copy(CopyDir::DtoH, bytes, mem);
        let op = Op { name: op, uses: &uses, kind, keep: None, describe: Some(&describe) };
        let ((), ticket) = engine::submit(&self.inner, op, copy)?;
        Ok(ticket)
    }

    /// Copies a pinned host buffer into device memory, asynchronously
    /// (`cuMemcpyHtoDAsync`). The host buffer stays readable meanwhile;
    /// writing it ([`PinnedBuffer::as_mut_slice`]) waits for this copy. The
    /// buffer may belong to another device than the stream (tracked all the
    /// same; allocate it [`crate::HostAllocFlags::PORTABLE`]).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::DeviceMismatch`] if `dst` is on
    /// another device; [`Error::Capturing`]; a driver error.
    pub fn upload<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &PinnedBuffer<T>,
        dst: &mut D,
    ) -> Result<()> {
        self.upload_range(src, .., dst)
    }

    /// Copies elements `range` of a pinned host buffer into device memory,
    /// asynchronously (`cuMemcpyHtoDAsync`); `dst` (a buffer or a view)
    /// must have the range's length. Tracked like [`Stream::upload`]: a read
    /// of the whole host buffer.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside `src`; as
    /// [`Stream::upload`].
    pub fn upload_range<T: Pod, R: RangeBounds<usize>, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &PinnedBuffer<T>,
        range: R,
        dst: &mut D,
    ) -> Result<()> {
        let (offset, len) = resolve(range, src.len())?;
        // `offset <= src.len()`: in bounds or one past the end.
        let hptr = src.as_ptr().wrapping_add(offset);
        // SAFETY: `hptr..hptr + len` lies inside `src`'s memory (resolved
        // above), which `src` owns; it cannot be freed or written before the
        // copy completes: `src`'s drop and `as_mut_slice` wait for the read
        // recorded on `src.res`.
        unsafe { self.h2d("Stream::upload", hptr, len, Host::Pinned(&src.res), dst) }
    }

    /// Copies a pageable host slice into device memory and returns when the
    /// copy is done (`cuStreamSynchronize` until the stream is idle, then
    /// `cuMemcpyHtoDAsync` and `cuStreamSynchronize`): the synchronous copy
    /// the driver performs for pageable memory anyway. Work queued on the
    /// stream before the call completes first.
    ///
    /// # Errors
    /// As [`Stream::upload`]; a failed wait is reported only once the copy
    /// is known complete (or as [`Error::ContextLost`]), so `src` is never
    /// read after this returns.
    pub fn upload_pageable<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &[T],
        dst: &mut D,
    ) -> Result<()> {
        // SAFETY: `src` is borrowed for this whole call, which returns only
        // after the copy has completed or the context is lost (Borrowed).
        unsafe { self.h2d("Stream::upload_pageable", src.as_ptr(), src.len(), Host::Borrowed, dst) }
    }

    /// Copies device memory into a pinned buffer, asynchronously
    /// (`cuMemcpyDtoHAsync`). The buffer comes back inside a [`Pending`]:
    /// its contents can be read only after a wait that covers the copy. The
    /// buffer may belong to another device than the stream.
    ///
    /// # Errors
    /// As [`Stream::upload`] (on error `dst` is dropped).
    pub fn download<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        src: &S,
        dst: PinnedBuffer<T>,
    ) -> Result<Pending<PinnedBuffer<T>>> {
        self.download_range(src, dst, ..)
    }

    /// Copies device memory into elements `range` of a pinned buffer,
    /// asynchronously (`cuMemcpyDtoHAsync`); `src` must have the range's
    /// length. The whole buffer comes back inside a [`Pending`], as with
    /// [`Stream::download`] (elements outside the range keep their values).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside `dst`; as
    /// [`Stream::download`] (on error `dst` is dropped).
    pub fn download_range<T: Pod, S: AsDeviceSlice<T> + ?Sized, R: RangeBounds<usize>>(
        &self,
        src: &S,
        mut dst: PinnedBuffer<T>,
        range: R,
    ) -> Result<Pending<PinnedBuffer<T>>> {
        let (offset, len) = resolve(range, dst.len())?;
        // `offset <= dst.len()`: in bounds or one past the end.
        let hptr = dst.as_mut_ptr().wrapping_add(offset);
        // SAFETY: `hptr..hptr + len` lies inside `dst`'s memory (resolved
        // above); `dst` owns it and moves into the returned Pending: no host
        // access until a wait covers the copy, and its drop waits for the
        // write recorded on `dst.res`; uploads still reading it are waited
        // for device-side (that recorded read).
        let ticket = unsafe { self.d2h("Stream::download", src, hptr, len, Host::Pinned(&dst.res)) }?;
        Pending::new(dst, Point::new(self.inner.clone(), ticket))
    }

    /// Copies device memory into a pageable host slice and returns when the
    /// data is there (`cuStreamSynchronize` until the stream is idle, then
    /// `cuMemcpyDtoHAsync` and `cuStreamSynchronize`). Work queued on the
    /// stream before the call completes first.
    ///
    /// # Errors
    /// As [`Stream::upload`]; a failed wait is reported only once the copy
    /// is known complete (or as [`Error::ContextLost`]), so `dst` never
    /// changes after this returns.
    pub fn download_pageable<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        src: &S,
        dst: &mut [T],
    ) -> Result<()> {
        // SAFETY: `dst` is mutably borrowed for this whole call, which
        // returns only after the copy has completed or the context is lost
        // (Borrowed).
        unsafe { self.d2h("Stream::download_pageable", src, dst.as_mut_ptr(), dst.len(), Host::Borrowed) }?;
        Ok(())
    }

    /// Copies device memory into a new `Vec` (a synchronous pageable copy).
    ///
    /// # Errors
    /// As [`Stream::download_pageable`].
    pub fn to_vec<T: Pod, S: AsDeviceSlice<T> + ?Sized>(&self, src: &S) -> Result<Vec<T>> {
        let len = src.view().len;
        // Not zeroed first: the copy writes every element, and a zeroing
        // pass would touch (and fault in) every page once more.
        let mut out = Vec::<T>::with_capacity(len);
        // SAFETY: `out` owns capacity for `len` `T`s, untouched by the host
        // until this call returns, which is only after the copy completed
        // or the context is lost (Borrowed); the copy writes into it, it
        // never reads it.
        unsafe { self.d2h("Stream::to_vec", src, out.as_mut_ptr(), len, Host::Borrowed) }?;
        // SAFETY: `d2h` returned `Ok`, so the copy of `len` elements (the
        // length it checked against `src`) has completed and initialized
        // `out[..len]`; any bytes are a valid `T` (`Pod`).
        unsafe { out.set_len(len) };
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
        let (sptr, dptr, bytes) = (s.ptr(), d.ptr(), d.bytes);
        let uses = [(Target::Device(s.alloc), Access::Read), (Target::Device(d.alloc), Access::Write)];
        if s.alloc.device().same(d.alloc.device()) {
            same_device(&self.inner, d.alloc, "the buffers")?;
            let describe = || OpDesc::copy(CopyDir::DtoD, bytes, HostMem::Device);
            let op = Op {
                name: "Stream::copy",
                uses: &uses,
                kind: Kind::Async,
                keep: None,
                describe: Some(&describe),
            };
            engine::submit(&self.inner, op, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: both ranges lie inside live allocations of this
                // stream's device whose frees are ordered after this use; a
                // `&` and a `&mut` view never overlap.
                call("cuMemcpyDtoDAsync", || unsafe { cu::memory::memcpy_dtod_async(dptr, sptr, bytes, raw) })
            })?;
        } else {
            if !self.device().same(s.alloc.device()) && !self.device().same(d.alloc.device()) {
                return Err(Error::DeviceMismatch {
                    what: "both buffers",
                    expected: self.device().ordinal(),
                    found: d.alloc.device().ordinal(),
                });
            }
            let (sctx, dctx) = (s.alloc.device().inner.ctx, d.alloc.device().inner.ctx);
            // Buffers of two devices: the engine picks the across flavor.
            let describe = || OpDesc::copy(CopyDir::DtoD, bytes, HostMem::Device);
            let op = Op {
                name: "Stream::copy",
                uses: &uses,
                kind: Kind::Async,
                keep: None,
                describe: Some(&describe),
            };
            engine::submit(&self.inner, op, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: both ranges lie inside live allocations whose frees
                // are ordered after this use; the contexts are the devices'
                // retained primary contexts.
                call("cuMemcpyPeerAsync", || unsafe {
                    cu::memory::memcpy_peer_async(dptr, dctx, sptr, sctx, bytes, raw)
                })
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
        same_device(&self.inner, v.alloc, "the buffer")?;
        let (dptr, bytes) = (v.ptr(), v.bytes);
        let uses = [(Target::Device(v.alloc), Access::Write)];
        let describe = || OpDesc::memset(bytes);
        let op = Op {
            name: "Stream::fill_bytes",
            uses: &uses,
            kind: Kind::Async,
            keep: None,
            describe: Some(&describe),
        };
        engine::submit(&self.inner, op, |raw| {
            if bytes == 0 {
                return Ok(());
            }
            // SAFETY: the range lies inside a live allocation whose free is
            // ordered after this use.
            call("cuMemsetD8Async", || unsafe { cu::memory::memset_d8_async(dptr, value, bytes, raw) })
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
        same_device(&self.inner, v.alloc, "the buffer")?;
        let (dptr, words) = (v.ptr(), v.bytes / 4);
        let uses = [(Target::Device(v.alloc), Access::Write)];
        let describe = || OpDesc::memset(words * 4);
        let op = Op {
            name: "Stream::fill_u32",
            uses: &uses,
            kind: Kind::Async,
            keep: None,
            describe: Some(&describe),
        };
        engine::submit(&self.inner, op, |raw| {
            if words == 0 {
                return Ok(());
            }
            // SAFETY: the range lies inside a live allocation whose free is
            // ordered after this use; it starts 4-byte aligned (allocations
            // are 256-byte aligned and views step by whole elements of a
            // multiple of 4 bytes).
            call("cuMemsetD32Async", || unsafe { cu::memory::memset_d32_async(dptr, value, words, raw) })
        })?;
        Ok(())
    }
}

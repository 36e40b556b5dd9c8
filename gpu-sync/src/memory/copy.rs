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
//! A copy from or to a borrowed slice of at least 16 MiB (the `*_pageable`
//! methods, `to_vec`, `DeviceBuffer::from_slice`) is staged through pinned
//! chunks by several host threads (`staging`): the borrowed slice is then
//! read or written only by the host, inside the call, and the device copies
//! are the pinned, tracked ones. A smaller one blocks in
//! the driver. It first waits, with no lock held, until its stream and the
//! uses it depends on are complete, so the driver call waits for its own
//! transfer only (a host function queued earlier has run by then); and it
//! returns only once the copy is complete — also when a wait fails, since a
//! slice of page-locked memory is copied asynchronously by the driver — or
//! the context is lost (the engine's blocking flavor).
//!
//! Unsafe code (allowed by `memory`): the driver's copy and memset entry
//! points take raw device and host pointers it owns or borrows.

use crate::engine::{self, Access, Kind, Op, Pending, Point, Resource, Target};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut, View, resolve};
use crate::memory::pinned::PinnedBuffer;
use crate::memory::staging::{self, CHUNK, Chunks};
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
    /// A staging chunk of a pageable copy (a pinned buffer, tracked by its
    /// resource): asynchronous like [`Host::Pinned`], but it never joins a
    /// capture (a capture begun meanwhile on the stream refuses it), since
    /// the pageable copy it is part of must have happened when the call
    /// returns.
    Staged(&'a Resource),
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
        // SAFETY: `hptr` points to `len` `T`s, `v.bytes` bytes (checked
        // above), valid as this function's contract says; `v` is a view of
        // the `dst` this call borrows mutably.
        unsafe { self.h2d_view(op, hptr.cast(), host, v) }
    }

    /// [`Stream::h2d`] into a view: `cuMemcpyHtoDAsync` of `v.bytes` bytes
    /// from `hptr` into `v`, tracked as a write of `v`'s allocation.
    ///
    /// # Safety
    /// 1. As [`Stream::h2d`]'s, for `v.bytes` bytes at `hptr`;
    /// 2. `v` is (part of) a view the caller borrows mutably for the call.
    unsafe fn h2d_view(&self, op: &'static str, hptr: *const u8, host: Host<'_>, v: View<'_>) -> Result<()> {
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
            Host::Pinned(h) | Host::Staged(h) => {
                let kind = if matches!(host, Host::Staged(_)) { Kind::Uncaptured } else { Kind::Async };
                let uses = [device_use, (Target::Host(h), Access::Read)];
                // A staged chunk is part of a pageable copy: described as one.
                let host_mem =
                    if matches!(host, Host::Staged(_)) { HostMem::Pageable } else { HostMem::Pinned };
                let describe = || OpDesc::copy(CopyDir::HtoD, bytes, host_mem);
                let op = Op::new(op, kind, &uses).describe(&describe).naming("the destination buffer");
                engine::submit(&self.inner, op, copy)?;
            }
            Host::Borrowed => {
                let uses = [device_use];
                let describe = || OpDesc::copy(CopyDir::HtoD, bytes, HostMem::Pageable);
                let op =
                    Op::new(op, Kind::Blocking, &uses).describe(&describe).naming("the destination buffer");
                engine::submit(&self.inner, op, copy)?;
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
        // SAFETY: `hptr` points to `len` `T`s, `v.bytes` bytes (checked
        // above), as this function's contract says; `v` is a view of the
        // `src` this call borrows.
        unsafe { self.d2h_view(op, v, hptr.cast(), host) }
    }

    /// [`Stream::d2h`] from a view: `cuMemcpyDtoHAsync` of `v.bytes` bytes
    /// from `v` into `hptr`, tracked as a read of `v`'s allocation; returns
    /// the ticket.
    ///
    /// # Safety
    /// 1. As [`Stream::d2h`]'s, for `v.bytes` bytes at `hptr`;
    /// 2. `v` is (part of) a view the caller borrows for the call.
    unsafe fn d2h_view(&self, op: &'static str, v: View<'_>, hptr: *mut u8, host: Host<'_>) -> Result<u64> {
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
            // A staged chunk is part of a pageable copy: described as one.
            Host::Staged(h) => {
                ([device_use, (Target::Host(h), Access::Write)], Kind::Uncaptured, HostMem::Pageable)
            }
            // The host side is borrowed, not tracked: listed twice, the
            // device use is recorded once more at the same ticket (no-op).
            Host::Borrowed => ([device_use, device_use], Kind::Blocking, HostMem::Pageable),
        };
        let describe = || OpDesc::copy(CopyDir::DtoH, bytes, mem);
        let op = Op::new(op, kind, &uses).describe(&describe).naming("the source buffer");
        let ((), ticket) = engine::submit(&self.inner, op, copy)?;
        Ok(ticket)
    }

    /// Whether a pageable copy of `bytes` goes through [`staging`]: large
    /// enough, and none of the engine's refusals would apply (on a
    /// capturing stream or thread, or inside a host function, the copy takes
    /// the driver's path, whose funnel refuses it).
    fn stages(&self, bytes: usize) -> bool {
        bytes >= staging::MIN_BYTES && engine::ordinary_now(&self.inner)
    }

    /// A pageable upload staged through two pinned chunks ([`staging`]):
    /// the host copies each chunk of `src` into a pinned buffer (several
    /// threads), then a tracked asynchronous upload moves it into its part
    /// of `v`; returns once the last chunk's upload (and so, in stream
    /// order, every earlier one and the work queued before) is complete.
    /// `src` is read only by the host, inside this call.
    ///
    /// `src.len()` must be `v.bytes` (checked: [`Error::LengthMismatch`]
    /// in bytes).
    fn upload_staged(&self, op: &'static str, src: &[u8], v: View<'_>) -> Result<()> {
        same_len(op, src.len(), v.bytes)?;
        let mut chunks = Chunks::take(self.device())?;
        let mut last = None;
        for (i, off) in (0..src.len()).step_by(CHUNK).enumerate() {
            let n = CHUNK.min(src.len() - off);
            let pin = chunks.get(i);
            // Waits until this chunk's previous upload has read it.
            staging::copy(&mut pin.as_mut_slice()?[..n], &src[off..off + n]);
            let part = View { alloc: v.alloc, offset: v.offset + off, bytes: n, len: n };
            let hptr = pin.as_ptr();
            // SAFETY: `hptr..hptr + n` lies in `pin`'s memory, which `pin`
            // owns; it is not freed or written before this upload completed:
            // `pin`'s drop and `as_mut_slice` wait for the read recorded on
            // `pin.res`. `part` is bytes `off..off + n` of `v`, inside the
            // view the caller borrows mutably (`src.len() == v.bytes`).
            unsafe { self.h2d_view(op, hptr, Host::Staged(&pin.res), part) }?;
            last = Some(i);
        }
        match last {
            Some(i) => chunks.get(i).res.host_wait_all(),
            None => Ok(()),
        }
    }

    /// A pageable download staged through two pinned chunks ([`staging`]):
    /// tracked asynchronous downloads of `v`'s parts into the chunks, two
    /// ahead; each chunk, once its download is complete, is handed to
    /// `put` with its offset in `v`, which copies it out (several threads).
    /// Returns after the last `put`.
    fn download_staged(
        &self,
        op: &'static str,
        v: View<'_>,
        mut put: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        let mut chunks = Chunks::take(self.device())?;
        let parts: Vec<(usize, usize)> =
            (0..v.bytes).step_by(CHUNK).map(|off| (off, CHUNK.min(v.bytes - off))).collect();
        let issue = |chunks: &mut Chunks, i: usize| -> Result<()> {
            let Some(&(off, n)) = parts.get(i) else { return Ok(()) };
            let pin = chunks.get(i);
            let hptr = pin.as_mut_ptr();
            let part = View { alloc: v.alloc, offset: v.offset + off, bytes: n, len: n };
            // SAFETY: `hptr..hptr + n` lies in `pin`'s memory, which `pin`
            // owns; the host neither reads nor writes it before this
            // download completed: `as_mut_slice` (below, the only access)
            // and `pin`'s drop wait for the write recorded on `pin.res`.
            // `part` is bytes `off..off + n` of `v`, inside the view the
            // caller borrows.
            unsafe { self.d2h_view(op, part, hptr, Host::Staged(&pin.res)) }.map(drop)
        };
        issue(&mut chunks, 0)?;
        issue(&mut chunks, 1)?;
        for (i, &(off, n)) in parts.iter().enumerate() {
            // Waits for this chunk's download.
            let data = chunks.get(i).as_mut_slice()?;
            put(off, &data[..n]);
            issue(&mut chunks, i + 2)?;
        }
        Ok(())
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
    /// copy is done. Work queued on the stream before the call completes
    /// first.
    ///
    /// Below 16 MiB: `cuStreamSynchronize` until the stream is idle, then
    /// `cuMemcpyHtoDAsync` and `cuStreamSynchronize` (the synchronous copy
    /// the driver performs for pageable memory anyway, one host thread
    /// copying into its staging memory). From 16 MiB: staged by gpu-sync,
    /// up to four host threads copying 16 MiB chunks into two pinned
    /// buffers (kept per device between calls) while the copy engine moves
    /// the previous chunk (tracked `cuMemcpyHtoDAsync`s); it returns once
    /// the last chunk has arrived. On a capturing stream or thread, or
    /// inside a host function, the driver's path is taken (its funnel
    /// refuses what it must).
    ///
    /// # Errors
    /// As [`Stream::upload`]; a failed wait is reported only once the copy
    /// is known complete (or as [`Error::ContextLost`]), so `src` is never
    /// read after this returns (the staged copy reads it only on the host,
    /// inside the call).
    pub fn upload_pageable<T: Pod, D: AsDeviceSliceMut<T> + ?Sized>(
        &self,
        src: &[T],
        dst: &mut D,
    ) -> Result<()> {
        if self.stages(std::mem::size_of_val(src)) {
            let v = dst.view();
            same_len("Stream::upload_pageable", src.len(), v.len)?;
            return self.upload_staged("Stream::upload_pageable", bytemuck::cast_slice(src), v);
        }
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
    /// data is there. Work queued on the stream before the call completes
    /// first. Below 16 MiB: `cuStreamSynchronize` until the stream is idle,
    /// then `cuMemcpyDtoHAsync` and `cuStreamSynchronize`; from 16 MiB,
    /// staged as [`Stream::upload_pageable`] is, the other way: tracked
    /// downloads into two pinned chunks, each copied out by up to four host
    /// threads once it has arrived.
    ///
    /// # Errors
    /// As [`Stream::upload`]; a failed wait is reported only once the copy
    /// is known complete (or as [`Error::ContextLost`]), so `dst` never
    /// changes after this returns (the staged copy writes it only on the
    /// host, inside the call).
    pub fn download_pageable<T: Pod, S: AsDeviceSlice<T> + ?Sized>(
        &self,
        src: &S,
        dst: &mut [T],
    ) -> Result<()> {
        let v = src.view();
        same_len("Stream::download_pageable", v.len, dst.len())?;
        let out: &mut [u8] = bytemuck::cast_slice_mut(dst);
        if self.stages(out.len()) {
            return self.download_staged("Stream::download_pageable", v, |off, data| {
                staging::copy(&mut out[off..off + data.len()], data);
            });
        }
        // SAFETY: `out` (all of `dst`) is mutably borrowed for this whole
        // call, which returns only after the copy has completed or the
        // context is lost (Borrowed).
        unsafe { self.d2h_view("Stream::download_pageable", v, out.as_mut_ptr(), Host::Borrowed) }?;
        Ok(())
    }

    /// Copies device memory into a new `Vec` (a synchronous pageable copy,
    /// staged from 16 MiB as [`Stream::download_pageable`] is: the host
    /// threads that copy the chunks out also take the new `Vec`'s first-touch
    /// page faults, in parallel).
    ///
    /// # Errors
    /// As [`Stream::download_pageable`].
    pub fn to_vec<T: Pod, S: AsDeviceSlice<T> + ?Sized>(&self, src: &S) -> Result<Vec<T>> {
        let len = src.view().len;
        // Not zeroed first: the copy writes every element, and a zeroing
        // pass would touch (and fault in) every page once more.
        let mut out = Vec::<T>::with_capacity(len);
        let v = src.view();
        if self.stages(v.bytes) {
            let spare = out.spare_capacity_mut();
            let spare_bytes = std::mem::size_of_val(spare);
            // SAFETY: the same memory as `spare` (the capacity past the
            // length, at least `len` uninitialized `T`s, exclusively
            // borrowed), seen as `MaybeUninit<u8>`, which has no validity
            // requirement and alignment 1.
            let spare: &mut [std::mem::MaybeUninit<u8>] =
                unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast(), spare_bytes) };
            self.download_staged("Stream::to_vec", v, |off, data| {
                staging::copy_uninit(&mut spare[off..off + data.len()], data);
            })?;
            // SAFETY: `download_staged` returned `Ok` after handing every
            // part of `v` (`v.bytes` = `len` `T`s, the capacity) to the
            // closure, which wrote it: `out[..len]` is initialized, and any
            // bytes are a valid `T` (`Pod`).
            unsafe { out.set_len(len) };
            return Ok(out);
        }
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
    /// devices `cuMemcpyPeerAsync`, which the driver stages through host
    /// memory when no peer access is open — inside a graph capture, with
    /// peer access open, `cuMemcpyDtoDAsync` over unified addresses; the
    /// stream may be on either device).
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
        let describe = || OpDesc::copy(CopyDir::DtoD, bytes, HostMem::Device);
        if s.alloc.device().same(d.alloc.device()) {
            let op = Op::new("Stream::copy", Kind::Async, &uses).describe(&describe).naming("the buffers");
            engine::submit(&self.inner, op, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                // SAFETY: both ranges lie inside live allocations of a
                // device the stream's reaches (the engine checked), whose
                // frees are ordered after this use; a `&` and a `&mut` view
                // never overlap.
                call("cuMemcpyDtoDAsync", || unsafe { cu::memory::memcpy_dtod_async(dptr, sptr, bytes, raw) })
            })?;
        } else {
            let (sctx, dctx) = (s.alloc.device().inner.ctx, d.alloc.device().inner.ctx);
            // Buffers of two devices, one of them reached from the stream's
            // (the engine checks): the engine locks both devices' books.
            let op = Op::new("Stream::copy", Kind::Async, &uses)
                .describe(&describe)
                .copy_between_devices("both buffers");
            // Inside a capture, with peer access open to both buffers from
            // the stream's device: a plain device-to-device copy over
            // unified addresses, a memcpy node a graph can hold —
            // `cuMemcpyPeerAsync` invalidated a capture on the H200s even
            // with access open. Outside a capture `cuMemcpyPeerAsync`
            // (staged by the driver when no access is open): both ways at
            // once it moved 2-4 % more than the unified-address copy on
            // four H100s (2026-11-27). A capture beginning between this
            // hint and the call only invalidates that capture (an error at
            // its end), and a staged copy is refused inside one (`engine`'s
            // captured flavor).
            let direct = !engine::ordinary_now(&self.inner) && engine::all_reached(&self.inner, &uses);
            engine::submit(&self.inner, op, |raw| {
                if bytes == 0 {
                    return Ok(());
                }
                if direct {
                    // SAFETY: both ranges lie inside live allocations whose
                    // frees are ordered after this use, on devices the
                    // stream's device reaches (peer access open, checked
                    // just above), so unified addressing resolves both.
                    return call("cuMemcpyDtoDAsync", || unsafe {
                        cu::memory::memcpy_dtod_async(dptr, sptr, bytes, raw)
                    });
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
        let (dptr, bytes) = (v.ptr(), v.bytes);
        let uses = [(Target::Device(v.alloc), Access::Write)];
        let describe = || OpDesc::memset(bytes);
        let op = Op::new("Stream::fill_bytes", Kind::Async, &uses).describe(&describe).naming("the buffer");
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
        let (dptr, words) = (v.ptr(), v.bytes / 4);
        let uses = [(Target::Device(v.alloc), Access::Write)];
        let describe = || OpDesc::memset(words * 4);
        let op = Op::new("Stream::fill_u32", Kind::Async, &uses).describe(&describe).naming("the buffer");
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

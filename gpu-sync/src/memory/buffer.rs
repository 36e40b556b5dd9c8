//! Device buffers: typed, stream-ordered, freed after every use.
//!
//! A buffer is allocated on a stream (`cuMemAllocAsync`); the allocation
//! counts as a write by that stream, so first use on another stream waits for
//! it. Dropping the last handle frees it on the allocation stream
//! (`cuMemFreeAsync`) after device-side waits for every use on other streams
//! that is not known complete: no host block, and no reuse before the last
//! reader is done. Without memory pools the fallback is `cuMemAlloc`, and the
//! free host-waits for the uses before `cuMemFree`.
//!
//! The allocation itself, its free and the decision "free now or later"
//! are the engine's (`engine::Allocation`); this file holds the typed
//! handles and views.

use crate::device::Device;
use crate::engine;
pub(crate) use crate::engine::Allocation;
use crate::error::{Error, Result};
use crate::stream::Stream;
use bytemuck::Pod;
use cuda_sys::CUdeviceptr;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// A typed buffer in device memory.
///
/// `T: bytemuck::Pod`: any bit pattern is a valid `T`, so reading device
/// memory back can never produce an invalid value. Cheap handle over a shared
/// allocation: graphs that captured the buffer keep the memory alive until
/// they are dropped. `Send + Sync`.
///
/// Operations take `&DeviceBuffer` to read and `&mut DeviceBuffer` to write;
/// each records its use (see the crate docs on tracking), so using a buffer on
/// a second stream needs no manual wait, and dropping it is safe at any time.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0, 4.0])?; // cuMemAllocAsync + copy
/// let zeros = DeviceBuffer::<f32>::zeroed(&stream, 2)?;
/// stream.copy(&zeros, &mut buf.slice_mut(2..)?)?; // device-to-device into a view
/// assert_eq!(stream.to_vec(&buf)?, [1.0, 2.0, 0.0, 0.0]);
/// assert_eq!(buf.len(), 4);
/// drop(buf); // freed stream-ordered (cuMemFreeAsync) after its uses
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct DeviceBuffer<T: Pod> {
    pub(crate) alloc: Arc<Allocation>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    /// `len` elements on `stream`'s device, allocated in stream order
    /// (`cuMemAllocAsync`; `cuMemAlloc` without memory pools). The contents
    /// are unspecified (whatever bytes the memory held).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the size overflows; [`Error::Capturing`]
    /// on a capturing stream; a driver error (`CUDA_ERROR_OUT_OF_MEMORY`).
    pub fn alloc(stream: &Stream, len: usize) -> Result<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{len} elements of {} bytes overflow usize",
                std::mem::size_of::<T>()
            ))
        })?;
        Ok(DeviceBuffer { alloc: Arc::new(Allocation::new(&stream.inner, bytes)?), len, _t: PhantomData })
    }

    /// `len` zeroed elements (`cuMemAllocAsync` then `cuMemsetD8Async`).
    ///
    /// # Errors
    /// As [`DeviceBuffer::alloc`].
    pub fn zeroed(stream: &Stream, len: usize) -> Result<Self> {
        let mut b = Self::alloc(stream, len)?;
        stream.fill_bytes(&mut b, 0)?;
        Ok(b)
    }

    /// A copy of `data` (allocated, then a synchronous copy from pageable
    /// memory; see [`Stream::upload_pageable`]).
    ///
    /// # Errors
    /// As [`DeviceBuffer::alloc`] and [`Stream::upload_pageable`].
    pub fn from_slice(stream: &Stream, data: &[T]) -> Result<Self> {
        let mut b = Self::alloc(stream, data.len())?;
        stream.upload_pageable(data, &mut b)?;
        Ok(b)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.alloc.bytes()
    }

    /// The buffer's device.
    pub fn device(&self) -> &Device {
        self.alloc.device()
    }

    /// The raw device address (for foreign code; work on it outside gpu-sync
    /// is not tracked). Zero for an empty buffer.
    pub fn as_raw(&self) -> CUdeviceptr {
        self.alloc.ptr()
    }

    /// Frees the buffer now and reports a failure, instead of logging it as
    /// `Drop` does (`cuMemFreeAsync` ordered after every use, or `cuMemFree`
    /// after host waits without memory pools). If a graph still holds the
    /// memory, only this handle goes and the graph frees it later.
    ///
    /// # Errors
    /// The driver error of a wait or of the free; the memory is then leaked
    /// (never freed while it may be in use). Inside a host function,
    /// `CUDA_ERROR_NOT_PERMITTED` (the buffer is dropped, its free deferred).
    pub fn close(self) -> Result<()> {
        // Inside a host function the buffer is dropped instead (its free is
        // deferred) and the refusal reported: the engine decides.
        let DeviceBuffer { alloc, .. } = self;
        engine::close_allocation(alloc)
    }

    /// A read-only view of elements `range`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer.
    pub fn slice<R: RangeBounds<usize>>(&self, range: R) -> Result<DeviceSlice<'_, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceSlice { alloc: &self.alloc, offset, len, _t: PhantomData })
    }

    /// A writable view of elements `range`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a range outside the buffer.
    pub fn slice_mut<R: RangeBounds<usize>>(&mut self, range: R) -> Result<DeviceSliceMut<'_, T>> {
        let (offset, len) = resolve(range, self.len)?;
        Ok(DeviceSliceMut { alloc: &self.alloc, offset, len, _t: PhantomData })
    }
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>({} elements at {:#x} on device {})",
            std::any::type_name::<T>(),
            self.len,
            self.alloc.ptr(),
            self.alloc.device().ordinal()
        )
    }
}

/// `(offset, len)` of `range` inside `0..len`.
///
/// # Errors
/// [`Error::OutOfRange`] for a range outside it (or decreasing).
pub(crate) fn resolve<R: RangeBounds<usize>>(range: R, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfRange { start, end, len });
    }
    Ok((start, end - start))
}

/// A read-only view of part of a [`DeviceBuffer`].
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let buf = DeviceBuffer::from_slice(&stream, &[1u32, 2, 3, 4, 5])?;
/// let middle = buf.slice(1..4)?; // borrows `buf`; a read use of its allocation
/// assert_eq!(middle.len(), 3);
/// assert_eq!(stream.to_vec(&middle)?, [2, 3, 4]);
/// assert!(buf.slice(3..9).is_err()); // Error::OutOfRange
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: Pod> {
    alloc: &'a Arc<Allocation>,
    offset: usize,
    len: usize,
    _t: PhantomData<&'a [T]>,
}

/// A writable view of part of a [`DeviceBuffer`].
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut buf = DeviceBuffer::<u32>::zeroed(&stream, 4)?;
/// let mut tail = buf.slice_mut(2..)?;
/// stream.fill_u32(&mut tail, 9)?; // a write use of the buffer's allocation
/// assert_eq!(stream.to_vec(&buf)?, [0, 0, 9, 9]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct DeviceSliceMut<'a, T: Pod> {
    alloc: &'a Arc<Allocation>,
    offset: usize,
    len: usize,
    _t: PhantomData<&'a mut [T]>,
}

/// The parts of a view that operations need. Crate-private fields: a view
/// is made only by [`view_of`], from a buffer's own allocation and bounds.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub(crate) alloc: &'a Arc<Allocation>,
    /// Offset in bytes.
    pub(crate) offset: usize,
    /// Length in bytes.
    pub(crate) bytes: usize,
    /// Length in elements.
    pub(crate) len: usize,
}

impl View<'_> {
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.alloc.ptr() + self.offset as CUdeviceptr
    }
}

/// The seals of the view traits: `pub` inside a private module, so only
/// this crate can name or implement them. Each is per element type — a
/// `DeviceBuffer<u8>` is a view of `u8` only, never of a local 16-byte
/// type whose element count would then be read 16 times too long — and
/// [`MutSeal`] is implemented by the writable views only: a shared
/// [`DeviceSlice`] cannot be made writable from outside (the blocking
/// copies' unlocked stretch and a launch's `Out`/`In` disjointness rest on
/// `&mut` exclusivity). No seal has a blanket impl over references.
pub(crate) mod sealed {
    use super::View;

    /// Seals [`super::AsDeviceSlice<T>`] and reads a view.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not device memory of `{T}`",
        note = "readable device memory of `T` is a `DeviceBuffer<T>`, `DeviceSlice<T>` or `DeviceSliceMut<T>`; the trait is sealed"
    )]
    pub trait ViewSeal<T> {
        /// The allocation, offset and length the view covers.
        fn view(&self) -> View<'_>;
    }

    /// Seals [`super::AsDeviceSliceMut<T>`]: the writable views only.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not writable device memory of `{T}`",
        note = "writable device memory of `T` is a `DeviceBuffer<T>` or `DeviceSliceMut<T>` taken by `&mut`; a `DeviceSlice` is read-only; the trait is sealed"
    )]
    pub trait MutSeal<T>: ViewSeal<T> {}
}

/// Device memory an operation can read: a [`DeviceBuffer`], a
/// [`DeviceSlice`] or a [`DeviceSliceMut`] of `T`. Sealed (per element
/// type).
///
/// Implemented for gpu-sync's views only; a generic function over them:
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{AsDeviceSlice, Device, DeviceBuffer, Stream};
/// fn bytes<T: gpu_sync::Pod>(view: &impl AsDeviceSlice<T>) -> usize {
///     view.device_len() * size_of::<T>()
/// }
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let buf = DeviceBuffer::<f32>::zeroed(&stream, 256)?;
/// assert_eq!((bytes(&buf), bytes(&buf.slice(64..128)?)), (1024, 256));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub trait AsDeviceSlice<T: Pod>: sealed::ViewSeal<T> {
    /// Device address of the first element (for alignment checks and
    /// foreign code; zero for an empty buffer).
    fn device_ptr(&self) -> CUdeviceptr {
        self.view().ptr()
    }

    /// Number of elements.
    fn device_len(&self) -> usize {
        self.view().len
    }
}

/// Device memory an operation can write: a [`DeviceBuffer`] or a
/// [`DeviceSliceMut`] (taken by `&mut`). Sealed: a [`DeviceSlice`] is never
/// writable.
///
/// Implemented for gpu-sync's writable views only; [`AsDeviceSlice`]'s
/// example writes a generic function over views the same way.
pub trait AsDeviceSliceMut<T: Pod>: AsDeviceSlice<T> + sealed::MutSeal<T> {}

fn view_of<T>(alloc: &Arc<Allocation>, offset: usize, len: usize) -> View<'_> {
    let size = std::mem::size_of::<T>();
    View { alloc, offset: offset * size, bytes: len * size, len }
}

impl<T: Pod> sealed::ViewSeal<T> for DeviceBuffer<T> {
    fn view(&self) -> View<'_> {
        view_of::<T>(&self.alloc, 0, self.len)
    }
}
impl<T: Pod> AsDeviceSlice<T> for DeviceBuffer<T> {}
impl<T: Pod> sealed::MutSeal<T> for DeviceBuffer<T> {}
impl<T: Pod> AsDeviceSliceMut<T> for DeviceBuffer<T> {}

impl<T: Pod> sealed::ViewSeal<T> for DeviceSlice<'_, T> {
    fn view(&self) -> View<'_> {
        view_of::<T>(self.alloc, self.offset, self.len)
    }
}
impl<T: Pod> AsDeviceSlice<T> for DeviceSlice<'_, T> {}

impl<T: Pod> sealed::ViewSeal<T> for DeviceSliceMut<'_, T> {
    fn view(&self) -> View<'_> {
        view_of::<T>(self.alloc, self.offset, self.len)
    }
}
impl<T: Pod> AsDeviceSlice<T> for DeviceSliceMut<'_, T> {}
impl<T: Pod> sealed::MutSeal<T> for DeviceSliceMut<'_, T> {}
impl<T: Pod> AsDeviceSliceMut<T> for DeviceSliceMut<'_, T> {}

macro_rules! view_accessors {
    ($ty:ident) => {
        impl<T: Pod> $ty<'_, T> {
            /// Number of elements.
            pub fn len(&self) -> usize {
                self.len
            }
            /// Whether it has no elements.
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
            /// The raw device address of the first element.
            pub fn as_raw(&self) -> CUdeviceptr {
                self.alloc.ptr() + (self.offset * std::mem::size_of::<T>()) as CUdeviceptr
            }
        }
    };
}
view_accessors!(DeviceSlice);
view_accessors!(DeviceSliceMut);

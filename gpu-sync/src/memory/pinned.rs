//! Page-locked ("pinned") host buffers: the only host memory that gets
//! asynchronous copies.
//!
//! A pinned buffer records the device's uses of it like a device buffer:
//! an upload from it is a device read; a download into it takes the buffer
//! by value and hands it back in a [`crate::Pending`], so it cannot be touched
//! until the copy is waited. Host writes ([`PinnedBuffer::as_mut_slice`]) and
//! the free wait for in-flight uploads first (an event-scope host wait).
//!
//! Unsafe code (allowed by `memory`): `cuMemFreeHost` takes a raw host
//! pointer, and the buffer hands out slices of the memory `cuMemHostAlloc`
//! returned.

use crate::device::Device;
use crate::engine::{self, Held, Resource};
use crate::error::{Error, Result};
use bytemuck::Pod;
use cuda_sys::handle::kind::HostAllocKind;
use cuda_sys::result as cu;
use cuda_sys::{CUdeviceptr, OwnedHostAlloc};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;

bitflags::bitflags! {
    /// Flags of `cuMemHostAlloc`.
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::{Device, HostAllocFlags, PinnedBuffer};
    /// let device = Device::get(0)?;
    /// let flags = HostAllocFlags::PORTABLE | HostAllocFlags::DEVICE_MAP;
    /// let host = PinnedBuffer::<f32>::new(&device, 1024, flags)?;
    /// assert_eq!(host.flags(), flags);
    /// host.device_ptr()?; // DEVICE_MAP: the device's address of the same memory
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HostAllocFlags: u32 {
        /// Pinned for every context, not only the allocating one
        /// (`CU_MEMHOSTALLOC_PORTABLE`).
        const PORTABLE = cuda_sys::CU_MEMHOSTALLOC_PORTABLE;
        /// Also mapped into the device's address space
        /// (`CU_MEMHOSTALLOC_DEVICEMAP`); see [`PinnedBuffer::device_ptr`].
        const DEVICE_MAP = cuda_sys::CU_MEMHOSTALLOC_DEVICEMAP;
        /// Write-combined: faster host-to-device transfers, very slow host
        /// reads (`CU_MEMHOSTALLOC_WRITECOMBINED`).
        const WRITE_COMBINED = cuda_sys::CU_MEMHOSTALLOC_WRITECOMBINED;
    }
}

/// A typed, page-locked host buffer (`cuMemHostAlloc`), zero-initialized.
///
/// Reads through [`std::ops::Deref`] never wait: while device work writes into
/// a pinned buffer, the buffer is owned by a [`crate::Pending`] and cannot be
/// reached. `Send`/`Sync` like a `Vec<T>`.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, DeviceBuffer, HostAllocFlags, PinnedBuffer, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let mut staging = PinnedBuffer::<u32>::new(&device, 4, HostAllocFlags::empty())?; // cuMemHostAlloc
/// staging.as_mut_slice()?.copy_from_slice(&[1, 2, 3, 4]);
/// let mut dev = DeviceBuffer::<u32>::alloc(&stream, 4)?;
/// stream.upload(&staging, &mut dev)?; // asynchronous: only pinned memory gets this
/// let back = stream.download(&dev, PinnedBuffer::new(&device, 4, HostAllocFlags::empty())?)?;
/// assert_eq!(&back.wait()?[..], &[1, 2, 3, 4]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
///
/// `Send` and `Sync` when `T` is, with no `unsafe impl`: the allocation is a
/// cuda-sys [`OwnedHostAlloc`] (whose thread-safety cuda-sys argues once),
/// and the buffer hands out its bytes only through `&self` (shared reads)
/// and `&mut self` (exclusive writes), as a `Vec<T>` does.
pub struct PinnedBuffer<T: Pod> {
    /// The allocation; `None` for zero bytes, or once given up to a
    /// [`HostMemory`] that frees it.
    mem: Option<Held<HostAllocKind>>,
    len: usize,
    flags: HostAllocFlags,
    device: Device,
    pub(crate) res: Resource,
    _t: PhantomData<T>,
}

impl<T: Pod> PinnedBuffer<T> {
    /// The largest element alignment a pinned buffer supports: 4096 bytes,
    /// the page alignment `cuMemHostAlloc` guarantees.
    pub const MAX_ALIGN: usize = 4096;

    /// `len` zeroed elements of pinned memory for `device`'s context
    /// (`cuMemHostAlloc`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the size overflows, or if `T` needs an
    /// alignment above [`PinnedBuffer::MAX_ALIGN`] (the driver guarantees
    /// page alignment, nothing more); [`Error::Capturing`] on a capturing
    /// thread; a driver error (`CUDA_ERROR_OUT_OF_MEMORY` when the OS
    /// refuses to lock more pages).
    pub fn new(device: &Device, len: usize, flags: HostAllocFlags) -> Result<Self> {
        let align = std::mem::align_of::<T>();
        if align > Self::MAX_ALIGN {
            return Err(Error::InvalidArgument(format!(
                "{} needs {align}-byte alignment; pinned memory is only guaranteed {}-byte (page) alignment",
                std::any::type_name::<T>(),
                Self::MAX_ALIGN
            )));
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{len} elements of {} bytes overflow usize",
                std::mem::size_of::<T>()
            ))
        })?;
        engine::off_stream("PinnedBuffer::new (cuMemHostAlloc)", || Self::alloc(device, len, bytes, flags))
    }

    /// [`PinnedBuffer::new`] once the engine's guards passed (`bytes` is
    /// `len` elements of `T`, `T`'s alignment at most `MAX_ALIGN`).
    fn alloc(device: &Device, len: usize, bytes: usize, flags: HostAllocFlags) -> Result<Self> {
        let align = std::mem::align_of::<T>();
        let res = Resource::new(device);
        if bytes == 0 {
            return Ok(PinnedBuffer { mem: None, len, flags, device: device.clone(), res, _t: PhantomData });
        }
        let dev = &device.inner;
        // Flags are the driver's own bits.
        let p: *mut c_void =
            dev.call("cuMemHostAlloc", || cu::memory::host_alloc(dev.drv, bytes, flags.bits()))?;
        if p.is_null() {
            return Err(Error::InvalidArgument("cuMemHostAlloc returned a null pointer".into()));
        }
        // SAFETY: `p` is a live allocation of this driver from
        // cuMemHostAlloc, owned by nothing else: the `Held` is its only owner
        // and frees it once (`Shared` kind: no single-thread condition).
        let mem = Held::new(device, unsafe { OwnedHostAlloc::from_raw(dev.drv, p) });
        if !p.cast::<T>().is_aligned() {
            // Not expected from any driver (it returns whole pages); never
            // hand out misaligned slices if one does.
            let host = HostMemory { mem, bytes, res };
            host.free();
            return Err(Error::InvalidArgument(format!(
                "cuMemHostAlloc returned {p:p}, not aligned to {align} bytes for {}",
                std::any::type_name::<T>()
            )));
        }
        // SAFETY: the driver returned `bytes` writable bytes at `p`, aligned
        // for `T` (checked just above); zeroing makes every element a valid,
        // initialized `T` (`T: Pod`).
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer { mem: Some(mem), len, flags, device: device.clone(), res, _t: PhantomData })
    }

    /// A pinned copy of `data`.
    ///
    /// # Errors
    /// As [`PinnedBuffer::new`].
    pub fn from_slice(device: &Device, data: &[T], flags: HostAllocFlags) -> Result<Self> {
        let mut b = Self::new(device, data.len(), flags)?;
        b.as_mut_slice()?.copy_from_slice(data);
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

    /// The flags it was allocated with.
    pub fn flags(&self) -> HostAllocFlags {
        self.flags
    }

    /// The device whose context allocated it.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The host memory, for writing. Waits first (host-side, on events) for
    /// every upload still reading it.
    ///
    /// # Errors
    /// A driver error from the wait (the buffer is then left untouched).
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.res.host_wait_all()?;
        // SAFETY: `ptr` points to `len` initialized `T`s owned by this
        // buffer; `&mut self` excludes other host access, and no device work
        // reads or writes it any more (waited above; writes only happen while
        // the buffer is moved into a Pending).
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) })
    }

    /// Waits for the device's uses and frees the memory now
    /// (`cuMemFreeHost`), reporting a failure instead of logging it as
    /// `Drop` does.
    ///
    /// # Errors
    /// [`Error::Capturing`] on a capturing thread (the buffer is then freed
    /// when the capture ends); inside a host function,
    /// `CUDA_ERROR_NOT_PERMITTED` (the free is deferred); the driver error of
    /// a wait or of the free (the memory is then leaked).
    pub fn close(mut self) -> Result<()> {
        engine::off_stream("PinnedBuffer::close (cuMemFreeHost)", || {
            let Some(host) = self.take_memory() else { return Ok(()) };
            host.try_free()
        })
    }

    /// Moves the memory (and its tracked uses) out into a [`HostMemory`]
    /// that frees it; `None` for an empty buffer. This buffer no longer owns
    /// the memory afterwards (its length is 0).
    fn take_memory(&mut self) -> Option<HostMemory> {
        let bytes = self.size_bytes();
        if bytes == 0 {
            return None;
        }
        let mem = self.mem.take()?;
        let empty = self.res.empty_like();
        let host = HostMemory { mem, bytes, res: std::mem::replace(&mut self.res, empty) };
        self.len = 0;
        Some(host)
    }

    /// The device address of a [`HostAllocFlags::DEVICE_MAP`] buffer
    /// (`cuMemHostGetDevicePointer`), for foreign kernels that read host
    /// memory directly. Such accesses are not tracked.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without `DEVICE_MAP`; a driver error.
    pub fn device_ptr(&self) -> Result<CUdeviceptr> {
        if !self.flags.contains(HostAllocFlags::DEVICE_MAP) {
            return Err(Error::InvalidArgument("device_ptr needs a DEVICE_MAP pinned buffer".into()));
        }
        let dev = &self.device.inner;
        // The memory is a live DEVICE_MAP allocation of this context; flags
        // must be 0.
        dev.call("cuMemHostGetDevicePointer", || {
            cu::memory::host_get_device_pointer(dev.drv, self.ptr().cast(), 0)
        })
    }

    /// The first element's address (dangling, but aligned, when the buffer
    /// holds no memory).
    #[inline]
    fn ptr(&self) -> *mut T {
        match &self.mem {
            Some(m) => m.get().as_raw().cast(),
            None => NonNull::dangling().as_ptr(),
        }
    }

    pub(crate) fn as_ptr(&self) -> *const T {
        self.ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr()
    }

    pub(crate) fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: Pod> std::ops::Deref for PinnedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialized `T`s owned by this buffer.
        // Device work only reads it while it is reachable here (uploads);
        // device writes need the buffer moved into a Pending, which releases
        // it only after the write completed.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }
}

impl<T: Pod> Drop for PinnedBuffer<T> {
    fn drop(&mut self) {
        let Some(host) = self.take_memory() else { return };
        // Neither a host function nor a capturing thread may call
        // cuMemFreeHost (nor wait): the free then runs on an ordinary thread
        // later, or when the capture ends.
        engine::free_now_or_later(None, Box::new(move || host.free()));
    }
}

/// Pinned memory on its way to `cuMemFreeHost`. `Send` from its parts (the
/// allocation is a cuda-sys owned handle).
struct HostMemory {
    mem: Held<HostAllocKind>,
    bytes: usize,
    res: Resource,
}

impl HostMemory {
    /// Waits for the device's uses, then frees (or leaks, logging, if a
    /// wait or the free fails).
    fn free(self) {
        let bytes = self.bytes;
        if let Err(e) = self.try_free() {
            log::error!("leaking {bytes} bytes of pinned memory: {e}");
        }
    }

    /// Waits for the device's uses, then frees (`cuMemFreeHost`, the
    /// device's context current); on error the memory is leaked (never
    /// freed while a copy may still use it).
    fn try_free(self) -> Result<()> {
        let HostMemory { mem, res, .. } = self;
        if let Err(e) = res.host_wait_all() {
            mem.leak();
            return Err(e);
        }
        // Every recorded use has completed (waited above), and the memory is
        // freed once: its PinnedBuffer gave it up to this value.
        mem.close("cuMemFreeHost")
    }
}

impl<T: Pod> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer<{}>({} elements, {:?})", std::any::type_name::<T>(), self.len, self.flags)
    }
}

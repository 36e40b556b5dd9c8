//! A prefetcher (the seeds' `CudaPrefetcher`): streams host data to the
//! device through double-buffered pinned staging on its own copy stream,
//! so the copy of chunk *i + 1* overlaps the compute on chunk *i*.
//!
//! Nothing here records an event or waits by hand: the staging buffers are
//! [`PinnedBuffer`]s and the device chunks [`DeviceBuffer`]s, so
//! - the compute stream's first use of a chunk waits (device-side) for the
//!   upload that wrote it — the tracker's cross-stream rule;
//! - the next upload into a device chunk waits (device-side) for every
//!   compute that read it — a write waits for all readers;
//! - refilling a staging buffer waits (host-side, on its own event) only for
//!   the upload still reading it — [`PinnedBuffer::as_mut_slice`].
//!
//! ```
//! # gpu_sync::sim::install().unwrap();
//! use gpu_sync::{Device, Prefetcher, Stream};
//! let device = Device::get(0)?;
//! let compute = Stream::new(&device)?;
//! let data: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
//! let mut pf = Prefetcher::<f32>::new(&device, 4096)?;
//! let mut sums = Vec::new();
//! pf.for_each(data.chunks(4096), |i, chunk| {
//!     // Any work on `compute` that reads `chunk`; here a download.
//!     let v = compute.to_vec(&chunk)?;
//!     sums.push((i, v.iter().sum::<f32>()));
//!     Ok(())
//! })?;
//! assert_eq!(sums.len(), 3);
//! assert_eq!(sums[2].1, (8192..10_000).map(|i| i as f32).sum::<f32>());
//! # Ok::<(), gpu_sync::Error>(())
//! ```

use crate::buffer::{DeviceBuffer, DeviceSlice};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::pinned::{HostAllocFlags, PinnedBuffer};
use crate::stream::Stream;
use bytemuck::Pod;

/// Double-buffered host-to-device staging on a dedicated copy stream.
pub struct Prefetcher<T: Pod> {
    copy: Stream,
    staging: [PinnedBuffer<T>; 2],
    chunks: [DeviceBuffer<T>; 2],
    chunk_len: usize,
    next: usize,
}

impl<T: Pod> Prefetcher<T> {
    /// Two pinned staging buffers (`cuMemHostAlloc`) and two device chunks of
    /// `chunk_len` elements, and a new copy stream.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `chunk_len == 0`; a driver error.
    pub fn new(device: &Device, chunk_len: usize) -> Result<Prefetcher<T>> {
        Self::with_flags(device, chunk_len, HostAllocFlags::empty())
    }

    /// As [`Prefetcher::new`], with the staging buffers' flags (for example
    /// [`HostAllocFlags::WRITE_COMBINED`]: faster uploads, slow host reads).
    ///
    /// # Errors
    /// As [`Prefetcher::new`].
    pub fn with_flags(device: &Device, chunk_len: usize, flags: HostAllocFlags) -> Result<Prefetcher<T>> {
        if chunk_len == 0 {
            return Err(Error::InvalidArgument("a prefetcher needs chunks of at least one element".into()));
        }
        let copy = Stream::new(device)?;
        let staging =
            [PinnedBuffer::new(device, chunk_len, flags)?, PinnedBuffer::new(device, chunk_len, flags)?];
        let chunks = [DeviceBuffer::alloc(&copy, chunk_len)?, DeviceBuffer::alloc(&copy, chunk_len)?];
        Ok(Prefetcher { copy, staging, chunks, chunk_len, next: 0 })
    }

    /// Elements per chunk.
    pub fn chunk_len(&self) -> usize {
        self.chunk_len
    }

    /// The copy stream the uploads run on.
    pub fn copy_stream(&self) -> &Stream {
        &self.copy
    }

    /// Stages `host` (at most [`Prefetcher::chunk_len`] elements) into the
    /// next slot and enqueues its upload on the copy stream
    /// (`cuMemcpyHtoDAsync`); returns the slot.
    fn load(&mut self, host: &[T]) -> Result<usize> {
        if host.len() > self.chunk_len {
            return Err(Error::InvalidArgument(format!(
                "a chunk of {} elements does not fit the prefetcher's {}",
                host.len(),
                self.chunk_len
            )));
        }
        let slot = self.next;
        self.next ^= 1;
        // Waits (host-side) only for the upload two chunks ago.
        self.staging[slot].as_mut_slice()?[..host.len()].copy_from_slice(host);
        // The whole staging buffer goes up (a short last chunk carries stale
        // elements past its end, which `for_each` never hands out); the
        // write waits device-side for every compute still reading the chunk.
        self.copy.upload(&self.staging[slot], &mut self.chunks[slot])?;
        Ok(slot)
    }

    /// Streams `chunks` to the device: chunk *i + 1*'s upload is enqueued
    /// before `f(i, chunk_i)` runs, so a compute stream working on chunk *i*
    /// overlaps the copy of the next. `f` gets a view of exactly the chunk's
    /// elements; work it submits on any stream that reads the view waits for
    /// the upload automatically.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a chunk longer than
    /// [`Prefetcher::chunk_len`]; a driver error; `f`'s error (which stops
    /// the iteration).
    pub fn for_each<'a, I, F>(&mut self, chunks: I, mut f: F) -> Result<()>
    where
        I: IntoIterator<Item = &'a [T]>,
        T: 'a,
        F: FnMut(usize, DeviceSlice<'_, T>) -> Result<()>,
    {
        let mut it = chunks.into_iter();
        let Some(first) = it.next() else {
            return Ok(());
        };
        let mut current = (self.load(first)?, first.len());
        let mut i = 0;
        loop {
            let upcoming = match it.next() {
                Some(c) => Some((self.load(c)?, c.len())),
                None => None,
            };
            let (slot, len) = current;
            f(i, self.chunks[slot].slice(..len)?)?;
            i += 1;
            match upcoming {
                Some(u) => current = u,
                None => return Ok(()),
            }
        }
    }
}

impl<T: Pod> std::fmt::Debug for Prefetcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefetcher<{}>(chunks of {})", std::any::type_name::<T>(), self.chunk_len)
    }
}

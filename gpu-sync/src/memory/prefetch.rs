//! A prefetcher (the seeds' `CudaPrefetcher`): streams host data to the
//! device through double-buffered pinned staging on its own copy stream,
//! so the copy of chunk *i + 1* overlaps the compute on chunk *i*. Two
//! ways in: [`Prefetcher::for_each`] takes host slices and copies each into
//! staging (a host memcpy), [`Prefetcher::for_each_filled`] lets the
//! producer write each chunk straight into staging (no host memcpy: what a
//! `pin_memory` DataLoader worker does).
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

use crate::device::Device;
use crate::error::{Error, Result};
use crate::memory::buffer::{DeviceBuffer, DeviceSlice};
use crate::memory::pinned::{HostAllocFlags, PinnedBuffer};
use crate::stream::Stream;
use bytemuck::Pod;

/// Double-buffered host-to-device staging on a dedicated copy stream.
///
/// [`Prefetcher::for_each_filled`]'s example streams three chunks through
/// one; the module's docs explain the double buffering.
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

    /// Lets `fill` write the next slot's pinned staging buffer in place and
    /// enqueues its upload on the copy stream (`cuMemcpyHtoDAsync`);
    /// returns the slot and the length `fill` reported.
    fn stage(&mut self, fill: impl FnOnce(&mut [T]) -> Result<usize>) -> Result<(usize, usize)> {
        let slot = self.next;
        let chunk_len = self.chunk_len;
        // Waits (host-side) only for the upload two chunks ago.
        let len = fill(self.staging[slot].as_mut_slice()?)?;
        if len > chunk_len {
            return Err(Error::InvalidArgument(format!(
                "a chunk of {len} elements does not fit the prefetcher's {chunk_len}"
            )));
        }
        self.next ^= 1;
        // The whole staging buffer goes up (a short chunk carries stale
        // elements past its end, which the loops never hand out); the write
        // waits device-side for every compute still reading the chunk.
        self.copy.upload(&self.staging[slot], &mut self.chunks[slot])?;
        // A marker right behind this upload: refilling this staging buffer
        // two chunks later then waits for this upload alone, not for the
        // next one (queued by then, and itself waiting for a compute).
        self.copy.inner.mark_tail()?;
        Ok((slot, len))
    }

    /// The loop both iterations share: chunk *i + 1* is staged (and its
    /// upload enqueued) before `f(i, chunk_i)` runs.
    fn pipeline(
        &mut self,
        mut next: impl FnMut(&mut Self) -> Option<Result<(usize, usize)>>,
        mut f: impl FnMut(usize, DeviceSlice<'_, T>) -> Result<()>,
    ) -> Result<()> {
        let Some(first) = next(self) else {
            return Ok(());
        };
        let mut current = first?;
        let mut i = 0;
        loop {
            let upcoming = next(self).transpose()?;
            let (slot, len) = current;
            f(i, self.chunks[slot].slice(..len)?)?;
            i += 1;
            match upcoming {
                Some(u) => current = u,
                None => return Ok(()),
            }
        }
    }

    /// Streams `chunks` to the device: each is copied (a host memcpy) into
    /// pinned staging, and chunk *i + 1*'s upload is enqueued before
    /// `f(i, chunk_i)` runs, so a compute stream working on chunk *i*
    /// overlaps the copy of the next. `f` gets a view of exactly the chunk's
    /// elements; work it submits on any stream that reads the view waits for
    /// the upload automatically. When the producer can write the data
    /// itself, [`Prefetcher::for_each_filled`] saves the host memcpy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a chunk longer than
    /// [`Prefetcher::chunk_len`]; a driver error; `f`'s error (which stops
    /// the iteration).
    pub fn for_each<'a, I, F>(&mut self, chunks: I, f: F) -> Result<()>
    where
        I: IntoIterator<Item = &'a [T]>,
        T: 'a,
        F: FnMut(usize, DeviceSlice<'_, T>) -> Result<()>,
    {
        let mut it = chunks.into_iter();
        self.pipeline(
            |pf| {
                let host = it.next()?;
                Some(pf.stage(|staging| match staging.get_mut(..host.len()) {
                    Some(dst) => {
                        dst.copy_from_slice(host);
                        Ok(host.len())
                    }
                    None => Ok(host.len()),
                }))
            },
            f,
        )
    }

    /// Streams `chunks` chunks that a producer writes directly into pinned
    /// staging, as a `pin_memory` DataLoader worker does: for each `i`,
    /// `fill(i, staging)` writes chunk *i* into the staging buffer (all
    /// [`Prefetcher::chunk_len`] elements of it, holding what that slot held
    /// before: the chunk two steps back, or zeros) and returns how many
    /// elements it filled; the upload of chunk *i + 1* is enqueued before
    /// `compute(i, chunk_i)` runs, as in [`Prefetcher::for_each`]. No host
    /// memcpy: the copy engine reads the producer's writes. `fill` for chunk
    /// *i + 2* waits (host-side) only for the upload of chunk *i*, never for
    /// compute.
    ///
    /// ```
    /// # gpu_sync::sim::install().unwrap();
    /// use gpu_sync::{Device, Prefetcher, Stream};
    /// let device = Device::get(0)?;
    /// let compute = Stream::new(&device)?;
    /// let mut pf = Prefetcher::<u32>::new(&device, 1000)?;
    /// let mut firsts = Vec::new();
    /// pf.for_each_filled(
    ///     3,
    ///     |i, staging| {
    ///         // Decode, generate or read chunk i straight into pinned memory.
    ///         for (j, x) in staging.iter_mut().enumerate() {
    ///             *x = (i * 1000 + j) as u32;
    ///         }
    ///         Ok(if i == 2 { 500 } else { staging.len() })
    ///     },
    ///     |i, chunk| {
    ///         let v = compute.to_vec(&chunk)?;
    ///         firsts.push((i, v[0], v.len()));
    ///         Ok(())
    ///     },
    /// )?;
    /// assert_eq!(firsts, vec![(0, 0, 1000), (1, 1000, 1000), (2, 2000, 500)]);
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `fill` reports more elements than
    /// [`Prefetcher::chunk_len`]; a driver error; `fill`'s or `compute`'s
    /// error (which stops the iteration).
    pub fn for_each_filled<F, G>(&mut self, chunks: usize, mut fill: F, compute: G) -> Result<()>
    where
        F: FnMut(usize, &mut [T]) -> Result<usize>,
        G: FnMut(usize, DeviceSlice<'_, T>) -> Result<()>,
    {
        let mut i = 0;
        self.pipeline(
            |pf| {
                if i >= chunks {
                    return None;
                }
                let at = i;
                i += 1;
                Some(pf.stage(|staging| fill(at, staging)))
            },
            compute,
        )
    }
}

impl<T: Pod> std::fmt::Debug for Prefetcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefetcher<{}>(chunks of {})", std::any::type_name::<T>(), self.chunk_len)
    }
}

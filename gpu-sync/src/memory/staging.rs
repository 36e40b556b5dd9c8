//! Large pageable copies, staged through pinned memory by several host
//! threads.
//!
//! The driver copies a pageable slice through its own pinned staging
//! memory with one host thread, so its rate is one core's `memcpy` rate
//! (6–8 GB/s for 1 GiB out of cache on the H100 machine of
//! docs/results/2026-11-25-pageable.md, where four threads copy at 20–35
//! GB/s and the link carries 54; staged, 14.6 GB/s). Copies of at least [`MIN_BYTES`] go through
//! two pinned chunks of [`CHUNK`] bytes instead: the host copies chunk
//! *i + 1* into one, with up to [`MAX_THREADS`] threads, while the copy
//! engine moves chunk *i* out of the other. The device side of each chunk is
//! an ordinary tracked copy from a [`PinnedBuffer`], so the safety argument
//! is the pinned one: the borrowed slice is only ever touched by the host,
//! inside the call, through safe slices.
//!
//! The chunks are kept per device ([`KEEP`] at most) between calls, taken
//! out of the pool while a copy uses them: the pool's lock is held only to
//! take or give back, never across a wait or a driver call. Two copies at
//! once each get their own pair. On the simulator nothing is kept.

use crate::device::Device;
use crate::error::Result;
use crate::memory::pinned::{HostAllocFlags, PinnedBuffer};
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::{Mutex, OnceLock};

/// Pageable copies of at least this many bytes are staged. Measured on the
/// H100 machine (docs/results/2026-11-25-pageable.md): one 16 MiB chunk
/// copied by four threads then uploaded beat the driver's path (14.0–16.9
/// against 12.5–13.5 GB/s), 4 MiB did not (10.0 against 13.5).
pub(crate) const MIN_BYTES: usize = 16 << 20;
/// Bytes per pinned chunk.
pub(crate) const CHUNK: usize = 16 << 20;
/// Host threads copying into or out of a chunk, at most (fewer when the
/// process may run on fewer cores).
const MAX_THREADS: usize = 4;
/// Chunks kept per device between calls (two per concurrent copy).
const KEEP: usize = 4;
/// Bytes below which one thread copies alone.
const PER_THREAD_MIN: usize = 1 << 20;

fn pool() -> &'static Mutex<HashMap<i32, Vec<PinnedBuffer<u8>>>> {
    static POOL: OnceLock<Mutex<HashMap<i32, Vec<PinnedBuffer<u8>>>>> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Two pinned chunks of one device, taken from the pool (or allocated) and
/// given back on drop.
pub(crate) struct Chunks {
    ordinal: i32,
    bufs: Vec<PinnedBuffer<u8>>,
}

impl Chunks {
    /// Two chunks for `device`: kept ones if the pool has them, else new
    /// ones (`cuMemHostAlloc`).
    ///
    /// # Errors
    /// [`PinnedBuffer::new`]'s (inside a host function or on a capturing
    /// thread it refuses, before any lock).
    pub(crate) fn take(device: &Device) -> Result<Chunks> {
        let ordinal = device.ordinal();
        let mut bufs = {
            let mut map = pool().lock().unwrap_or_else(|p| p.into_inner());
            let kept = map.entry(ordinal).or_default();
            let n = kept.len().min(2);
            kept.split_off(kept.len() - n)
        };
        while bufs.len() < 2 {
            bufs.push(PinnedBuffer::new(device, CHUNK, HostAllocFlags::empty())?);
        }
        Ok(Chunks { ordinal, bufs })
    }

    /// Chunk `i % 2`.
    pub(crate) fn get(&mut self, i: usize) -> &mut PinnedBuffer<u8> {
        &mut self.bufs[i % 2]
    }
}

impl Drop for Chunks {
    fn drop(&mut self) {
        // On the simulator nothing is kept: each test's session sees the
        // pinned memory it caused freed (and none of another session's).
        if crate::Backend::current().is_some_and(crate::Backend::is_sim) {
            return;
        }
        let mut map = pool().lock().unwrap_or_else(|p| p.into_inner());
        let kept = map.entry(self.ordinal).or_default();
        while kept.len() < KEEP {
            match self.bufs.pop() {
                Some(b) => kept.push(b),
                None => break,
            }
        }
        // Any left over drop here (their drop waits for, or defers after,
        // their uses).
    }
}

/// How many threads copy `bytes`.
fn threads(bytes: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (bytes / PER_THREAD_MIN).clamp(1, cores.clamp(1, MAX_THREADS))
}

/// Runs `f` on each pair of `dst`'s and `src`'s stripes, the first on this
/// thread and the others on scoped threads (on this thread too if one
/// cannot be spawned).
fn striped<D: Send, S: Sync>(dst: &mut [D], src: &[S], f: impl Fn(&mut [D], &[S]) + Sync) {
    debug_assert_eq!(dst.len(), src.len());
    let t = threads(src.len());
    if t <= 1 {
        f(dst, src);
        return;
    }
    let per = src.len().div_ceil(t);
    let f = &f;
    std::thread::scope(|sc| {
        let mut pairs = dst.chunks_mut(per).zip(src.chunks(per));
        let first = pairs.next();
        for (d, s) in pairs {
            let builder = std::thread::Builder::new().name("gpu-sync staging".into());
            // The spawned closure owns `d`/`s`; if the spawn fails, the error
            // hands nothing back, so copy on this thread from a second
            // borrow is impossible: spawn with a slot instead.
            let slot = std::sync::Mutex::new(Some((d, s)));
            let run = |slot: &std::sync::Mutex<Option<(&mut [D], &[S])>>| {
                if let Some((d, s)) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    f(d, s);
                }
            };
            let shared = std::sync::Arc::new(slot);
            let theirs = shared.clone();
            if builder.spawn_scoped(sc, move || run(&theirs)).is_err() {
                run(&shared);
            }
        }
        if let Some((d, s)) = first {
            f(d, s);
        }
    });
}

/// `dst.copy_from_slice(src)` over several threads.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    striped(dst, src, |d, s| d.copy_from_slice(s));
}

/// Writes `src` into `dst` (uninitialized memory) over several threads.
pub(crate) fn copy_uninit(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    striped(dst, src, |d, s| {
        for (d, s) in d.iter_mut().zip(s) {
            d.write(*s);
        }
    });
}

//! A communicator's state (`CommInner`), shared by its handle and what is
//! deferred for it: waiting for NCCL's jobs, aborting, and the drop that
//! finalizes it (never hanging, never panicking).

use super::comm::in_progress_ok;
use crate::device::Device;
use crate::engine::Timeline;
use crate::error::{Error, Result};
use cuda_sys::nccl::result as nc;
use cuda_sys::nccl::{CommName, Nccl};
use cuda_sys::nccl_bindings::{ncclComm_t, ncclResult_t};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A communicator's state, shared by its handle and what is deferred for it.
pub(super) struct CommInner {
    pub(super) nccl: &'static Nccl,
    pub(super) raw: RawComm,
    pub(super) device: Device,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) timeout: Duration,
    /// A blocking communicator ([`super::CommOptions::blocking`]).
    pub(super) blocking: bool,
    /// The clique this rank belongs to, when every rank of it is in this
    /// process (made by [`super::Communicator::init_all_with`] or split from
    /// such): a process-unique number; 0 otherwise.
    pub(super) clique: u64,
    /// Set once aborted: every later call refuses.
    pub(super) aborted: AtomicBool,
    /// The streams its operations ran on, each waited for (all its work so
    /// far) before it is finalized.
    pub(super) streams: Mutex<Vec<Arc<Timeline>>>,
    /// The id of the stream [`CommInner::note`] saw last (0: none yet), so
    /// the usual case — the same stream again — takes no lock.
    pub(super) last_stream: AtomicU64,
}

/// A raw communicator handle. NCCL lets a communicator be used from any
/// thread, one call at a time: gpu-sync calls NCCL on it either with the
/// handle owned alone (init, drop) or inside an engine operation on a
/// stream of its device, which holds that device's book for the call, so
/// calls never overlap.
pub(super) struct RawComm(pub(super) CommName);

impl RawComm {
    pub(super) fn get(&self) -> ncclComm_t {
        self.0.get()
    }
}

impl CommInner {
    /// [`Error::InvalidArgument`] once the communicator was aborted.
    pub(super) fn usable(&self, what: &'static str) -> Result<()> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "{what}: the communicator (rank {} of {}) was aborted after an error or a timeout",
                self.rank, self.size
            )));
        }
        Ok(())
    }

    /// Polls `ncclCommGetAsyncError` until the communicator is ready
    /// (`ncclSuccess`), it reports an error, or the timeout passes (then it
    /// is aborted: [`Error::NcclTimeout`]).
    ///
    /// # Errors
    /// NCCL's asynchronous error (the communicator is aborted);
    /// [`Error::NcclTimeout`].
    pub(super) fn wait_ready(&self, what: &'static str) -> Result<()> {
        let start = Instant::now();
        loop {
            // SAFETY: a live communicator (not destroyed while `self` lives;
            // `aborted` is checked by callers before issuing work).
            let state = unsafe { nc::comm_get_async_error(self.nccl, self.raw.get()) }?;
            match state {
                ncclResult_t::ncclSuccess => return Ok(()),
                ncclResult_t::ncclInProgress => {}
                _ => {
                    let e = cuda_sys::nccl::check("ncclCommGetAsyncError", state).err();
                    self.abort();
                    return Err(e.map_or_else(
                        || Error::Internal("an NCCL state that is no error".into()),
                        Error::from,
                    ));
                }
            }
            if start.elapsed() > self.timeout {
                self.abort();
                return Err(Error::NcclTimeout { what, waited: self.timeout });
            }
            // NCCL's own thread finishes enqueuing a group within tens of
            // microseconds: yield (about a microsecond) for the first 20 ms
            // rather than sleep, which cost ~300 µs per collective on the
            // H200s (a sleep of 200 µs after the first few yields); then
            // sleep, for a rank that is slow to come.
            if start.elapsed() < Duration::from_millis(20) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Aborts the communicator (`ncclCommAbort`, local: it waits for no
    /// rank) once; later calls refuse.
    pub(super) fn abort(&self) {
        if !self.aborted.swap(true, Ordering::AcqRel) {
            // SAFETY: a live communicator, aborted once (`aborted` was
            // false); nothing destroys it but this and `Drop`, which skips
            // an aborted one.
            if let Err(e) = unsafe { nc::comm_abort(self.nccl, self.raw.get()) } {
                log::error!("ncclCommAbort (rank {} of {}): {e}", self.rank, self.size);
            }
        }
    }

    /// Notes that an operation of this communicator ran on `stream`: its
    /// handle is kept (once) so the drop waits for it. The same stream as
    /// the last note's is known already: no lock, no clone.
    #[inline]
    pub(super) fn note(&self, stream: &Arc<Timeline>) {
        if self.last_stream.load(Ordering::Relaxed) == stream.id() {
            return;
        }
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if !streams.iter().any(|s| Arc::ptr_eq(s, stream)) {
            streams.push(stream.clone());
        }
        // Stored with the stream in the list (under the lock): a note that
        // reads this id finds its stream kept.
        self.last_stream.store(stream.id(), Ordering::Relaxed);
    }
}

impl Drop for CommInner {
    /// Waits for the communicator's last operations, finalizes it
    /// (`ncclCommFinalize`, polled up to the timeout) and destroys it; on
    /// any error or timeout it is aborted instead. Never panics; errors are
    /// logged.
    fn drop(&mut self) {
        if self.aborted.load(Ordering::Acquire) {
            return;
        }
        let streams = std::mem::take(self.streams.get_mut().unwrap_or_else(|p| p.into_inner()));
        if crate::engine::inside_host_fn() {
            // No host wait or NCCL call inside a host function: the same
            // drop, later, on an ordinary thread.
            let later = CommInner {
                nccl: self.nccl,
                raw: RawComm(self.raw.0),
                device: self.device.clone(),
                rank: self.rank,
                size: self.size,
                timeout: self.timeout,
                blocking: self.blocking,
                clique: self.clique,
                aborted: AtomicBool::new(false),
                streams: Mutex::new(streams),
                last_stream: AtomicU64::new(0),
            };
            // This one is now only a shell: nothing more to do on it.
            self.aborted.store(true, Ordering::Release);
            crate::engine::free_now_or_later(None, Box::new(move || drop(later)));
            return;
        }
        // Everything enqueued so far on the streams it ran on (its own
        // operations among it: tickets grow).
        let ready = streams
            .iter()
            .try_for_each(|s| s.host_wait_all_so_far("dropping a communicator"))
            .and_then(|()| {
                self.device.inner.bind()?;
                // SAFETY: a live communicator owned alone here.
                in_progress_ok(unsafe { nc::comm_finalize(self.nccl, self.raw.get()) })?;
                self.wait_ready("dropping a communicator (ncclCommFinalize)")
            });
        match ready {
            Ok(()) => {
                // SAFETY: finalized, owned alone, destroyed once.
                if let Err(e) = unsafe { nc::comm_destroy(self.nccl, self.raw.get()) } {
                    log::error!("ncclCommDestroy (rank {} of {}): {e}", self.rank, self.size);
                }
            }
            Err(e) => {
                log::error!(
                    "dropping a communicator (rank {} of {}): {e}; aborting it",
                    self.rank,
                    self.size
                );
                self.abort();
            }
        }
    }
}

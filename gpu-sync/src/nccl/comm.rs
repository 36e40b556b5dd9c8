//! Communicators: one rank of an NCCL clique, non-blocking, made for every
//! local GPU by one process ([`Communicator::init_all`]) or one per process
//! from a shared [`UniqueId`] ([`Communicator::init_rank`]); finalized and
//! destroyed on drop without ever hanging.

use super::table;
use crate::device::Device;
use crate::engine::Point;
use crate::error::{Error, Result};
use cuda_sys::nccl::result as nc;
use cuda_sys::nccl::{CommName, Nccl, NcclError};
use cuda_sys::nccl_bindings::{NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclResult_t, ncclUniqueId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a communicator waits for NCCL (its ranks to join, a group's
/// connection set-up, its finalize) before it aborts: the default of
/// [`CommOptions`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of a new communicator.
///
/// ```
/// let o = gpu_sync::nccl::CommOptions { timeout: std::time::Duration::from_secs(5) };
/// assert!(o.timeout < gpu_sync::nccl::DEFAULT_TIMEOUT);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CommOptions {
    /// How long to wait for NCCL before aborting the communicator with
    /// [`Error::NcclTimeout`]: for its ranks to join, for a group's
    /// connection set-up, for its finalize on drop.
    pub timeout: Duration,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions { timeout: DEFAULT_TIMEOUT }
    }
}

/// The id every rank of one communicator is made with (`ncclGetUniqueId`
/// on one rank, its 128 bytes sent to the others by the caller's own
/// means — or NCCL's rendezvous: with `NCCL_COMM_ID=host:port` set in
/// every process, every rank's [`UniqueId::new`] names the same clique).
///
/// ```
/// # gpu_sync::sim::install()?;
/// let id = gpu_sync::nccl::UniqueId::new()?;
/// let again = gpu_sync::nccl::UniqueId::from_bytes(id.to_bytes());
/// assert_eq!(id.to_bytes(), again.to_bytes());
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct UniqueId(ncclUniqueId);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`).
    ///
    /// # Errors
    /// [`Error::NcclLoad`] without NCCL; NCCL's error.
    pub fn new() -> Result<UniqueId> {
        Ok(UniqueId(nc::get_unique_id(table()?)?))
    }

    /// Its bytes, to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        for (d, s) in b.iter_mut().zip(self.0.internal) {
            *d = s as u8;
        }
        b
    }

    /// The id whose bytes another rank sent.
    pub fn from_bytes(bytes: [u8; 128]) -> UniqueId {
        let mut id = ncclUniqueId::default();
        for (d, s) in id.internal.iter_mut().zip(bytes) {
            *d = s as std::ffi::c_char;
        }
        UniqueId(id)
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({:02x?}…)", &self.to_bytes()[..8])
    }
}

/// One rank of an NCCL communicator, bound to one device. Its collectives
/// are tracked stream operations ([`crate::nccl::group`],
/// [`Communicator::all_reduce`] …): their buffers are ordered against
/// every other use and freed after the collective is done on the GPU, with
/// no `record_stream` and no host wait.
///
/// Non-blocking (`config.blocking = 0`): no NCCL call waits for another
/// rank while gpu-sync holds its bookkeeping; where NCCL must wait (ranks
/// joining, a first collective's connections, the finalize on drop), the
/// communicator polls its state up to [`CommOptions::timeout`], then aborts
/// with [`Error::NcclTimeout`] — never a hang. Dropping it waits for its
/// last collectives, finalizes and destroys it (aborting on any error).
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::{Device, nccl::Communicator};
/// let devices = Device::all()?;
/// let comms = Communicator::init_all(&devices)?;
/// assert_eq!(comms.len(), devices.len());
/// assert_eq!((comms[0].rank(), comms[0].size()), (0, devices.len()));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Communicator {
    pub(super) inner: Arc<CommInner>,
}

/// A communicator's state, shared by its handle and what is deferred for it.
pub(super) struct CommInner {
    pub(super) nccl: &'static Nccl,
    pub(super) raw: RawComm,
    pub(super) device: Device,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) timeout: Duration,
    /// Set once aborted: every later call refuses.
    pub(super) aborted: AtomicBool,
    /// The points of its last operations (one per stream, by the stream's
    /// id), waited for before it is finalized.
    pub(super) last: Mutex<Vec<(u64, Point)>>,
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

impl Communicator {
    /// One communicator per device of `devices`, rank `i` on `devices[i]`,
    /// all driven from this process (each rank's
    /// `ncclCommInitRankConfig`, non-blocking, inside one NCCL group),
    /// with [`CommOptions::default`].
    ///
    /// # Errors
    /// As [`Communicator::init_all_with`].
    pub fn init_all(devices: &[Device]) -> Result<Vec<Communicator>> {
        Communicator::init_all_with(devices, CommOptions::default())
    }

    /// [`Communicator::init_all`] with `options`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no device or a device given twice;
    /// [`Error::NcclLoad`] without NCCL; NCCL's error;
    /// [`Error::NcclTimeout`] when the ranks are not ready in time.
    pub fn init_all_with(devices: &[Device], options: CommOptions) -> Result<Vec<Communicator>> {
        if devices.is_empty() {
            return Err(Error::InvalidArgument("Communicator::init_all: no device given".into()));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].iter().any(|e| e.same(d)) {
                return Err(Error::InvalidArgument(format!(
                    "Communicator::init_all: device {} given twice (one rank per device)",
                    d.ordinal()
                )));
            }
        }
        crate::ffi::refuse("ncclCommInitRankConfig")?;
        let nccl = table()?;
        let id = nc::get_unique_id(nccl)?;
        let n = devices.len();
        let mut raws: Vec<ncclComm_t> = vec![std::ptr::null_mut(); n];
        nc::group_start(nccl)?;
        let mut first: Option<Error> = None;
        for (rank, d) in devices.iter().enumerate() {
            if let Err(e) = d.inner.bind().and_then(|()| init_rank_raw(nccl, &mut raws[rank], n, id, rank)) {
                first = Some(e);
                break;
            }
        }
        // The group is ended on every path.
        let ended = in_progress_ok(nc::group_end(nccl));
        let comms: Vec<Communicator> = raws
            .iter()
            .zip(devices)
            .enumerate()
            .filter(|(_, (r, _))| !r.is_null())
            .map(|(rank, (r, d))| Communicator::wrap(nccl, *r, d, rank, n, options))
            .collect();
        if let Some(e) = first {
            return Err(e);
        }
        ended?;
        if comms.len() != n {
            return Err(Error::Internal("ncclCommInitRankConfig returned no communicator".into()));
        }
        for c in &comms {
            c.inner.wait_ready("Communicator::init_all")?;
        }
        Ok(comms)
    }

    /// Rank `rank` of a communicator of `size` ranks named by `id`, on
    /// `device` (one process per GPU: `ncclCommInitRankConfig`,
    /// non-blocking), waiting up to the timeout for every rank to join.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `rank >= size`; [`Error::NcclLoad`];
    /// NCCL's error; [`Error::NcclTimeout`].
    pub fn init_rank(
        device: &Device,
        size: usize,
        rank: usize,
        id: &UniqueId,
        options: CommOptions,
    ) -> Result<Communicator> {
        if rank >= size {
            return Err(Error::InvalidArgument(format!(
                "Communicator::init_rank: rank {rank} of a communicator of {size} ranks"
            )));
        }
        crate::ffi::refuse("ncclCommInitRankConfig")?;
        let nccl = table()?;
        device.inner.bind()?;
        let mut raw: ncclComm_t = std::ptr::null_mut();
        init_rank_raw(nccl, &mut raw, size, id.0, rank)?;
        if raw.is_null() {
            return Err(Error::Internal("ncclCommInitRankConfig returned no communicator".into()));
        }
        let c = Communicator::wrap(nccl, raw, device, rank, size, options);
        c.inner.wait_ready("Communicator::init_rank")?;
        Ok(c)
    }

    /// This process's rank from a launcher's environment — `RANK`,
    /// `WORLD_SIZE` and `LOCAL_RANK` as `torchrun` sets them (device
    /// `LOCAL_RANK`) — joined through NCCL's own rendezvous, which needs
    /// `NCCL_COMM_ID=host:port` set in every process (e.g. to
    /// `$MASTER_ADDR:$((MASTER_PORT + 1))` under torchrun, whose store holds
    /// `MASTER_PORT`; never derived: its absence is an error that names the
    /// value to use). [`crate::nccl::spawn_local`] sets all four.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a missing or malformed variable;
    /// the errors of [`Communicator::init_rank`].
    pub fn from_env(options: CommOptions) -> Result<Communicator> {
        let var = |name: &'static str| -> Result<usize> {
            let v = std::env::var(name).map_err(|_| {
                Error::InvalidArgument(format!(
                    "Communicator::from_env: {name} is not set (torchrun sets it)"
                ))
            })?;
            v.trim().parse().map_err(|_| {
                Error::InvalidArgument(format!("Communicator::from_env: {name}={v:?} is not a number"))
            })
        };
        let (rank, size, local) = (var("RANK")?, var("WORLD_SIZE")?, var("LOCAL_RANK")?);
        if std::env::var_os("NCCL_COMM_ID").is_none() {
            // Never derived (see `nccl::spawn`): torchrun's store holds
            // MASTER_PORT, and a library cannot set a variable for NCCL safely.
            let example = match (std::env::var("MASTER_ADDR"), var("MASTER_PORT")) {
                (Ok(addr), Ok(port)) => format!("{addr}:{}", port + 1),
                _ => "$MASTER_ADDR:$((MASTER_PORT + 1))".into(),
            };
            return Err(Error::InvalidArgument(format!(
                "Communicator::from_env: NCCL_COMM_ID is not set: NCCL's rendezvous needs it, the same in every \
                 process, on a port other than torchrun's MASTER_PORT (e.g. NCCL_COMM_ID={example})"
            )));
        }
        let device = Device::get(i32::try_from(local).map_err(|_| {
            Error::InvalidArgument(format!("Communicator::from_env: LOCAL_RANK={local} is out of range"))
        })?)?;
        Communicator::init_rank(&device, size, rank, &UniqueId::new()?, options)
    }

    fn wrap(
        nccl: &'static Nccl,
        raw: ncclComm_t,
        device: &Device,
        rank: usize,
        size: usize,
        options: CommOptions,
    ) -> Communicator {
        Communicator {
            inner: Arc::new(CommInner {
                nccl,
                raw: RawComm(CommName::new(raw)),
                device: device.clone(),
                rank,
                size,
                timeout: options.timeout,
                aborted: AtomicBool::new(false),
                last: Mutex::new(Vec::new()),
            }),
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// The device this rank runs on.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {} of {}, device {})",
            self.inner.rank,
            self.inner.size,
            self.inner.device.ordinal()
        )
    }
}

/// `ncclCommInitRankConfig` with `blocking = 0`; `ncclInProgress` is
/// success here (the caller polls).
fn init_rank_raw(
    nccl: &Nccl,
    raw: &mut ncclComm_t,
    size: usize,
    id: ncclUniqueId,
    rank: usize,
) -> Result<()> {
    let mut config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    // SAFETY: the caller bound the rank's device's context on this thread;
    // `config` starts from the initializer and holds no strings.
    in_progress_ok(unsafe { nc::comm_init_rank_config(nccl, raw, size, id, rank, &mut config) })
}

/// `Ok` for success and for `ncclInProgress`.
pub(super) fn in_progress_ok(r: std::result::Result<(), NcclError>) -> Result<()> {
    match r {
        Ok(()) | Err(NcclError::InProgress { .. }) => Ok(()),
        Err(e) => Err(e.into()),
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

    /// Notes `p` as this communicator's last operation on stream `stream`
    /// (its id).
    pub(super) fn note(&self, stream: u64, p: Point) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.retain(|(s, _)| *s != stream);
        last.push((stream, p));
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
        let last = std::mem::take(self.last.get_mut().unwrap_or_else(|p| p.into_inner()));
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
                aborted: AtomicBool::new(false),
                last: Mutex::new(last),
            };
            // This one is now only a shell: nothing more to do on it.
            self.aborted.store(true, Ordering::Release);
            crate::engine::free_now_or_later(None, Box::new(move || drop(later)));
            return;
        }
        let ready = last.iter().try_for_each(|(_, p)| p.host_wait()).and_then(|()| {
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

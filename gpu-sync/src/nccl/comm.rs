//! Communicators: one rank of an NCCL clique, non-blocking, made for every
//! local GPU by one process ([`Communicator::init_all`]) or one per process
//! from a shared [`UniqueId`] ([`Communicator::init_rank`]); finalized and
//! destroyed on drop without ever hanging.

use super::inner::{CommInner, RawComm};
use super::table;
use crate::device::Device;

use crate::error::{Error, Result};
use cuda_sys::nccl::result as nc;
use cuda_sys::nccl::{CommName, Nccl, NcclError};
use cuda_sys::nccl_bindings::{NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclUniqueId};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a communicator waits for NCCL (its ranks to join, a group's
/// connection set-up, its finalize) before it aborts: the default of
/// [`CommOptions`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Options of a new communicator.
///
/// ```
/// let o = gpu_sync::nccl::CommOptions { timeout: std::time::Duration::from_secs(5), ..Default::default() };
/// assert!(o.timeout < gpu_sync::nccl::DEFAULT_TIMEOUT);
/// assert!(!o.blocking); // non-blocking unless asked
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CommOptions {
    /// How long to wait for NCCL before aborting the communicator with
    /// [`Error::NcclTimeout`]: for its ranks to join, for a group's
    /// connection set-up, for its finalize on drop.
    pub timeout: Duration,
    /// A blocking communicator (`config.blocking = 1`).
    ///
    /// On a non-blocking communicator (the default) NCCL ends every group
    /// on a thread it creates for that group, and the caller polls for it:
    /// a cost of tens of microseconds per group, which small messages feel
    /// (`docs/guide/collectives.md`, "Blocking or not"). A blocking one
    /// enqueues inside `ncclGroupEnd`, which may then wait on the host for
    /// every rank of the clique to take part (its connections are made on
    /// first use, its launches meet at a barrier). gpu-sync takes it where
    /// that wait cannot last forever:
    /// - every rank in this process ([`Communicator::init_all_with`]): a
    ///   group must hold the same collectives for every rank of each
    ///   blocking clique and a matching receive for every send, or it is
    ///   refused;
    /// - one rank per process ([`Communicator::init_rank`]) only with
    ///   NCCL's connections made at init (`NCCL_RUNTIME_CONNECT=0` in the
    ///   environment of every process, read when the communicator is made),
    ///   and collectives only: a send, receive or all-to-all connects its
    ///   peers on first use, so it is refused on such a communicator. The
    ///   rank joins non-blocking (the timeout holds), then splits itself
    ///   into a blocking communicator of the same ranks, which it keeps;
    ///   [`Communicator::split`] of it is refused, as is a second blocking
    ///   rank of the same clique in one process (two such ranks, one per
    ///   thread, hung on two H200s, NCCL's log ending in the blocking
    ///   split's connection set-up; the ranks of one process are
    ///   [`Communicator::init_all_with`]'s).
    pub blocking: bool,
}

impl Default for CommOptions {
    fn default() -> Self {
        CommOptions { timeout: DEFAULT_TIMEOUT, blocking: false }
    }
}

/// Where NCCL writes the handles of new communicators. A non-blocking
/// init or split stores the handle when its job ends, on NCCL's own
/// thread, after the call that took the pointer has returned (`*newcomm`
/// assigned at the end of `ncclCommInitRankFunc`; a split sets it there
/// only). So the slots live on the heap, are read atomically, and are
/// freed only once every job is known to have ended ([`Slots::free`]);
/// a path that cannot know (an error before the jobs ended) leaks them —
/// a few words — rather than let NCCL write into freed memory.
struct Slots(&'static [std::sync::atomic::AtomicPtr<cuda_sys::nccl_bindings::ncclComm>]);

impl Slots {
    fn new(n: usize) -> Slots {
        let v: Vec<_> = (0..n).map(|_| std::sync::atomic::AtomicPtr::new(std::ptr::null_mut())).collect();
        Slots(Box::leak(v.into_boxed_slice()))
    }

    /// Slot `i` as the out-pointer of one NCCL call.
    fn out(&mut self, i: usize) -> &mut ncclComm_t {
        // SAFETY: the slot is live heap memory (leaked until `free`) of
        // `ncclComm_t`'s layout (`AtomicPtr<T>` is a `*mut T`); the `&mut`
        // is used only for the one call it is passed to, while no other
        // reference to the slot is used (reads go through `get`, after the
        // call); NCCL's later store is atomic, as `get`'s load is.
        unsafe { &mut *self.0[i].as_ptr() }
    }

    /// Slot `i`'s handle now (null if NCCL has not stored one).
    fn get(&self, i: usize) -> ncclComm_t {
        self.0[i].load(Ordering::Acquire)
    }

    /// Frees the slots: only once no NCCL job can still store into them.
    fn free(self) {
        let p = self.0 as *const [std::sync::atomic::AtomicPtr<cuda_sys::nccl_bindings::ncclComm>]
            as *mut [std::sync::atomic::AtomicPtr<cuda_sys::nccl_bindings::ncclComm>];
        // SAFETY: `p` came from `Box::leak` in `new` and is freed once
        // (`self` is consumed); the caller knows every job that held a
        // slot has ended, so nothing writes into it again.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// A source of process-unique clique numbers (0: none).
static CLIQUES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

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
/// Non-blocking (`config.blocking = 0`) unless [`CommOptions::blocking`]
/// asks otherwise: no NCCL call waits for another
/// rank while gpu-sync holds its bookkeeping; where NCCL must wait (ranks
/// joining, a first collective's connections, the finalize on drop), the
/// communicator polls its state up to [`CommOptions::timeout`], then aborts
/// with [`Error::NcclTimeout`] — never a hang. Dropping it waits for its
/// last collectives (all the work so far of the streams they ran on),
/// finalizes and destroys it (aborting on any error).
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

impl Communicator {
    /// One communicator per device of `devices`, rank `i` on `devices[i]`,
    /// all driven from this process (each rank's
    /// `ncclCommInitRankConfig`, inside one NCCL group),
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
        let clique = CLIQUES.fetch_add(1, Ordering::Relaxed);
        let mut slots = Slots::new(n);
        nc::group_start(nccl)?;
        let mut first: Option<Error> = None;
        for (rank, d) in devices.iter().enumerate() {
            let made = d
                .inner
                .bind()
                .and_then(|()| init_rank_raw(nccl, slots.out(rank), n, id, rank, options.blocking));
            if let Err(e) = made {
                first = Some(e);
                break;
            }
        }
        // The group is ended on every path.
        let ended = in_progress_ok(nc::group_end(nccl));
        // An init sets its handle at once (and again when its job ends).
        let comms: Vec<Communicator> = devices
            .iter()
            .enumerate()
            .filter(|(rank, _)| !slots.get(*rank).is_null())
            .map(|(rank, d)| Communicator::wrap(nccl, slots.get(rank), d, rank, n, options, clique))
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
        // Every rank's job has ended: nothing stores into the slots again.
        slots.free();
        Ok(comms)
    }

    /// Rank `rank` of a communicator of `size` ranks named by `id`, on
    /// `device` (one process per GPU: `ncclCommInitRankConfig`,
    /// non-blocking), waiting up to the timeout for every rank to join;
    /// with [`CommOptions::blocking`], then split into a blocking
    /// communicator of the same ranks (`ncclCommSplit`, waited for the same
    /// way).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `rank >= size`, or for
    /// [`CommOptions::blocking`] without `NCCL_RUNTIME_CONNECT=0` in the
    /// environment (a blocking group could wait for a rank of another
    /// process on its first use) or for a second blocking rank of one clique
    /// in this process; [`Error::NcclLoad`]; NCCL's error;
    /// [`Error::NcclTimeout`].
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
        if options.blocking {
            runtime_connect_off("Communicator::init_rank")?;
            first_blocking_rank_here("Communicator::init_rank", id)?;
        }
        crate::ffi::refuse("ncclCommInitRankConfig")?;
        let nccl = table()?;
        device.inner.bind()?;
        let mut slots = Slots::new(1);
        init_rank_raw(nccl, slots.out(0), size, id.0, rank, false)?;
        let raw = slots.get(0);
        if raw.is_null() {
            return Err(Error::Internal("ncclCommInitRankConfig returned no communicator".into()));
        }
        let joined = CommOptions { blocking: false, ..options };
        let c = Communicator::wrap(nccl, raw, device, rank, size, joined, 0);
        c.inner.wait_ready("Communicator::init_rank")?;
        slots.free();
        if !options.blocking {
            return Ok(c);
        }
        // The blocking communicator: split from the non-blocking one, every
        // rank with one colour, in rank order. The split runs as its parent
        // does (non-blocking: the timeout holds while the ranks meet); the
        // parent is then finalized and destroyed.
        const WHAT: &str = "Communicator::init_rank (blocking)";
        let key = i32::try_from(rank)
            .map_err(|_| Error::InvalidArgument(format!("{WHAT}: rank {rank} is out of range")))?;
        let mut slots = Slots::new(1);
        in_progress_ok(split_raw_keyed(&c.inner, 0, key, true, slots.out(0)))?;
        c.inner.wait_ready(WHAT)?;
        let raw = slots.get(0);
        slots.free();
        if raw.is_null() {
            return Err(Error::Internal(format!("{WHAT}: ncclCommSplit returned no communicator")));
        }
        let mut b = Communicator::wrap(nccl, raw, device, 0, 0, options, 0);
        b.finish(WHAT)?;
        if (b.rank(), b.size()) != (rank, size) {
            return Err(Error::Internal(format!(
                "{WHAT}: the split gave rank {} of {}, not rank {rank} of {size}",
                b.rank(),
                b.size()
            )));
        }
        Ok(b)
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

    /// Splits every communicator of one clique driven by this process
    /// (`parents`: every rank of it, as [`Communicator::init_all`] gave
    /// them) into sub-cliques by colour (`ncclCommSplit` for each rank,
    /// inside one NCCL group): rank `i` joins the sub-clique of
    /// `colors[i]`, or none for `None`; ranks keep their order. The new
    /// communicators have their parents' options.
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::{Device, nccl::Communicator};
    /// let devices = Device::all()?;
    /// let comms = Communicator::init_all(&devices)?;
    /// // Even and odd ranks, two sub-cliques.
    /// let colors: Vec<Option<u32>> = (0..comms.len()).map(|r| Some(r as u32 % 2)).collect();
    /// let subs = Communicator::split_all(&comms, &colors)?;
    /// let first = subs[0].as_ref().expect("rank 0 has a colour");
    /// assert_eq!((first.rank(), first.size()), (0, comms.len().div_ceil(2)));
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `parents` are every rank of one
    /// clique of this process, in rank order, with a colour each (at most
    /// `i32::MAX`); NCCL's error; [`Error::NcclTimeout`].
    pub fn split_all(parents: &[Communicator], colors: &[Option<u32>]) -> Result<Vec<Option<Communicator>>> {
        const WHAT: &str = "Communicator::split_all";
        let Some(p0) = parents.first() else {
            return Err(Error::InvalidArgument(format!("{WHAT}: no communicator given")));
        };
        let whole = p0.inner.clique != 0
            && parents.len() == p0.size()
            && parents.iter().enumerate().all(|(i, p)| p.inner.clique == p0.inner.clique && p.rank() == i);
        if !whole {
            return Err(Error::InvalidArgument(format!(
                "{WHAT}: give every rank of one clique made by Communicator::init_all, in rank order \
                 (a rank of another process splits with Communicator::split)"
            )));
        }
        if colors.len() != parents.len() {
            return Err(Error::LengthMismatch { op: WHAT, src: parents.len(), dst: colors.len() });
        }
        let raw_colors = colors.iter().map(|c| color_raw(WHAT, *c)).collect::<Result<Vec<i32>>>()?;
        for p in parents {
            p.inner.usable(WHAT)?;
        }
        crate::ffi::refuse("ncclCommSplit")?;
        let nccl = p0.inner.nccl;
        let mut slots = Slots::new(parents.len());
        nc::group_start(nccl)?;
        let mut first: Option<Error> = None;
        for (i, p) in parents.iter().enumerate() {
            let made =
                p.inner.device.inner.bind().and_then(|()| split_raw(&p.inner, raw_colors[i], slots.out(i)));
            if let Err(e) = made {
                first = Some(e);
                break;
            }
        }
        // The group is ended on every path.
        let ended = in_progress_ok(nc::group_end(nccl));
        if let Some(e) = first {
            return Err(e);
        }
        ended?;
        // A split stores the new handles when its jobs end, which the
        // parents report (their state is in progress until then).
        for p in parents {
            p.inner.wait_ready(WHAT)?;
        }
        // One new clique number per colour.
        let mut cliques: Vec<(u32, u64)> = Vec::new();
        let mut out = Vec::with_capacity(parents.len());
        for (i, (p, color)) in parents.iter().zip(colors).enumerate() {
            let raw = slots.get(i);
            let made = match (raw.is_null(), color) {
                (false, Some(c)) => {
                    let clique = match cliques.iter().find(|(k, _)| k == c) {
                        Some((_, id)) => *id,
                        None => {
                            let id = CLIQUES.fetch_add(1, Ordering::Relaxed);
                            cliques.push((*c, id));
                            id
                        }
                    };
                    Some(Communicator::adopt(&p.inner, raw, clique))
                }
                _ => None,
            };
            out.push(made);
        }
        slots.free();
        for c in out.iter_mut().flatten() {
            c.finish(WHAT)?;
        }
        Ok(out)
    }

    /// This rank's part of splitting its communicator into sub-cliques by
    /// colour (`ncclCommSplit`), for one process per rank: every rank of
    /// the communicator calls it, each in its own process, and joins the
    /// sub-clique of `color` (`None`: none, and `Ok(None)` is returned);
    /// ranks are ordered by `key`, then by their rank here. The new
    /// communicator has this one's options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank of a clique driven by this
    /// process (use [`Communicator::split_all`], which splits every rank
    /// at once) or a colour above `i32::MAX`; NCCL's error;
    /// [`Error::NcclTimeout`] when the other ranks do not come in time.
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Communicator>> {
        const WHAT: &str = "Communicator::split";
        if self.inner.clique != 0 {
            return Err(Error::InvalidArgument(format!(
                "{WHAT}: rank {} belongs to a clique driven by this process; split every rank at once \
                 with Communicator::split_all",
                self.rank()
            )));
        }
        if self.inner.blocking {
            return Err(Error::InvalidArgument(format!(
                "{WHAT}: rank {} is a blocking communicator with ranks in other processes: its split would \
                 wait for them on the host with no timeout; split a non-blocking one",
                self.rank()
            )));
        }
        let raw_color = color_raw(WHAT, color)?;
        self.inner.usable(WHAT)?;
        crate::ffi::refuse("ncclCommSplit")?;
        self.inner.device.inner.bind()?;
        let mut slots = Slots::new(1);
        in_progress_ok(split_raw_keyed(&self.inner, raw_color, key, self.inner.blocking, slots.out(0)))?;
        // The handle is stored when the split's job ends, which this
        // rank's state reports.
        self.inner.wait_ready(WHAT)?;
        let raw = slots.get(0);
        slots.free();
        if raw.is_null() || color.is_none() {
            return Ok(None);
        }
        let mut c = Communicator::adopt(&self.inner, raw, 0);
        c.finish(WHAT)?;
        Ok(Some(c))
    }

    /// A communicator NCCL made from `parent` (a split), before its rank
    /// and size are known ([`Communicator::finish`] reads them).
    fn adopt(parent: &CommInner, raw: ncclComm_t, clique: u64) -> Communicator {
        let options = CommOptions { timeout: parent.timeout, blocking: parent.blocking };
        Communicator::wrap(parent.nccl, raw, &parent.device, 0, 0, options, clique)
    }

    /// Waits for a split communicator to be ready, then reads its rank and
    /// size from NCCL (`ncclCommUserRank`, `ncclCommCount`).
    fn finish(&mut self, what: &'static str) -> Result<()> {
        self.inner.wait_ready(what)?;
        let (nccl, raw) = (self.inner.nccl, self.inner.raw.get());
        // SAFETY: a live communicator, ready (waited above).
        let (rank, size) = unsafe { (nc::comm_user_rank(nccl, raw)?, nc::comm_count(nccl, raw)?) };
        let inner = Arc::get_mut(&mut self.inner)
            .ok_or_else(|| Error::Internal("a new communicator is shared before it is ready".into()))?;
        inner.rank =
            usize::try_from(rank).map_err(|_| Error::Internal(format!("ncclCommUserRank gave {rank}")))?;
        inner.size =
            usize::try_from(size).map_err(|_| Error::Internal(format!("ncclCommCount gave {size}")))?;
        Ok(())
    }

    pub(super) fn wrap(
        nccl: &'static Nccl,
        raw: ncclComm_t,
        device: &Device,
        rank: usize,
        size: usize,
        options: CommOptions,
        clique: u64,
    ) -> Communicator {
        Communicator {
            inner: Arc::new(CommInner {
                nccl,
                raw: RawComm(CommName::new(raw)),
                device: device.clone(),
                rank,
                size,
                timeout: options.timeout,
                blocking: options.blocking,
                clique,
                aborted: AtomicBool::new(false),
                streams: Mutex::new(Vec::new()),
                last_stream: AtomicU64::new(0),
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

    /// The raw handle (`ncclComm_t`), for interop with foreign code, as
    /// [`Stream::as_raw`](crate::Stream::as_raw). Every NCCL call on it is
    /// `unsafe` (`cuda_sys::nccl::result`): its caller keeps NCCL's rule of
    /// one call at a time per communicator (gpu-sync calls it from inside
    /// an engine operation on a stream of its device, or owning it alone at
    /// init and drop), and work enqueued through it is not tracked — it
    /// must be finished before the communicator is dropped.
    pub fn as_raw(&self) -> ncclComm_t {
        self.inner.raw.get()
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

/// `ncclCommInitRankConfig` with `blocking` as asked; `ncclInProgress` is
/// success here (the caller polls).
fn init_rank_raw(
    nccl: &Nccl,
    raw: &mut ncclComm_t,
    size: usize,
    id: ncclUniqueId,
    rank: usize,
    blocking: bool,
) -> Result<()> {
    let mut config = NCCL_CONFIG_INITIALIZER;
    config.blocking = i32::from(blocking);
    // SAFETY: the caller bound the rank's device's context on this thread;
    // `config` starts from the initializer and holds no strings.
    in_progress_ok(unsafe { nc::comm_init_rank_config(nccl, raw, size, id, rank, &mut config) })
}

/// [`Error::InvalidArgument`] unless NCCL makes its connections at init
/// (`NCCL_RUNTIME_CONNECT=0` in the environment, which NCCL reads once,
/// before any setting in its configuration files): a blocking
/// communicator with ranks in other processes is made only then (see
/// [`CommOptions::blocking`]).
fn runtime_connect_off(what: &'static str) -> Result<()> {
    match std::env::var("NCCL_RUNTIME_CONNECT") {
        Ok(v) if v.trim() == "0" => Ok(()),
        found => Err(Error::InvalidArgument(format!(
            "{what}: a blocking communicator with ranks in other processes needs NCCL_RUNTIME_CONNECT=0 \
             in every process's environment ({}): NCCL then connects the ranks at init, and a blocking \
             group never waits for another process on the host; or use a non-blocking communicator",
            match found {
                Ok(v) => format!("it is {v:?}"),
                Err(_) => "it is not set".into(),
            }
        ))),
    }
}

/// The cliques (by unique id) of which this process made a blocking rank
/// with [`Communicator::init_rank`].
static BLOCKING_HERE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// [`Error::InvalidArgument`] when this process already made a blocking
/// rank of the clique `id` names: two blocking ranks of one clique, each
/// made by its own thread of one process, hung on two H200s (NCCL 2.28.9:
/// its log ends in the blocking split's connection set-up; the cause was
/// not found), and the ranks of one
/// process are what [`Communicator::init_all_with`] is for. Records `id`
/// otherwise (an id serves one clique: nothing is ever removed).
fn first_blocking_rank_here(what: &'static str, id: &UniqueId) -> Result<()> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.0.internal.hash(&mut h);
    let key = h.finish();
    let mut seen = BLOCKING_HERE.lock().unwrap_or_else(|p| p.into_inner());
    if seen.contains(&key) {
        return Err(Error::InvalidArgument(format!(
            "{what}: this process already made a blocking rank of this clique; a blocking rank needs a process \
             of its own (make every rank this process drives with Communicator::init_all_with, or use \
             non-blocking communicators)"
        )));
    }
    seen.push(key);
    Ok(())
}

/// A colour as NCCL takes it (`NCCL_SPLIT_NOCOLOR` for `None`).
fn color_raw(what: &'static str, color: Option<u32>) -> Result<i32> {
    match color {
        None => Ok(cuda_sys::nccl_bindings::NCCL_SPLIT_NOCOLOR),
        Some(c) => i32::try_from(c).map_err(|_| {
            Error::InvalidArgument(format!("{what}: colour {c} is above NCCL's largest, {}", i32::MAX))
        }),
    }
}

/// `ncclCommSplit` of `parent` by `color`, keyed by the parent's rank
/// (ranks keep their order), with the parent's blocking mode.
fn split_raw(parent: &CommInner, color: i32, raw: &mut ncclComm_t) -> Result<()> {
    let key = i32::try_from(parent.rank)
        .map_err(|_| Error::InvalidArgument(format!("rank {} is out of range", parent.rank)))?;
    in_progress_ok(split_raw_keyed(parent, color, key, parent.blocking, raw))
}

/// `ncclCommSplit` of `parent` by `color` and `key`, with the parent's
/// blocking mode; the caller bound the parent's device.
fn split_raw_keyed(
    parent: &CommInner,
    color: i32,
    key: i32,
    blocking: bool,
    raw: &mut ncclComm_t,
) -> std::result::Result<(), NcclError> {
    let mut config = NCCL_CONFIG_INITIALIZER;
    config.blocking = i32::from(blocking);
    // SAFETY: a live parent (borrowed by the caller, not aborted: checked
    // by `usable`); `config` starts from the initializer and holds no
    // strings; `raw` is a valid out-pointer.
    unsafe { nc::comm_split(parent.nccl, parent.raw.get(), color, key, raw, &mut config) }
}

/// `Ok` for success and for `ncclInProgress`.
pub(super) fn in_progress_ok(r: std::result::Result<(), NcclError>) -> Result<()> {
    match r {
        Ok(()) | Err(NcclError::InProgress { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

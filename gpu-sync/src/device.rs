//! Devices, their primary contexts, and the device-wide wait.

use crate::error::{Error, Result};
use crate::ffi::{call, driver};
use crate::trace::{DeviceFacts, DeviceTrace};
use cuda_sys::result as cu;
use cuda_sys::{BorrowedContext, CUcontext, CUdevice, CUdevice_attribute as A, Driver};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A CUDA device and its retained primary context.
///
/// Cheap to clone (a shared handle); `Send + Sync`. Every `Device` for one
/// ordinal shares one state, so submissions on all its streams draw tickets
/// from one counter and a [`Device::synchronize`] proof covers all of them.
///
/// The primary context (`cuDevicePrimaryCtxRetain`) is retained on first use
/// and kept for the life of the process. Before each driver call gpu-sync
/// makes it current on the calling thread (`cuCtxSetCurrent`), caching which
/// context it made current per thread so the hot path costs a thread-local
/// read. If foreign code changes the thread's current context behind
/// gpu-sync's back, call [`Device::make_current`].
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::Device;
/// let device = Device::get(0)?; // cuDeviceGet + the primary context
/// let (major, minor) = device.compute_capability()?;
/// println!("{} (sm_{major}{minor}), {} bytes", device.name()?, device.total_memory()?);
/// let all_done = device.synchronize()?; // cuCtxSynchronize: a DeviceSynced proof
/// # let _ = all_done;
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

/// Launch limits read once from the device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_threads_per_block: u32,
    pub max_block: [u32; 3],
    pub max_grid: [u32; 3],
    pub max_shared_per_block_optin: u32,
}

pub(crate) struct DeviceInner {
    pub ordinal: i32,
    pub raw: CUdevice,
    /// The retained primary context (never released, hence `'static`).
    pub ctx: BorrowedContext<'static>,
    pub drv: &'static Driver,
    pub limits: Limits,
    pub pools: bool,
    /// Last ticket handed out to a submission on any stream of this device.
    pub ticket: AtomicU64,
    /// Every ticket up to this one is known complete (device-wide waits).
    pub completed: AtomicU64,
    pub ledger: Ledger,
    pub priority_range: (i32, i32),
    /// Recording: the flag the engine's funnel reads, and the recorder's
    /// sink while one lives.
    pub trace: DeviceTrace,
    /// Peer access this device has been given: bit `j` is set once device
    /// `j`'s memory is open to work on this device (its context's peer
    /// access and its pool's access, see `Device::enable_peer_access`).
    /// Only set, and cleared by a disable; read by [`DeviceInner::reaches`].
    pub peers: AtomicU64,
}

fn registry() -> &'static Mutex<HashMap<i32, Arc<DeviceInner>>> {
    static DEVICES: OnceLock<Mutex<HashMap<i32, Arc<DeviceInner>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn attr(drv: &'static Driver, dev: CUdevice, a: A) -> Result<i32> {
    call("cuDeviceGetAttribute", || cu::device::get_attribute(drv, a, dev))
}

fn attr_u32(drv: &'static Driver, dev: CUdevice, a: A) -> Result<u32> {
    Ok(u32::try_from(attr(drv, dev, a)?).unwrap_or(0))
}

impl Device {
    /// Number of CUDA devices (`cuDeviceGetCount`).
    ///
    /// # Errors
    /// [`Error::Load`] without a driver; a driver error otherwise.
    pub fn count() -> Result<usize> {
        let drv = driver()?;
        let n = call("cuDeviceGetCount", || cu::device::get_count(drv))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Every device, in ordinal order.
    ///
    /// # Errors
    /// As [`Device::count`] and [`Device::get`].
    pub fn all() -> Result<Vec<Device>> {
        (0..Self::count()?).map(|i| Device::get(i as i32)).collect()
    }

    /// Device `ordinal` (`cuDeviceGet`), retaining its primary context
    /// (`cuDevicePrimaryCtxRetain`) on first use.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an ordinal the driver does not have;
    /// [`Error::Load`] without a driver.
    pub fn get(ordinal: i32) -> Result<Device> {
        let drv = driver()?;
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(inner) = map.get(&ordinal) {
            return Ok(Device { inner: inner.clone() });
        }
        let count = call("cuDeviceGetCount", || cu::device::get_count(drv))?;
        if ordinal < 0 || ordinal >= count {
            return Err(Error::InvalidArgument(format!(
                "no CUDA device {ordinal}: the driver reports {count} device(s)"
            )));
        }
        let raw = call("cuDeviceGet", || cu::device::get(drv, ordinal))?;
        // Retained and never released: the handle stays valid for the process.
        let ctx = call("cuDevicePrimaryCtxRetain", || cu::primary_ctx::retain(drv, raw))?;
        let limits = Limits {
            max_threads_per_block: attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr_u32(drv, raw, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_per_block_optin: attr_u32(
                drv,
                raw,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )?,
        };
        let pools = drv.cuMemAllocAsync.is_some()
            && drv.cuMemFreeAsync.is_some()
            && attr(drv, raw, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0;
        bind_ctx(drv, ctx)?;
        if pools {
            keep_pool_memory(drv, raw)?;
        }
        // The device's primary context is current on this thread (just above).
        let (least, greatest) =
            call("cuCtxGetStreamPriorityRange", || cu::context::get_stream_priority_range(drv))?;
        let inner = Arc::new(DeviceInner {
            ordinal,
            raw,
            ctx,
            drv,
            limits,
            pools,
            ticket: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            ledger: Ledger::default(),
            priority_range: (least, greatest),
            trace: DeviceTrace::default(),
            peers: AtomicU64::new(0),
        });
        map.insert(ordinal, inner.clone());
        Ok(Device { inner })
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> i32 {
        self.inner.ordinal
    }

    /// The raw `CUdevice`.
    pub fn as_raw(&self) -> CUdevice {
        self.inner.raw
    }

    /// The raw primary context (retained for the life of the process).
    pub fn raw_context(&self) -> CUcontext {
        self.inner.ctx.as_raw()
    }

    /// The primary context as cuda-sys's borrowed handle, alive for the
    /// whole process (it is retained and never released), for cuda-sys
    /// calls that keep the context (CUPTI's range profiler,
    /// `cuda_sys::cupti::KernelDurations`).
    pub fn context(&self) -> BorrowedContext<'static> {
        self.inner.ctx
    }

    /// Whether stream-ordered allocation (`cuMemAllocAsync`) is used for this
    /// device's buffers; without it buffers use `cuMemAlloc`/`cuMemFree`.
    pub fn has_memory_pools(&self) -> bool {
        self.inner.pools
    }

    /// Makes this device's primary context current on the calling thread
    /// (`cuCtxSetCurrent`), always: for after foreign code (the runtime API,
    /// another library, the raw driver table) changed the thread's context
    /// behind gpu-sync's back. gpu-sync's own calls skip the call when the
    /// context is already current, which cuda-sys's safe
    /// `result::context::set_current` keeps exact.
    ///
    /// # Errors
    /// A driver error from `cuCtxSetCurrent`.
    pub fn make_current(&self) -> Result<()> {
        bind_ctx(self.inner.drv, self.inner.ctx)
    }

    /// Device name (`cuDeviceGetName`).
    ///
    /// # Errors
    /// A driver error.
    pub fn name(&self) -> Result<String> {
        call("cuDeviceGetName", || cu::device::get_name(self.inner.drv, self.inner.raw))
    }

    /// One attribute (`cuDeviceGetAttribute`).
    ///
    /// # Errors
    /// A driver error (for example an attribute this driver does not know).
    pub fn attribute(&self, a: A) -> Result<i32> {
        attr(self.inner.drv, self.inner.raw, a)
    }

    /// Compute capability `(major, minor)`.
    ///
    /// # Errors
    /// A driver error.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// Total device memory in bytes (`cuDeviceTotalMem`).
    ///
    /// # Errors
    /// A driver error.
    pub fn total_memory(&self) -> Result<u64> {
        let bytes = call("cuDeviceTotalMem", || cu::device::total_mem(self.inner.drv, self.inner.raw))?;
        Ok(bytes as u64)
    }

    /// Free and total memory of the device as the driver sees it
    /// (`cuMemGetInfo`), in bytes.
    ///
    /// # Errors
    /// A driver error.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        self.inner.bind()?;
        // The device's context is current on this thread.
        let (free, total) = call("cuMemGetInfo", || cu::memory::get_info(self.inner.drv))?;
        Ok((free as u64, total as u64))
    }

    /// The stream priority range `(least, greatest)` from
    /// `cuCtxGetStreamPriorityRange`; numerically lower is higher priority.
    pub fn stream_priority_range(&self) -> (i32, i32) {
        self.inner.priority_range
    }

    /// The driver's CUDA version (`cuDriverGetVersion`), e.g. `13000`.
    pub fn driver_version(&self) -> i32 {
        self.inner.drv.version()
    }

    /// Starts recording this device's stream-ordered operations (every
    /// launch, copy, memset, host function, graph replay, wait, allocation
    /// and free submitted through gpu-sync on its streams, or on
    /// [`RecordOptions::streams`](crate::trace::RecordOptions::streams)),
    /// the host ranges of every thread ([`trace::range`](crate::trace::range))
    /// and the memory ledger at each allocation and free, until the
    /// returned [`Recorder`](crate::trace::Recorder) is stopped or dropped.
    /// See [`crate::trace`].
    ///
    /// With [`Timing::Events`](crate::trace::Timing::Events) the recorder
    /// creates its timing events (`cuEventCreate`) and its reference
    /// calibration (an event on a stream of its own, `cuStreamCreate`,
    /// `cuEventRecord`, `cuEventSynchronize`) here.
    ///
    /// # Errors
    /// [`Error::AlreadyRecording`] while another recorder of this device
    /// lives; [`Error::Cupti`] naming the cause for
    /// [`Timing::Cupti`](crate::trace::Timing::Cupti) without a usable
    /// libcupti (the event backend then works); `CUDA_ERROR_NOT_PERMITTED`
    /// inside a host function; a driver error creating the events.
    pub fn record(&self, opts: crate::trace::RecordOptions) -> Result<crate::trace::Recorder> {
        let i = &self.inner;
        let facts = DeviceFacts { ordinal: i.ordinal, raw: i.raw, ctx: i.ctx, drv: i.drv, pools: i.pools };
        i.trace.start(facts, opts)
    }

    pub(crate) fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Whether work on this device can be given access to `peer`'s memory
    /// (`cuDeviceCanAccessPeer`): false for the device itself and for pairs
    /// without a peer path (no NVLink and no PCIe peer support between them).
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::Device;
    /// let (a, b) = (Device::get(0)?, Device::get(1)?); // the simulator has two
    /// assert!(a.can_access_peer(&b)?);
    /// assert!(!a.can_access_peer(&a)?);
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    ///
    /// # Errors
    /// A driver error.
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        let (i, p) = (&self.inner, &peer.inner);
        call("cuDeviceCanAccessPeer", || cu::device::can_access_peer(i.drv, i.raw, p.raw))
    }

    /// The link from this device to `peer` as the driver describes it
    /// (`cuDeviceGetP2PAttribute`, this device as the source).
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::Device;
    /// let (a, b) = (Device::get(0)?, Device::get(1)?);
    /// let link = a.p2p_attributes(&b)?;
    /// assert!(link.access_supported);
    /// assert!(a.p2p_attributes(&a).is_err()); // no link to itself
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::PeerAccess`] for the device itself; a driver error.
    pub fn p2p_attributes(&self, peer: &Device) -> Result<P2PAttributes> {
        use cuda_sys::CUdevice_P2PAttribute as P;
        if self.same(peer) {
            return Err(self.peer_error(peer, "a device is not its own peer"));
        }
        let (i, p) = (&self.inner, &peer.inner);
        let get =
            |a: P| call("cuDeviceGetP2PAttribute", || cu::device::get_p2p_attribute(i.drv, a, i.raw, p.raw));
        Ok(P2PAttributes {
            performance_rank: get(P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
            access_supported: get(P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED)? != 0,
            native_atomics: get(P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
            cuda_array_access: get(P::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED)? != 0,
        })
    }

    /// Whether gpu-sync has opened `peer`'s memory to work on this device
    /// ([`Device::enable_peer_access`], not yet disabled). Always true for
    /// the device itself.
    pub fn peer_access_enabled(&self, peer: &Device) -> bool {
        self.inner.reaches(&peer.inner)
    }

    /// An [`Error::PeerAccess`] naming this device and `peer`.
    pub(crate) fn peer_error(&self, peer: &Device, reason: impl Into<String>) -> Error {
        Error::PeerAccess { device: self.ordinal(), peer: peer.ordinal(), reason: reason.into() }
    }
}

/// The link between two devices as the driver describes it
/// ([`Device::p2p_attributes`], `cuDeviceGetP2PAttribute`).
///
/// ```
/// # gpu_sync::sim::install()?; // the simulator has two devices
/// use gpu_sync::Device;
/// let (a, b) = (Device::get(0)?, Device::get(1)?);
/// let link = a.p2p_attributes(&b)?;
/// if link.access_supported {
///     a.enable_peer_access(&b)?; // work on a may touch b's memory
/// }
/// println!("rank {}, native atomics {}", link.performance_rank, link.native_atomics);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct P2PAttributes {
    /// The link's relative performance among the machine's pairs: lower is
    /// faster (`CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`). Not a count of
    /// NVLink links: ask NVML for those (`gpu-bench p2p` does).
    pub performance_rank: i32,
    /// Whether peer access is possible (`CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED`).
    pub access_supported: bool,
    /// Whether atomics over the link are native
    /// (`CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED`).
    pub native_atomics: bool,
    /// Whether CUDA arrays can be accessed over it
    /// (`CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED`).
    pub cuda_array_access: bool,
}

impl DeviceInner {
    /// Whether work on this device may touch memory of device `owner`: the
    /// same device, or one whose memory peer access opened to this one
    /// ([`DeviceInner::peers`]). The one question every cross-device rule
    /// asks.
    #[inline]
    pub(crate) fn reaches(&self, owner: &DeviceInner) -> bool {
        self.ordinal == owner.ordinal
            || (0..64).contains(&owner.ordinal)
                && self.peers.load(Ordering::Acquire) & (1 << owner.ordinal) != 0
    }

    /// Records that device `owner`'s memory is open to work on this device
    /// (`open`) or no longer is: bit `owner` of [`DeviceInner::peers`].
    /// Only peer access (`memory/peer.rs`) calls it, with its lock held.
    pub(crate) fn set_reach(&self, owner: &DeviceInner, open: bool) {
        if !(0..64).contains(&owner.ordinal) {
            return;
        }
        let bit = 1u64 << owner.ordinal;
        if open {
            self.peers.fetch_or(bit, Ordering::AcqRel);
        } else {
            self.peers.fetch_and(!bit, Ordering::AcqRel);
        }
    }

    /// Makes the driver call `f` (entry point `name`) with this device's
    /// context current: the door for calls that are not stream-ordered
    /// (creating and querying events, loading modules, pinned memory,
    /// graphs), beside the engine's for stream-ordered ones. Inside a host
    /// function nothing is called (`CUDA_ERROR_NOT_PERMITTED`).
    ///
    /// # Errors
    /// The bind's or the call's error.
    #[inline]
    pub(crate) fn call<T>(
        &self,
        name: &'static str,
        f: impl FnOnce() -> cuda_sys::result::Result<T>,
    ) -> Result<T> {
        crate::ffi::refuse(name)?;
        self.bind()?;
        call(name, f)
    }

    /// See [`Device::make_current`].
    ///
    /// Whether the context is already current is asked of cuda-sys's
    /// per-call layer ([`cu::context::is_current_here`]), which every safe
    /// `cuCtxSetCurrent` passes through — also the one a user makes through
    /// the re-exported `gpu_sync::cuda_sys` — so safe code cannot leave the
    /// answer stale (modules and pinned memory would then land in another
    /// context). A thread-local read, as before.
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        crate::ffi::bind(self.drv, self.ctx)
    }

    /// Whether [`DeviceInner::bind`] made this device's context current on
    /// the calling thread, as far as cuda-sys remembers (a debug check of
    /// the paths that skip binding).
    pub(crate) fn is_bound_here(&self) -> bool {
        cuda_sys::result::context::is_current_here(self.drv, self.ctx.as_raw())
    }

    /// Hands out the next ticket: call with the device's book locked (every
    /// submission to a stream of this device holds it), right after the
    /// driver call that submitted the operation returned. The lock orders
    /// every draw, so a load and a store suffice — no read-modify-write on
    /// the hot path. A ticket never names work the driver has not been given,
    /// which is what lets [`Device::synchronize`] read the counter without a
    /// lock: if it sees ticket T, the operations of every ticket up to T
    /// returned from the driver before it looked.
    #[inline]
    pub(crate) fn next_ticket(&self) -> u64 {
        let t = self.ticket.load(Ordering::Relaxed) + 1;
        self.ticket.store(t, Ordering::Release);
        t
    }
}

/// Lets the default memory pool keep freed memory for reuse instead of
/// returning it to the OS at every synchronization (its release threshold
/// raised from 0 to the maximum), as caching allocators do;
/// [`Device::trim_memory_pool`] gives memory back.
fn keep_pool_memory(drv: &'static Driver, dev: CUdevice) -> Result<()> {
    let pool = call("cuDeviceGetDefaultMemPool", || cu::device::get_default_mem_pool(drv, dev))?;
    let attr = cuda_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
    call("cuMemPoolSetAttribute", || cu::mem_pool::set_attribute(pool, attr, u64::MAX))
}

/// Makes `ctx` current on this thread (cuda-sys remembers it, see
/// [`DeviceInner::bind`]).
fn bind_ctx(drv: &'static Driver, ctx: BorrowedContext<'static>) -> Result<()> {
    call("cuCtxSetCurrent", || cu::context::set_current(drv, Some(ctx)))
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({})", self.inner.ordinal)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
    }
}
impl Eq for Device {}

/// Per-device counters of gpu-sync's own allocations.
#[derive(Default)]
pub(crate) struct Ledger {
    pub(crate) allocated: AtomicU64,
    pub(crate) peak: AtomicU64,
    pub(crate) live: AtomicU64,
}

impl Ledger {
    /// Counts an allocation of `bytes`; a memory sample for the device's
    /// recorder, if one lives (`trace`: the device's slot).
    pub fn allocated(&self, bytes: u64, trace: &DeviceTrace) {
        let now = self.allocated.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.peak.fetch_max(now, Ordering::AcqRel);
        self.live.fetch_add(1, Ordering::AcqRel);
        trace.memory(now);
    }

    /// Counts the free of an allocation of `bytes`; a memory sample as for
    /// [`Ledger::allocated`].
    pub fn freed(&self, bytes: u64, trace: &DeviceTrace) {
        let now = self.allocated.fetch_sub(bytes, Ordering::AcqRel).saturating_sub(bytes);
        self.live.fetch_sub(1, Ordering::AcqRel);
        trace.memory(now);
    }
}

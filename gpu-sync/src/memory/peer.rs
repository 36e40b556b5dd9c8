//! Peer access: opening one device's memory to work on another
//! ([`Device::enable_peer_access`]) and closing it again.
//!
//! Two driver grants make a device's memory reachable from another, and
//! gpu-sync's buffers need both kinds: a context's peer access
//! (`cuCtxEnablePeerAccess`, per pair of contexts) opens memory from
//! `cuMemAlloc` (gpu-sync's buffers on devices without memory pools); a
//! pool's access (`cuMemPoolSetAccess`, per pool and device) opens memory
//! from `cuMemAllocAsync`, which is where gpu-sync's buffers come from on
//! every device with memory pools: the device's **default** pool.
//!
//! Both grants are process-wide state of the driver, shared with every other
//! library in the process (PyTorch's `torch.cuda` enables context peer
//! access on the pairs it copies between, cudarc and CuPy on request):
//! enabling here finds what another library already opened and takes it as
//! is (`CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED` is success), and disabling
//! closes only what this module opened. What gpu-sync's own rules read is
//! [`DeviceInner::peers`](crate::device::DeviceInner), set here after both
//! grants succeeded and cleared here before either is taken back.

use crate::device::{Device, DeviceInner};
use crate::error::{Error, Result};
use crate::ffi::call;
use cuda_sys::CUmemAccess_flags as F;
use cuda_sys::result as cu;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// What [`Device::enable_peer_access`] itself opened for one ordered pair
/// (work on `.0` reaching `.1`'s memory), so a disable closes no more.
#[derive(Debug, Clone, Copy, Default)]
struct Opened {
    /// `cuCtxEnablePeerAccess` was ours (not already enabled).
    context: bool,
    /// `cuMemPoolSetAccess` on the owner's default pool was ours.
    pool: bool,
}

/// The pairs gpu-sync opened, under one lock: enabling and disabling are
/// rare, and the lock keeps a pair's driver calls and its bit in step.
fn opened() -> MutexGuard<'static, HashMap<(i32, i32), Opened>> {
    static OPENED: OnceLock<Mutex<HashMap<(i32, i32), Opened>>> = OnceLock::new();
    OPENED.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|p| p.into_inner())
}

/// The driver's code in `e`, if it is a driver error.
fn code(e: &Error) -> Option<cuda_sys::CUresult> {
    match e {
        Error::Driver { error, .. } => Some(error.0),
        _ => None,
    }
}

impl Device {
    /// Opens `peer`'s memory to work on this device: kernels on this
    /// device's streams may then read and write `peer`'s buffers, and peer
    /// copies between the two go over the link (NVLink or PCIe peer-to-peer)
    /// instead of being staged through host memory.
    ///
    /// Two driver grants, both process-wide: the context's peer access
    /// (`cuCtxEnablePeerAccess` with this device's context current and
    /// `peer`'s as the argument), and `peer`'s default memory pool opened
    /// to this device (`cuMemPoolSetAccess`, read-write) — gpu-sync's
    /// buffers come from that pool, which every library's
    /// `cudaMallocAsync` memory in the process shares, so that memory is
    /// opened too. Access is one way: call it on both devices for both.
    ///
    /// Explicit and idempotent: a second call does nothing; a grant another
    /// library already made (`CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED`) is
    /// taken as is, and [`Device::disable_peer_access`] leaves it open.
    ///
    /// ```
    /// # gpu_sync::sim::install()?;
    /// use gpu_sync::Device;
    /// let (a, b) = (Device::get(0)?, Device::get(1)?);
    /// a.enable_peer_access(&b)?; // work on `a` may touch `b`'s memory
    /// a.enable_peer_access(&b)?; // idempotent
    /// assert!(a.peer_access_enabled(&b) && !b.peer_access_enabled(&a));
    /// assert!(a.enable_peer_access(&a).is_err()); // not its own peer
    /// a.disable_peer_access(&b)?;
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::PeerAccess`] naming both devices for the same device twice,
    /// a pair without peer access (`cuDeviceCanAccessPeer` false), and
    /// `CUDA_ERROR_TOO_MANY_PEERS` (this device has as many peers as the
    /// driver allows: disable one first); a driver error otherwise, with
    /// nothing left opened.
    pub fn enable_peer_access(&self, peer: &Device) -> Result<()> {
        self.peer_pair(peer)?;
        if !self.can_access_peer(peer)? {
            return Err(self.peer_error(peer, "the driver reports no peer path (cuDeviceCanAccessPeer is 0)"));
        }
        let mut opened = opened();
        let key = (self.ordinal(), peer.ordinal());
        if opened.contains_key(&key) {
            return Ok(());
        }
        let (me, owner) = (&self.inner, &peer.inner);
        let context = match me.call("cuCtxEnablePeerAccess", || cu::context::enable_peer_access(owner.ctx, 0))
        {
            Ok(()) => true,
            Err(e) if code(&e) == Some(cuda_sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) => false,
            Err(e) if code(&e) == Some(cuda_sys::CUresult::CUDA_ERROR_TOO_MANY_PEERS) => {
                return Err(self.peer_error(
                    peer,
                    format!("{e}: device {} has as many peers as its driver allows", self.ordinal()),
                ));
            }
            Err(e) => return Err(e),
        };
        let pool = match open_pool(me, owner) {
            Ok(p) => p,
            Err(e) => {
                if context {
                    // Undo ours; the pool's error is the one to report.
                    let _ = me.call("cuCtxDisablePeerAccess", || cu::context::disable_peer_access(owner.ctx));
                }
                return Err(e);
            }
        };
        opened.insert(key, Opened { context, pool });
        me.set_reach(owner, true);
        Ok(())
    }

    /// Closes what [`Device::enable_peer_access`] opened of `peer`'s memory
    /// to work on this device; does nothing if it was not enabled.
    ///
    /// gpu-sync stops letting work on this device use `peer`'s memory
    /// first, then waits on the host for this device's work submitted so
    /// far (some of it may read `peer`'s memory: closing the grants under
    /// it would fault it), then takes back the grants it made
    /// (`cuMemPoolSetAccess` with no access, `cuCtxDisablePeerAccess`).
    /// Grants another library made before ours stay.
    ///
    /// # Errors
    /// [`Error::PeerAccess`] for the same device twice; the wait's error
    /// ([`Error::Capturing`] on a capturing thread: nothing is closed); a
    /// driver error.
    pub fn disable_peer_access(&self, peer: &Device) -> Result<()> {
        self.peer_pair(peer)?;
        let mut opened = opened();
        let key = (self.ordinal(), peer.ordinal());
        let Some(was) = opened.get(&key).copied() else { return Ok(()) };
        let (me, owner) = (&self.inner, &peer.inner);
        me.set_reach(owner, false);
        if let Err(e) = self.synchronize() {
            me.set_reach(owner, true);
            return Err(e);
        }
        opened.remove(&key);
        if was.pool {
            let pool =
                call("cuDeviceGetDefaultMemPool", || cu::device::get_default_mem_pool(owner.drv, owner.raw))?;
            let none = F::CU_MEM_ACCESS_FLAGS_PROT_NONE;
            call("cuMemPoolSetAccess", || cu::mem_pool::set_access(pool, me.ordinal, none))?;
        }
        if was.context {
            match me.call("cuCtxDisablePeerAccess", || cu::context::disable_peer_access(owner.ctx)) {
                Err(e) if code(&e) != Some(cuda_sys::CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) => {
                    return Err(e);
                }
                // Not enabled: someone else in the process took it back.
                _ => {}
            }
        }
        Ok(())
    }

    /// `Ok` for two distinct devices whose ordinals the peer bit set holds.
    fn peer_pair(&self, peer: &Device) -> Result<()> {
        if self.same(peer) {
            return Err(self.peer_error(peer, "a device is not its own peer"));
        }
        if !(0..64).contains(&self.ordinal()) || !(0..64).contains(&peer.ordinal()) {
            return Err(self.peer_error(peer, "gpu-sync tracks peer access for devices 0 to 63 only"));
        }
        Ok(())
    }
}

/// Opens `owner`'s default pool to `me` unless it is open already (another
/// library did it); returns whether this call opened it. Nothing to open
/// without memory pools (gpu-sync's buffers then come from `cuMemAlloc`,
/// which the context's peer access covers).
fn open_pool(me: &DeviceInner, owner: &DeviceInner) -> Result<bool> {
    if !owner.pools {
        return Ok(false);
    }
    let pool = call("cuDeviceGetDefaultMemPool", || cu::device::get_default_mem_pool(owner.drv, owner.raw))?;
    let now = call("cuMemPoolGetAccess", || cu::mem_pool::get_access(pool, me.ordinal))?;
    if now == F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE {
        return Ok(false);
    }
    let rw = F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    call("cuMemPoolSetAccess", || cu::mem_pool::set_access(pool, me.ordinal, rw))?;
    Ok(true)
}

//! Peer access: the P2P attributes of a device pair, a context's peer
//! access (enabled and disabled per pair of contexts and session), and a
//! default pool's access per device. What they open is enforced where work
//! runs (`crate::peer`).
#![allow(non_snake_case)]

use super::device::pools_supported;
use super::{api, id, need, put};
use crate::peer::MAX_PEERS;
use crate::result::{
    CUresult, INVALID_CONTEXT, INVALID_DEVICE, INVALID_HANDLE, INVALID_VALUE, PEER_ACCESS_ALREADY_ENABLED,
    PEER_ACCESS_NOT_ENABLED, Res, TOO_MANY_PEERS,
};
use crate::state::{Caller, State};
use cuda_sys::{
    CUcontext, CUdevice, CUdevice_P2PAttribute as P2P, CUmemAccess_flags as F, CUmemAccessDesc,
    CUmemLocation, CUmemLocationType, CUmemoryPool,
};
use std::ffi::{c_int, c_uint};

/// `cuDeviceGetP2PAttribute`: every pair of distinct simulated devices is
/// linked alike (rank 0, access and native atomics supported, CUDA arrays
/// accessible); the same device twice is `CUDA_ERROR_INVALID_DEVICE`.
pub(super) unsafe extern "C" fn cuDeviceGetP2PAttribute(
    value: *mut c_int,
    attrib: P2P,
    srcDevice: CUdevice,
    dstDevice: CUdevice,
) -> CUresult {
    api("cuDeviceGetP2PAttribute", |st, _| {
        need(value)?;
        st.device(srcDevice)?;
        st.device(dstDevice)?;
        if srcDevice == dstDevice {
            return Err(INVALID_DEVICE);
        }
        let v = match attrib {
            P2P::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK => 0,
            P2P::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED
            | P2P::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
            | P2P::CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED => 1,
            P2P::CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED => 0,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: output slot from the caller.
        unsafe { put(value, v) }
    })
}

/// The current device and the device of `peer` for a peer-access call.
fn pair(st: &State, caller: &Caller, peer: CUcontext) -> Res<(i32, i32)> {
    let me = st.current_device(caller)?;
    let owner = st.ctx_device(id(peer)).ok_or(INVALID_CONTEXT)?;
    if owner == me {
        return Err(INVALID_DEVICE);
    }
    Ok((me, owner))
}

/// `cuCtxEnablePeerAccess`: once per (current, peer) pair and session
/// (`CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED` after), at most
/// [`MAX_PEERS`] peers per context (`CUDA_ERROR_TOO_MANY_PEERS`).
pub(super) unsafe extern "C" fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint) -> CUresult {
    api("cuCtxEnablePeerAccess", |st, caller| {
        if Flags != 0 {
            return Err(INVALID_VALUE);
        }
        let (me, owner) = pair(st, caller, peerContext)?;
        let peers = &mut st.session_mut(caller.session).peers;
        if peers.contains(&(me, owner)) {
            return Err(PEER_ACCESS_ALREADY_ENABLED);
        }
        if peers.iter().filter(|(d, _)| *d == me).count() >= MAX_PEERS {
            return Err(TOO_MANY_PEERS);
        }
        peers.insert((me, owner));
        Ok(())
    })
}

/// `cuCtxDisablePeerAccess`: `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED` unless
/// enabled.
pub(super) unsafe extern "C" fn cuCtxDisablePeerAccess(peerContext: CUcontext) -> CUresult {
    api("cuCtxDisablePeerAccess", |st, caller| {
        let (me, owner) = pair(st, caller, peerContext)?;
        if st.session_mut(caller.session).peers.remove(&(me, owner)) {
            Ok(())
        } else {
            Err(PEER_ACCESS_NOT_ENABLED)
        }
    })
}

/// The device a location names (only device locations are modelled).
fn located(st: &State, loc: &CUmemLocation) -> Res<i32> {
    if loc.type_ != CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE {
        return Err(INVALID_VALUE);
    }
    st.device(loc.id).map_err(|_| INVALID_DEVICE)
}

/// The device owning pool `h`, pools supported.
fn pool_owner(st: &State, caller: &Caller, h: CUmemoryPool) -> Res<i32> {
    let owner = st.pool_device(id(h)).ok_or(INVALID_HANDLE)?;
    pools_supported(st, caller.session, owner)?;
    Ok(owner)
}

/// `cuMemPoolSetAccess`: each descriptor opens (`PROT_READWRITE`) or closes
/// (`PROT_NONE`) the pool to a device; `PROT_READ` is refused
/// (`CUDA_ERROR_INVALID_VALUE`: device pools are read-write or nothing), as
/// is taking the owner's own access away (`CUDA_ERROR_INVALID_DEVICE`).
/// Every descriptor is checked before any applies.
pub(super) unsafe extern "C" fn cuMemPoolSetAccess(
    pool: CUmemoryPool,
    map: *const CUmemAccessDesc,
    count: usize,
) -> CUresult {
    api("cuMemPoolSetAccess", |st, caller| {
        let owner = pool_owner(st, caller, pool)?;
        if count == 0 {
            return Ok(());
        }
        need(map)?;
        // SAFETY: the caller passes `count` descriptors at `map` (CUDA's
        // contract), non-null (checked).
        let descs = unsafe { std::slice::from_raw_parts(map, count) };
        let mut change = Vec::with_capacity(count);
        for d in descs {
            let dev = located(st, &d.location)?;
            let open = match d.flags {
                F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE => true,
                F::CU_MEM_ACCESS_FLAGS_PROT_NONE => false,
                _ => return Err(INVALID_VALUE),
            };
            if dev == owner && !open {
                return Err(INVALID_DEVICE);
            }
            change.push((dev, open));
        }
        let access = &mut st.session_mut(caller.session).pool_access;
        for (dev, open) in change.into_iter().filter(|(d, _)| *d != owner) {
            if open {
                access.insert((dev, owner));
            } else {
                access.remove(&(dev, owner));
            }
        }
        Ok(())
    })
}

/// `cuMemPoolGetAccess`: `PROT_READWRITE` for the owner and for devices
/// the pool was opened to, else `PROT_NONE`.
pub(super) unsafe extern "C" fn cuMemPoolGetAccess(
    flags: *mut F,
    memPool: CUmemoryPool,
    location: *mut CUmemLocation,
) -> CUresult {
    api("cuMemPoolGetAccess", |st, caller| {
        need(flags)?;
        need(location)?;
        let owner = pool_owner(st, caller, memPool)?;
        // SAFETY: non-null (checked), the caller's location to read.
        let dev = located(st, unsafe { &*location })?;
        let open = dev == owner || st.session_mut(caller.session).pool_access.contains(&(dev, owner));
        let f = if open { F::CU_MEM_ACCESS_FLAGS_PROT_READWRITE } else { F::CU_MEM_ACCESS_FLAGS_PROT_NONE };
        // SAFETY: output slot from the caller.
        unsafe { put(flags, f) }
    })
}

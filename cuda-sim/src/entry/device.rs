//! Initialization, version and device queries.
#![allow(non_snake_case)]

use super::{api, handle, need, put};
use crate::device;
use crate::result::{CUresult, INVALID_VALUE, NO_DEVICE, NOT_SUPPORTED, Res};
use crate::state::State;
use cuda_sys::{CUdevice, CUdevice_attribute, CUmemoryPool, CUuuid};
use std::ffi::{c_char, c_int, c_uint};

/// The value of `attr` on `dev` as seen by `session` (its overrides first).
pub(crate) fn effective_attribute(st: &State, session: u64, dev: i32, attr: CUdevice_attribute) -> Res<i32> {
    if let Some(v) = st.sessions.get(&session).and_then(|s| s.attrs.get(&(dev, attr.0))) {
        return Ok(*v);
    }
    device::attribute(attr, dev).ok_or(INVALID_VALUE)
}

/// Whether `session` sees memory pools on `dev`.
pub(crate) fn pools_supported(st: &State, session: u64, dev: i32) -> Res {
    let a = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
    if effective_attribute(st, session, dev, a)? == 0 { Err(NOT_SUPPORTED) } else { Ok(()) }
}

/// Copies `s` NUL-terminated into a C buffer of `len` bytes, truncating.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes.
unsafe fn put_str(dst: *mut c_char, len: c_int, s: &str) -> Res {
    need(dst)?;
    let len = usize::try_from(len).ok().filter(|&l| l > 0).ok_or(INVALID_VALUE)?;
    let n = s.len().min(len - 1);
    // SAFETY: `dst` is valid for `len > n` bytes (caller's obligation); the
    // source is a Rust string, disjoint from the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), dst, n);
        dst.add(n).write(0);
    }
    Ok(())
}

/// `cuInit`: flags must be 0; creates the configured devices.
pub(super) unsafe extern "C" fn cuInit(Flags: c_uint) -> CUresult {
    api("cuInit", |st, _| {
        if Flags != 0 {
            return Err(INVALID_VALUE);
        }
        st.init_devices();
        if st.devices.is_empty() {
            return Err(NO_DEVICE);
        }
        Ok(())
    })
}

/// `cuDriverGetVersion`: the configured version (works before `cuInit`).
pub(super) unsafe extern "C" fn cuDriverGetVersion(driverVersion: *mut c_int) -> CUresult {
    api("cuDriverGetVersion", |st, _| {
        let v = if st.initialized { st.config.version } else { crate::config::current_config().version };
        // SAFETY: output slot from the caller.
        unsafe { put(driverVersion, v) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    api("cuDeviceGet", |st, _| {
        need(device)?;
        let d = st.device(ordinal)?;
        // SAFETY: output slot from the caller.
        unsafe { put(device, d) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    // SAFETY: output slot from the caller.
    api("cuDeviceGetCount", |st, _| unsafe { put(count, st.device_count()) })
}

pub(super) unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    api("cuDeviceGetName", |st, _| {
        st.device(dev)?;
        // SAFETY: `name` is the caller's buffer of `len` bytes.
        unsafe { put_str(name, len, device::NAME) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: CUdevice_attribute,
    dev: CUdevice,
) -> CUresult {
    api("cuDeviceGetAttribute", |st, caller| {
        need(pi)?;
        st.device(dev)?;
        let v = effective_attribute(st, caller.session, dev, attrib)?;
        // SAFETY: output slot from the caller.
        unsafe { put(pi, v) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceTotalMem(bytes: *mut usize, dev: CUdevice) -> CUresult {
    api("cuDeviceTotalMem", |st, _| {
        need(bytes)?;
        st.device(dev)?;
        let total = usize::try_from(st.config.memory_per_device).unwrap_or(usize::MAX);
        // SAFETY: output slot from the caller.
        unsafe { put(bytes, total) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    api("cuDeviceGetUuid", |st, _| {
        need(uuid)?;
        st.device(dev)?;
        let bytes = device::uuid(dev).map(|b| b as c_char);
        // SAFETY: output slot from the caller.
        unsafe { put(uuid, CUuuid { bytes }) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGetPCIBusId(
    pciBusId: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    api("cuDeviceGetPCIBusId", |st, _| {
        st.device(dev)?;
        // SAFETY: `pciBusId` is the caller's buffer of `len` bytes.
        unsafe { put_str(pciBusId, len, &device::pci_bus_id(dev)) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceCanAccessPeer(
    canAccessPeer: *mut c_int,
    dev: CUdevice,
    peerDev: CUdevice,
) -> CUresult {
    api("cuDeviceCanAccessPeer", |st, _| {
        need(canAccessPeer)?;
        st.device(dev)?;
        st.device(peerDev)?;
        // SAFETY: output slot from the caller.
        unsafe { put(canAccessPeer, c_int::from(dev != peerDev)) }
    })
}

pub(super) unsafe extern "C" fn cuDeviceGetDefaultMemPool(
    pool_out: *mut CUmemoryPool,
    dev: CUdevice,
) -> CUresult {
    api("cuDeviceGetDefaultMemPool", |st, caller| {
        need(pool_out)?;
        st.device(dev)?;
        pools_supported(st, caller.session, dev)?;
        let pool = st.devices.get(dev as usize).map_or(0, |d| d.pool);
        // SAFETY: output slot from the caller.
        unsafe { put(pool_out, handle(pool)) }
    })
}

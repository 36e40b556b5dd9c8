//! Devices ([Device Management][dev]; peer queries from [Peer Context Memory
//! Access][peer]).
//!
//! A `CUdevice` is an ordinal-like integer, not a pointer: any value is safe
//! to pass (a bad one is `CUDA_ERROR_INVALID_DEVICE`).
//!
//! [dev]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html
//! [peer]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html

use super::Result;
use crate::handle::{Borrowed, BorrowedMemPool};
use crate::{CUdevice, CUdevice_P2PAttribute, CUdevice_attribute, CUmemoryPool, CUuuid, Driver};
use std::ffi::c_char;

/// The device of ordinal `ordinal` (`cuDeviceGet`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_DEVICE` for an ordinal the driver lacks;
/// `Unsupported` without the entry point.
pub fn get(drv: &Driver, ordinal: i32) -> Result<CUdevice> {
    let mut d: CUdevice = 0;
    // SAFETY: writes one device through a valid pointer.
    unsafe { call!(drv, cuDeviceGet(&mut d, ordinal)) }?;
    Ok(d)
}

/// Number of devices (`cuDeviceGetCount`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_count(drv: &Driver) -> Result<i32> {
    let mut n = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { call!(drv, cuDeviceGetCount(&mut n)) }?;
    Ok(n)
}

/// The device's name (`cuDeviceGetName`, into a 256-byte buffer).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_name(drv: &Driver, dev: CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into
    // the buffer of that length.
    unsafe { call!(drv, cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev)) }?;
    Ok(c_string(&buf))
}

/// One attribute of the device (`cuDeviceGetAttribute`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_VALUE` for an attribute the driver does not know;
/// `Unsupported` without the entry point.
pub fn get_attribute(drv: &Driver, attr: CUdevice_attribute, dev: CUdevice) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { call!(drv, cuDeviceGetAttribute(&mut v, attr, dev)) }?;
    Ok(v)
}

/// The device's memory in bytes (`cuDeviceTotalMem`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn total_mem(drv: &Driver, dev: CUdevice) -> Result<usize> {
    let mut n = 0usize;
    // SAFETY: writes one size_t through a valid pointer.
    unsafe { call!(drv, cuDeviceTotalMem(&mut n, dev)) }?;
    Ok(n)
}

/// The device's UUID (`cuDeviceGetUuid`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_uuid(drv: &Driver, dev: CUdevice) -> Result<CUuuid> {
    let mut u = CUuuid::default();
    // SAFETY: writes one CUuuid through a valid pointer.
    unsafe { call!(drv, cuDeviceGetUuid(&mut u, dev)) }?;
    Ok(u)
}

/// The device's PCI bus id, `"0000:28:00.0"` (`cuDeviceGetPCIBusId`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_pci_bus_id(drv: &Driver, dev: CUdevice) -> Result<String> {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated.
    unsafe { call!(drv, cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev)) }?;
    Ok(c_string(&buf))
}

/// Whether `dev` can access `peer`'s memory (`cuDeviceCanAccessPeer`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn can_access_peer(drv: &Driver, dev: CUdevice, peer: CUdevice) -> Result<bool> {
    let mut can = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { call!(drv, cuDeviceCanAccessPeer(&mut can, dev, peer)) }?;
    Ok(can != 0)
}

/// One attribute of the link from `src` to `dst`
/// (`cuDeviceGetP2PAttribute`): the performance rank (lower is faster),
/// whether access is supported, whether native atomics are, whether CUDA
/// arrays can be accessed.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_DEVICE` (same device or a bad ordinal), the
/// driver's code; `Unsupported` without the entry point.
pub fn get_p2p_attribute(
    drv: &Driver,
    attr: CUdevice_P2PAttribute,
    src: CUdevice,
    dst: CUdevice,
) -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int through a valid pointer; any attribute value is
    // safe to pass (an unknown one is `CUDA_ERROR_INVALID_VALUE`).
    unsafe { call!(drv, cuDeviceGetP2PAttribute(&mut v, attr, src, dst)) }?;
    Ok(v)
}

/// The device's default memory pool (`cuDeviceGetDefaultMemPool`), alive
/// as long as the driver.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__DEVICE.html)
///
/// # Errors
/// `CUDA_ERROR_NOT_SUPPORTED` on a device without memory pools;
/// `Unsupported` without the entry point (before CUDA 11.2).
pub fn get_default_mem_pool(drv: &'static Driver, dev: CUdevice) -> Result<BorrowedMemPool<'static>> {
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // SAFETY: writes one pool handle through a valid pointer.
    unsafe { call!(drv, cuDeviceGetDefaultMemPool(&mut pool, dev)) }?;
    super::non_null("cuDeviceGetDefaultMemPool", pool)?;
    // SAFETY: a device's default pool is never destroyed while the driver
    // is loaded, and `drv` (which holds the library) is `'static`; pools are
    // internally synchronized.
    Ok(unsafe { Borrowed::borrow_raw(drv, pool) })
}

/// The text before the first NUL of `buf` (all of it if none).
fn c_string(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

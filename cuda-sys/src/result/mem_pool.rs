//! Memory pools ([Stream Ordered Memory Allocator][async]).
//!
//! [async]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html

use super::Result;
use crate::CUmemPool_attribute as A;
use crate::error::DriverError;
use crate::handle::{AsBorrowed, kind};
use std::ffi::c_void;

fn c_void_slot<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

/// How the driver stores an attribute's value: `int` or `cuuint64_t`.
enum Slot {
    Int,
    U64,
}

fn slot(call: &'static str, attr: A) -> Result<Slot> {
    match attr {
        A::CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES
        | A::CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC
        | A::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES => Ok(Slot::Int),
        A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        | A::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
        | A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
        | A::CU_MEMPOOL_ATTR_USED_MEM_CURRENT
        | A::CU_MEMPOOL_ATTR_USED_MEM_HIGH => Ok(Slot::U64),
        _ => {
            Err(DriverError::Refused { call, reason: "a memory pool attribute whose value type is unknown" })
        }
    }
}

/// One attribute of the pool (`cuMemPoolGetAttribute`), widened to `u64`
/// (the `int` attributes are booleans). The value's C type is chosen from
/// the attribute, so the driver always writes into a slot of the right size.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// The driver's code; `Refused` for an attribute the 13.0 headers do not
/// type; `Unsupported` before CUDA 11.2.
pub fn get_attribute(pool: impl AsBorrowed<kind::MemPoolKind>, attr: A) -> Result<u64> {
    let p = pool.as_borrowed();
    match slot("cuMemPoolGetAttribute", attr)? {
        Slot::Int => {
            let mut v: i32 = 0;
            // SAFETY: a live pool; the driver writes an `int` for this
            // attribute into a valid slot of that type.
            unsafe { call!(p.driver(), cuMemPoolGetAttribute(p.as_raw(), attr, c_void_slot(&mut v))) }?;
            Ok(u64::from(v != 0))
        }
        Slot::U64 => {
            let mut v: u64 = 0;
            // SAFETY: as above, a `cuuint64_t` slot.
            unsafe { call!(p.driver(), cuMemPoolGetAttribute(p.as_raw(), attr, c_void_slot(&mut v))) }?;
            Ok(v)
        }
    }
}

/// Sets one attribute of the pool (`cuMemPoolSetAttribute`); `int`
/// attributes take `value != 0`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// The driver's code (`CUDA_ERROR_INVALID_VALUE` for a read-only
/// attribute); `Refused` for an attribute the 13.0 headers do not type;
/// `Unsupported` before CUDA 11.2.
pub fn set_attribute(pool: impl AsBorrowed<kind::MemPoolKind>, attr: A, value: u64) -> Result<()> {
    let p = pool.as_borrowed();
    match slot("cuMemPoolSetAttribute", attr)? {
        Slot::Int => {
            let mut v = i32::from(value != 0);
            // SAFETY: a live pool; the driver reads an `int` for this
            // attribute from a valid slot of that type.
            unsafe { call!(p.driver(), cuMemPoolSetAttribute(p.as_raw(), attr, c_void_slot(&mut v))) }
        }
        Slot::U64 => {
            let mut v = value;
            // SAFETY: as above, a `cuuint64_t` slot.
            unsafe { call!(p.driver(), cuMemPoolSetAttribute(p.as_raw(), attr, c_void_slot(&mut v))) }
        }
    }
}

/// Releases pool memory back to the OS, keeping at least `keep` bytes
/// reserved (`cuMemPoolTrimTo`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// The driver's code; `Unsupported` before CUDA 11.2.
pub fn trim_to(pool: impl AsBorrowed<kind::MemPoolKind>, keep: usize) -> Result<()> {
    let p = pool.as_borrowed();
    // SAFETY: a live pool.
    unsafe { call!(p.driver(), cuMemPoolTrimTo(p.as_raw(), keep)) }
}

/// The location of device `ordinal` (`CU_MEM_LOCATION_TYPE_DEVICE`).
fn device_location(ordinal: i32) -> crate::CUmemLocation {
    crate::CUmemLocation { type_: crate::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: ordinal }
}

/// Sets how work on device `ordinal` may access the pool's memory
/// (`cuMemPoolSetAccess` with one descriptor): `PROT_READWRITE` opens it,
/// `PROT_NONE` closes it. The pool's own device always has access.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// `CUDA_ERROR_INVALID_DEVICE` for the pool's own device (which cannot
/// lose access) or a device without peer access to it, the driver's code;
/// `Unsupported` before CUDA 11.2.
pub fn set_access(
    pool: impl AsBorrowed<kind::MemPoolKind>,
    ordinal: i32,
    flags: crate::CUmemAccess_flags,
) -> Result<()> {
    let p = pool.as_borrowed();
    let desc = crate::CUmemAccessDesc { location: device_location(ordinal), flags };
    // SAFETY: a live pool; the driver reads one descriptor from a valid
    // pointer.
    unsafe { call!(p.driver(), cuMemPoolSetAccess(p.as_raw(), &desc, 1)) }
}

/// How work on device `ordinal` may access the pool's memory
/// (`cuMemPoolGetAccess`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html)
///
/// # Errors
/// The driver's code; `Unsupported` before CUDA 11.2.
pub fn get_access(
    pool: impl AsBorrowed<kind::MemPoolKind>,
    ordinal: i32,
) -> Result<crate::CUmemAccess_flags> {
    let p = pool.as_borrowed();
    let mut loc = device_location(ordinal);
    let mut flags = crate::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
    // SAFETY: a live pool; the driver reads the location and writes one
    // flags value, both through valid pointers.
    unsafe { call!(p.driver(), cuMemPoolGetAccess(&mut flags, p.as_raw(), &mut loc)) }?;
    Ok(flags)
}

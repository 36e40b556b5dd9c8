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

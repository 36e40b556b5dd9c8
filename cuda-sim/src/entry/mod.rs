//! The driver table: one `unsafe extern "C"` function per entry point of
//! [`cuda_sys::Driver`], each with the exact `PFN_*` signature, named as the
//! entry point. [`table`] is expanded from cuda-sys's one entry-point list
//! ([`cuda_sys::for_each_entry_point`]): an entry point the simulator lacks
//! is a compile error here, not a silent `None`.
//!
//! This module holds `unsafe` code because C callers hand the simulator raw
//! pointers (output slots, host buffers, kernel parameters); each function
//! checks them for null and documents what else it relies on.
#![allow(unsafe_code)]

mod context;
mod copy;
mod device;
mod errors;
mod event;
mod graph;
mod memory;
mod module;
mod peer;
mod stream;

use crate::result::{CUresult, INVALID_VALUE, NOT_INITIALIZED, Res, SUCCESS, is_sticky};
use crate::scheduler::{DEADLOCK, PEER_PENDING};
use crate::session;
use crate::state::{self, Caller, State};
use cuda_sys::{Driver, InstallError};

/// What [`Driver::origin`] says for the simulator's table.
pub const ORIGIN: &str = "cuda-sim";

/// Entry points that work before `cuInit`.
const BEFORE_INIT: [&str; 2] = ["cuInit", "cuDriverGetVersion"];

/// Runs the body of entry point `name` for the calling thread's session.
///
/// The common prologue: refuse calls from inside a host function
/// (`CUDA_ERROR_NOT_PERMITTED`, never a deadlock), log the call, return the
/// session's sticky error if it is poisoned, apply the fault plan, require
/// `cuInit`. A body that waits for a collective part another thread has
/// not issued yet ([`PEER_PENDING`]) is run again, with the lock released
/// in between, for up to [`crate::nccl::PEER_TIMEOUT`]; then the wait
/// fails with [`DEADLOCK`] and a report.
pub(crate) fn api(name: &'static str, mut body: impl FnMut(&mut State, &Caller) -> Res) -> CUresult {
    let session = session::current();
    let mut first = true;
    let deadline = std::time::Instant::now() + crate::nccl::PEER_TIMEOUT;
    loop {
        let mut guard = match state::enter() {
            Ok(g) => g,
            Err(refused) => return refused.into(),
        };
        let st = &mut *guard;
        let s = st.session_mut(session);
        if first {
            let (n, k) = s.count_call(name);
            if let Some(code) = s.sticky {
                return code;
            }
            if let Some(code) = s.faults.decide(n, name, k).filter(|c| *c != SUCCESS) {
                log::info!("cuda-sim: fault injection fails {name} (call {n}) with {code:?}");
                if is_sticky(code) {
                    s.poison(code);
                }
                return code;
            }
            if !st.initialized && !BEFORE_INIT.contains(&name) {
                return NOT_INITIALIZED;
            }
            first = false;
        } else if let Some(code) = s.sticky {
            return code;
        }
        let caller = Caller { session, thread: std::thread::current().id(), ctx: state::current_ctx() };
        let r = body(st, &caller);
        // No clock copy outlives the body: the one safe moment to sweep.
        crate::retire::maybe_sweep(st);
        match r {
            Ok(()) => return SUCCESS,
            Err(PEER_PENDING) if std::time::Instant::now() < deadline => {
                // A host wait for a collective whose part another thread
                // has yet to issue: wait for that thread, lock released.
                drop(guard);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Err(PEER_PENDING) => {
                let what = format!(
                    "{name}: a collective's part was never issued by its rank within {:?} (a peer that never \
                     came)",
                    crate::nccl::PEER_TIMEOUT
                );
                crate::nccl::report_deadlock(st, session, &what, &[]);
                return DEADLOCK;
            }
            Err(code) => return code,
        }
    }
}

/// Fails with `CUDA_ERROR_INVALID_VALUE` if `p` is null.
pub(crate) fn need<T>(p: *const T) -> Res {
    if p.is_null() { Err(INVALID_VALUE) } else { Ok(()) }
}

/// Writes `v` through `p` (checked non-null).
///
/// # Safety
/// `p` must be null or valid for a write of `T` (the C caller's output slot).
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> Res {
    need(p)?;
    // SAFETY: `p` is non-null, and valid for a write by the caller's
    // obligation (the CUDA contract for output parameters).
    unsafe { p.write(v) };
    Ok(())
}

/// A handle's numeric value.
pub(crate) fn id<T>(p: *mut T) -> u64 {
    p.addr() as u64
}

/// A handle value as an opaque pointer (never dereferenced).
pub(crate) fn handle<T>(id: u64) -> *mut T {
    std::ptr::without_provenance_mut(id as usize)
}

/// Every entry point's function, by its driver name, for [`table`].
mod all {
    pub(super) use super::context::*;
    pub(super) use super::copy::*;
    pub(super) use super::device::*;
    pub(super) use super::errors::*;
    pub(super) use super::event::*;
    pub(super) use super::graph::*;
    pub(super) use super::memory::*;
    pub(super) use super::module::*;
    pub(super) use super::peer::*;
    pub(super) use super::stream::*;
}

/// Fills every field of the table with the simulator's function of that name.
macro_rules! sim_table {
    ($($name:ident : $pfn:ident = $since:literal, $req:literal;)*) => {
        fn fill(d: &mut Driver) {
            $( d.$name = Some(all::$name); )*
        }
    };
}
cuda_sys::for_each_entry_point!(sim_table);

/// Builds the simulator's driver table: every entry point `Some`, version
/// from the [`Config`](crate::Config), origin `"cuda-sim"`.
pub fn table() -> Driver {
    let version = crate::config::current_config().version;
    let mut d = Driver::empty(version, ORIGIN);
    fill(&mut d);
    d
}

/// Installs the simulator as the process-wide driver
/// ([`cuda_sys::install`]); calling it again returns the table already
/// installed when that is the simulator's.
///
/// # Errors
/// [`InstallError`] when another driver (libcuda) is already loaded or
/// installed.
pub fn install() -> Result<&'static Driver, InstallError> {
    // The simulator's CUPTI and NCCL come with its driver (a libcupti or
    // libnccl loaded before keeps its place, and sees no simulated work).
    crate::cupti::install();
    crate::nccl::install();
    if let Some(d) = cuda_sys::installed().filter(|d| d.origin() == ORIGIN) {
        return Ok(d);
    }
    // SAFETY: every entry of `table()` implements the CUDA Driver API
    // contract for its function (memory it hands out is owned and valid
    // until freed, copies stay within their arguments); that is the point
    // of this crate, and what its tests check.
    match unsafe { cuda_sys::install(table()) } {
        Ok(d) => Ok(d),
        Err(e) => match cuda_sys::installed() {
            Some(d) if d.origin() == ORIGIN => Ok(d),
            _ => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_is_filled() {
        let d = table();
        assert_eq!(d.missing(), Vec::<&str>::new());
        assert_eq!(d.origin(), ORIGIN);
    }
}

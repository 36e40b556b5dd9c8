//! Raw driver calls for tests that plant synchronization bugs behind
//! gpu-sync's back (the race oracle must catch them) or check the oracle's
//! model laws directly. Each method is one driver call whose result must be
//! `CUDA_SUCCESS`; the test fails with the call's name otherwise.
//!
//! Only over cuda-sim ([`Raw::new`] refuses any other table): the simulator
//! checks every handle and device address it is given and answers a bad one
//! with an error, so these safe functions cannot cause undefined behaviour
//! with any handle — which is why clippy's `not_unsafe_ptr_arg_deref` is
//! allowed here. Host pointers are only those `host_alloc` returned.
#![allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]

use cuda_sys::{CUdeviceptr, CUevent, CUresult, CUstream, Driver};
use std::ffi::c_void;

/// The installed driver table, for raw calls.
#[derive(Clone, Copy)]
pub struct Raw {
    d: &'static Driver,
    lenient: bool,
}

fn ok(call: &str, r: CUresult) {
    assert_eq!(r, CUresult::CUDA_SUCCESS, "{call} failed: {}", cuda_sys::CuError(r));
}

/// Checks a result, unless the caller is lenient (after a planted bug a
/// fault may have poisoned the context, and every later call fails).
macro_rules! check {
    ($self:ident, $call:literal, $r:expr) => {{
        let r = $r;
        if !$self.lenient {
            ok($call, r);
        }
    }};
}

macro_rules! entry {
    ($d:expr, $name:ident) => {
        match $d.$name {
            Some(f) => f,
            None => panic!(concat!("the driver lacks ", stringify!($name))),
        }
    };
}

impl Raw {
    /// The installed table, which must be cuda-sim's; the calling thread
    /// must have a current context (get a `gpu_sync::Device` and call
    /// `make_current` first).
    pub fn new() -> Raw {
        match cuda_sys::installed() {
            Some(d) if d.origin() == cuda_sim::ORIGIN => Raw { d, lenient: false },
            Some(d) => panic!("raw test calls run only on cuda-sim, not {}", d.origin()),
            None => panic!("no driver installed"),
        }
    }

    /// The same table, ignoring failures (for code after a planted bug).
    pub fn lenient(self) -> Raw {
        Raw { lenient: true, ..self }
    }

    /// `cuStreamCreate`-like: a non-blocking stream at the default priority.
    pub fn stream(&self) -> CUstream {
        let mut s: CUstream = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer; a context is
        // current (caller's precondition).
        check!(self, "cuStreamCreateWithPriority", unsafe {
            entry!(self.d, cuStreamCreateWithPriority)(&mut s, 1, 0)
        });
        s
    }

    /// `cuStreamDestroy`.
    pub fn destroy_stream(&self, s: CUstream) {
        // SAFETY: `s` came from `stream` and is destroyed once.
        check!(self, "cuStreamDestroy", unsafe { entry!(self.d, cuStreamDestroy)(s) });
    }

    /// `cuStreamSynchronize`.
    pub fn sync(&self, s: CUstream) {
        // SAFETY: a live stream handle.
        check!(self, "cuStreamSynchronize", unsafe { entry!(self.d, cuStreamSynchronize)(s) });
    }

    /// `cuEventCreate` with `CU_EVENT_DISABLE_TIMING`.
    pub fn event(&self) -> CUevent {
        let mut e: CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle through a valid pointer.
        check!(self, "cuEventCreate", unsafe { entry!(self.d, cuEventCreate)(&mut e, 2) });
        e
    }

    /// `cuEventDestroy`.
    pub fn destroy_event(&self, e: CUevent) {
        // SAFETY: `e` came from `event` and is destroyed once.
        check!(self, "cuEventDestroy", unsafe { entry!(self.d, cuEventDestroy)(e) });
    }

    /// `cuEventRecord`.
    pub fn record(&self, e: CUevent, s: CUstream) {
        // SAFETY: live handles.
        check!(self, "cuEventRecord", unsafe { entry!(self.d, cuEventRecord)(e, s) });
    }

    /// `cuStreamWaitEvent`.
    pub fn wait(&self, s: CUstream, e: CUevent) {
        // SAFETY: live handles; flags 0.
        check!(self, "cuStreamWaitEvent", unsafe { entry!(self.d, cuStreamWaitEvent)(s, e, 0) });
    }

    /// `cuMemAllocAsync`.
    pub fn alloc(&self, bytes: usize, s: CUstream) -> CUdeviceptr {
        let mut p: CUdeviceptr = 0;
        // SAFETY: writes one device pointer through a valid pointer.
        check!(self, "cuMemAllocAsync", unsafe { entry!(self.d, cuMemAllocAsync)(&mut p, bytes, s) });
        p
    }

    /// `cuMemFreeAsync`.
    pub fn free(&self, p: CUdeviceptr, s: CUstream) {
        // SAFETY: a device pointer from `alloc`, freed once. Whether the
        // free is ordered after its uses is exactly what the tests probe; the
        // simulator never reuses freed addresses soon, so host memory is
        // never at risk.
        check!(self, "cuMemFreeAsync", unsafe { entry!(self.d, cuMemFreeAsync)(p, s) });
    }

    /// `cuMemsetD32Async` of `words` words.
    pub fn memset(&self, p: CUdeviceptr, v: u32, words: usize, s: CUstream) {
        // SAFETY: device memory only (the simulator checks the range).
        check!(self, "cuMemsetD32Async", unsafe { entry!(self.d, cuMemsetD32Async)(p, v, words, s) });
    }

    /// `cuMemcpyDtoDAsync`.
    pub fn copy(&self, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, s: CUstream) {
        // SAFETY: device memory only (the simulator checks both ranges).
        check!(self, "cuMemcpyDtoDAsync", unsafe { entry!(self.d, cuMemcpyDtoDAsync)(dst, src, bytes, s) });
    }

    /// `cuMemHostAlloc` (pinned, zero flags).
    pub fn host_alloc(&self, bytes: usize) -> *mut u8 {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one host pointer through a valid pointer.
        check!(self, "cuMemHostAlloc", unsafe { entry!(self.d, cuMemHostAlloc)(&mut p, bytes, 0) });
        p.cast()
    }

    /// `cuMemFreeHost`.
    pub fn free_host(&self, p: *mut u8) {
        // SAFETY: `p` came from `host_alloc` and is freed once, after the
        // caller synchronized the copies into it.
        check!(self, "cuMemFreeHost", unsafe { entry!(self.d, cuMemFreeHost)(p.cast()) });
    }

    /// `cuMemcpyDtoHAsync` into pinned memory from `host_alloc`.
    pub fn download(&self, dst: *mut u8, src: CUdeviceptr, bytes: usize, s: CUstream) {
        // SAFETY: `dst` is pinned memory of at least `bytes` from
        // `host_alloc`, which the caller keeps until the copy is synchronized.
        check!(self, "cuMemcpyDtoHAsync", unsafe {
            entry!(self.d, cuMemcpyDtoHAsync)(dst.cast(), src, bytes, s)
        });
    }
}

impl Default for Raw {
    fn default() -> Self {
        Raw::new()
    }
}

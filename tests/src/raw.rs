//! Raw driver calls for tests that plant synchronization bugs behind
//! gpu-sync's back (the race oracle must catch them) or check the oracle's
//! model laws directly. Each method is one call of cuda-sys's per-call layer
//! (`cuda_sys::result`) whose result must be `Ok`; the test fails with the
//! call's name and error otherwise.
//!
//! Only over cuda-sim ([`Raw::new`] refuses any other table): the simulator
//! checks every handle and device address it is given and answers a bad one
//! with an error, so these safe functions cannot cause undefined behaviour
//! with any handle — which is why they may take raw handles (borrowed with
//! `Borrowed::borrow_raw`) and why clippy's `not_unsafe_ptr_arg_deref` is
//! allowed here. Host pointers are only those `host_alloc` returned.
#![allow(unsafe_code, clippy::not_unsafe_ptr_arg_deref)]

use cuda_sys::result::{event, memory, stream};
use cuda_sys::{
    Borrowed, BorrowedContext, BorrowedEvent, BorrowedStream, CUcontext, CUdeviceptr, CUevent, CUstream,
    Driver, DriverError,
};

/// The installed driver table, for raw calls.
#[derive(Clone, Copy)]
pub struct Raw {
    d: &'static Driver,
    lenient: bool,
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

    /// The value of an `Ok`; on an error, a panic naming the call, unless
    /// lenient (after a planted bug a fault may have poisoned the context,
    /// and every later call fails), where it is `fallback`.
    #[track_caller]
    fn ok<T>(&self, r: Result<T, DriverError>, fallback: T) -> T {
        match r {
            Ok(v) => v,
            Err(_) if self.lenient => fallback,
            Err(e) => panic!("{e}"),
        }
    }

    fn s(&self, s: CUstream) -> BorrowedStream<'static> {
        // SAFETY: the table is cuda-sim's (checked by `new`), which looks
        // every stream handle up in its tables: a stale or bogus one is
        // CUDA_ERROR_INVALID_HANDLE, never a dereference (module docs).
        unsafe { Borrowed::borrow_raw(self.d, s) }
    }

    fn e(&self, e: CUevent) -> BorrowedEvent<'static> {
        // SAFETY: as in `s`: cuda-sim checks event handles.
        unsafe { Borrowed::borrow_raw(self.d, e) }
    }

    /// `cuStreamCreateWithPriority`: a non-blocking stream at the default
    /// priority, owned by the caller until [`Raw::destroy_stream`].
    pub fn stream(&self) -> CUstream {
        let r = stream::create_with_priority(self.d, 1, 0).map(|s| s.into_raw());
        self.ok(r, std::ptr::null_mut())
    }

    /// `cuStreamDestroy`.
    pub fn destroy_stream(&self, s: CUstream) {
        // SAFETY: cuda-sim checks the handle (module docs); `s` came from
        // `stream` and the caller destroys it once.
        let owned = unsafe { cuda_sys::OwnedStream::from_raw(self.d, s) };
        self.ok(stream::destroy(owned), ());
    }

    /// `cuStreamSynchronize`.
    pub fn sync(&self, s: CUstream) {
        self.ok(stream::synchronize(self.s(s)), ());
    }

    /// `cuEventCreate` with `CU_EVENT_DISABLE_TIMING`, owned by the caller
    /// until [`Raw::destroy_event`].
    pub fn event(&self) -> CUevent {
        let r = event::create(self.d, 2).map(|e| e.into_raw());
        self.ok(r, std::ptr::null_mut())
    }

    /// `cuEventDestroy`.
    pub fn destroy_event(&self, e: CUevent) {
        // SAFETY: cuda-sim checks the handle; `e` came from `event` and the
        // caller destroys it once.
        let owned = unsafe { cuda_sys::OwnedEvent::from_raw(self.d, e) };
        self.ok(event::destroy(owned), ());
    }

    /// `cuEventRecord`.
    pub fn record(&self, e: CUevent, s: CUstream) {
        self.ok(event::record(self.e(e), self.s(s)), ());
    }

    /// `cuStreamWaitEvent`.
    pub fn wait(&self, s: CUstream, e: CUevent) {
        self.ok(stream::wait_event(self.s(s), self.e(e), 0), ());
    }

    /// `cuMemAllocAsync`.
    pub fn alloc(&self, bytes: usize, s: CUstream) -> CUdeviceptr {
        self.ok(memory::alloc_async(bytes, self.s(s)), 0)
    }

    /// `cuMemFreeAsync`.
    pub fn free(&self, p: CUdeviceptr, s: CUstream) {
        // SAFETY: a device pointer from `alloc`, freed once. Whether the
        // free is ordered after its uses is exactly what the tests probe; the
        // simulator never reuses freed addresses soon and checks every
        // access, so host memory is never at risk.
        self.ok(unsafe { memory::free_async(p, self.s(s)) }, ());
    }

    /// `cuMemsetD32Async` of `words` words.
    pub fn memset(&self, p: CUdeviceptr, v: u32, words: usize, s: CUstream) {
        // SAFETY: device memory only (the simulator checks the range).
        self.ok(unsafe { memory::memset_d32_async(p, v, words, self.s(s)) }, ());
    }

    /// `cuMemcpyDtoDAsync`.
    pub fn copy(&self, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, s: CUstream) {
        // SAFETY: device memory only (the simulator checks both ranges).
        self.ok(unsafe { memory::memcpy_dtod_async(dst, src, bytes, self.s(s)) }, ());
    }

    /// `cuMemcpyPeerAsync`: `bytes` from `src` (memory of context `src_ctx`)
    /// to `dst` (of `dst_ctx`), on `s` of either device.
    pub fn copy_peer(
        &self,
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
        s: CUstream,
    ) {
        // SAFETY: cuda-sim checks context handles as it checks streams
        // (module docs).
        let ctx = |c: CUcontext| -> BorrowedContext<'static> { unsafe { Borrowed::borrow_raw(self.d, c) } };
        // SAFETY: device memory only (the simulator checks both ranges and
        // both contexts).
        let r = unsafe { memory::memcpy_peer_async(dst, ctx(dst_ctx), src, ctx(src_ctx), bytes, self.s(s)) };
        self.ok(r, ());
    }

    /// `cuMemHostAlloc` (pinned, zero flags).
    pub fn host_alloc(&self, bytes: usize) -> *mut u8 {
        self.ok(memory::host_alloc(self.d, bytes, 0), std::ptr::null_mut()).cast()
    }

    /// `cuMemFreeHost`.
    pub fn free_host(&self, p: *mut u8) {
        // SAFETY: `p` came from `host_alloc` and is freed once, after the
        // caller synchronized the copies into it.
        self.ok(unsafe { memory::free_host(self.d, p.cast()) }, ());
    }

    /// `cuMemcpyDtoHAsync` into pinned memory from `host_alloc`.
    pub fn download(&self, dst: *mut u8, src: CUdeviceptr, bytes: usize, s: CUstream) {
        // SAFETY: `dst` is pinned memory of at least `bytes` from
        // `host_alloc`, which the caller keeps until the copy is synchronized.
        self.ok(unsafe { memory::memcpy_dtoh_async(dst.cast(), src, bytes, self.s(s)) }, ());
    }
}

impl Default for Raw {
    fn default() -> Self {
        Raw::new()
    }
}

//! Owned and borrowed driver handles (rustix's `OwnedFd` / `BorrowedFd<'a>`
//! for CUDA objects).
//!
//! An [`Owned<K>`] is a handle this process must destroy: dropping it calls
//! the kind's destroy entry point (`cuStreamDestroy`, `cuEventDestroy`,
//! `cuModuleUnload`, `cuGraphDestroy`, `cuGraphExecDestroy`, `cuMemFreeHost`
//! for pinned host memory) and, if the
//! driver refuses, logs and leaks — the one destroy-or-log of the workspace.
//! A [`RawHandle<K>`] is only a handle's name (rustix's `RawFd`): it may
//! cross threads, and using it takes the `unsafe` [`Borrowed::borrow_raw`].
//! A [`Borrowed<'a, K>`] is a copyable view whose lifetime proves the handle
//! is alive (borrowed from an owner, or one that lives as long as the driver:
//! the default streams, a retained primary context, a device's default memory
//! pool). Both carry the `&'static` [`Driver`] that made them, so the
//! per-call layer ([`crate::result`]) calls the table the handle belongs to
//! and refuses to mix handles of two tables (a cuda-sim handle given to
//! libcuda would be a wild pointer there).
//!
//! This module is the only place in cuda-sys with `unsafe impl Send/Sync`;
//! each is argued once below from the driver's documented thread-safety.
//!
//! # The current context when a handle is destroyed
//! Dropping runs the destroy call on the dropping thread with whatever
//! context is current there; cuda-sys does not change it (no policy here).
//! `cuStreamDestroy`, `cuEventDestroy`, `cuGraphDestroy` and
//! `cuGraphExecDestroy` find the object's context through the handle;
//! `cuModuleUnload` is documented as unloading "from the current context",
//! and a thread that never had a context current may get
//! `CUDA_ERROR_INVALID_CONTEXT`. So the owner makes the handle's context
//! current before dropping it (gpu-sync binds the device's primary context
//! first, as it does before every call). Done wrong, the destroy fails, is
//! logged, and the handle leaks: never undefined behaviour.

use crate::bindings::*;
use crate::driver::{CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, Driver};
use crate::error::DriverError;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

/// The kinds of handle, as types (uninhabited: they only name a kind).
pub mod kind {
    /// `CUstream`.
    #[derive(Debug)]
    pub enum StreamKind {}
    /// `CUevent`.
    #[derive(Debug)]
    pub enum EventKind {}
    /// `CUmodule`.
    #[derive(Debug)]
    pub enum ModuleKind {}
    /// `CUfunction` (borrowed from its module; never destroyed on its own).
    #[derive(Debug)]
    pub enum FunctionKind {}
    /// `CUgraph`.
    #[derive(Debug)]
    pub enum GraphKind {}
    /// `CUgraphExec`.
    #[derive(Debug)]
    pub enum GraphExecKind {}
    /// `CUcontext` (a retained primary context; released only by the
    /// `unsafe` [`crate::result::primary_ctx::release`]).
    #[derive(Debug)]
    pub enum ContextKind {}
    /// `CUmemoryPool` (a device's default pool, alive as long as the driver).
    #[derive(Debug)]
    pub enum MemPoolKind {}
    /// Page-locked host memory from `cuMemHostAlloc`, named by its address
    /// (freed with `cuMemFreeHost`). The handle is the allocation, not its
    /// contents: reading or writing the bytes is the owner's business.
    #[derive(Debug)]
    pub enum HostAllocKind {}
}

mod sealed {
    use crate::Driver;
    use crate::error::DriverError;

    pub trait Sealed {}

    /// The destroy call of a kind; in a private module, so only
    /// [`super::Owned`] can call it.
    pub trait DestroyRaw: super::HandleKind {
        /// The destroy entry point's name.
        const DESTROY: &'static str;
        /// Destroys `raw`.
        ///
        /// # Safety
        /// 1. `raw` is a live handle of this kind made through `drv`;
        /// 2. it is never used again (by anyone) after this call.
        unsafe fn destroy(drv: &Driver, raw: Self::Raw) -> Result<(), DriverError>;
    }
}

/// A kind of driver handle: its raw type and what to call it in messages.
/// Sealed: the kinds are those of [`kind`].
pub trait HandleKind: sealed::Sealed + 'static {
    /// The raw handle (`CUstream`, …).
    type Raw: Copy + PartialEq + fmt::Debug;
    /// What the handle is, for messages (`"stream"`).
    const WHAT: &'static str;
}

/// A kind whose handles this process destroys: [`Owned`] exists for it.
pub trait Destroy: sealed::DestroyRaw {}

/// A kind whose handles the driver lets several threads use at once (any
/// call, concurrently): streams, events, modules, functions, contexts and
/// memory pools are internally synchronized by the driver; a pinned host
/// allocation is an address the driver only looks up (copies, device
/// pointers) or frees, which any thread may do. Graphs and graph
/// execs are not ([graph object thread safety][ts]: "graph objects are not
/// internally synchronized", calls on one must be serialized), so neither
/// `Owned<GraphKind>` nor `Owned<GraphExecKind>` is `Sync`, and their borrowed forms
/// are neither `Send` nor `Sync`.
///
/// [ts]: https://docs.nvidia.com/cuda/cuda-driver-api/graphs-thread-safety.html
pub trait Shared: HandleKind {}

macro_rules! kinds {
    ($($k:ident: $raw:ty, $what:literal, $shared:tt;)*) => {$(
        impl sealed::Sealed for kind::$k {}
        impl HandleKind for kind::$k {
            type Raw = $raw;
            const WHAT: &'static str = $what;
        }
        kinds!(@shared $k $shared);
    )*};
    (@shared $k:ident shared) => { impl Shared for kind::$k {} };
    (@shared $k:ident serial) => {};
}

kinds! {
    StreamKind: CUstream, "stream", shared;
    EventKind: CUevent, "event", shared;
    ModuleKind: CUmodule, "module", shared;
    FunctionKind: CUfunction, "function", shared;
    GraphKind: CUgraph, "graph", serial;
    GraphExecKind: CUgraphExec, "graph exec", serial;
    ContextKind: CUcontext, "context", shared;
    MemPoolKind: CUmemoryPool, "memory pool", shared;
    HostAllocKind: *mut std::ffi::c_void, "pinned host allocation", shared;
}

macro_rules! destroys {
    ($($k:ident: $call:ident;)*) => {$(
        impl sealed::DestroyRaw for kind::$k {
            const DESTROY: &'static str = stringify!($call);
            unsafe fn destroy(drv: &Driver, raw: Self::Raw) -> Result<(), DriverError> {
                match drv.$call {
                    // SAFETY: the caller's obligations: `raw` is a live
                    // handle of this kind from `drv`, never used again.
                    Some(f) => crate::error::check_call(stringify!($call), unsafe { f(raw) }),
                    None => Err(DriverError::unsupported(drv, stringify!($call))),
                }
            }
        }
        impl Destroy for kind::$k {}
    )*};
}

destroys! {
    StreamKind: cuStreamDestroy;
    EventKind: cuEventDestroy;
    ModuleKind: cuModuleUnload;
    GraphKind: cuGraphDestroy;
    GraphExecKind: cuGraphExecDestroy;
    HostAllocKind: cuMemFreeHost;
}

/// A driver handle this process owns: destroyed when dropped (see the
/// module docs for the context that must be current), or explicitly with
/// [`Owned::destroy`] to see the error.
pub struct Owned<K: Destroy> {
    raw: K::Raw,
    drv: &'static Driver,
    _kind: PhantomData<K>,
}

/// A driver handle borrowed for `'a`: `Copy`, and alive while it exists.
pub struct Borrowed<'a, K: HandleKind> {
    raw: K::Raw,
    drv: &'static Driver,
    _life: PhantomData<(&'a (), K)>,
}

/// `CUstream`, owned.
pub type OwnedStream = Owned<kind::StreamKind>;
/// `CUevent`, owned.
pub type OwnedEvent = Owned<kind::EventKind>;
/// `CUmodule`, owned.
pub type OwnedModule = Owned<kind::ModuleKind>;
/// `CUgraph`, owned (`Send`, not `Sync`).
pub type OwnedGraph = Owned<kind::GraphKind>;
/// `CUgraphExec`, owned (`Send`, not `Sync`).
pub type OwnedGraphExec = Owned<kind::GraphExecKind>;
/// Page-locked host memory (`cuMemHostAlloc`), owned: dropping it frees it
/// (`cuMemFreeHost`).
pub type OwnedHostAlloc = Owned<kind::HostAllocKind>;
/// `CUstream`, borrowed.
pub type BorrowedStream<'a> = Borrowed<'a, kind::StreamKind>;
/// `CUevent`, borrowed.
pub type BorrowedEvent<'a> = Borrowed<'a, kind::EventKind>;
/// `CUmodule`, borrowed.
pub type BorrowedModule<'a> = Borrowed<'a, kind::ModuleKind>;
/// `CUfunction`, borrowed from its module.
pub type BorrowedFunction<'a> = Borrowed<'a, kind::FunctionKind>;
/// `CUgraph`, borrowed (neither `Send` nor `Sync`).
pub type BorrowedGraph<'a> = Borrowed<'a, kind::GraphKind>;
/// `CUgraphExec`, borrowed (neither `Send` nor `Sync`).
pub type BorrowedGraphExec<'a> = Borrowed<'a, kind::GraphExecKind>;
/// `CUcontext`, borrowed (a retained primary context).
pub type BorrowedContext<'a> = Borrowed<'a, kind::ContextKind>;
/// `CUmemoryPool`, borrowed (a device's default pool).
pub type BorrowedMemPool<'a> = Borrowed<'a, kind::MemPoolKind>;

// SAFETY: `Send` for every owned kind. No driver object is tied to the thread
// that created it: the driver API takes handles on any thread (the
// thread-local state is only which context is current, which the handle does
// not depend on; see the module docs for destroying). Moving an `Owned` moves
// the only right to destroy it, and `&'static Driver` is `Sync` data (a table
// of `extern "C"` function pointers and immutable fields).
unsafe impl<K: Destroy> Send for Owned<K> {}
// SAFETY: `Sync` only for `Shared` kinds, which the driver synchronizes
// internally, so calls through `&Owned<K>` from several threads at once are
// allowed (`Shared`'s docs). Graphs and graph execs are left out: calls on
// one must be serialized, and `!Sync` is what serializes them.
unsafe impl<K: Destroy + Shared> Sync for Owned<K> {}
// SAFETY: a `Borrowed` is a shared reference in all but name (`Copy`, many
// may exist): sending one lets two threads use the handle at once, which is
// sound exactly for `Shared` kinds (as `&T: Send` needs `T: Sync`).
unsafe impl<K: Shared> Send for Borrowed<'_, K> {}
// SAFETY: as for `Send`: concurrent use of a `Shared` handle is allowed.
unsafe impl<K: Shared> Sync for Borrowed<'_, K> {}

/// A raw handle as a value that may cross threads: the driver's name for an
/// object and nothing more — no claim that it is alive (rustix's `RawFd`).
/// Using it takes [`Borrowed::borrow_raw`], whose caller argues liveness.
/// For owners that keep the object alive by other means (a kernel keeps its
/// function's module loaded) and would otherwise hold a bare pointer.
pub struct RawHandle<K: HandleKind> {
    raw: K::Raw,
    _kind: PhantomData<K>,
}

impl<K: HandleKind> RawHandle<K> {
    /// Names `raw`.
    #[inline]
    pub fn new(raw: K::Raw) -> Self {
        RawHandle { raw, _kind: PhantomData }
    }

    /// The raw handle.
    #[inline(always)]
    pub fn get(self) -> K::Raw {
        self.raw
    }
}

impl<K: HandleKind> Clone for RawHandle<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: HandleKind> Copy for RawHandle<K> {}

impl<K: HandleKind> fmt::Debug for RawHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawHandle({} {:?})", K::WHAT, self.raw)
    }
}

// SAFETY: a `RawHandle` is only a name: nothing reads through it, and every
// use turns it into a `Borrowed` first with the `unsafe` `borrow_raw`, whose
// caller argues that the object is alive. Sending or sharing the name is
// therefore harmless, and concurrent use of the object it names is sound for
// `Shared` kinds (as for `Borrowed`).
unsafe impl<K: Shared> Send for RawHandle<K> {}
// SAFETY: as for `Send`.
unsafe impl<K: Shared> Sync for RawHandle<K> {}

impl<K: Destroy> Owned<K> {
    /// Takes ownership of a raw handle.
    ///
    /// # Safety
    /// 1. `raw` is a live handle of kind `K` made through `drv`;
    /// 2. nothing else destroys it: the returned value is its only owner;
    /// 3. if `K` is not [`Shared`], no other thread uses it while this value
    ///    exists except through this value.
    pub unsafe fn from_raw(drv: &'static Driver, raw: K::Raw) -> Self {
        Owned { raw, drv, _kind: PhantomData }
    }

    /// The raw handle, still owned by `self`.
    #[inline]
    pub fn as_raw(&self) -> K::Raw {
        self.raw
    }

    /// Gives up ownership without destroying: the caller now owns the raw
    /// handle (to leak it, or to rebuild an owner with [`Owned::from_raw`]).
    pub fn into_raw(self) -> K::Raw {
        ManuallyDrop::new(self).raw
    }

    /// The table the handle belongs to.
    #[inline]
    pub fn driver(&self) -> &'static Driver {
        self.drv
    }

    /// Borrows the handle.
    #[inline]
    pub fn as_borrowed(&self) -> Borrowed<'_, K> {
        Borrowed { raw: self.raw, drv: self.drv, _life: PhantomData }
    }

    /// Destroys the handle now (the kind's destroy call: `cuStreamDestroy`,
    /// `cuEventDestroy`, `cuModuleUnload`, `cuGraphDestroy`,
    /// `cuGraphExecDestroy`), returning the driver's error instead of
    /// logging it. On error the handle is leaked.
    ///
    /// # Errors
    /// [`DriverError::Failed`] with the driver's code;
    /// [`DriverError::Unsupported`] when the table lacks the call.
    pub fn destroy(self) -> Result<(), DriverError> {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` owned a live handle of kind `K` from `this.drv`
        // (`from_raw`'s obligations, or made by `crate::result`); it is
        // consumed here, so no one uses the handle afterwards.
        unsafe { K::destroy(this.drv, this.raw) }
    }
}

impl<K: Destroy> Drop for Owned<K> {
    /// Destroy-or-log: calls the kind's destroy entry point; an error is
    /// logged (`log::warn!`) and the handle leaked. Never panics.
    fn drop(&mut self) {
        // SAFETY: `self` owns a live handle of kind `K` from `self.drv`
        // (`from_raw`'s obligations, or made by `crate::result`), and is
        // being dropped: nothing uses the handle afterwards.
        if let Err(e) = unsafe { K::destroy(self.drv, self.raw) } {
            log::warn!("leaking a CUDA {} ({:?}): {e}", K::WHAT, self.raw);
        }
    }
}

impl<'a, K: HandleKind> Borrowed<'a, K> {
    /// Borrows a raw handle for `'a`.
    ///
    /// # Safety
    /// 1. `raw` is a live handle of kind `K` made through `drv`, and stays
    ///    alive (is not destroyed) for `'a`;
    /// 2. if `K` is not [`Shared`], no other thread uses it during `'a`.
    #[inline]
    pub unsafe fn borrow_raw(drv: &'static Driver, raw: K::Raw) -> Self {
        Borrowed { raw, drv, _life: PhantomData }
    }

    /// The raw handle.
    #[inline]
    pub fn as_raw(self) -> K::Raw {
        self.raw
    }

    /// The table the handle belongs to.
    #[inline]
    pub fn driver(self) -> &'static Driver {
        self.drv
    }
}

impl BorrowedStream<'static> {
    /// The legacy default stream (`CU_STREAM_LEGACY`), which synchronizes
    /// with blocking streams; it exists for the life of every context.
    pub fn legacy(drv: &'static Driver) -> Self {
        Borrowed { raw: CU_STREAM_LEGACY, drv, _life: PhantomData }
    }

    /// The calling thread's per-thread default stream
    /// (`CU_STREAM_PER_THREAD`).
    pub fn per_thread(drv: &'static Driver) -> Self {
        Borrowed { raw: CU_STREAM_PER_THREAD, drv, _life: PhantomData }
    }

    /// The null stream: the legacy or per-thread default stream, as the
    /// table was loaded ([`Driver::default_stream`]).
    pub fn null(drv: &'static Driver) -> Self {
        Borrowed { raw: std::ptr::null_mut(), drv, _life: PhantomData }
    }
}

impl<K: HandleKind> Clone for Borrowed<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: HandleKind> Copy for Borrowed<'_, K> {}

impl<K: HandleKind> PartialEq for Borrowed<'_, K> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw && std::ptr::eq(self.drv, other.drv)
    }
}

impl<K: Destroy> fmt::Debug for Owned<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owned {}({:?})", K::WHAT, self.raw)
    }
}

impl<K: HandleKind> fmt::Debug for Borrowed<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Borrowed {}({:?})", K::WHAT, self.raw)
    }
}

/// Anything that lends a handle of kind `K`: [`Owned<K>`], [`Borrowed<K>`],
/// and references to either. The per-call functions take `impl AsBorrowed<K>`,
/// so `result::stream::synchronize(&owned)` and
/// `result::stream::synchronize(borrowed)` both read naturally.
pub trait AsBorrowed<K: HandleKind> {
    /// The borrowed handle.
    fn as_borrowed(&self) -> Borrowed<'_, K>;
}

impl<K: Destroy> AsBorrowed<K> for Owned<K> {
    #[inline]
    fn as_borrowed(&self) -> Borrowed<'_, K> {
        Owned::as_borrowed(self)
    }
}

impl<K: HandleKind> AsBorrowed<K> for Borrowed<'_, K> {
    #[inline]
    fn as_borrowed(&self) -> Borrowed<'_, K> {
        *self
    }
}

impl<K: HandleKind, T: AsBorrowed<K> + ?Sized> AsBorrowed<K> for &T {
    #[inline]
    fn as_borrowed(&self) -> Borrowed<'_, K> {
        (**self).as_borrowed()
    }
}

/// `Ok` when `a` and `b` are one table: handles of two tables must not meet
/// in one call (`call` names it in the error).
#[inline]
pub(crate) fn same_driver(call: &'static str, a: &Driver, b: &Driver) -> Result<(), DriverError> {
    if std::ptr::eq(a, b) {
        Ok(())
    } else {
        Err(DriverError::Refused { call, reason: "the handles belong to two different driver tables" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send<T: Send>() {}
    fn sync<T: Sync>() {}

    #[test]
    fn thread_safety_follows_the_driver() {
        send::<OwnedStream>();
        sync::<OwnedStream>();
        send::<OwnedEvent>();
        sync::<OwnedEvent>();
        send::<OwnedModule>();
        sync::<OwnedModule>();
        send::<OwnedGraph>();
        send::<OwnedGraphExec>();
        send::<BorrowedStream<'static>>();
        sync::<BorrowedFunction<'static>>();
        sync::<BorrowedContext<'static>>();
        // `OwnedGraph: !Sync` is a compile-fail case in the tests crate.
    }

    unsafe extern "C" fn failing_destroy(_s: CUstream) -> CUresult {
        CUresult::CUDA_ERROR_INVALID_HANDLE
    }

    #[test]
    fn drop_logs_and_leaks_instead_of_panicking() {
        let mut d = Driver::empty(13000, "test");
        d.cuStreamDestroy = Some(failing_destroy);
        let d: &'static Driver = Box::leak(Box::new(d));
        let raw = std::ptr::without_provenance_mut::<CUstream_st>(0x40);
        // SAFETY: the table's destroy only returns an error; nothing is
        // dereferenced.
        let s = unsafe { OwnedStream::from_raw(d, raw) };
        assert_eq!(s.as_raw(), raw);
        drop(s); // logs, does not panic
        // SAFETY: as above.
        let s = unsafe { OwnedStream::from_raw(d, raw) };
        let err = s.destroy().expect_err("the table refuses");
        assert_eq!(err.call(), "cuStreamDestroy");
        assert_eq!(err.result(), Some(CUresult::CUDA_ERROR_INVALID_HANDLE));
        // An empty table: Unsupported, naming the call.
        let empty: &'static Driver = Box::leak(Box::new(Driver::empty(12000, "empty")));
        // SAFETY: as above; the empty table calls nothing.
        let e = unsafe { OwnedEvent::from_raw(empty, std::ptr::null_mut()) };
        let err = e.destroy().expect_err("no entry point");
        assert!(matches!(err, DriverError::Unsupported { call: "cuEventDestroy", needs: 2000, have: 12000 }));
        assert_eq!(err.to_string(), "cuEventDestroy needs a CUDA 2.0 driver; this driver is CUDA 12.0");
    }
}

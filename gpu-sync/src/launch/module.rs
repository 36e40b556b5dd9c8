//! Modules: compiled device code loaded into a device's context.
//!
//! Unsafe code (allowed by `launch`): the driver reads an image by pointer
//! (`cuModuleLoadData`), and typed kernels are declared by an `unsafe fn`
//! (`Module::kernel`: its `# Safety` is the contract that makes
//! `Kernel::launch` safe).

use crate::device::Device;
use crate::engine::{self, Held, TailMark, Timeline};
use crate::error::{Error, Result};
use crate::ffi::call;
use crate::launch::kernel::Kernel;
use crate::launch::signature::Signature;
use cuda_sys::handle::kind::ModuleKind;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedFunction, CUresult};
use std::ffi::CString;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A loaded module: unloaded (`cuModuleUnload`, context bound, deferred
/// inside host functions) when no `Module`, `Kernel` or graph holds it, and
/// only once every launch of it is known complete (see `Drop`).
/// `Send + Sync` from its parts: the driver lets any thread look functions
/// up in a module and launch them (cuda-sys argues it for `OwnedModule`).
pub(crate) struct ModuleInner {
    /// Always `Some` until `Drop` takes it.
    module: Option<Held<ModuleKind>>,
    pub device: Device,
    /// Ids of streams already in `launched_on`, one slot per `id % 4`
    /// ([`Self::note_launch`]): a launch on a stream seen recently costs
    /// one load (also when launches alternate between streams).
    recent: [AtomicU64; 4],
    /// What the unload must wait for, one entry per stream a kernel of the
    /// module was launched on: the stream while anything else holds it,
    /// else a marker of its last work, until that completes
    /// ([`Self::prune`]).
    launched_on: Mutex<Vec<Launched>>,
}

/// A stream a kernel of a module was launched on, as the module's unload
/// needs it.
enum Launched {
    /// A stream something else still holds (a `Stream`, a recorded use of
    /// a buffer): launches may still come on it, and the unload waits for
    /// everything submitted there by then.
    Stream(Arc<Timeline>),
    /// A stream nothing else held any more, let go (so the driver stream is
    /// destroyed): no launch can come on it again, and the unload waits on
    /// this marker of everything it was given.
    Gone(TailMark),
}

impl ModuleInner {
    /// Notes that a kernel of the module is about to be launched on `s`
    /// (call before the launch returns): the unload then waits for all work
    /// submitted on `s` so far. A stream seen recently: one load. The
    /// `Relaxed` load is enough: a slot only ever holds the id of a stream
    /// already pushed under the mutex (an entry that leaves the list is of
    /// a stream no launch can use again: see [`Self::prune`]), and the
    /// unload reads the list after the last handle's drop (which orders
    /// every launch before it).
    #[inline(always)]
    pub(crate) fn note_launch(&self, s: &Arc<Timeline>) {
        if self.recent[(s.id() % 4) as usize].load(Ordering::Relaxed) != s.id() {
            self.note_stream(s);
        }
    }

    #[cold]
    fn note_stream(&self, s: &Arc<Timeline>) {
        // Inside a host function, a simulated kernel or the foreign door the
        // launch is refused (`engine::submit` refuses first), and this
        // thread may hold a book, which a prune on another thread may be
        // waiting for under the list's lock (lock order: the list, then a
        // book): nothing to note, and the list is not touched.
        if crate::ffi::calls_refused() {
            return;
        }
        let mut on = self.launched_on.lock().unwrap_or_else(|p| p.into_inner());
        let mut let_go = Vec::new();
        if !on.iter().any(|l| matches!(l, Launched::Stream(t) if t.id() == s.id())) {
            Self::prune(&mut on, &mut let_go);
            on.push(Launched::Stream(s.clone()));
        }
        self.recent[(s.id() % 4) as usize].store(s.id(), Ordering::Relaxed);
        drop(on);
        // Streams and markers go with no lock held (a stream's drop
        // retires it in its device's book).
        drop(let_go);
    }

    /// Keeps the list to what the unload needs, when a new stream joins it
    /// (so the hot path never sees it): a stream nothing but the list holds
    /// is let go — dropped if a host wait proved its work complete, else
    /// replaced by a marker of its last work ([`Timeline::tail_mark`]) —
    /// and a marker whose work completed (`cuEventQuery`) is dropped. What
    /// leaves the list goes to `let_go`. A failure (a driver error, a
    /// capturing stream) keeps the entry as it was: the unload waits for it.
    ///
    /// Letting go of a stream is sound because no launch can come on it
    /// again: a launch needs a `Stream`, which holds the timeline, and with
    /// the count at one, under this list's lock, no other holder is left to
    /// make one (nothing makes a `Weak` of a timeline). Its slot in
    /// `recent` may still name it; ids are never reused.
    fn prune(on: &mut Vec<Launched>, let_go: &mut Vec<Launched>) {
        let mut i = 0;
        while i < on.len() {
            let tail = match &on[i] {
                Launched::Stream(t) if Arc::strong_count(t) == 1 => {
                    // Pairs with the release of the other holders' drops:
                    // their submissions happen before the book read below.
                    std::sync::atomic::fence(Ordering::Acquire);
                    match t.tail_mark() {
                        Ok(tail) => tail,
                        Err(_) => {
                            i += 1;
                            continue;
                        }
                    }
                }
                Launched::Stream(_) => {
                    i += 1;
                    continue;
                }
                Launched::Gone(m) => {
                    if matches!(m.is_complete(), Ok(true)) {
                        let_go.push(on.swap_remove(i));
                    } else {
                        i += 1;
                    }
                    continue;
                }
            };
            match tail {
                Some(m) => {
                    let_go.push(std::mem::replace(&mut on[i], Launched::Gone(m)));
                    i += 1;
                }
                None => let_go.push(on.swap_remove(i)),
            }
        }
    }

    /// The module handle.
    fn held(&self) -> Result<&Held<ModuleKind>> {
        self.module.as_ref().ok_or_else(|| Error::Internal("a module used after its unload".into()))
    }
}

impl Drop for ModuleInner {
    /// The driver has no stream-ordered unload, and unloading a module
    /// whose kernel is still queued is undefined: so the unload first waits
    /// on the host, on each stream a kernel of it was launched on, for
    /// everything submitted there so far (a marker covering the stream's
    /// last ticket; no lock held while waiting) — a superset of its
    /// launches, since no launch can start once the last handle is gone —
    /// and on the marker kept for each such stream already let go. As
    /// a pinned buffer's free does for its copies; it is leaked if a wait
    /// fails. Inside a host function (or a
    /// simulated kernel) all of it happens later on an ordinary thread; on a
    /// capturing thread, when its capture ends. Graphs keep the module alive
    /// themselves (their launches are waited for by `GraphExec`'s drop).
    fn drop(&mut self) {
        let Some(module) = self.module.take() else { return };
        let launched = std::mem::take(self.launched_on.get_mut().unwrap_or_else(|p| p.into_inner()));
        engine::free_now_or_later(
            None,
            Box::new(move || {
                let waited = launched.iter().try_for_each(|l| match l {
                    Launched::Stream(s) => s.host_wait_all_so_far("cuModuleUnload"),
                    Launched::Gone(m) => m.host_wait(),
                });
                match waited {
                    Ok(()) => drop(module),
                    Err(e) => {
                        log::error!("leaking a CUDA module: waiting for its launches failed: {e}");
                        module.leak();
                    }
                }
            }),
        );
    }
}

/// Device code loaded into a device's primary context (`cuModuleLoadData`):
/// a fatbin, cubin or NUL-terminated PTX image. Unloaded (`cuModuleUnload`)
/// when the module and every kernel and graph taken from it are dropped.
///
/// ```
/// # let _session = gpu_sync::sim::session(0)?;
/// # gpu_sync::sim::register::<(gpu_sync::Out<u32>, u32, gpu_sync::Len)>("fill", |(out, v, n)| out[..n as usize].fill(v));
/// # const PTX: &[u8] = gpu_sync::sim::PTX_STUB;
/// use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Len, Module, Out, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let module = Module::load(&device, PTX)?; // cuModuleLoadData: fatbin, cubin or PTX
/// // SAFETY: `fill(unsigned* out, unsigned v, u64 n)` writes `out[i]` for
/// // i < n only, and n is a `Len` (each launch checks n ≤ out's length).
/// let fill = unsafe { module.kernel::<(Out<u32>, u32, Len)>("fill")? };
/// let mut out = DeviceBuffer::<u32>::zeroed(&stream, 256)?;
/// fill.launch(&stream, LaunchConfig::for_elements(256, 128), (&mut out, 3u32, 256u64))?;
/// assert_eq!(stream.to_vec(&out)?, [3; 256]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: Arc<ModuleInner>,
}

impl Module {
    /// Loads `image` into `device`'s context (`cuModuleLoadData`). The
    /// driver copies what it needs; `image` can be dropped afterwards.
    ///
    /// `cuModuleLoadData` takes no length — the driver finds the image's end
    /// in the image itself — so the image is checked first, and the driver
    /// never reads past the slice: a **fatbin** (magic `0xBA55ED50`) must
    /// hold the header size + entries size its header declares, and each
    /// entry its declared payload; an **ELF cubin** (64-bit) must hold its
    /// program and section header tables, every segment and section, and
    /// NUL-terminated string tables with every name inside them; **PTX** must
    /// have a NUL byte inside the slice (the text before it, non-empty
    /// UTF-8). An image that is not 8-byte aligned is copied into an aligned
    /// buffer for the call.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an image that is none of those, or
    /// whose sizes run past the slice ("not a fatbin, cubin or
    /// NUL-terminated PTX image", or the size that does not fit); a driver
    /// error (`CUDA_ERROR_INVALID_IMAGE` for contents the driver rejects,
    /// `CUDA_ERROR_NO_BINARY_FOR_GPU` when it has no code for this GPU).
    pub fn load(device: &Device, image: &[u8]) -> Result<Module> {
        crate::launch::image::validate(image).map_err(Error::InvalidArgument)?;
        // SAFETY: `validate` checked every size the driver follows in the
        // image (fatbin header and entries, ELF tables, sections, segments
        // and string tables, or the PTX's NUL) against `image.len()`.
        unsafe { Module::load_in_place(device, image) }
    }

    /// Loads PTX text into `device`'s context (`cuModuleLoadData`); the
    /// `CStr` carries the NUL the driver reads up to.
    ///
    /// # Errors
    /// A driver error (`CUDA_ERROR_INVALID_PTX`, `CUDA_ERROR_INVALID_IMAGE`).
    pub fn load_ptx(device: &Device, ptx: &std::ffi::CStr) -> Result<Module> {
        // SAFETY: PTX is read up to its NUL, which `CStr` guarantees is the
        // last byte of the slice.
        unsafe { Module::load_in_place(device, ptx.to_bytes_with_nul()) }
    }

    /// Loads `image` without checking it (`cuModuleLoadData`), for image
    /// formats [`Module::load`] does not know. An image that is not 8-byte
    /// aligned is copied into an aligned buffer, as by `load`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty image; a driver error.
    ///
    /// # Safety
    /// 1. Every byte the driver reads to load `image` — as far as the
    ///    image's own headers, tables or terminating NUL say it extends —
    ///    must lie inside `image`.
    pub unsafe fn load_unchecked(device: &Device, image: &[u8]) -> Result<Module> {
        if image.is_empty() {
            return Err(Error::InvalidArgument("empty module image".into()));
        }
        // SAFETY: the caller promises that the driver's reads stay inside
        // `image` (obligation 1).
        unsafe { Module::load_in_place(device, image) }
    }

    /// `cuModuleLoadData` on `image`, copied to an 8-aligned buffer first if
    /// it is not 8-aligned (the driver reads binary headers in place with
    /// 8-byte loads).
    ///
    /// # Safety
    /// 1. The driver's reads of the image (as its own headers or NUL say)
    ///    must stay inside `image`.
    unsafe fn load_in_place(device: &Device, image: &[u8]) -> Result<Module> {
        let copy: Vec<u64>;
        let image = if image.as_ptr().align_offset(8) != 0 {
            let mut words = vec![0u64; image.len().div_ceil(8)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..image.len()].copy_from_slice(image);
            copy = words;
            &bytemuck::cast_slice::<u64, u8>(&copy)[..image.len()]
        } else {
            image
        };
        let dev = &device.inner;
        // SAFETY: `image` is a live byte slice for the whole call, and every
        // byte the driver reads of it lies inside it (caller's obligation 1;
        // an aligned copy holds the same bytes); the driver copies what it
        // loads. The device's context is current (`DeviceInner::call` binds it).
        let raw = dev
            .call("cuModuleLoadData", || unsafe { cu::module::load_data(dev.drv, image.as_ptr().cast()) })?;
        let module = Held::new(device, raw);
        Ok(Module {
            inner: Arc::new(ModuleInner {
                module: Some(module),
                device: device.clone(),
                recent: Default::default(),
                launched_on: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The module's device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    fn get_function(&self, name: &str) -> Result<BorrowedFunction<'_>> {
        let cname = CString::new(name)
            .map_err(|_| Error::InvalidArgument(format!("kernel name {name:?} contains a NUL byte")))?;
        let dev = &self.inner.device.inner;
        let module = self.inner.held()?.get().as_borrowed();
        let r = dev.call("cuModuleGetFunction", || cu::module::get_function(module, &cname));
        match r {
            Err(Error::Driver { error, .. }) if error.0 == CUresult::CUDA_ERROR_NOT_FOUND => {
                // The simulator runs no device code: it finds a kernel only
                // once its CPU version is registered under that name.
                let on_sim = cuda_sys::installed().is_some_and(|d| d.origin() == "cuda-sim");
                Err(Error::KernelSignature {
                    kernel: name.to_owned(),
                    problem: if on_sim {
                        "no such kernel in the module: on the simulator a kernel exists only once its CPU \
                         version is registered under this name (gpu_sync::sim::register), and a CUDA C++ \
                         kernel needs extern \"C\" for its name to be this one"
                            .into()
                    } else {
                        "no such kernel in the module (a CUDA C++ kernel needs extern \"C\" to be found by \
                         its plain name)"
                            .into()
                    },
                })
            }
            other => other,
        }
    }

    /// Declares the kernel `name` of this module with the Rust signature `S`
    /// (`cuModuleGetFunction`), after which [`Kernel::launch`] is safe.
    ///
    /// `S` is checked against the driver's parameter list
    /// (`cuFuncGetParamInfo`, CUDA 12.4+): the same number of parameters,
    /// each of the size `S` says. Drivers without that call skip the check
    /// ([`Kernel::signature_checked`] says which). Sizes cannot tell a
    /// pointer from a `u64`, a read from a write, or how far the kernel
    /// indexes: that is the caller's promise below.
    ///
    /// # Errors
    /// [`Error::KernelSignature`] naming the kernel and the parameter that
    /// differs, or when the module has no such kernel; a driver error (also
    /// from reading the function's dynamic shared memory limit).
    ///
    /// # Safety
    /// A returned `Kernel<S>` lets safe code launch the kernel with any
    /// arguments of `S`'s types and any launch configuration that passes
    /// [`Kernel::launch`]'s checks. So the caller promises, of the kernel
    /// `name` in this module, for every such launch:
    /// 1. **Signature.** `S` is its real parameter list: the same count and
    ///    order, each parameter of the type the kernel declares — a pointer
    ///    for [`In<T>`](crate::In)/[`Out<T>`](crate::Out) (the kernel may
    ///    read the view's bytes as another plain type, within 3),
    ///    `unsigned long long` for [`Len`](crate::Len), the same scalar type
    ///    otherwise.
    /// 2. **Access.** Through an `In<T>` pointer it only reads; through an
    ///    `Out<T>` pointer it may read and write. (gpu-sync orders the launch
    ///    after conflicting uses of each view, and an `Out` view never
    ///    overlaps another view of the same launch.)
    /// 3. **Bounds.** Every access stays inside the views passed, whatever
    ///    their lengths and offsets, whatever the values of the scalar
    ///    arguments, and whatever the grid, block and dynamic shared memory
    ///    size (any configuration the device accepts). It may bound its
    ///    accesses by a [`Len`](crate::Len) argument (checked at each launch
    ///    to be at most every view's length) and by nothing else: a plain
    ///    scalar is not a bound, a view's length is unknown to it otherwise.
    ///    It needs no alignment beyond `align_of::<T>()` of each view's
    ///    element type (checked at each launch), and, for every such
    ///    configuration, its own threads do not race on memory (e.g. a
    ///    read-modify-write indexed by `threadIdx.x` alone, repeated in a
    ///    2-D block) and it has no other undefined behaviour (warp
    ///    intrinsics that assume full warps, shared memory it assumes the
    ///    launch provides).
    /// 4. **Nothing else.** It touches no memory but its views (no pointers
    ///    smuggled through integer scalars, no globals aliasing host or
    ///    device memory that gpu-sync manages), and does not synchronize
    ///    with or wait for other kernels, host memory or host code in ways
    ///    the tracker cannot see.
    ///
    /// A caller that keeps the returned kernel private (no safe code outside
    /// it can reach it) may instead prove 3 for each launch it makes, as the
    /// `kernels` crate's wrappers do. Calling this with a signature the
    /// driver rejects (an `Err`) has no effect.
    pub unsafe fn kernel<S: Signature>(&self, name: &str) -> Result<Kernel<S>> {
        let f = self.get_function(name)?;
        let checked = self.check_params(f, name, S::PARAM_SIZES)?;
        Kernel::new(f.as_raw(), self.inner.clone(), name.to_owned(), checked)
    }

    /// The kernel `name` without a checked signature
    /// (`cuModuleGetFunction`), for kernels whose contract holds only for
    /// some launches, launched with the unsafe [`crate::RawKernel::launch`].
    ///
    /// # Errors
    /// As [`Module::kernel`] for a missing kernel; a driver error reading
    /// the function's dynamic shared memory limit.
    pub fn raw_kernel(&self, name: &str) -> Result<crate::launch::kernel::RawKernel> {
        let f = self.get_function(name)?;
        crate::launch::kernel::RawKernel::new(f.as_raw(), self.inner.clone(), name.to_owned())
    }

    /// Checks parameter sizes; `Ok(false)` when the driver cannot tell
    /// (it lacks `cuFuncGetParamInfo`).
    fn check_params(&self, f: BorrowedFunction<'_>, name: &str, sizes: &[usize]) -> Result<bool> {
        // `Ok(None)`: no parameter `i` (the driver's CUDA_ERROR_INVALID_VALUE).
        let param = |i: usize| -> Result<Option<usize>> {
            match call("cuFuncGetParamInfo", || cu::function::get_param_info(f, i)) {
                Ok((_offset, size)) => Ok(Some(size)),
                Err(Error::Driver { error, .. }) if error.0 == CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
                Err(e) => Err(e),
            }
        };
        let mismatch = |problem: String| Error::KernelSignature { kernel: name.to_owned(), problem };
        for (i, &want) in sizes.iter().enumerate() {
            let size = match param(i) {
                Err(Error::Unsupported { .. }) => return Ok(false),
                Err(e) => return Err(e),
                Ok(None) => {
                    return Err(mismatch(format!(
                        "the Rust signature has {} parameters but the kernel has {i}",
                        sizes.len()
                    )));
                }
                Ok(Some(size)) => size,
            };
            if size != want {
                return Err(mismatch(format!(
                    "parameter {i} is {size} bytes in the kernel but {want} bytes in the Rust signature"
                )));
            }
        }
        // Asking one past the last parameter: only CUDA_ERROR_INVALID_VALUE
        // means "no such parameter"; any other failure is the driver's and is
        // reported as such.
        match param(sizes.len()) {
            Err(Error::Unsupported { .. }) => Ok(false),
            Err(e) => Err(e),
            Ok(None) => Ok(true),
            Ok(Some(_)) => {
                let mut n = sizes.len() + 1;
                while n <= 4096 && matches!(param(n), Ok(Some(_))) {
                    n += 1;
                }
                Err(mismatch(format!(
                    "the kernel has {n} parameters but the Rust signature has {}",
                    sizes.len()
                )))
            }
        }
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module(device {})", self.inner.device.ordinal())
    }
}

//! Typed kernel launches: [`Kernel`] and [`RawKernel`] over a function of a
//! loaded module; their configuration is `config`'s, their signatures
//! `signature`'s.
//!
//! A kernel's signature is a tuple of parameter types: [`In<T>`](crate::In) (a device
//! buffer the kernel reads), [`Out<T>`](crate::Out) (one it writes, and may read),
//! [`Len`](crate::Len) (an element count checked against every buffer of the launch) and
//! plain scalars (`u32`, `f32`, …). Declaring a typed kernel is `unsafe`
//! ([`Module::kernel`](crate::Module::kernel)): sizes from the driver cannot
//! tell a pointer from a `u64`, a read from a write, or how far the kernel
//! indexes, so the caller promises what the kernel does, once. A launch then
//! takes a tuple of matching arguments — `&DeviceBuffer<T>` or
//! `&DeviceSlice<T>` for `In<T>`, `&mut DeviceBuffer<T>` or
//! `&mut DeviceSliceMut<T>` for `Out<T>`, a `u64` for `Len`, the scalar
//! itself otherwise — so a wrong argument does not compile, and is safe.
//! Every buffer argument is a tracked use (see the crate docs); before the
//! driver sees a launch, each view's address is checked against its element
//! type's alignment and each `Len` against every view's length.
//!
//! Unsafe code (allowed by `launch`): `cuLaunchKernel` takes kernel
//! parameters by raw pointer, and a kernel borrows its function handle from
//! the module it keeps loaded.

use crate::device::Device;
use crate::engine::{self, Access, KeepAlive, Kind, Op, Target, Uses};
use crate::error::{Error, Result};
use crate::launch::config::LaunchConfig;
use crate::launch::module::ModuleInner;
use crate::launch::signature::{KernelArgs, MAX_PARAMS, Raw, RawArg, Signature};
use crate::stream::Stream;
use crate::trace::OpDesc;
use cuda_sys::handle::kind::FunctionKind;
use cuda_sys::result as cu;
use cuda_sys::{BorrowedFunction, RawHandle};
use cuda_sys::{CUdeviceptr, CUfunction, CUfunction_attribute};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// The arguments of one launch: exactly one [`RawArg`] per parameter.
struct Args<'s, 'a>(&'s [RawArg<'a>]);

/// Arguments whose count [`KernelCore::launch`] checked against the
/// kernel's parameters (at most [`MAX_PARAMS`], each at most 8 bytes): made
/// there only, so [`KernelCore::launch_checked`] cannot be reached without
/// the check.
struct ArgsChecked<'s, 'a>(&'s [RawArg<'a>]);

/// A launch's uses are its buffer arguments (the engine checks that the
/// stream's device reaches each).
impl Uses for Args<'_, '_> {
    #[inline(always)]
    fn iter(&self) -> impl Iterator<Item = (Target<'_>, Access)> {
        self.0.iter().filter_map(|a| match a {
            RawArg(Raw::Buffer { alloc, access, .. }) => Some((Target::Device(alloc), *access)),
            _ => None,
        })
    }

    /// The buffers in a plain loop (the filtering iterator above costs the
    /// eager flavor's passes a branch more per argument).
    #[inline(always)]
    fn each<'s>(&'s self, mut f: impl FnMut(Target<'s>, Access)) {
        for a in self.0 {
            if let RawArg(Raw::Buffer { alloc, access, .. }) = a {
                f(Target::Device(alloc), *access);
            }
        }
    }
}

/// What a kernel handle shares between its typed and raw forms.
struct KernelCore {
    /// The function, named: `module` keeps it loaded.
    f: RawHandle<FunctionKind>,
    module: Arc<ModuleInner>,
    /// The module's device (read by every launch's check without touching
    /// the module).
    device: Device,
    /// The module again, as what a captured launch keeps alive for its
    /// graph (made once, so a launch clones nothing).
    keep: KeepAlive,
    name: String,
    max_dynamic_shared: AtomicU32,
}

impl KernelCore {
    fn new(f: CUfunction, module: Arc<ModuleInner>, name: String) -> Result<KernelCore> {
        let max = Self::driver_max_dynamic_shared(f, &module)?;
        let keep: KeepAlive = module.clone();
        let device = module.device.clone();
        Ok(KernelCore {
            f: RawHandle::new(f),
            module,
            device,
            keep,
            name,
            max_dynamic_shared: AtomicU32::new(max),
        })
    }

    /// The dynamic shared memory a launch of `f` may use before anything is
    /// raised: the driver's own figure (`cuFuncGetAttribute` with
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`), which is the
    /// device's per-block limit less the function's static shared memory.
    fn driver_max_dynamic_shared(f: CUfunction, module: &ModuleInner) -> Result<u32> {
        let dev = &module.device.inner;
        let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // SAFETY: `f` is a live function of `module`, which the caller is
        // about to keep loaded; the borrow lives for this call only.
        let borrowed = unsafe { BorrowedFunction::borrow_raw(dev.drv, f) };
        let v = dev.call("cuFuncGetAttribute", || cu::function::get_attribute(borrowed, attr))?;
        // A negative size is not one the driver gives; 0 then refuses any
        // dynamic shared memory until it is raised.
        Ok(u32::try_from(v).unwrap_or(0))
    }

    fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        let dev = &self.module.device.inner;
        // SAFETY: `f` is a live function of the module this kernel keeps
        // loaded (the Arc), for the borrow's short life; shared by design.
        let f = unsafe { BorrowedFunction::borrow_raw(dev.drv, self.f.get()) };
        // The function's static shared memory counts against the same
        // opt-in limit.
        let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
        let fixed = dev.call("cuFuncGetAttribute", || cu::function::get_attribute(f, attr))?;
        let fixed = u32::try_from(fixed).unwrap_or(0);
        let room = dev.limits.max_shared_per_block_optin.saturating_sub(fixed);
        if bytes > room {
            return Err(Error::LaunchConfig {
                kernel: self.name.clone(),
                reason: format!(
                    "{bytes} bytes of dynamic shared memory exceed the {room} the device's opt-in limit of {} \
                     leaves beside the kernel's {fixed} bytes of static shared memory",
                    dev.limits.max_shared_per_block_optin
                ),
            });
        }
        let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        // The value is within what the opt-in limit leaves.
        dev.call("cuFuncSetAttribute", || cu::function::set_attribute(f, attr, bytes as i32))?;
        self.max_dynamic_shared.store(bytes, Ordering::Release);
        Ok(())
    }

    fn check(&self, stream: &Stream, cfg: &LaunchConfig) -> Result<()> {
        if !self.device.same(stream.device()) {
            return Err(Error::DeviceMismatch {
                what: "the kernel's module",
                expected: stream.device().ordinal(),
                found: self.device.ordinal(),
            });
        }
        let limits = &stream.device().inner.limits;
        cfg.validate(limits, self.max_dynamic_shared.load(Ordering::Acquire))
            .map_err(|reason| Error::LaunchConfig { kernel: self.name.clone(), reason })
    }

    #[cold]
    fn misaligned(&self, param: usize, ptr: CUdeviceptr, align: usize) -> Error {
        Error::LaunchArgument {
            kernel: self.name.clone(),
            param,
            problem: format!(
                "the view starts at {ptr:#x}, which is not aligned to the {align} bytes its element \
                 type needs (a misaligned access would fault on the device)"
            ),
        }
    }

    /// The error for a `Len` argument longer than a view: the first
    /// largest `Len` and the first shortest view, found again here (cold).
    #[cold]
    #[inline(never)]
    fn len_too_large(&self, args: &[RawArg<'_>]) -> Error {
        let mut longest: Option<(usize, u64)> = None;
        let mut shortest: Option<(usize, usize)> = None;
        for (i, a) in args.iter().enumerate() {
            match *a {
                RawArg(Raw::Len(n)) if longest.is_none_or(|(_, m)| n > m) => longest = Some((i, n)),
                RawArg(Raw::Buffer { len, .. }) if shortest.is_none_or(|(_, m)| len < m) => {
                    shortest = Some((i, len))
                }
                _ => {}
            }
        }
        let ((param, n), (view, len)) = (longest.unwrap_or_default(), shortest.unwrap_or_default());
        Error::LaunchArgument {
            kernel: self.name.clone(),
            param,
            problem: format!(
                "Len argument {n} exceeds the shortest buffer argument (parameter {view}, {len} elements)"
            ),
        }
    }

    /// The launch's entry, inlined into each signature's `launch`, where
    /// `sizes` (the signature's constant) and the length of `args` (an
    /// array of the signature's arity) are known: the check below then
    /// folds away, and [`KernelCore::launch_checked`] runs once per launch.
    #[inline(always)]
    fn launch(&self, stream: &Stream, cfg: LaunchConfig, sizes: &[usize], args: &[RawArg<'_>]) -> Result<()> {
        // The sealed traits make these agree; a launch must never hand the
        // driver fewer parameter pointers than the kernel reads.
        if sizes.len() != args.len() || args.len() > MAX_PARAMS || sizes.iter().any(|&s| s > 8) {
            return Err(self.signature_mismatch(sizes.len(), args.len()));
        }
        self.launch_checked(stream, cfg, ArgsChecked(args))
    }

    #[cold]
    fn signature_mismatch(&self, params: usize, args: usize) -> Error {
        Error::KernelSignature {
            kernel: self.name.clone(),
            problem: format!("{args} arguments for {params} parameters"),
        }
    }

    /// [`KernelCore::launch`] once the argument count is checked (the
    /// proof: `args`, an [`ArgsChecked`], which only `launch` makes).
    fn launch_checked(&self, stream: &Stream, cfg: LaunchConfig, args: ArgsChecked<'_, '_>) -> Result<()> {
        let args = args.0;
        self.check(stream, &cfg)?;
        // The slots and the parameter pointers, written by the pass below for
        // the first `args.len()` entries only (no zeroing of the twelve): the
        // driver is handed exactly those (`params`, below).
        let mut slots = [MaybeUninit::<u64>::uninit(); MAX_PARAMS];
        // The shortest view's length and the largest `Len`: one pass, then
        // one comparison; which parameters they are is found again only for
        // the error (`len_too_large`), off the hot path.
        let mut shortest = u64::MAX;
        let mut longest_len = 0u64;
        // Each parameter's pointer to its slot, set in the same pass.
        let mut params = [MaybeUninit::<*mut c_void>::uninit(); MAX_PARAMS];
        let mut written = 0usize;
        let mut home = engine::Home::new(&stream.inner);
        for (i, ((slot, p), a)) in slots.iter_mut().zip(params.iter_mut()).zip(args).enumerate() {
            let bits = match a.0 {
                Raw::Scalar(bits) => bits,
                Raw::Len(n) => {
                    longest_len = longest_len.max(n);
                    n
                }
                Raw::Buffer { alloc, ptr, len, align, .. } => {
                    // The device rule's question, asked here where every
                    // buffer is walked anyway (the engine's `Home`).
                    home.note(alloc);
                    // `align` is an `align_of`, a power of two: a mask, not a
                    // division, on the hot path.
                    if ptr & (align as u64).wrapping_sub(1) != 0 {
                        return Err(self.misaligned(i, ptr, align));
                    }
                    // `usize` to `u64`: lossless on every host Rust targets.
                    shortest = shortest.min(len as u64);
                    ptr
                }
            };
            *p = MaybeUninit::new(std::ptr::from_mut(slot.write(bits)).cast::<c_void>());
            written = i + 1;
        }
        // No buffer: `shortest` stays `u64::MAX`, which no `Len` exceeds;
        // no `Len`: 0 exceeds nothing.
        if longest_len > shortest {
            return Err(self.len_too_large(args));
        }
        let drv = stream.device().inner.drv;
        let f = self.f.get();
        // Before the launch returns: the module's unload waits for it.
        self.module.note_launch(&stream.inner);
        // The closures below take the configuration by one reference (`move`
        // of `&LaunchConfig`), not each of its fields.
        let (cfg, name) = (&cfg, &self.name);
        let describe = move || {
            let (g, b) = (cfg.grid, cfg.block);
            OpDesc::kernel(name, [g.x, g.y, g.z], [b.x, b.y, b.z], cfg.shared_mem_bytes)
        };
        // SAFETY: the pass above wrote entries `0..written` of `params` (a
        // prefix of the array: `written` is one past the last index it
        // wrote, and it writes every index in turn), so they are initialized
        // `*mut c_void`s (`MaybeUninit<T>` has `T`'s layout); the slice
        // borrows `params` mutably, as the array did before.
        let params: &mut [*mut c_void] =
            unsafe { std::slice::from_raw_parts_mut(params.as_mut_ptr().cast::<*mut c_void>(), written) };
        let uses = Args(args);
        let op = Op::new("cuLaunchKernel", Kind::Async, &uses)
            .keep(&self.keep)
            .describe(&describe)
            .naming("a buffer argument")
            .home(home);
        engine::submit(&stream.inner, op, move |raw| {
            // SAFETY: `borrow_raw`: `f` is a live function of the stream's
            // context, loaded through `drv` (the device's table, which loaded
            // the module), and the module stays loaded for the whole call (the
            // kernel's Arc keeps it; device checked above). `launch_kernel`:
            // `params` holds one pointer per parameter, each to a slot holding
            // the argument's bytes (device pointers as u64, scalars in the low
            // bytes), and the parameter count and sizes are those of the
            // signature checked at load (or vouched for by the caller of an
            // unsafe raw launch).
            // What the kernel does with them is the contract its declarer
            // promised (`Module::kernel`'s or `RawKernel::launch`'s
            // `# Safety`): it reads through `In` views, writes only through
            // `Out` ones, stays inside each view (bounded by nothing but the
            // view lengths or a `Len`, checked above to be at most every
            // view's length), and needs no more alignment than the element
            // types' (checked above). Every buffer is tracked: the kernel runs
            // after conflicting uses on other streams, and the memory
            // outlives it.
            // No second refusal: `submit` made it (`call_admitted`).
            crate::ffi::call_admitted(|| unsafe {
                let f = BorrowedFunction::borrow_raw(drv, f);
                let (g, b) = (cfg.grid, cfg.block);
                cu::launch::launch_kernel(
                    f,
                    [g.x, g.y, g.z],
                    [b.x, b.y, b.z],
                    cfg.shared_mem_bytes,
                    raw,
                    params,
                )
            })
        })?;
        Ok(())
    }
}

/// A kernel declared with the Rust signature `S`
/// ([`Module::kernel`](crate::Module::kernel), whose `# Safety` is the
/// contract that makes [`Kernel::launch`] safe).
///
/// ```
/// # let _session = gpu_sync::sim::session(0)?;
/// # gpu_sync::sim::register::<(gpu_sync::In<f32>, gpu_sync::Out<f32>, f32, gpu_sync::Len)>("scale",
/// #     |(x, y, a, n)| for i in 0..n as usize { y[i] = a * x[i] });
/// # const PTX: &[u8] = gpu_sync::sim::PTX_STUB;
/// use gpu_sync::{Device, DeviceBuffer, In, Kernel, LaunchConfig, Len, Module, Out, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let module = Module::load(&device, PTX)?;
/// // SAFETY: `scale(const float* x, float* y, float a, u64 n)` reads x[i] and
/// // writes y[i] for i < n only, and n is a `Len` (checked against both views).
/// let scale: Kernel<(In<f32>, Out<f32>, f32, Len)> = unsafe { module.kernel("scale")? };
/// let x = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0])?;
/// let mut y = DeviceBuffer::<f32>::zeroed(&stream, 2)?;
/// // `&x` for In, `&mut y` for Out: anything else does not compile.
/// scale.launch(&stream, LaunchConfig::for_elements(2, 64), (&x, &mut y, 10.0f32, 2u64))?;
/// assert_eq!(stream.to_vec(&y)?, [10.0, 20.0]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Kernel<S> {
    core: KernelCore,
    checked: bool,
    _s: PhantomData<fn(S)>,
}

impl<S: Signature> Kernel<S> {
    pub(crate) fn new(
        f: CUfunction,
        module: Arc<ModuleInner>,
        name: String,
        checked: bool,
    ) -> Result<Kernel<S>> {
        Ok(Kernel { core: KernelCore::new(f, module, name)?, checked, _s: PhantomData })
    }

    /// Launches the kernel on `stream` (`cuLaunchKernel`). Checked first,
    /// before the driver sees anything: the configuration against the
    /// device's limits, each view's address against its element type's
    /// alignment, each [`Len`](crate::Len) argument against every view's length. Each
    /// buffer argument is a tracked use: the launch waits (device-side) for
    /// conflicting uses on other streams, and later uses wait for it.
    ///
    /// Safe because whoever declared the kernel promised what it does (see
    /// [`Module::kernel`](crate::Module::kernel)).
    ///
    /// # Errors
    /// [`Error::LaunchConfig`] for a configuration the device cannot run;
    /// [`Error::LaunchArgument`] for a misaligned view or a [`Len`](crate::Len) longer
    /// than a view; [`Error::DeviceMismatch`] for a buffer or stream of
    /// another device; a driver error. Nothing is enqueued on an error
    /// returned before the driver call.
    #[inline]
    pub fn launch<A: KernelArgs<S>>(&self, stream: &Stream, cfg: LaunchConfig, args: A) -> Result<()> {
        self.core.launch(stream, cfg, S::PARAM_SIZES, args.raw_args().as_ref())
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// Whether the signature was checked against the driver at load (it is
    /// with CUDA 12.4+ drivers, which have `cuFuncGetParamInfo`).
    pub fn signature_checked(&self) -> bool {
        self.checked
    }

    /// Allows launches with up to `bytes` of dynamic shared memory
    /// (`cuFuncSetAttribute` with `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    ///
    /// # Errors
    /// [`Error::LaunchConfig`] beyond what the device's opt-in limit leaves
    /// beside the kernel's static shared memory; a driver error.
    pub fn set_max_dynamic_shared_mem(&self, bytes: u32) -> Result<()> {
        self.core.set_max_dynamic_shared(bytes)
    }

    /// The dynamic shared memory a launch may use now: what the last
    /// [`set_max_dynamic_shared_mem`](Self::set_max_dynamic_shared_mem)
    /// allowed, or at first the driver's default for this function (the
    /// device's per-block limit less the kernel's static shared memory).
    pub fn max_dynamic_shared_mem(&self) -> u32 {
        self.core.max_dynamic_shared.load(Ordering::Acquire)
    }

    /// The raw function handle.
    pub fn as_raw(&self) -> CUfunction {
        self.core.f.get()
    }
}

/// A kernel without a checked signature, for foreign kernels.
///
/// ```
/// # let _session = gpu_sync::sim::session(0)?;
/// # gpu_sync::sim::register::<(gpu_sync::Out<u32>, gpu_sync::Len)>("ones", |(y, n)| y[..n as usize].fill(1));
/// use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Len, Module, Out, Stream, sim};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let module = Module::load(&device, sim::PTX_STUB)?;
/// let ones = module.raw_kernel("ones")?; // no signature checked at load
/// let mut y = DeviceBuffer::<u32>::zeroed(&stream, 4)?;
/// // SAFETY: `ones(u32* y, unsigned long long n)` is the kernel's real
/// // parameter list; it writes y[i] = 1 for i < n only, n a checked Len.
/// unsafe { ones.launch::<(Out<u32>, Len), _>(&stream, LaunchConfig::for_elements(4, 32), (&mut y, 4u64))? };
/// assert_eq!(stream.to_vec(&y)?, [1; 4]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct RawKernel {
    core: KernelCore,
}

impl RawKernel {
    pub(crate) fn new(f: CUfunction, module: Arc<ModuleInner>, name: String) -> Result<RawKernel> {
        Ok(RawKernel { core: KernelCore::new(f, module, name)? })
    }

    /// Launches with arguments of signature `S`, unchecked against the kernel
    /// (`cuLaunchKernel`). Buffer arguments are tracked, and the configuration,
    /// alignment and [`Len`](crate::Len) arguments checked, exactly as in
    /// [`Kernel::launch`].
    ///
    /// # Errors
    /// As [`Kernel::launch`].
    ///
    /// # Safety
    /// For this launch (these arguments, this configuration):
    /// 1. `S` must be the kernel's real parameter list: the same number of
    ///    parameters, each of the type the kernel declares (a pointer for
    ///    [`In`](crate::In)/[`Out`](crate::Out), `unsigned long long` for [`Len`](crate::Len), the same scalar
    ///    type otherwise).
    /// 2. The kernel must access device memory only through its buffer
    ///    arguments, within their lengths, needing no more alignment than
    ///    their element types', and only write through [`Out`](crate::Out) ones; any
    ///    other memory it touches is the caller's to keep alive, ordered
    ///    and free of other accesses while it runs.
    pub unsafe fn launch<S: Signature, A: KernelArgs<S>>(
        &self,
        stream: &Stream,
        cfg: LaunchConfig,
        args: A,
    ) -> Result<()> {
        self.core.launch(stream, cfg, S::PARAM_SIZES, args.raw_args().as_ref())
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The raw function handle.
    pub fn as_raw(&self) -> CUfunction {
        self.core.f.get()
    }
}

impl<S> std::fmt::Debug for Kernel<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({})", self.core.name)
    }
}
impl std::fmt::Debug for RawKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawKernel({})", self.core.name)
    }
}

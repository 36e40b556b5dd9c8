//! Modules: compiled device code loaded into a device's context.
//!
//! Unsafe code: this file calls the driver (`cuModuleLoadData`,
//! `cuModuleGetFunction`, `cuFuncGetParamInfo`, `cuModuleUnload`).
#![allow(unsafe_code)]

use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::cu;
use crate::launch::{Kernel, Signature};
use cuda_sys::{CUfunction, CUmodule, CUresult};
use std::ffi::CString;
use std::sync::Arc;

pub(crate) struct ModuleInner {
    pub raw: CUmodule,
    pub device: Device,
}

// SAFETY: a `CUmodule` is not tied to the thread that loaded it: the driver
// lets any thread look functions up in a module and launch them (modules are
// not among the objects it leaves unsynchronized; graphs are). `cuModuleUnload`
// runs once, in `Drop`, when no `Kernel` or graph holds the module any more.
unsafe impl Send for ModuleInner {}
// SAFETY: through `&ModuleInner` the handle is only read and passed to
// `cuModuleGetFunction`, which the driver allows concurrently.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let dev = &self.device.inner;
        let r = dev.bind().and_then(|()| {
            // SAFETY: the last handle (module, kernels, graphs holding it) is
            // gone, so no launch of its functions can be issued any more.
            unsafe { cu!(dev.drv, cuModuleUnload(self.raw)) }
        });
        if let Err(e) = r {
            log::warn!("leaking a CUDA module: {e}");
        }
    }
}

/// Device code loaded into a device's primary context (`cuModuleLoadData`):
/// a fatbin, cubin or NUL-terminated PTX image. Unloaded (`cuModuleUnload`)
/// when the module and every kernel and graph taken from it are dropped.
///
/// ```
/// # let _session = gpu_sync::sim::session(0)?;
/// # gpu_sync::sim::register::<(gpu_sync::Out<u32>, u32, u64)>("fill", |(out, v, n)| out[..n as usize].fill(v));
/// # const PTX: &[u8] = gpu_sync::sim::PTX_STUB;
/// use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Module, Out, Stream};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let module = Module::load(&device, PTX)?; // cuModuleLoadData: fatbin, cubin or PTX
/// #[allow(unused_unsafe)]
/// // SAFETY: `fill(unsigned* out, unsigned v, u64 n)` writes `out[i]` for
/// // i < n only, and every launch passes n ≤ out's length.
/// let fill = unsafe { module.kernel::<(Out<u32>, u32, u64)>("fill")? };
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
    /// Loads `image` into `device`'s context. The driver copies what it needs;
    /// `image` can be dropped afterwards.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty image; a driver error
    /// (`CUDA_ERROR_INVALID_IMAGE`, `CUDA_ERROR_NO_BINARY_FOR_GPU` when it has
    /// no code for this GPU).
    pub fn load(device: &Device, image: &[u8]) -> Result<Module> {
        if image.is_empty() {
            return Err(Error::InvalidArgument("empty module image".into()));
        }
        let dev = &device.inner;
        dev.bind()?;
        let mut raw: CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is a live byte slice for the whole call; the driver
        // reads the image's own headers to find its length (a fatbin or ELF
        // header, or PTX up to its NUL) and copies what it loads.
        unsafe { cu!(dev.drv, cuModuleLoadData(&mut raw, image.as_ptr().cast())) }?;
        Ok(Module { inner: Arc::new(ModuleInner { raw, device: device.clone() }) })
    }

    /// The module's device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    fn get_function(&self, name: &str) -> Result<CUfunction> {
        let cname = CString::new(name)
            .map_err(|_| Error::InvalidArgument(format!("kernel name {name:?} contains a NUL byte")))?;
        let dev = &self.inner.device.inner;
        dev.bind()?;
        let mut f: CUfunction = std::ptr::null_mut();
        // SAFETY: writes one function handle; the module is live and the name
        // NUL-terminated.
        let r = unsafe { cu!(dev.drv, cuModuleGetFunction(&mut f, self.inner.raw, cname.as_ptr())) };
        match r {
            Err(Error::Driver { error, .. }) if error.0 == CUresult::CUDA_ERROR_NOT_FOUND => {
                Err(Error::KernelSignature {
                    kernel: name.to_owned(),
                    problem: "no such kernel in the module".into(),
                })
            }
            other => other.map(|()| f),
        }
    }

    /// The kernel `name` with the Rust signature `S`, checked against the
    /// driver's parameter list (`cuFuncGetParamInfo`, CUDA 12.4+): the same
    /// number of parameters, each of the size `S` says. Drivers without that
    /// call skip the check ([`Kernel::signature_checked`] says which).
    ///
    /// # Errors
    /// [`Error::KernelSignature`] naming the kernel and the parameter that
    /// differs, or when the module has no such kernel; a driver error.
    pub fn kernel<S: Signature>(&self, name: &str) -> Result<Kernel<S>> {
        let f = self.get_function(name)?;
        let checked = self.check_params(f, name, S::PARAM_SIZES)?;
        Ok(Kernel::new(f, self.inner.clone(), name.to_owned(), checked))
    }

    /// The kernel `name` without a checked signature, for foreign kernels
    /// launched with [`crate::RawKernel::launch`].
    ///
    /// # Errors
    /// As [`Module::kernel`] for a missing kernel.
    pub fn raw_kernel(&self, name: &str) -> Result<crate::launch::RawKernel> {
        let f = self.get_function(name)?;
        Ok(crate::launch::RawKernel::new(f, self.inner.clone(), name.to_owned()))
    }

    /// Checks parameter sizes; `Ok(false)` when the driver cannot tell.
    fn check_params(&self, f: CUfunction, name: &str, sizes: &[usize]) -> Result<bool> {
        let drv = self.inner.device.inner.drv;
        let Some(info) = drv.cuFuncGetParamInfo else {
            return Ok(false);
        };
        let mismatch = |problem: String| Error::KernelSignature { kernel: name.to_owned(), problem };
        for (i, &want) in sizes.iter().enumerate() {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: `info` is the driver's cuFuncGetParamInfo; it writes two
            // size_t through valid pointers for a live function handle.
            let r = unsafe { info(f, i, &mut offset, &mut size) };
            if r == CUresult::CUDA_ERROR_INVALID_VALUE {
                return Err(mismatch(format!(
                    "the Rust signature has {} parameters but the kernel has {i}",
                    sizes.len()
                )));
            }
            crate::ffi::check("cuFuncGetParamInfo", r)?;
            if size != want {
                return Err(mismatch(format!(
                    "parameter {i} is {size} bytes in the kernel but {want} bytes in the Rust signature"
                )));
            }
        }
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: as above; asking one past the last parameter.
        let r = unsafe { info(f, sizes.len(), &mut offset, &mut size) };
        // Only CUDA_ERROR_INVALID_VALUE means "no such parameter"; any other
        // failure is the driver's and is reported as such.
        if r != CUresult::CUDA_ERROR_INVALID_VALUE {
            crate::ffi::check("cuFuncGetParamInfo", r)?;
            let mut n = sizes.len() + 1;
            loop {
                // SAFETY: as above.
                let r = unsafe { info(f, n, &mut offset, &mut size) };
                if r != CUresult::CUDA_SUCCESS || n > 4096 {
                    break;
                }
                n += 1;
            }
            return Err(mismatch(format!(
                "the kernel has {n} parameters but the Rust signature has {}",
                sizes.len()
            )));
        }
        Ok(true)
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module(device {})", self.inner.device.ordinal())
    }
}

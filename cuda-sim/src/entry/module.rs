//! Modules, functions and kernel launches.
#![allow(non_snake_case)]

use super::device::effective_attribute;
use super::{api, handle, id, need, put};
use crate::graph::{add_node, capture_of};
use crate::module::{Function, Module, param_layout};
use crate::ops::{Launch, Work};
use crate::registry::lookup_kernel;
use crate::result::{
    CUresult, INVALID_CONTEXT, INVALID_HANDLE, INVALID_IMAGE, INVALID_VALUE, NOT_FOUND, NOT_SUPPORTED, Res,
};
use crate::state::{Caller, State};
use crate::stream::{self, Waits};
use cuda_sys::{CUdevice_attribute as A, CUfunction, CUfunction_attribute, CUmodule, CUstream};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

/// The fatbin header magic.
const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// Whether `image` starts like a binary module (a fatbin or an ELF cubin):
/// its first 4 bytes, read one at a time and stopping at a NUL, so a short
/// PTX string is never read past its end (the binary magics contain no NUL
/// byte).
///
/// # Safety
/// `image` must be non-null and point to a module image as CUDA defines it:
/// at least 4 readable bytes for a binary, or a NUL-terminated string.
unsafe fn is_binary(image: *const u8) -> bool {
    let mut head = [0u8; 4];
    for (k, slot) in head.iter_mut().enumerate() {
        // SAFETY: bytes up to the first NUL (or the first 4 of a binary
        // image) are readable (the caller's obligation).
        let b = unsafe { image.add(k).read() };
        if b == 0 {
            break;
        }
        *slot = b;
    }
    u32::from_le_bytes(head) == FATBIN_MAGIC || head == *b"\x7fELF"
}

/// The text of a PTX image (not a fatbin or ELF), if it is one.
///
/// # Safety
/// As [`is_binary`]: `image` is a valid module image.
unsafe fn ptx_text<'a>(image: *const u8) -> Option<&'a str> {
    // SAFETY: the caller's obligation, as `is_binary` needs it.
    if unsafe { is_binary(image) } {
        return None;
    }
    // SAFETY: a PTX image is a NUL-terminated string (the caller's promise).
    unsafe { std::ffi::CStr::from_ptr(image.cast()) }.to_str().ok()
}

/// Whether `image` looks like a fatbin, an ELF cubin or PTX text.
///
/// # Safety
/// As [`is_binary`]: `image` is a valid module image.
unsafe fn valid_image(image: *const u8) -> bool {
    // SAFETY: the caller's obligation, as `is_binary` needs it.
    if unsafe { is_binary(image) } {
        return true;
    }
    // PTX: after whitespace, "//" or ".version". Read byte by byte and stop
    // at the terminating NUL, so no byte past the string is read.
    let mut i = 0usize;
    loop {
        // SAFETY: every byte up to the terminating NUL is readable; the loop
        // stops at the first NUL.
        let b = unsafe { image.add(i).read() };
        if b == 0 || !b.is_ascii_whitespace() {
            break;
        }
        i += 1;
    }
    let mut prefix = [0u8; 8];
    for (k, slot) in prefix.iter_mut().enumerate() {
        // SAFETY: as above; stops at NUL.
        let b = unsafe { image.add(i + k).read() };
        if b == 0 {
            break;
        }
        *slot = b;
    }
    prefix.starts_with(b"//") || prefix == *b".version"
}

pub(super) unsafe extern "C" fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) -> CUresult {
    api("cuModuleLoadData", |st, caller| {
        need(module)?;
        need(image)?;
        let device = st.current_device(caller)?;
        // SAFETY: `image` is non-null and, by CUDA's contract, a module image.
        if !unsafe { valid_image(image.cast::<u8>()) } {
            return Err(INVALID_IMAGE);
        }
        // SAFETY: `image` is a valid module image (checked above); for PTX,
        // a NUL-terminated text by CUDA's contract.
        let entries = unsafe { ptx_text(image.cast::<u8>()) }.and_then(crate::module::ptx_entries);
        let h = st.new_handle();
        st.modules.insert(h, Module { session: caller.session, device, functions: HashMap::new(), entries });
        st.session_mut(caller.session).live.modules += 1;
        // SAFETY: output slot from the caller.
        unsafe { put(module, handle(h)) }
    })
}

/// `cuModuleUnload`: its functions die with it (queued launches keep
/// their own copy of the kernel).
pub(super) unsafe extern "C" fn cuModuleUnload(hmod: CUmodule) -> CUresult {
    api("cuModuleUnload", |st, _| {
        let m = st.modules.remove(&id(hmod)).ok_or(INVALID_HANDLE)?;
        for f in m.functions.values() {
            st.functions.remove(f);
        }
        let s = st.session_mut(m.session);
        s.live.modules = s.live.modules.saturating_sub(1);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuModuleGetFunction(
    hfunc: *mut CUfunction,
    hmod: CUmodule,
    name: *const c_char,
) -> CUresult {
    api("cuModuleGetFunction", |st, _| {
        need(hfunc)?;
        need(name)?;
        let m = id(hmod);
        // SAFETY: `name` is a non-null NUL-terminated string (CUDA's contract).
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NOT_FOUND)?;
        let module = st.modules.get(&m).ok_or(INVALID_HANDLE)?;
        if let Some(entries) = &module.entries
            && !entries.contains(name)
        {
            log::warn!(
                "cuda-sim: cuModuleGetFunction({name:?}): the PTX declares no .entry {name} (it declares {:?}); \
                 a CUDA C++ kernel needs extern \"C\" to keep its plain name",
                entries.iter().collect::<Vec<_>>()
            );
            return Err(NOT_FOUND);
        }
        let device = module.device;
        let spec = lookup_kernel(name).ok_or(NOT_FOUND)?;
        let f = match module.functions.get(spec.name) {
            Some(&f) => f,
            None => {
                let f = st.new_handle();
                st.functions.insert(f, Function::new(device, spec));
                if let Some(module) = st.modules.get_mut(&m) {
                    module.functions.insert(spec.name, f);
                }
                f
            }
        };
        // SAFETY: output slot from the caller.
        unsafe { put(hfunc, handle(f)) }
    })
}

fn function(st: &State, f: CUfunction) -> Res<&Function> {
    st.functions.get(&id(f)).ok_or(INVALID_HANDLE)
}

/// `cuFuncGetParamInfo`: offsets with natural alignment (at most 8);
/// `paramSize` may be null.
pub(super) unsafe extern "C" fn cuFuncGetParamInfo(
    func: CUfunction,
    paramIndex: usize,
    paramOffset: *mut usize,
    paramSize: *mut usize,
) -> CUresult {
    api("cuFuncGetParamInfo", |st, _| {
        need(paramOffset)?;
        let f = function(st, func)?;
        let &(off, size) = param_layout(&f.spec).get(paramIndex).ok_or(INVALID_VALUE)?;
        // SAFETY: output slots from the caller (`paramSize` only if non-null).
        unsafe {
            put(paramOffset, off)?;
            if !paramSize.is_null() {
                put(paramSize, size)?;
            }
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: CUfunction_attribute,
    hfunc: CUfunction,
) -> CUresult {
    api("cuFuncGetAttribute", |st, _| {
        need(pi)?;
        let v = function(st, hfunc)?.attribute(attrib)?;
        // SAFETY: output slot from the caller.
        unsafe { put(pi, v) }
    })
}

pub(super) unsafe extern "C" fn cuFuncSetAttribute(
    hfunc: CUfunction,
    attrib: CUfunction_attribute,
    value: c_int,
) -> CUresult {
    api("cuFuncSetAttribute", |st, _| {
        st.functions.get_mut(&id(hfunc)).ok_or(INVALID_HANDLE)?.set_attribute(attrib, value)
    })
}

pub(super) unsafe extern "C" fn cuFuncGetName(name: *mut *const c_char, hfunc: CUfunction) -> CUresult {
    api("cuFuncGetName", |st, _| {
        need(name)?;
        let n = function(st, hfunc)?.name;
        // SAFETY: output slot from the caller; the name is interned for the
        // life of the process.
        unsafe { put(name, n.as_ptr()) }
    })
}

/// Checks a launch's geometry against the device limits `caller` sees.
fn check_geometry(
    st: &State,
    caller: &Caller,
    f: &Function,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
) -> Res {
    let attr = |a: A| effective_attribute(st, caller.session, f.device, a).map(|v| v.max(0) as u64);
    let max_grid = [
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
    ];
    let max_block = [
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
    ];
    let max_threads = attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    let within = |v: &[u32; 3], m: &[u64; 3]| v.iter().zip(m).all(|(&x, &m)| x >= 1 && u64::from(x) <= m);
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    let shared_ok = i64::from(shared) <= i64::from(f.max_dynamic_shared);
    if within(&grid, &max_grid) && within(&block, &max_block) && threads <= max_threads && shared_ok {
        Ok(())
    } else {
        Err(INVALID_VALUE)
    }
}

/// Copies each parameter's bytes (sizes from the registration).
///
/// # Safety
/// `params` must be null or an array with one valid pointer per parameter
/// of the kernel, each readable for that parameter's size.
unsafe fn copy_params(f: &Function, params: *mut *mut c_void) -> Res<Vec<Vec<u8>>> {
    let n = f.spec.params.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    need(params)?;
    let mut args = Vec::with_capacity(n);
    for (i, p) in f.spec.params.iter().enumerate() {
        // SAFETY: `params` has `n` entries (caller's obligation).
        let arg = unsafe { params.add(i).read() };
        need(arg)?;
        // SAFETY: `arg` points to the parameter's value, `p.size` bytes
        // (caller's obligation, the same as the real driver's).
        args.push(unsafe { std::slice::from_raw_parts(arg.cast::<u8>(), p.size) }.to_vec());
    }
    Ok(args)
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn cuLaunchKernel(
    f: CUfunction,
    gridDimX: c_uint,
    gridDimY: c_uint,
    gridDimZ: c_uint,
    blockDimX: c_uint,
    blockDimY: c_uint,
    blockDimZ: c_uint,
    sharedMemBytes: c_uint,
    hStream: CUstream,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    api("cuLaunchKernel", |st, caller| {
        let func = function(st, f)?;
        if !extra.is_null() {
            return Err(NOT_SUPPORTED);
        }
        let (grid, block) = ([gridDimX, gridDimY, gridDimZ], [blockDimX, blockDimY, blockDimZ]);
        check_geometry(st, caller, func, grid, block, sharedMemBytes)?;
        // SAFETY: `kernelParams` follows CUDA's contract for cuLaunchKernel.
        let args = unsafe { copy_params(func, kernelParams)? };
        let (spec, device) = (func.spec, func.device);
        // A launch runs in the current context: the function's module and
        // the stream must both belong to it (a launch into a stream of
        // another device than the current one fails, as the CUDA
        // programming guide states for multi-device programs).
        if st.current_device(caller)? != device {
            return Err(INVALID_CONTEXT);
        }
        let sid = stream::resolve(st, caller, hStream)?;
        if st.streams.get(&sid).is_none_or(|s| s.device != device) {
            return Err(INVALID_HANDLE);
        }
        let work = Work::Kernel(Arc::new(Launch { spec, grid, block, shared: sharedMemBytes, args }));
        if capture_of(st, sid).is_some() {
            return add_node(st, sid, work);
        }
        stream::enqueue(st, sid, work, Waits::default()).map(|_| ())
    })
}

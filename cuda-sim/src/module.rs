//! Modules and functions: every simulated module exposes every kernel in
//! the registry; a function carries the kernel's registration and its
//! settable attributes.

use crate::device::{DEFAULT_SHARED, OPTIN_SHARED};
use crate::registry::KernelSpec;
use crate::result::{INVALID_VALUE, Res};
use cuda_sys::CUfunction_attribute as F;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

/// A loaded module.
#[derive(Debug)]
pub(crate) struct Module {
    pub(crate) session: u64,
    pub(crate) device: i32,
    /// Functions handed out, by name.
    pub(crate) functions: HashMap<&'static str, u64>,
    /// For a PTX image that declares kernels: their `.entry` names. A
    /// registered kernel is found in such a module only under one of them,
    /// as on a GPU (a C++ kernel without `extern "C"` has a mangled entry
    /// name, and asking for the plain one fails there too).
    pub(crate) entries: Option<std::collections::HashSet<String>>,
}

/// The `.entry` names a PTX text declares; `None` when it declares none (a
/// stand-in image, as the simulator's own tests load).
pub(crate) fn ptx_entries(ptx: &str) -> Option<std::collections::HashSet<String>> {
    let names: std::collections::HashSet<String> = ptx
        .split(".entry")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect();
    (!names.is_empty()).then_some(names)
}

/// A function of a module.
#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) device: i32,
    pub(crate) name: &'static CStr,
    pub(crate) spec: KernelSpec,
    pub(crate) max_dynamic_shared: i32,
    pub(crate) carveout: i32,
}

impl Function {
    /// A function for `spec` in a module of `device`.
    pub(crate) fn new(device: i32, spec: KernelSpec) -> Function {
        Function { device, name: intern(spec.name), spec, max_dynamic_shared: DEFAULT_SHARED, carveout: -1 }
    }

    /// `cuFuncGetAttribute`.
    pub(crate) fn attribute(&self, attr: F) -> Res<i32> {
        Ok(match attr {
            F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => 1024,
            F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
            | F::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
            | F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES => 0,
            F::CU_FUNC_ATTRIBUTE_NUM_REGS => 32,
            F::CU_FUNC_ATTRIBUTE_PTX_VERSION | F::CU_FUNC_ATTRIBUTE_BINARY_VERSION => 90,
            F::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA => 0,
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => self.max_dynamic_shared,
            F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => self.carveout,
            F::CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET
            | F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH
            | F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT
            | F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH
            | F::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            | F::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE => 0,
            _ => return Err(INVALID_VALUE),
        })
    }

    /// `cuFuncSetAttribute`: the dynamic shared memory limit (up to the
    /// opt-in limit) and the carveout preference are settable.
    pub(crate) fn set_attribute(&mut self, attr: F, value: i32) -> Res {
        match attr {
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES if (0..=OPTIN_SHARED).contains(&value) => {
                self.max_dynamic_shared = value;
            }
            F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT if (-1..=100).contains(&value) => {
                self.carveout = value;
            }
            _ => return Err(INVALID_VALUE),
        }
        Ok(())
    }
}

/// Natural alignment of a parameter of `size` bytes: the largest power of
/// two dividing it, at most 8.
fn align_of_size(size: usize) -> usize {
    if size == 0 { 1 } else { (1usize << size.trailing_zeros()).min(8) }
}

/// `(offset, size)` of each parameter in the parameter buffer.
pub(crate) fn param_layout(spec: &KernelSpec) -> Vec<(usize, usize)> {
    let mut off = 0usize;
    spec.params
        .iter()
        .map(|p| {
            let a = align_of_size(p.size);
            off = off.div_ceil(a) * a;
            let here = off;
            off += p.size;
            (here, p.size)
        })
        .collect()
}

/// A `'static` NUL-terminated copy of a kernel name (interned: one leak per
/// distinct registered name).
pub(crate) fn intern(name: &'static str) -> &'static CStr {
    static NAMES: OnceLock<Mutex<HashMap<&'static str, &'static CStr>>> = OnceLock::new();
    let mut m = NAMES.get_or_init(|| Mutex::new(HashMap::new())).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = m.get(name) {
        return c;
    }
    let owned = CString::new(name.replace('\0', "")).unwrap_or_default();
    let leaked: &'static CStr = Box::leak(owned.into_boxed_c_str());
    m.insert(name, leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{KernelCall, KernelFault, ParamSpec};

    fn nop(_: &mut KernelCall<'_>) -> Result<(), KernelFault> {
        Ok(())
    }

    #[test]
    fn params_are_naturally_aligned() {
        static P: [ParamSpec; 4] = [
            ParamSpec::scalar::<u8>(),
            ParamSpec::read(),
            ParamSpec::scalar::<u32>(),
            ParamSpec::scalar::<[u32; 3]>(),
        ];
        let spec = KernelSpec { name: "k", params: &P, run: nop, duration: None };
        assert_eq!(param_layout(&spec), vec![(0, 1), (8, 8), (16, 4), (20, 12)]);
        assert_eq!(intern("k").to_bytes(), b"k");
        assert!(std::ptr::eq(intern("k"), intern("k")));
    }
}

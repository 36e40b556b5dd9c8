//! The kernel registry: CPU reference implementations that the simulator runs
//! in place of device code, registered by kernel name.
//!
//! A registration says, for each parameter, its size in bytes and whether it
//! is a scalar or a device pointer the kernel reads, writes, or both. The
//! simulator uses the sizes for `cuFuncGetParamInfo` and the access kinds for
//! the race oracle; the implementation reads and writes device memory only
//! through [`KernelCall`], which checks every access against the live
//! allocations (an access outside them is `CUDA_ERROR_ILLEGAL_ADDRESS`, a
//! sticky error, as on a GPU) and records it for the oracle.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// How a kernel uses one parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// A plain value passed by copy (sizes 1, 2, 4, 8 or a `#[repr(C)]` struct).
    Scalar,
    /// A device pointer the kernel only reads through.
    Read,
    /// A device pointer the kernel only writes through.
    Write,
    /// A device pointer the kernel reads and writes through (counts as a write
    /// for the race oracle).
    ReadWrite,
}

/// One parameter of a registered kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParamSpec {
    /// Size in bytes, as `cuFuncGetParamInfo` reports it (8 for pointers).
    pub size: usize,
    /// How the kernel uses it.
    pub kind: ParamKind,
}

impl ParamSpec {
    /// A scalar parameter of `T`.
    pub const fn scalar<T>() -> ParamSpec {
        ParamSpec { size: std::mem::size_of::<T>(), kind: ParamKind::Scalar }
    }
    /// A device pointer the kernel reads.
    pub const fn read() -> ParamSpec {
        ParamSpec { size: 8, kind: ParamKind::Read }
    }
    /// A device pointer the kernel writes.
    pub const fn write() -> ParamSpec {
        ParamSpec { size: 8, kind: ParamKind::Write }
    }
    /// A device pointer the kernel reads and writes.
    pub const fn read_write() -> ParamSpec {
        ParamSpec { size: 8, kind: ParamKind::ReadWrite }
    }
}

/// A fault a reference implementation reports; the simulator turns it into
/// the `CUresult` a GPU would give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelFault {
    /// An access outside every allocation (memory never mapped; freed
    /// memory is not a fault but a race-oracle report):
    /// `CUDA_ERROR_ILLEGAL_ADDRESS`, which poisons the context.
    #[error("kernel {kernel}: parameter {param} accesses {len} bytes at {addr:#x}, outside every allocation")]
    IllegalAddress {
        /// The kernel.
        kernel: String,
        /// The parameter index.
        param: usize,
        /// First byte accessed.
        addr: u64,
        /// Bytes accessed.
        len: u64,
    },
    /// The implementation used a parameter against its registration (wrong
    /// index, size, or a write through a read-only pointer): a bug in the
    /// registration, reported as `CUDA_ERROR_INVALID_VALUE`.
    #[error("kernel {kernel}: parameter {param}: {what}")]
    BadParam {
        /// The kernel.
        kernel: String,
        /// The parameter index.
        param: usize,
        /// What was wrong.
        what: String,
    },
}

/// Device memory as a reference implementation sees it; implemented by the
/// simulator's memory.
pub(crate) trait DeviceMemory {
    /// Copies `out.len()` bytes starting at device address `addr` into `out`.
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), (u64, u64)>;
    /// Copies `data` to device address `addr`.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), (u64, u64)>;
    /// Bytes from `addr` to the end of the device-visible allocation
    /// holding it, freed or not (`None` outside every such allocation).
    fn extent(&self, addr: u64) -> Option<u64>;

    /// Checks that `len` bytes at device address `addr` lie inside one
    /// device-visible allocation (freed or not), without touching them.
    fn check(&self, addr: u64, len: u64) -> Result<(), (u64, u64)>;

    /// The path an access at `addr` takes from the launch's device
    /// (`None` where that is not known, or `addr` is outside every
    /// device-visible allocation).
    fn path(&self, _addr: u64) -> Option<crate::model::Path> {
        None
    }
}

/// A byte range one kernel touched through one parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touched {
    /// Parameter index.
    pub param: usize,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether it was written (else read).
    pub write: bool,
}

/// One launch as the reference implementation sees it: launch geometry,
/// parameter values, and checked access to device memory.
pub struct KernelCall<'a> {
    pub(crate) spec: &'a KernelSpec,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_mem_bytes: u32,
    /// Raw bytes of each parameter, as copied at launch.
    pub(crate) args: Vec<Vec<u8>>,
    pub(crate) memory: &'a mut dyn DeviceMemory,
    pub(crate) touched: Vec<Touched>,
}

impl KernelCall<'_> {
    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        self.spec.name
    }
    /// Grid dimensions of the launch.
    pub fn grid(&self) -> [u32; 3] {
        self.grid
    }
    /// Block dimensions of the launch.
    pub fn block(&self) -> [u32; 3] {
        self.block
    }
    /// Dynamic shared memory bytes of the launch.
    pub fn shared_mem_bytes(&self) -> u32 {
        self.shared_mem_bytes
    }
    /// Total threads launched.
    pub fn threads(&self) -> u64 {
        // Saturating: a maximal grid of maximal blocks exceeds u64.
        self.grid.iter().chain(&self.block).fold(1u64, |acc, &v| acc.saturating_mul(u64::from(v)))
    }

    fn bad(&self, param: usize, what: impl Into<String>) -> KernelFault {
        KernelFault::BadParam { kernel: self.spec.name.to_owned(), param, what: what.into() }
    }

    fn param(&self, index: usize) -> Result<(&ParamSpec, &[u8]), KernelFault> {
        match (self.spec.params.get(index), self.args.get(index)) {
            (Some(p), Some(a)) => Ok((p, a)),
            _ => Err(self.bad(index, "no such parameter")),
        }
    }

    /// The value of scalar parameter `index`.
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] if it is not a scalar of `T`'s size.
    pub fn scalar<T: bytemuck::Pod>(&self, index: usize) -> Result<T, KernelFault> {
        let (p, a) = self.param(index)?;
        if p.kind != ParamKind::Scalar || a.len() != std::mem::size_of::<T>() {
            return Err(self.bad(index, format!("not a scalar of {} bytes", std::mem::size_of::<T>())));
        }
        Ok(bytemuck::pod_read_unaligned(a))
    }

    /// The device address held by pointer parameter `index`.
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] if it is not a pointer parameter.
    pub fn ptr(&self, index: usize) -> Result<u64, KernelFault> {
        let (p, a) = self.param(index)?;
        if p.kind == ParamKind::Scalar || a.len() != 8 {
            return Err(self.bad(index, "not a pointer"));
        }
        Ok(bytemuck::pod_read_unaligned(a))
    }

    /// Bytes a kernel may address through pointer parameter `index`: from
    /// the pointer to the end of the allocation holding it, freed or not (0 when it
    /// points into none, for example a null pointer).
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] if it is not a pointer parameter.
    pub fn extent(&self, index: usize) -> Result<u64, KernelFault> {
        let ptr = self.ptr(index)?;
        Ok(self.memory.extent(ptr).unwrap_or(0))
    }

    /// The path through which pointer parameter `index` reaches its memory
    /// from the launch's device ([`crate::model::Path`]): its own memory,
    /// a peer's over the link, or mapped host memory over the host link;
    /// `None` when the pointer is outside every allocation the launch may
    /// reach, or the call does not know (a duration function's call made
    /// before the launch's memory is known). A duration function prices
    /// the bytes of each path at that path's roof
    /// ([`crate::model::Traffic`]).
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] if it is not a pointer parameter.
    pub fn path(&self, index: usize) -> Result<Option<crate::model::Path>, KernelFault> {
        let ptr = self.ptr(index)?;
        Ok(self.memory.path(ptr))
    }

    /// Checks that `len` elements of `T` starting `offset` elements past
    /// pointer parameter `index` lie inside one allocation (freed ones included:
    /// their use is reported, not a fault), and returns
    /// the address of the first. Call it before allocating a host buffer
    /// whose size comes from a launch argument (a kernel that fills `n`
    /// elements): an oversized length is then an illegal address, as on a
    /// GPU, instead of a huge allocation. [`KernelCall::read_at`] checks
    /// this itself.
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] for a scalar parameter;
    /// [`KernelFault::IllegalAddress`] for a range outside every
    /// allocation (a byte count that overflows included).
    pub fn check_access<T: bytemuck::Pod>(
        &self,
        index: usize,
        offset: u64,
        len: usize,
    ) -> Result<u64, KernelFault> {
        let base = self.ptr(index)?;
        let size = std::mem::size_of::<T>() as u64;
        let addr = base.wrapping_add(offset.wrapping_mul(size));
        let illegal = |len: u64| KernelFault::IllegalAddress {
            kernel: self.spec.name.to_owned(),
            param: index,
            addr,
            len,
        };
        let bytes = offset
            .checked_mul(size)
            .and_then(|_| (len as u64).checked_mul(size))
            .ok_or_else(|| illegal(u64::MAX))?;
        if bytes > 0 {
            self.memory.check(addr, bytes).map_err(|(_, len)| illegal(len))?;
        }
        Ok(addr)
    }

    /// Reads `len` elements of `T` starting `offset` elements past pointer
    /// parameter `index`.
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] for a write-only or scalar parameter;
    /// [`KernelFault::IllegalAddress`] outside every allocation (never mapped).
    pub fn read_at<T: bytemuck::Pod>(
        &mut self,
        index: usize,
        offset: u64,
        len: usize,
    ) -> Result<Vec<T>, KernelFault> {
        if self.spec.params.get(index).is_some_and(|p| p.kind == ParamKind::Write) {
            return Err(self.bad(index, "read through a write-only pointer"));
        }
        // The range is checked before the host buffer is allocated: a
        // length argument larger than the buffer is an illegal address, as
        // on a GPU, never an allocation of that many bytes.
        let addr = self.check_access::<T>(index, offset, len)?;
        let mut out = vec![T::zeroed(); len];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let n = bytes.len() as u64;
        if n > 0 {
            self.memory.read(addr, bytes).map_err(|(addr, len)| KernelFault::IllegalAddress {
                kernel: self.spec.name.to_owned(),
                param: index,
                addr,
                len,
            })?;
            self.touched.push(Touched { param: index, addr, len: n, write: false });
        }
        Ok(out)
    }

    /// Reads `len` elements of `T` at pointer parameter `index`.
    ///
    /// # Errors
    /// As [`KernelCall::read_at`].
    pub fn read<T: bytemuck::Pod>(&mut self, index: usize, len: usize) -> Result<Vec<T>, KernelFault> {
        self.read_at(index, 0, len)
    }

    /// Writes `data` starting `offset` elements past pointer parameter `index`.
    ///
    /// # Errors
    /// [`KernelFault::BadParam`] for a read-only or scalar parameter;
    /// [`KernelFault::IllegalAddress`] outside every allocation (never mapped).
    pub fn write_at<T: bytemuck::Pod>(
        &mut self,
        index: usize,
        offset: u64,
        data: &[T],
    ) -> Result<(), KernelFault> {
        let base = self.ptr(index)?;
        if self.spec.params[index].kind == ParamKind::Read {
            return Err(self.bad(index, "write through a read-only pointer"));
        }
        let size = std::mem::size_of::<T>() as u64;
        let addr = base.wrapping_add(offset.wrapping_mul(size));
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let n = bytes.len() as u64;
        if n > 0 {
            self.memory.write(addr, bytes).map_err(|(addr, len)| KernelFault::IllegalAddress {
                kernel: self.spec.name.to_owned(),
                param: index,
                addr,
                len,
            })?;
            self.touched.push(Touched { param: index, addr, len: n, write: true });
        }
        Ok(())
    }

    /// Writes `data` at pointer parameter `index`.
    ///
    /// # Errors
    /// As [`KernelCall::write_at`].
    pub fn write<T: bytemuck::Pod>(&mut self, index: usize, data: &[T]) -> Result<(), KernelFault> {
        self.write_at(index, 0, data)
    }
}

/// A reference implementation: runs the whole launch.
pub type KernelFn = fn(&mut KernelCall<'_>) -> Result<(), KernelFault>;

/// Simulated duration of a launch in nanoseconds (for timing events).
pub type DurationFn = fn(&KernelCall<'_>) -> u64;

/// A kernel known to the simulator.
#[derive(Debug, Clone, Copy)]
pub struct KernelSpec {
    /// The kernel's name as `cuModuleGetFunction` is asked for it (the
    /// `extern "C"` symbol).
    pub name: &'static str,
    /// Its parameters, in order.
    pub params: &'static [ParamSpec],
    /// The reference implementation.
    pub run: KernelFn,
    /// Its simulated duration; `None`: the device model's (`model::kernel_ns`) for the
    /// bytes its pointer parameters may touch.
    pub duration: Option<DurationFn>,
}

fn registry() -> &'static Mutex<HashMap<&'static str, KernelSpec>> {
    static REGISTRY: OnceLock<Mutex<HashMap<&'static str, KernelSpec>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers (or replaces) a kernel by name. `cuModuleGetFunction` on any
/// simulated module finds every registered kernel.
pub fn register_kernel(spec: KernelSpec) {
    registry().lock().unwrap_or_else(|p| p.into_inner()).insert(spec.name, spec);
}

/// The registered kernel of this name.
pub fn lookup_kernel(name: &str) -> Option<KernelSpec> {
    registry().lock().unwrap_or_else(|p| p.into_inner()).get(name).copied()
}

//! A launch's arguments as the CPU twins of [`super`] read them: by the
//! `.cu` parameter names of the kernel's spec entry ([`Args`]), never by
//! position, and checked against the spec (alignment, extents) before any
//! host buffer is made.

use super::{SIM_CLOCK_GHZ, probe_duration};
use crate::spec::{Extent, KernelId, ParamKind};
use cuda_sim::{KernelCall, KernelFault};

/// The index of `kernel`'s parameter `name` (its name in the `.cu` source,
/// as the spec entry lists it).
///
/// # Errors
/// [`KernelFault::BadParam`] naming `name` when the spec has no such
/// parameter.
fn param_index(kernel: KernelId, name: &str) -> Result<usize, KernelFault> {
    kernel.info().params.iter().position(|p| p.name == name).ok_or_else(|| KernelFault::BadParam {
        kernel: kernel.name().to_owned(),
        param: kernel.info().params.len(),
        what: format!("the spec has no parameter `{name}`"),
    })
}

/// The value of `kernel`'s scalar parameter `name` in `call`.
///
/// # Errors
/// [`KernelFault::BadParam`] for a name the spec lacks or a scalar not of
/// `T`'s size.
pub(super) fn scalar<T: bytemuck::Pod>(
    call: &KernelCall<'_>,
    kernel: KernelId,
    name: &str,
) -> Result<T, KernelFault> {
    call.scalar(param_index(kernel, name)?)
}

/// A launch's arguments, each named as in the kernel's spec entry: what a
/// CPU twin reads and writes, by the `.cu` parameter names rather than by
/// position.
pub(super) struct Args<'c, 'k> {
    call: &'c mut KernelCall<'k>,
    kernel: KernelId,
}

impl<'c, 'k> Args<'c, 'k> {
    /// The arguments of `call`, a launch of `kernel`, after checking every
    /// pointer it touches against the spec's alignment ([`check_alignment`]).
    pub(super) fn new(call: &'c mut KernelCall<'k>, kernel: KernelId) -> Result<Self, KernelFault> {
        check_alignment(call, kernel)?;
        Ok(Args { call, kernel })
    }

    fn index(&self, name: &str) -> Result<usize, KernelFault> {
        param_index(self.kernel, name)
    }

    /// Scalar parameter `name`.
    pub(super) fn scalar<T: bytemuck::Pod>(&self, name: &str) -> Result<T, KernelFault> {
        scalar(self.call, self.kernel, name)
    }

    /// `n` elements of `elem_bytes` each through pointer `name` as a count,
    /// checked against its allocation ([`count`]).
    pub(super) fn count(&self, name: &str, n: Option<u64>, elem_bytes: u64) -> Result<usize, KernelFault> {
        count(self.call, self.index(name)?, n, elem_bytes)
    }

    /// The first `len` elements behind pointer `name`.
    pub(super) fn read<T: bytemuck::Pod>(&mut self, name: &str, len: usize) -> Result<Vec<T>, KernelFault> {
        let i = self.index(name)?;
        self.call.read(i, len)
    }

    /// Writes `data` at the start of pointer `name`.
    pub(super) fn write<T: bytemuck::Pod>(&mut self, name: &str, data: &[T]) -> Result<(), KernelFault> {
        let i = self.index(name)?;
        self.call.write(i, data)
    }

    /// Writes `vals[i]` through pointer `name` for every visited `i`
    /// ([`write_visited`]).
    pub(super) fn write_visited<T: bytemuck::Pod>(
        &mut self,
        name: &str,
        vals: &[T],
        hit: &[bool],
    ) -> Result<(), KernelFault> {
        let i = self.index(name)?;
        write_visited(self.call, i, vals, hit)
    }

    /// `*name += add` (wrapping) on the `u64` behind pointer `name`.
    pub(super) fn accumulate(&mut self, name: &str, add: u64) -> Result<(), KernelFault> {
        let old = self.read::<u64>(name, 1)?;
        let new = old.first().copied().unwrap_or(0).wrapping_add(add);
        self.write(name, &[new])
    }

    /// Runs `body` for every index below `n` each thread of the launch
    /// visits ([`per_thread`]).
    pub(super) fn per_thread(&self, n: usize, body: impl FnMut(usize)) {
        per_thread(self.call, n, body);
    }

    /// The simulated duration of a probe ([`probe_duration`]), at least 1 ns.
    pub(super) fn probe_ns(&self) -> f64 {
        probe_duration(self.call, self.kernel).unwrap_or(1.0).max(1.0)
    }

    /// Writes the simulator's clock for `ns` to the probe's `clk`:
    /// `[SM cycles, nanoseconds]`.
    pub(super) fn write_clock(&mut self, ns: f64) -> Result<(), KernelFault> {
        self.write("clk", &[(ns * SIM_CLOCK_GHZ).round() as u64, ns.round() as u64])
    }
}

fn fault_bad(call: &KernelCall<'_>, param: usize, what: String) -> KernelFault {
    KernelFault::BadParam { kernel: call.name().to_owned(), param, what }
}

/// Checks every pointer the launch touches (a non-zero extent) against the
/// spec's alignment. A GPU would fault with `CUDA_ERROR_MISALIGNED_ADDRESS`;
/// the registry has no such fault, so this reports `BadParam` naming it.
fn check_alignment(call: &KernelCall<'_>, kernel: KernelId) -> Result<(), KernelFault> {
    for (i, p) in kernel.info().params.iter().enumerate() {
        let ParamKind::Pointer { align, len, .. } = p.kind else {
            continue;
        };
        let n = match len {
            Extent::Param(j) => call.scalar::<u64>(j)?,
            Extent::Fixed(n) => n,
        };
        let ptr = call.ptr(i)?;
        if n > 0 && ptr % align as u64 != 0 {
            return Err(fault_bad(
                call,
                i,
                format!(
                    "`{}` = {ptr:#x} is not {align}-byte aligned \
                     (a GPU faults with CUDA_ERROR_MISALIGNED_ADDRESS)",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

/// `n` elements of `elem_bytes` each through pointer `param`, as a `usize`
/// count, checked against the allocation `param` points into before any
/// host buffer of that size is made: a length past the buffer's allocation
/// is an illegal address (sticky, as on a GPU), never a huge allocation.
fn count(call: &KernelCall<'_>, param: usize, n: Option<u64>, elem_bytes: u64) -> Result<usize, KernelFault> {
    let bytes = n.and_then(|n| n.checked_mul(elem_bytes)).and_then(|b| usize::try_from(b).ok());
    let (Some(n), Some(bytes)) = (n.and_then(|n| usize::try_from(n).ok()), bytes) else {
        return Err(KernelFault::IllegalAddress {
            kernel: call.name().to_owned(),
            param,
            addr: call.ptr(param).unwrap_or(0),
            len: n.map_or(u64::MAX, |n| n.saturating_mul(elem_bytes)),
        });
    };
    call.check_access::<u8>(param, 0, bytes)?;
    Ok(n)
}

/// Runs `body(i)` for every index `i < n` that a thread of the launch visits
/// in a grid-stride loop over x (`gs_first()` = `blockIdx.x * blockDim.x +
/// threadIdx.x`, `gs_stride()` = `gridDim.x * blockDim.x`), thread by thread:
/// every block and thread index of the launch runs, the y and z ones too,
/// which (as on a GPU, since the `.cu` kernels read x indices only) repeat
/// the x range. The tiled kernels split the range among the x threads
/// otherwise (8 KiB block tiles, block-strided, then a grid-stride tail),
/// but on both every x pass covers each index exactly once, so the outcome
/// is the same for every launch shape.
fn per_thread(call: &KernelCall<'_>, n: usize, mut body: impl FnMut(usize)) {
    let (grid, block) = (call.grid(), call.block());
    let stride = u64::from(grid[0]) * u64::from(block[0]);
    let n = n as u64;
    for _block_yz in 0..u64::from(grid[1]) * u64::from(grid[2]) {
        for bx in 0..u64::from(grid[0]) {
            for _thread_yz in 0..u64::from(block[1]) * u64::from(block[2]) {
                for tx in 0..u64::from(block[0]) {
                    let mut i = bx * u64::from(block[0]) + tx;
                    while i < n {
                        // `i < n`, and `n` came from a `usize`.
                        body(i as usize);
                        i += stride;
                    }
                }
            }
        }
    }
}

/// Writes `vals[i]` through pointer parameter `param` for every `i` a
/// thread visited (`hit[i]`), as runs of consecutive indices: an output
/// pointer is write-only (the simulator refuses to read it back), and what
/// no thread wrote keeps its bytes, as on a GPU.
fn write_visited<T: bytemuck::Pod>(
    call: &mut KernelCall<'_>,
    param: usize,
    vals: &[T],
    hit: &[bool],
) -> Result<(), KernelFault> {
    let mut i = 0;
    while i < hit.len() {
        if !hit[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < hit.len() && hit[i] {
            i += 1;
        }
        call.write_at(param, start as u64, &vals[start..i])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_the_spec_lacks_is_a_bad_param_naming_it() {
        assert_eq!(param_index(KernelId::MixU32, "salt").ok(), Some(3));
        assert_eq!(param_index(KernelId::TriadF32, "n").ok(), Some(4));
        match param_index(KernelId::MixU32, "seed") {
            Err(KernelFault::BadParam { kernel, what, .. }) => {
                assert_eq!(kernel, "mix_u32");
                assert!(what.contains("`seed`"), "{what}");
            }
            other => panic!("expected BadParam, got {other:?}"),
        }
    }

    #[test]
    fn every_spec_name_finds_its_own_position() {
        for k in KernelId::ALL {
            for (i, p) in k.info().params.iter().enumerate() {
                assert_eq!(param_index(k, p.name).ok(), Some(i), "{}.{}", k.name(), p.name);
            }
        }
    }
}

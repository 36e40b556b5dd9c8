//! The argument checks the wrappers share: each refusal is an
//! [`Error::InvalidArgument`] that names the kernel and the cause, made
//! before anything reaches the driver.

use crate::spec::KernelId;
use gpu_sync::{Error, Result};

/// The refusal of `kernel`'s arguments: `what` is the cause.
pub(crate) fn invalid(kernel: KernelId, what: String) -> Error {
    Error::InvalidArgument(format!("{}: {what}", kernel.name()))
}

/// `ptr` (the start of view `name`) is 16-byte aligned, as 16-byte loads
/// need.
pub(crate) fn aligned16(kernel: KernelId, name: &str, ptr: u64) -> Result<()> {
    if ptr.is_multiple_of(16) {
        Ok(())
    } else {
        Err(invalid(kernel, format!("`{name}` at {ptr:#x} is not 16-byte aligned (16-byte loads)")))
    }
}

/// `len` elements of 4 bytes as whole uint4: the count of uint4.
pub(crate) fn quads(kernel: KernelId, name: &str, len: usize) -> Result<u64> {
    if len.is_multiple_of(4) {
        Ok((len / 4) as u64)
    } else {
        Err(invalid(kernel, format!("`{name}` has {len} elements, not a multiple of 4")))
    }
}

/// `a` and `b` (two sizes named by `what`) are equal.
pub(crate) fn same(kernel: KernelId, what: &str, a: usize, b: usize) -> Result<()> {
    if a == b { Ok(()) } else { Err(invalid(kernel, format!("{what}: {a} vs {b}"))) }
}

/// The operands of a matrix-unit probe (`mma.sync`, `wgmma`): each view of
/// `sizes` (`(name, size, needed)`) has exactly the size it needs, and each
/// of `aligned` (`(name, address)`) starts 16-byte aligned.
pub(crate) fn operands(kernel: KernelId, sizes: &[(&str, u64, u64)], aligned: &[(&str, u64)]) -> Result<()> {
    for &(name, got, want) in sizes {
        if got != want {
            return Err(invalid(kernel, format!("`{name}` has size {got}, needs {want}")));
        }
    }
    for &(name, ptr) in aligned {
        if !ptr.is_multiple_of(16) {
            return Err(invalid(kernel, format!("`{name}` at {ptr:#x} is not 16-byte aligned")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal names the kernel and its cause; exact, aligned operands
    /// pass.
    #[test]
    fn operand_checks_name_each_refusal() {
        let k = KernelId::MmaBf16;
        assert!(operands(k, &[("a", 1024, 1024), ("clk", 2, 2)], &[("a", 256)]).is_ok());
        let why = |sizes: &[(&str, u64, u64)], aligned: &[(&str, u64)]| match operands(k, sizes, aligned) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        };
        let m = why(&[("a", 1024, 1024), ("out", 1000, 1024)], &[]);
        assert!(m.contains("`out` has size 1000, needs 1024") && m.contains(k.name()), "{m}");
        assert!(why(&[], &[("b", 0x108)]).contains("`b` at 0x108 is not 16-byte aligned"));
        assert!(aligned16(k, "x", 8).is_err() && aligned16(k, "x", 32).is_ok());
        assert_eq!(quads(k, "x", 8).ok(), Some(2));
        assert!(quads(k, "x", 6).is_err());
        assert!(same(k, "lengths", 3, 4).is_err() && same(k, "lengths", 4, 4).is_ok());
    }
}

//! Cost models: floating-point operations and the minimum bytes each kernel
//! moves, as functions of its size arguments, so a benchmark can place it
//! on the roofline.
//!
//! "Minimum bytes" counts each input element read once and each output
//! element written once (a read-write element counts both ways); it ignores
//! caches, partial sectors and the per-block atomics' extra traffic. Integer
//! work (hashes, sums) is not counted as FLOPs. Arithmetic saturates instead
//! of overflowing.

use crate::spec::KernelId;

/// Work and traffic of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cost {
    /// Floating-point operations (an FMA counts 2).
    pub flops: u64,
    /// Bytes read from device memory.
    pub bytes_read: u64,
    /// Bytes written to device memory.
    pub bytes_written: u64,
}

impl Cost {
    /// Bytes moved both ways.
    pub const fn bytes(&self) -> u64 {
        self.bytes_read.saturating_add(self.bytes_written)
    }

    /// Arithmetic intensity: FLOPs per byte moved (0 when nothing moves and
    /// nothing is computed, infinite when only computing).
    pub fn intensity(&self) -> f64 {
        match (self.flops, self.bytes()) {
            (0, 0) => 0.0,
            (_, 0) => f64::INFINITY,
            (f, b) => f as f64 / b as f64,
        }
    }
}

/// The cost of one launch of `kernel` whose size argument (the parameter
/// [`KernelInfo::size_param`](crate::KernelInfo::size_param) names: `n4` for
/// the `uint4` kernels, `n` for the others) is `size`; `spin_cycles` ignores it.
pub const fn for_kernel(kernel: KernelId, size: u64) -> Cost {
    // Each kernel's model is named in its entry of the kernel table.
    kernel.cost(size)
}

const fn bytes(n: u64, size: u64) -> u64 {
    n.saturating_mul(size)
}

/// `read_sum_u32x4`: reads `16*n4` bytes; `*out` is read and written once.
pub const fn read_sum_u32x4(n4: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n4, 16).saturating_add(8), bytes_written: 8 }
}

/// `copy_u32x4`: `16*n4` bytes each way.
pub const fn copy_u32x4(n4: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n4, 16), bytes_written: bytes(n4, 16) }
}

/// `triad_f32`: one FMA (2 FLOPs) per element; reads `b` and `c`, writes `a`.
pub const fn triad_f32(n: u64) -> Cost {
    Cost { flops: bytes(n, 2), bytes_read: bytes(n, 8), bytes_written: bytes(n, 4) }
}

/// `spin_cycles`: writes the 8-byte result only.
pub const fn spin_cycles() -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: 8 }
}

/// `empty_kernel`: nothing read or written.
pub const fn empty_kernel() -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: 0 }
}

/// `fill_pattern_u32`: writes `4*n` bytes.
pub const fn fill_pattern_u32(n: u64) -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: bytes(n, 4) }
}

/// `check_pattern_u32`: reads `4*n` bytes; `*mismatches` read and written once.
pub const fn check_pattern_u32(n: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n, 4).saturating_add(8), bytes_written: 8 }
}

/// `scale_f32`: one multiply per element; reads and writes `4*n` bytes.
pub const fn scale_f32(n: u64) -> Cost {
    Cost { flops: n, bytes_read: bytes(n, 4), bytes_written: bytes(n, 4) }
}

/// `add_f32`: one add per element; reads `8*n`, writes `4*n` bytes.
pub const fn add_f32(n: u64) -> Cost {
    Cost { flops: n, bytes_read: bytes(n, 8), bytes_written: bytes(n, 4) }
}

/// `mix_u32`: integer only; reads `8*n`, writes `4*n` bytes.
pub const fn mix_u32(n: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n, 8), bytes_written: bytes(n, 4) }
}

/// `bump_u32`: integer only; reads and writes `4*n` bytes.
pub const fn bump_u32(n: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n, 4), bytes_written: bytes(n, 4) }
}

/// `clock_probe`: writes its two 8-byte results only.
pub const fn clock_probe() -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: 16 }
}

/// `stamp`: writes its two 8-byte timestamps only.
pub const fn stamp() -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: 16 }
}

/// `spin_gate`: reads the 4-byte flag (at least once), writes 8 bytes.
pub const fn spin_gate() -> Cost {
    Cost { flops: 0, bytes_read: 4, bytes_written: 8 }
}

/// `copy_mapped_u32x4`: `16*n4` bytes read over the bus from host memory,
/// `16*n4` written to device memory.
pub const fn copy_mapped_u32x4(n4: u64) -> Cost {
    copy_u32x4(n4)
}

/// Independent chains per slot of the FMA probes (`RL_CHAINS` in
/// `roofline.cu`).
pub const FMA_CHAINS: u64 = 8;
/// FMA steps per chain per iteration of the FMA probes (`RL_INNER`).
pub const FMA_INNER: u64 = 64;
/// Loads per thread per iteration of `smem_read`.
pub const SMEM_UNROLL: u64 = 8;

/// The FMA probes' table model: the stores of a checking launch
/// (`store != 0`), `n` elements of `elem_bytes`; FLOPs need the iteration
/// count, see [`fma_probe`].
pub const fn fma_store(n: u64, elem_bytes: u64) -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: bytes(n, elem_bytes) }
}

/// One launch of an FMA probe over `n` slots and `iters` iterations, with
/// `lanes` values per FMA instruction (2 for the packed 16-bit types): each
/// FMA counts 2 FLOPs per lane. No memory traffic while timing
/// (`store == 0`).
pub const fn fma_probe(n: u64, iters: u64, lanes: u64) -> Cost {
    let fmas = n.saturating_mul(FMA_CHAINS).saturating_mul(FMA_INNER).saturating_mul(iters);
    Cost { flops: fmas.saturating_mul(2).saturating_mul(lanes), bytes_read: 0, bytes_written: 0 }
}

/// `cache_read` with `n` loads: `16*n` bytes through the cache level its
/// working set lives in.
pub const fn cache_read(n: u64) -> Cost {
    Cost { flops: 0, bytes_read: bytes(n, 16).saturating_add(8), bytes_written: 8 }
}

/// `smem_read`'s table model: the two result words.
pub const fn smem_read() -> Cost {
    Cost { flops: 0, bytes_read: 0, bytes_written: 8 }
}

/// `smem_read` over `threads` threads with `iters` iterations: `16` bytes of
/// shared memory per load, [`SMEM_UNROLL`] loads per iteration.
pub const fn smem_traffic(threads: u64, iters: u64) -> u64 {
    threads.saturating_mul(iters).saturating_mul(SMEM_UNROLL).saturating_mul(16)
}

/// `intensity_f32` over `n4` float4 with `fmas` FMAs per float: `8*fmas`
/// FLOPs per 32 bytes moved.
pub const fn intensity_f32(n4: u64, fmas: u64) -> Cost {
    Cost {
        flops: n4.saturating_mul(4).saturating_mul(fmas).saturating_mul(2),
        bytes_read: bytes(n4, 16),
        bytes_written: bytes(n4, 16),
    }
}

/// `intensity_f64` over `n4` uint4 (two doubles each) with `fmas` FMAs per
/// double: `4*fmas` FLOPs per 32 bytes moved.
pub const fn intensity_f64(n4: u64, fmas: u64) -> Cost {
    Cost {
        flops: n4.saturating_mul(2).saturating_mul(fmas).saturating_mul(2),
        bytes_read: bytes(n4, 16),
        bytes_written: bytes(n4, 16),
    }
}

/// `intensity_f16x2` over `n4` uint4 (eight halves each) with `fmas` FMAs
/// per half: `16*fmas` FLOPs per 32 bytes moved.
pub const fn intensity_f16x2(n4: u64, fmas: u64) -> Cost {
    Cost {
        flops: n4.saturating_mul(8).saturating_mul(fmas).saturating_mul(2),
        bytes_read: bytes(n4, 16),
        bytes_written: bytes(n4, 16),
    }
}

/// Bytes of a tensor probe's A tile in global memory (64 rows x 128 bytes).
pub const TC_A_BYTES: u64 = 64 * 128;
/// Bytes of its B tile (256 rows x 128 bytes).
pub const TC_B_BYTES: u64 = 256 * 128;
/// Elements of its result (64 x 256 f32).
pub const TC_OUT_ELEMS: u64 = 64 * 256;

/// The tensor probes' table model: the tiles read once and the result
/// stored (a checking launch).
pub const fn tensor_store() -> Cost {
    Cost { flops: 0, bytes_read: TC_A_BYTES + TC_B_BYTES, bytes_written: TC_OUT_ELEMS * 4 }
}

/// One launch of a tensor probe: `blocks` blocks of `warpgroups`
/// warpgroups, `iters` iterations of four `wgmma` m64n256 of depth `k`
/// (16 for the 16-bit types, 32 for FP8).
pub const fn tensor_probe(blocks: u64, warpgroups: u64, iters: u64, k: u64) -> Cost {
    let per = 2 * 64 * 256 * k * 4;
    Cost {
        flops: blocks.saturating_mul(warpgroups).saturating_mul(iters).saturating_mul(per),
        bytes_read: 0,
        bytes_written: 0,
    }
}

/// Bytes of an `mma.sync` probe's A operand (32 rows x 32 bytes).
pub const MMA_A_BYTES: u64 = 32 * 32;
/// Bytes of its B operand (32 rows x 32 bytes).
pub const MMA_B_BYTES: u64 = 32 * 32;
/// Elements of its result (32 x 32 f32).
pub const MMA_OUT_ELEMS: u64 = 32 * 32;
/// `mma.sync` instructions a warp issues per iteration (2 x 4 fragments).
pub const MMA_PER_ITER: u64 = 8;

/// The `mma.sync` probes' table model: the operands read once and the
/// result stored (a checking launch).
pub const fn mma_store() -> Cost {
    Cost { flops: 0, bytes_read: MMA_A_BYTES + MMA_B_BYTES, bytes_written: MMA_OUT_ELEMS * 4 }
}

/// One launch of an `mma.sync` probe: `warps` warps, `iters` iterations of
/// [`MMA_PER_ITER`] m16n8 `mma.sync` of depth `k` (16 for the 16-bit types,
/// 32 for FP8).
pub const fn mma_probe(warps: u64, iters: u64, k: u64) -> Cost {
    let per = 2 * 16 * 8 * k * MMA_PER_ITER;
    Cost { flops: warps.saturating_mul(iters).saturating_mul(per), bytes_read: 0, bytes_written: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_counts() {
        // 1 MiB of uint4 = 65536 elements.
        assert_eq!(read_sum_u32x4(65536), Cost { flops: 0, bytes_read: (1 << 20) + 8, bytes_written: 8 });
        assert_eq!(copy_u32x4(10).bytes(), 320);
        // STREAM triad on 1000 floats: 2000 FLOPs, 12000 bytes, intensity 1/6.
        let t = triad_f32(1000);
        assert_eq!((t.flops, t.bytes_read, t.bytes_written), (2000, 8000, 4000));
        assert!((t.intensity() - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(scale_f32(3), Cost { flops: 3, bytes_read: 12, bytes_written: 12 });
        assert!((scale_f32(3).intensity() - 0.125).abs() < 1e-12);
        assert_eq!(add_f32(5), Cost { flops: 5, bytes_read: 40, bytes_written: 20 });
        assert_eq!(mix_u32(5).bytes(), 60);
        assert_eq!(bump_u32(5).bytes(), 40);
        assert_eq!(fill_pattern_u32(5), Cost { flops: 0, bytes_read: 0, bytes_written: 20 });
        assert_eq!(check_pattern_u32(5).bytes(), 36);
        assert_eq!(spin_cycles().bytes(), 8);
        assert_eq!(clock_probe().bytes(), 16);
        assert_eq!(spin_gate().bytes(), 12);
        assert_eq!(copy_mapped_u32x4(10), copy_u32x4(10));
        assert_eq!(copy_u32x4(0).intensity(), 0.0);
        assert_eq!(Cost { flops: 1, bytes_read: 0, bytes_written: 0 }.intensity(), f64::INFINITY);
    }

    #[test]
    fn for_kernel_uses_the_size_argument() {
        assert_eq!(for_kernel(KernelId::TriadF32, 1000), triad_f32(1000));
        assert_eq!(for_kernel(KernelId::ReadSumU32x4, 7), read_sum_u32x4(7));
        assert_eq!(for_kernel(KernelId::SpinCycles, 99), spin_cycles());
        assert_eq!(for_kernel(KernelId::Empty, 99).bytes(), 0);
        for k in KernelId::ALL {
            // Every kernel but spin has a size argument, and its cost grows with it.
            let has_size = k.info().size_param().is_some();
            let sizeless = matches!(
                k,
                KernelId::SpinCycles
                    | KernelId::Empty
                    | KernelId::ClockProbe
                    | KernelId::Stamp
                    | KernelId::SpinGate
                    | KernelId::SmemRead
                    | KernelId::TcBf16
                    | KernelId::TcF16
                    | KernelId::TcE4m3
                    | KernelId::MmaBf16
                    | KernelId::MmaF16
                    | KernelId::MmaE4m3
            );
            assert_eq!(has_size, !sizeless, "{}", k.name());
            if has_size {
                assert!(for_kernel(k, 2).bytes() > for_kernel(k, 1).bytes(), "{}", k.name());
            }
        }
    }

    #[test]
    fn probe_counts() {
        // 10 slots x 8 chains x 64 steps x 3 iterations = 15360 FMAs.
        assert_eq!(fma_probe(10, 3, 1).flops, 30720);
        assert_eq!(fma_probe(10, 3, 2).flops, 61440);
        assert_eq!(fma_probe(10, 3, 1).bytes(), 0);
        // 1024 FLOPs per element at fmas = 512: intensity 1024 / 8 = 128.
        assert!((intensity_f32(100, 512).intensity() - 128.0).abs() < 1e-12);
        assert_eq!(intensity_f32(100, 0).flops, 0);
        // FP64: two doubles a uint4; 1024 FLOPs per double at fmas = 512:
        // intensity 1024 / 16 = 64.
        assert!((intensity_f64(100, 512).intensity() - 64.0).abs() < 1e-12);
        assert_eq!(intensity_f64(3, 1), Cost { flops: 12, bytes_read: 48, bytes_written: 48 });
        // FP16x2: eight halves a uint4; intensity fmas / 2.
        assert!((intensity_f16x2(100, 512).intensity() - 256.0).abs() < 1e-12);
        assert_eq!(intensity_f16x2(3, 1).flops, 48);
        // One m16n8k16 is 4096 FLOPs, eight an iteration; m16n8k32 twice that.
        assert_eq!(mma_probe(1, 1, 16).flops, 8 * 4096);
        assert_eq!(mma_probe(10, 3, 32).flops, 10 * 3 * 8 * 8192);
        assert_eq!(mma_store().bytes(), 2048 + 4096);
        assert_eq!(smem_traffic(256, 10), 256 * 10 * 8 * 16);
        assert_eq!(cache_read(4).bytes_read, 72);
        // One m64n256k16 is 524288 FLOPs; four a iteration.
        assert_eq!(tensor_probe(1, 1, 1, 16).flops, 4 * 524_288);
        assert_eq!(tensor_probe(132, 2, 10, 32).flops, 132 * 2 * 10 * 4 * 1_048_576);
    }

    #[test]
    fn saturates() {
        assert_eq!(copy_u32x4(u64::MAX).bytes(), u64::MAX);
        assert_eq!(triad_f32(u64::MAX).flops, u64::MAX);
    }
}

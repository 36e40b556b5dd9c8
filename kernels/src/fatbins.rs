//! The committed fatbins, embedded in the binary.
//!
//! Built by `cargo xtask kernels` from `kernels/cu/*.cu` (SASS for sm_80 and
//! sm_90, PTX for sm_90 so newer GPUs JIT it) and checked fresh by
//! `cargo xtask kernels --check`. `cuModuleLoadData` reads the image in place
//! and expects the fatbin header's 8-byte alignment, so each image is wrapped
//! in an 8-aligned struct: `include_bytes!` alone only guarantees 1.

use crate::spec::ModuleId;

/// The first four bytes of every fatbin image (little-endian `u32`).
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;

/// Bytes with the alignment of `u64`.
#[repr(C, align(8))]
struct Aligned8<T: ?Sized>(T);

static STREAM: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/stream.fatbin"));
static SPIN: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/spin.fatbin"));
static PATTERN: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/pattern.fatbin"));
static ELEMENTWISE: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/elementwise.fatbin"));
static BENCH: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/bench.fatbin"));
static ROOFLINE: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/roofline.fatbin"));
static TENSOR: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/tensor.fatbin"));
static MMA: &Aligned8<[u8]> = &Aligned8(*include_bytes!("../fatbin/mma.fatbin"));

/// The fatbin image of `module`, 8-byte aligned.
pub fn fatbin(module: ModuleId) -> &'static [u8] {
    match module {
        ModuleId::Stream => &STREAM.0,
        ModuleId::Spin => &SPIN.0,
        ModuleId::Pattern => &PATTERN.0,
        ModuleId::Elementwise => &ELEMENTWISE.0,
        ModuleId::Bench => &BENCH.0,
        ModuleId::Roofline => &ROOFLINE.0,
        ModuleId::Tensor => &TENSOR.0,
        ModuleId::Mma => &MMA.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_aligned_fatbins() {
        for m in ModuleId::ALL {
            let image = fatbin(m);
            assert_eq!(image.as_ptr() as usize % 8, 0, "{} is not 8-aligned", m.name());
            assert!(image.len() > 64, "{} is suspiciously small", m.name());
            let magic = u32::from_le_bytes([image[0], image[1], image[2], image[3]]);
            assert_eq!(magic, FATBIN_MAGIC, "{} does not start with the fatbin magic", m.name());
        }
    }

    #[test]
    fn images_name_their_kernels() {
        // The ELF symbol table of each embedded cubin carries the kernel names.
        for m in ModuleId::ALL {
            let image = fatbin(m);
            for k in m.kernels() {
                let found = image.windows(k.name.len()).any(|w| w == k.name.as_bytes());
                assert!(found, "{}.fatbin has no symbol {}", m.name(), k.name);
            }
        }
    }
}

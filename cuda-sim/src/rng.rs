//! A tiny deterministic random number generator (SplitMix64).
//!
//! The scheduler needs reproducible choices, not statistical quality, and the
//! crate keeps its dependencies light, so this is the 10-line SplitMix64 of
//! Steele, Lea and Flood rather than the `rand` crate.

/// SplitMix64: each call advances a 64-bit counter by the golden-ratio
/// increment and mixes it.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator for the `index`-th child of `seed` (a stream of a session,
    /// say): seeds that differ in either part give unrelated sequences.
    pub(crate) fn derive(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mixed = r.next_u64();
        Rng(mixed ^ index)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_children_differ() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(7);
        assert_eq!(a, (0..4).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::derive(7, 0).next_u64(), Rng::derive(7, 1).next_u64());
        assert_ne!(Rng::derive(7, 0).next_u64(), Rng::derive(8, 0).next_u64());
        assert!(Rng::new(1).below(3) < 3);
        assert_eq!(Rng::new(1).below(0), 0);
    }
}

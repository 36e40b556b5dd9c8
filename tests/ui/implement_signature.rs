// Signatures are sealed: only tuples of the crate's parameter types.
use gpu_sync::Signature;

struct Forged;

impl Signature for &Forged {
    const PARAM_SIZES: &'static [usize] = &[8, 8];
}

impl Signature for &mut Forged {
    const PARAM_SIZES: &'static [usize] = &[];
}

fn main() {}

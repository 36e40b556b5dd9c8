// Parameter types are sealed: a local type, or a reference to one, cannot
// become a parameter of another size or meaning.
use gpu_sync::Param;

struct Wide;

impl Param for &Wide {
    const SIZE: usize = 4096;
}

impl Param for &mut Wide {
    const SIZE: usize = 8;
}

fn main() {}

// Kernel arguments are sealed: a raw address cannot pose as a buffer.
use gpu_sync::{In, KernelArg, RawArg};

struct Address(u64);

impl KernelArg<In<f32>> for Address {
    fn raw(&self) -> RawArg<'_> {
        RawArg::Scalar(self.0)
    }
}

fn main() {}

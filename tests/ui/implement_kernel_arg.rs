// Kernel arguments are sealed: neither a local type nor a reference to one
// can pose as a buffer (`&Local` and `&mut Local` are local types under the
// orphan rules, so a seal with blanket impls for `&S` would let them in).
use gpu_sync::{In, KernelArg, Out, RawArg};

struct Address(u64);

impl KernelArg<In<f32>> for Address {
    fn raw(&self) -> RawArg<'_> {
        RawArg::Scalar(self.0)
    }
}

impl KernelArg<Out<u32>> for &Address {
    fn raw(&self) -> RawArg<'_> {
        RawArg::Scalar(self.0)
    }
}

impl KernelArg<In<u32>> for &mut Address {
    fn raw(&self) -> RawArg<'_> {
        RawArg::Scalar(self.0)
    }
}

fn main() {}

// Argument tuples are sealed: a local type, or a reference to one, cannot
// stand for a launch's arguments.
use gpu_sync::{KernelArgs, RawArg};

struct Forged(u64);

impl KernelArgs<(u64,)> for &Forged {
    type Raw<'a> = [RawArg<'a>; 1] where Self: 'a;
    fn raw_args(&self) -> Self::Raw<'_> {
        [RawArg::Scalar(self.0)]
    }
}

impl KernelArgs<(u64,)> for &mut Forged {
    type Raw<'a> = [RawArg<'a>; 1] where Self: 'a;
    fn raw_args(&self) -> Self::Raw<'_> {
        [RawArg::Scalar(self.0)]
    }
}

fn main() {}

// What a launch hands the driver for an argument is opaque: it is built
// inside gpu-sync only, so no address, length or allocation can be forged
// or swapped, and an honest argument's parts cannot be read out and
// recombined.
use gpu_sync::{DeviceBuffer, KernelArg, Out, RawArg};

fn forge(honest: &mut DeviceBuffer<u32>, other: &DeviceBuffer<u32>) {
    let _scalar = RawArg::Scalar(0x7f00_0000);
    let _len = RawArg::Len(1 << 40);
    let honest = &mut *honest;
    if let RawArg::Buffer { alloc, align, access, .. } = KernelArg::<Out<u32>>::raw(&honest) {
        let _forged = RawArg::Buffer { alloc, ptr: other.as_raw(), len: usize::MAX, align, access };
    }
}

fn main() {}

// Device views are sealed: a shared view cannot be made writable, a buffer
// cannot pose as a view of another element type, and a local type cannot
// pose as device memory.
use gpu_sync::{AsDeviceSlice, AsDeviceSliceMut, DeviceBuffer, DeviceSlice, Pod, View, Zeroable};

#[derive(Clone, Copy)]
#[repr(C)]
struct W([u32; 4]);
// SAFETY: a plain array of `u32`s (the test needs a local `Pod` type).
unsafe impl Zeroable for W {}
// SAFETY: as above.
unsafe impl Pod for W {}

// A shared view made writable: `&mut` exclusivity is what the blocking
// copies and a launch's `Out` rely on.
impl AsDeviceSliceMut<W> for DeviceSlice<'_, W> {}

// A byte buffer posing as a buffer of 16-byte elements: its length would be
// read 16 times too long.
impl AsDeviceSlice<W> for DeviceBuffer<u8> {
    fn view(&self) -> View<'_> {
        AsDeviceSlice::<u8>::view(self)
    }
}

struct Local;

impl AsDeviceSlice<u32> for &Local {
    fn view(&self) -> View<'_> {
        loop {}
    }
}

fn main() {}

//! Typed kernel signatures: a kernel's parameter list as a tuple of
//! [`In<T>`] (a device buffer the kernel reads), [`Out<T>`] (one it writes,
//! and may read), [`Len`] (an element count checked against every buffer of
//! the launch) and plain scalars; the argument types that match each
//! ([`KernelArg`], [`KernelArgs`]); and what a launch hands the driver for
//! each argument ([`RawArg`]). All sealed: a launch hands the driver exactly
//! one pointer per parameter, each to a value of the declared size.

use crate::engine::{Access, Allocation};
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut};
use bytemuck::Pod;
use cuda_sys::CUdeviceptr;
use std::marker::PhantomData;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
    /// Seals [`super::KernelArgs`]: implemented for every tuple, so only the
    /// crate's own tuple impls (over sealed [`super::KernelArg`]s) exist.
    pub trait ArgsSealed {}
}

/// A kernel parameter type: [`In<T>`], [`Out<T>`] or a scalar. Sealed.
pub trait Param: sealed::Sealed {
    /// Its size in bytes as the kernel sees it.
    const SIZE: usize;
}

/// A parameter the kernel reads through: a `const T*`. Its argument is any
/// readable view (`&DeviceBuffer<T>`, `&DeviceSlice<T>`, `&DeviceSliceMut<T>`).
pub struct In<T>(PhantomData<fn() -> T>);
/// A parameter the kernel writes (and may read) through: a `T*`. Its argument
/// is a writable view taken by `&mut` (`&mut DeviceBuffer<T>`,
/// `&mut DeviceSliceMut<T>`).
pub struct Out<T>(PhantomData<fn() -> T>);

/// An element count the kernel may bound its accesses by: an
/// `unsigned long long` (8 bytes) in the kernel, a `u64` argument at launch.
///
/// Every launch checks that the value is at most the element count of
/// **every** buffer argument of that launch ([`In`] and [`Out`], each counted
/// in its own element type); a larger value is
/// [`Error::LaunchArgument`](crate::Error::LaunchArgument) naming the kernel, the value and the shortest
/// view, and nothing reaches the driver. So a kernel that touches
/// `p[0..n]` of each buffer `p` for a `Len` parameter `n` keeps every access
/// inside the views it was given — the safe way to pass a length (a plain
/// `u64` is not checked against anything, and a kernel must not trust it as
/// a bound; see [`Module::kernel`](crate::Module::kernel)'s `# Safety`).
/// A signature may have any number of `Len` parameters; each is checked.
/// A launch without buffer arguments accepts any value.
pub struct Len(());

impl<T: Pod> sealed::Sealed for In<T> {}
impl<T: Pod> Param for In<T> {
    const SIZE: usize = 8;
}
impl<T: Pod> sealed::Sealed for Out<T> {}
impl<T: Pod> Param for Out<T> {
    const SIZE: usize = 8;
}
impl sealed::Sealed for Len {}
impl Param for Len {
    const SIZE: usize = 8;
}

/// One argument as a launch sees it.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum RawArg<'a> {
    /// A scalar's bytes, little-endian in the low bytes.
    Scalar(u64),
    /// A [`Len`]: checked against every buffer's `len` at launch.
    Len(u64),
    /// A device buffer view.
    Buffer {
        /// Its allocation (tracked).
        alloc: &'a Arc<Allocation>,
        /// The address passed to the kernel.
        ptr: CUdeviceptr,
        /// Its length in elements of its own type.
        len: usize,
        /// The alignment its element type needs (`align_of::<T>()`).
        align: usize,
        /// How the kernel uses it.
        access: Access,
    },
}

/// An argument accepted for parameter type `P`. Sealed.
pub trait KernelArg<P: Param>: sealed::Sealed {
    #[doc(hidden)]
    fn raw(&self) -> RawArg<'_>;
}

macro_rules! scalar_params {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Param for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
        }
        impl KernelArg<$t> for $t {
            #[inline]
            fn raw(&self) -> RawArg<'_> {
                let mut bits = [0u8; 8];
                bits[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
                RawArg::Scalar(u64::from_le_bytes(bits))
            }
        }
    )*};
}
scalar_params!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// A `u64` is the argument of a [`Len`] parameter (checked at launch).
impl KernelArg<Len> for u64 {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        RawArg::Len(*self)
    }
}

impl<S: ?Sized> sealed::Sealed for &S {}
impl<S: ?Sized> sealed::Sealed for &mut S {}
/// Any readable view — `&DeviceBuffer<T>`, `&DeviceSlice<T>`,
/// `&DeviceSliceMut<T>` — is an [`In<T>`] argument.
impl<T: Pod, S: AsDeviceSlice<T> + ?Sized> KernelArg<In<T>> for &S {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        let v = (**self).view();
        let align = std::mem::align_of::<T>();
        RawArg::Buffer { alloc: v.alloc, ptr: v.ptr(), len: v.len, align, access: Access::Read }
    }
}
/// Any writable view taken by `&mut` — `&mut DeviceBuffer<T>`,
/// `&mut DeviceSliceMut<T>` — is an [`Out<T>`] argument.
impl<T: Pod, S: AsDeviceSliceMut<T> + ?Sized> KernelArg<Out<T>> for &mut S {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        let v = (**self).view();
        let align = std::mem::align_of::<T>();
        RawArg::Buffer { alloc: v.alloc, ptr: v.ptr(), len: v.len, align, access: Access::Write }
    }
}

/// A kernel signature: a tuple of [`Param`]s, up to 12. Sealed.
pub trait Signature: sealed::Sealed {
    /// Each parameter's size in bytes.
    const PARAM_SIZES: &'static [usize];
}

/// Most parameters a typed kernel can have.
pub const MAX_PARAMS: usize = 12;

/// Arguments matching signature `S`: a tuple of [`KernelArg`]s. Sealed.
pub trait KernelArgs<S: Signature>: sealed::ArgsSealed {
    #[doc(hidden)]
    type Raw<'a>: AsRef<[RawArg<'a>]>
    where
        Self: 'a;
    #[doc(hidden)]
    fn raw_args(&self) -> Self::Raw<'_>;
}

macro_rules! tuple_signatures {
    ($(($($p:ident $a:ident $i:tt),*))*) => {$(
        impl<$($p: Param),*> sealed::Sealed for ($($p,)*) {}
        impl<$($a),*> sealed::ArgsSealed for ($($a,)*) {}
        impl<$($p: Param),*> Signature for ($($p,)*) {
            const PARAM_SIZES: &'static [usize] = &[$($p::SIZE),*];
        }
        impl<$($p: Param, $a: KernelArg<$p>),*> KernelArgs<($($p,)*)> for ($($a,)*) {
            type Raw<'a> = [RawArg<'a>; 0 $(+ { let _ = $i; 1 })*] where Self: 'a;
            #[inline(always)]
            fn raw_args(&self) -> Self::Raw<'_> {
                [$(self.$i.raw()),*]
            }
        }
    )*};
}
impl sealed::Sealed for () {}
impl sealed::ArgsSealed for () {}
impl Signature for () {
    const PARAM_SIZES: &'static [usize] = &[];
}
impl KernelArgs<()> for () {
    type Raw<'a> = [RawArg<'a>; 0];
    fn raw_args(&self) -> [RawArg<'static>; 0] {
        []
    }
}
tuple_signatures! {
    (P0 A0 0)
    (P0 A0 0, P1 A1 1)
    (P0 A0 0, P1 A1 1, P2 A2 2)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10)
    (P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10, P11 A11 11)
}

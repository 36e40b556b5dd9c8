//! Typed kernel signatures: a kernel's parameter list as a tuple of
//! [`In<T>`] (a device buffer the kernel reads), [`Out<T>`] (one it writes,
//! and may read), [`Len`] (an element count checked against every buffer of
//! the launch) and plain scalars; the argument types that match each
//! ([`KernelArg`], [`KernelArgs`]); and what a launch hands the driver for
//! each argument ([`RawArg`], opaque). All sealed: a launch hands the driver
//! exactly one pointer per parameter, each to a value of the declared size,
//! and every buffer argument is a view the crate made.
//!
//! # How the seals hold
//! Each public trait has a supertrait of the private module `sealed`, which
//! code outside the crate cannot name and so cannot implement. The seals are
//! per trait and, for arguments, per parameter type: [`KernelArg<P>`] needs
//! `sealed::ArgSeal<P>`, implemented only for a scalar and its own type, a
//! `u64` for [`Len`], `&S` for `In<T>` where `S` is a sealed readable view of
//! `T`, and `&mut S` for `Out<T>` where `S` is a sealed writable view of `T`.
//! No seal has a blanket impl over references (`&Local` and `&mut Local` are
//! local types under the orphan rules: a blanket `impl<S> Seal for &S` let a
//! user crate write `impl KernelArg<Out<u32>> for &Local`). What an argument
//! reads into ([`RawArg`]) is built only here and has no public fields or
//! constructors, so an honest argument's parts cannot be swapped either.
//! The compile-fail cases `implement_kernel_arg`, `implement_param`,
//! `implement_signature`, `implement_kernel_args`, `build_raw_arg` and
//! `implement_device_slice` (tests/ui) try each door.

use crate::engine::{Access, Allocation};
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut};
use bytemuck::Pod;
use cuda_sys::CUdeviceptr;
use std::marker::PhantomData;
use std::sync::Arc;

/// The seals. The traits are `pub` inside a private module: nameable (and
/// implementable) only in this crate.
pub(crate) mod sealed {
    use super::RawArg;

    /// Seals [`super::Param`]: the crate's parameter types only.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a kernel parameter type",
        note = "parameter types are `In<T>`, `Out<T>`, `Len` and the scalars `u8`..`u64`, `i8`..`i64`, `f32`, `f64`; the trait is sealed"
    )]
    pub trait ParamSeal {}

    /// Seals [`super::Signature`]: tuples of [`super::Param`]s only.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a kernel signature",
        note = "a signature is a tuple of up to 12 parameter types; the trait is sealed"
    )]
    pub trait SignatureSeal {}

    /// Seals [`super::KernelArg<P>`], per parameter type `P`, and reads an
    /// argument for a launch.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a kernel argument for a parameter of type `{P}`",
        label = "not an argument for `{P}`",
        note = "an `In<T>` parameter takes `&` a device buffer or view of `T`; an `Out<T>` parameter takes `&mut` a `DeviceBuffer<T>` or `DeviceSliceMut<T>`; a `Len` takes a `u64`; a scalar parameter takes that scalar",
        note = "the argument traits are sealed: no other type can implement them"
    )]
    pub trait ArgSeal<P> {
        /// The argument as the launch hands it to the driver.
        fn raw(&self) -> RawArg<'_>;
    }

    /// Seals [`super::KernelArgs<S>`] (tuples of sealed arguments only) and
    /// reads a launch's arguments.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` are not the arguments of a kernel of signature `{S}`",
        note = "pass a tuple with one argument per parameter, in order; the trait is sealed"
    )]
    pub trait ArgsSeal<S> {
        /// One [`RawArg`] per parameter.
        type Raw<'a>: AsRef<[RawArg<'a>]>
        where
            Self: 'a;
        /// The arguments, in parameter order.
        fn raw_args(&self) -> Self::Raw<'_>;
    }
}

/// A kernel parameter type: [`In<T>`], [`Out<T>`] or a scalar. Sealed.
///
/// Not implemented outside gpu-sync: [`Kernel`](crate::Kernel)'s and
/// [`Len`]'s examples show signatures and their arguments in use.
pub trait Param: sealed::ParamSeal {
    /// Its size in bytes as the kernel sees it.
    const SIZE: usize;
}

/// A parameter the kernel reads through: a `const T*`. Its argument is any
/// readable view (`&DeviceBuffer<T>`, `&DeviceSlice<T>`, `&DeviceSliceMut<T>`).
///
/// Named in a kernel's signature type: [`Kernel`](crate::Kernel)'s example
/// declares `(In<f32>, Out<f32>, f32, Len)` and launches it.
pub struct In<T>(PhantomData<fn() -> T>);
/// A parameter the kernel writes (and may read) through: a `T*`. Its argument
/// is a writable view taken by `&mut` (`&mut DeviceBuffer<T>`,
/// `&mut DeviceSliceMut<T>`).
///
/// Named in a kernel's signature type: [`Kernel`](crate::Kernel)'s example
/// declares `(In<f32>, Out<f32>, f32, Len)` and launches it.
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
///
/// ```
/// # let _session = gpu_sync::sim::session(0)?;
/// # gpu_sync::sim::register::<(gpu_sync::Out<u32>, gpu_sync::Len)>("ones", |(y, n)| y[..n as usize].fill(1));
/// use gpu_sync::{Device, DeviceBuffer, Error, LaunchConfig, Len, Module, Out, Stream, sim};
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// let module = Module::load(&device, sim::PTX_STUB)?;
/// // SAFETY: `ones(u32* y, u64 n)` writes y[i] = 1 for i < n only, n a Len.
/// let ones = unsafe { module.kernel::<(Out<u32>, Len)>("ones")? };
/// let mut y = DeviceBuffer::<u32>::zeroed(&stream, 8)?;
/// ones.launch(&stream, LaunchConfig::for_elements(8, 32), (&mut y, 8u64))?;
/// // 9 > the 8 elements of y: refused before the driver sees it.
/// let err = ones.launch(&stream, LaunchConfig::for_elements(9, 32), (&mut y, 9u64));
/// assert!(matches!(err, Err(Error::LaunchArgument { .. })));
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub struct Len(());

impl<T: Pod> sealed::ParamSeal for In<T> {}
impl<T: Pod> Param for In<T> {
    const SIZE: usize = 8;
}
impl<T: Pod> sealed::ParamSeal for Out<T> {}
impl<T: Pod> Param for Out<T> {
    const SIZE: usize = 8;
}
impl sealed::ParamSeal for Len {}
impl Param for Len {
    const SIZE: usize = 8;
}

/// One argument as a launch hands it to the driver: opaque, built only
/// inside gpu-sync (by the sealed argument impls), read only by the launch.
/// It has no public constructor, field or method: an honest argument's
/// allocation, address and length cannot be read out and recombined.
#[derive(Clone, Copy)]
pub struct RawArg<'a>(pub(crate) Raw<'a>);

/// What a [`RawArg`] holds.
#[derive(Clone, Copy)]
pub(crate) enum Raw<'a> {
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

/// An argument accepted for parameter type `P`: the scalar itself for a
/// scalar, a `u64` for [`Len`], `&` a readable view of `T` for [`In<T>`],
/// `&mut` a writable view of `T` for [`Out<T>`]. Sealed (per parameter
/// type: see the module docs).
///
/// Not implemented outside gpu-sync: [`Kernel`](crate::Kernel)'s and
/// [`Len`]'s examples show signatures and their arguments in use.
pub trait KernelArg<P: Param>: sealed::ArgSeal<P> {}

impl<P: Param, A: sealed::ArgSeal<P>> KernelArg<P> for A {}

macro_rules! scalar_params {
    ($($t:ty),*) => {$(
        impl sealed::ParamSeal for $t {}
        impl Param for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
        }
        impl sealed::ArgSeal<$t> for $t {
            #[inline]
            fn raw(&self) -> RawArg<'_> {
                let mut bits = [0u8; 8];
                bits[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
                RawArg(Raw::Scalar(u64::from_le_bytes(bits)))
            }
        }
    )*};
}
scalar_params!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// A `u64` is the argument of a [`Len`] parameter (checked at launch).
impl sealed::ArgSeal<Len> for u64 {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        RawArg(Raw::Len(*self))
    }
}

/// Any readable view — `&DeviceBuffer<T>`, `&DeviceSlice<T>`,
/// `&DeviceSliceMut<T>` — is an [`In<T>`] argument.
impl<T: Pod, S: AsDeviceSlice<T> + ?Sized> sealed::ArgSeal<In<T>> for &S {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        let v = (**self).view();
        let align = std::mem::align_of::<T>();
        RawArg(Raw::Buffer { alloc: v.alloc, ptr: v.ptr(), len: v.len, align, access: Access::Read })
    }
}
/// Any writable view taken by `&mut` — `&mut DeviceBuffer<T>`,
/// `&mut DeviceSliceMut<T>` — is an [`Out<T>`] argument.
impl<T: Pod, S: AsDeviceSliceMut<T> + ?Sized> sealed::ArgSeal<Out<T>> for &mut S {
    #[inline]
    fn raw(&self) -> RawArg<'_> {
        let v = (**self).view();
        let align = std::mem::align_of::<T>();
        RawArg(Raw::Buffer { alloc: v.alloc, ptr: v.ptr(), len: v.len, align, access: Access::Write })
    }
}

/// A kernel signature: a tuple of [`Param`]s, up to 12. Sealed.
///
/// Not implemented outside gpu-sync: [`Kernel`](crate::Kernel)'s and
/// [`Len`]'s examples show signatures and their arguments in use.
pub trait Signature: sealed::SignatureSeal {
    /// Each parameter's size in bytes.
    const PARAM_SIZES: &'static [usize];
}

/// Most parameters a typed kernel can have.
pub const MAX_PARAMS: usize = 12;

/// Arguments matching signature `S`: a tuple of [`KernelArg`]s, one per
/// parameter. Sealed.
///
/// Not implemented outside gpu-sync: [`Kernel`](crate::Kernel)'s and
/// [`Len`]'s examples show signatures and their arguments in use.
pub trait KernelArgs<S: Signature>: sealed::ArgsSeal<S> {}

impl<S: Signature, A: sealed::ArgsSeal<S>> KernelArgs<S> for A {}

macro_rules! tuple_signatures {
    ($(($($p:ident $a:ident $i:tt),*))*) => {$(
        impl<$($p: Param),*> sealed::SignatureSeal for ($($p,)*) {}
        impl<$($p: Param),*> Signature for ($($p,)*) {
            const PARAM_SIZES: &'static [usize] = &[$($p::SIZE),*];
        }
        impl<$($p: Param, $a: KernelArg<$p>),*> sealed::ArgsSeal<($($p,)*)> for ($($a,)*) {
            type Raw<'a> = [RawArg<'a>; 0 $(+ { let _ = $i; 1 })*] where Self: 'a;
            #[inline(always)]
            fn raw_args(&self) -> Self::Raw<'_> {
                [$(sealed::ArgSeal::<$p>::raw(&self.$i)),*]
            }
        }
    )*};
}
impl sealed::SignatureSeal for () {}
impl Signature for () {
    const PARAM_SIZES: &'static [usize] = &[];
}
impl sealed::ArgsSeal<()> for () {
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

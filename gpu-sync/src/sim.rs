//! Testing GPU code without a GPU (feature `sim`): the software driver
//! `cuda-sim` as a library.
//!
//! gpu-sync is not published on crates.io: depend on it by path (a checkout
//! of this workspace beside your crate) or by git
//! (`gpu-sync = { git = "<this repository's URL>", features = ["sim"] }`):
//!
//! ```toml
//! [dev-dependencies]
//! gpu-sync = { path = "../gpu-sync/gpu-sync", features = ["sim"] }
//! ```
//!
//! - [`install`] makes the simulator the process's driver (or let
//!   [`select_driver`](crate::select_driver) choose by `GPU_SYNC_DRIVER`).
//! - [`session`] opens a [`Session`] for one test: its own scheduler seed
//!   (the order in which queued work runs; the same seed replays it), race
//!   oracle verdict ([`Session::races`], [`Session::assert_no_races`]) and
//!   fault plan ([`Session::inject`]).
//! - [`register`] gives the simulator a CPU version of your own kernel: a
//!   closure over typed slices whose reads and writes are derived from the
//!   kernel's typed signature (`In<T>` → `&[T]`, `Out<T>` → `&mut [T]`,
//!   scalars by value).
//!
//! ```
//! use gpu_sync::{sim, Device, DeviceBuffer, In, LaunchConfig, Len, Module, Out, Stream};
//!
//! type Vadd = (In<f32>, In<f32>, Out<f32>, Len);
//! let session = sim::session(7)?; // installs the simulator, seed 7
//! sim::register::<Vadd>("vadd", |(x, y, out, n)| {
//!     for i in 0..n as usize {
//!         out[i] = x[i] + y[i];
//!     }
//! });
//!
//! let device = Device::get(0)?;
//! let stream = Stream::new(&device)?;
//! let module = Module::load(&device, sim::PTX_STUB)?;
//! // SAFETY: the registered `vadd` reads `x` and `y` and writes `out` only
//! // below `n`, a `Len` that each launch checks against all three views.
//! let vadd = unsafe { module.kernel::<Vadd>("vadd")? };
//! let x = DeviceBuffer::from_slice(&stream, &[1.0f32, 2.0, 3.0])?;
//! let y = DeviceBuffer::from_slice(&stream, &[10.0f32, 20.0, 30.0])?;
//! let mut out = DeviceBuffer::<f32>::zeroed(&stream, 3)?;
//! vadd.launch(&stream, LaunchConfig::for_elements(3, 128), (&x, &y, &mut out, 3u64))?;
//! assert_eq!(stream.to_vec(&out)?, [11.0, 22.0, 33.0]);
//! session.assert_no_races();
//! # Ok::<(), gpu_sync::Error>(())
//! ```
//!
//! What the simulator models and what not is listed in `cuda-sim`'s crate
//! docs; the guide `docs/guide/testing-without-a-gpu.md` walks through a
//! downstream crate's CI set-up.

use crate::error::{Error, Result};
use crate::launch::signature::{In, Out, Param, Signature};
use bytemuck::Pod;
use cuda_sim::{KernelCall, KernelSpec, ParamSpec};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use cuda_sim::FaultPlan;
/// A fault a CPU version of a kernel meets, raised by the simulator itself (a launch argument outside every
/// allocation), never by safe gpu-sync code: the launch then fails with
/// `CUDA_ERROR_ILLEGAL_ADDRESS`, which [`Session::sticky_error`] reports.
pub use cuda_sim::KernelFault;
/// The kind of bug a [`RaceReport`] names; [`Session`]'s example reads the
/// reports.
pub use cuda_sim::RaceKind;
/// What the race oracle found, one report per bug: [`Session::races`]
/// returns them, and [`Session`]'s example prints them.
pub use cuda_sim::RaceReport;
/// A [`Session`] made current on another thread until dropped, as
/// [`Session::enter`] returns it:
///
/// ```
/// let session = gpu_sync::sim::session(3)?;
/// let device = gpu_sync::Device::get(0)?;
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         let _guard = session.enter(); // this thread's work joins the session
///         gpu_sync::Stream::new(&device)?.synchronize().map(|_| ())
///     }).join().expect("the thread ran")
/// })?;
/// session.assert_no_races();
/// # Ok::<(), gpu_sync::Error>(())
/// ```
pub use cuda_sim::SessionGuard;
/// A driver result code (`CUresult`): [`Session::inject`]'s example makes a call fail
/// with one and reads it back from the error.
pub use cuda_sys::CUresult;

/// A minimal PTX image the simulator accepts as a module: every module the
/// simulator loads exposes every registered kernel, so tests that have no
/// real image can load this one.
pub const PTX_STUB: &[u8] = b"//\n// simulator stub\n.version 8.0\n.target sm_80\n.address_size 64\n\0";

/// Makes the simulator the process's driver. Idempotent: calling it again
/// (or after [`select_driver`](crate::select_driver) chose the simulator)
/// does nothing.
///
/// # Errors
/// [`Error::DriverSelection`] when the real driver (or another table) is
/// already in use: a process has one driver for its whole life.
pub fn install() -> Result<()> {
    match cuda_sim::install() {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::DriverSelection(format!("cannot install the simulator cuda-sim: {e}"))),
    }
}

/// Installs the simulator (as [`install`]) and opens a [`Session`] with
/// `seed`, current on the calling thread.
///
/// # Errors
/// As [`install`].
pub fn session(seed: u64) -> Result<Session> {
    install()?;
    Ok(Session { inner: cuda_sim::Session::new(seed) })
}

/// One test's view of the simulator: the scheduler seed, the race oracle's
/// verdict, the fault plan and the sticky-error state of the work submitted
/// while it is current.
///
/// `cargo test` runs tests as threads of one process sharing the one
/// simulated machine; a session isolates them. It is current on the thread
/// that opened it ([`Session::enter`] makes it current on another one) until
/// dropped.
///
/// ```
/// use gpu_sync::{Device, DeviceBuffer, Stream, sim};
/// let session = sim::session(42)?; // this test's own seed and oracle
/// let device = Device::get(0)?;
/// let (a, b) = (Stream::new(&device)?, Stream::new(&device)?);
/// let x = DeviceBuffer::from_slice(&a, &[1u32; 64])?;
/// assert_eq!(b.to_vec(&x)?, [1; 64]); // b waits for a's upload: no race
/// for report in session.races() {
///     println!("{report}"); // what a report would say: kind, allocation, both accesses
/// }
/// assert_eq!(session.seed(), 42);
/// session.assert_no_races();
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug)]
pub struct Session {
    inner: cuda_sim::Session,
}

impl Session {
    /// The seed of the scheduler: the same seed runs queued work in the same
    /// order.
    pub fn seed(&self) -> u64 {
        self.inner.seed()
    }

    /// The races, use-after-frees and double frees the oracle found so far
    /// in this session's work (empty: none).
    pub fn races(&self) -> Vec<RaceReport> {
        self.inner.races()
    }

    /// Panics, listing every report, if the oracle found a race, a
    /// use-after-free or a double free in this session's work. Meant for
    /// tests; library code uses [`Session::races`].
    ///
    /// # Panics
    /// When [`Session::races`] is not empty.
    #[track_caller]
    pub fn assert_no_races(&self) {
        let races = self.races();
        if !races.is_empty() {
            let list: Vec<String> = races.iter().map(|r| format!("  {r}")).collect();
            panic!("the race oracle reported {} problem(s):\n{}", races.len(), list.join("\n"));
        }
    }

    /// Makes driver calls fail as `plan` says, from now on in this session:
    /// call N, every call of a kind, or the k-th call of a kind returns a
    /// chosen `CUresult`. Sticky codes (`CUDA_ERROR_ILLEGAL_ADDRESS`) poison
    /// the session like a lost context.
    ///
    /// ```
    /// use gpu_sync::sim::{self, CUresult, FaultPlan};
    /// let session = sim::session(1)?;
    /// let device = gpu_sync::Device::get(0)?;
    /// session.inject(FaultPlan::new().fail_every("cuStreamCreateWithPriority", CUresult::CUDA_ERROR_OUT_OF_MEMORY));
    /// let err = gpu_sync::Stream::new(&device).unwrap_err();
    /// assert_eq!(err.cu_error().map(|e| e.0), Some(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
    /// # Ok::<(), gpu_sync::Error>(())
    /// ```
    pub fn inject(&self, plan: FaultPlan) {
        self.inner.inject(plan);
    }

    /// Removes the injected faults.
    pub fn clear_faults(&self) {
        self.inner.clear_faults();
    }

    /// The sticky error that poisoned this session, if any.
    pub fn sticky_error(&self) -> Option<CUresult> {
        self.inner.sticky_error()
    }

    /// The driver calls made in this session so far, by name.
    pub fn calls(&self) -> Vec<&'static str> {
        self.inner.calls()
    }

    /// Makes this session current on the calling thread until the guard is
    /// dropped (for work a test submits from other threads).
    pub fn enter(&self) -> SessionGuard<'_> {
        self.inner.enter()
    }

    /// The underlying `cuda_sim` session, for what this wrapper does not
    /// expose (attribute overrides, live-object counts).
    pub fn as_cuda_sim(&self) -> &cuda_sim::Session {
        &self.inner
    }
}

/// Everything else of the underlying `cuda_sim` session (attribute
/// overrides, live-object counts, pending work).
impl std::ops::Deref for Session {
    type Target = cuda_sim::Session;
    fn deref(&self) -> &cuda_sim::Session {
        &self.inner
    }
}

/// A kernel parameter type the simulator can hand to a CPU closure:
/// [`In<T>`] as `&[T]`, [`Out<T>`] as `&mut [T]`, scalars by value.
///
/// A slice starts at the pointer passed and ends at the end of the
/// allocation holding it — every element the kernel could address. Its
/// contents are copied out of simulated device memory before the closure
/// runs and, for `Out`, back after it: the race oracle sees the whole range
/// read (and, for `Out`, written).
///
/// Implemented for gpu-sync's parameter types and their tuples; named only
/// through [`register`] and [`register_per_thread`], whose examples (and the
/// module's) show the views a closure receives.
pub trait SimParam: Param {
    /// What the closure sees for this parameter.
    type View<'a>;
    #[doc(hidden)]
    type Staged;
    #[doc(hidden)]
    fn spec() -> ParamSpec;
    #[doc(hidden)]
    fn load(call: &mut KernelCall<'_>, index: usize) -> Result<Self::Staged, KernelFault>;
    #[doc(hidden)]
    fn view(staged: &mut Self::Staged) -> Self::View<'_>;
    #[doc(hidden)]
    fn store(call: &mut KernelCall<'_>, index: usize, staged: Self::Staged) -> Result<(), KernelFault>;
}

/// Elements of `T` from pointer parameter `index` to the end of its
/// allocation.
fn elements<T>(call: &KernelCall<'_>, index: usize) -> Result<usize, KernelFault> {
    let bytes = call.extent(index)?;
    let size = std::mem::size_of::<T>() as u64;
    Ok(bytes.checked_div(size).map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)))
}

impl<T: Pod> SimParam for In<T> {
    type View<'a> = &'a [T];
    type Staged = Vec<T>;
    fn spec() -> ParamSpec {
        ParamSpec::read()
    }
    fn load(call: &mut KernelCall<'_>, index: usize) -> Result<Vec<T>, KernelFault> {
        let n = elements::<T>(call, index)?;
        call.read(index, n)
    }
    fn view(staged: &mut Vec<T>) -> &[T] {
        staged
    }
    fn store(_: &mut KernelCall<'_>, _: usize, _: Vec<T>) -> Result<(), KernelFault> {
        Ok(())
    }
}

impl<T: Pod> SimParam for Out<T> {
    type View<'a> = &'a mut [T];
    type Staged = Vec<T>;
    fn spec() -> ParamSpec {
        // `Out` may also read (a `T*`), so the oracle treats it as both.
        ParamSpec::read_write()
    }
    fn load(call: &mut KernelCall<'_>, index: usize) -> Result<Vec<T>, KernelFault> {
        let n = elements::<T>(call, index)?;
        call.read(index, n)
    }
    fn view(staged: &mut Vec<T>) -> &mut [T] {
        staged
    }
    fn store(call: &mut KernelCall<'_>, index: usize, staged: Vec<T>) -> Result<(), KernelFault> {
        call.write(index, &staged)
    }
}

macro_rules! scalar_sim_params {
    ($($t:ty),*) => {$(
        impl SimParam for $t {
            type View<'a> = $t;
            type Staged = $t;
            fn spec() -> ParamSpec {
                ParamSpec::scalar::<$t>()
            }
            fn load(call: &mut KernelCall<'_>, index: usize) -> Result<$t, KernelFault> {
                call.scalar(index)
            }
            fn view(staged: &mut $t) -> $t {
                *staged
            }
            fn store(_: &mut KernelCall<'_>, _: usize, _: $t) -> Result<(), KernelFault> {
                Ok(())
            }
        }
    )*};
}
scalar_sim_params!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

/// A [`Len`](crate::Len) is a `u64` to the closure, as to the kernel.
impl SimParam for crate::Len {
    type View<'a> = u64;
    type Staged = u64;
    fn spec() -> ParamSpec {
        ParamSpec::scalar::<u64>()
    }
    fn load(call: &mut KernelCall<'_>, index: usize) -> Result<u64, KernelFault> {
        call.scalar(index)
    }
    fn view(staged: &mut u64) -> u64 {
        *staged
    }
    fn store(_: &mut KernelCall<'_>, _: usize, _: u64) -> Result<(), KernelFault> {
        Ok(())
    }
}

/// A kernel signature whose every parameter is a [`SimParam`]: the tuple of
/// views is what a registered closure receives.
///
/// Implemented for gpu-sync's parameter types and their tuples; named only
/// through [`register`] and [`register_per_thread`], whose examples (and the
/// module's) show the views a closure receives.
pub trait SimSignature: Signature {
    /// The closure's argument: one view per parameter, in order.
    type Views<'a>;
    #[doc(hidden)]
    type Staged;
    #[doc(hidden)]
    fn specs() -> Vec<ParamSpec>;
    #[doc(hidden)]
    fn load(call: &mut KernelCall<'_>) -> Result<Self::Staged, KernelFault>;
    #[doc(hidden)]
    fn views(staged: &mut Self::Staged) -> Self::Views<'_>;
    #[doc(hidden)]
    fn store(call: &mut KernelCall<'_>, staged: Self::Staged) -> Result<(), KernelFault>;
}

macro_rules! sim_signatures {
    ($(($($p:ident $i:tt),*))*) => {$(
        impl<$($p: SimParam),*> SimSignature for ($($p,)*) {
            type Views<'a> = ($($p::View<'a>,)*);
            type Staged = ($($p::Staged,)*);
            fn specs() -> Vec<ParamSpec> {
                vec![$($p::spec()),*]
            }
            fn load(call: &mut KernelCall<'_>) -> Result<Self::Staged, KernelFault> {
                Ok(($($p::load(call, $i)?,)*))
            }
            fn views(staged: &mut Self::Staged) -> Self::Views<'_> {
                ($($p::view(&mut staged.$i),)*)
            }
            fn store(call: &mut KernelCall<'_>, staged: Self::Staged) -> Result<(), KernelFault> {
                $($p::store(call, $i, staged.$i)?;)*
                Ok(())
            }
        }
    )*};
}
impl SimSignature for () {
    type Views<'a> = ();
    type Staged = ();
    fn specs() -> Vec<ParamSpec> {
        Vec::new()
    }
    fn load(_: &mut KernelCall<'_>) -> Result<(), KernelFault> {
        Ok(())
    }
    fn views(_: &mut ()) {}
    fn store(_: &mut KernelCall<'_>, _: ()) -> Result<(), KernelFault> {
        Ok(())
    }
}
sim_signatures! {
    (P0 0)
    (P0 0, P1 1)
    (P0 0, P1 1, P2 2)
    (P0 0, P1 1, P2 2, P3 3)
    (P0 0, P1 1, P2 2, P3 3, P4 4)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6, P7 7)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6, P7 7, P8 8)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6, P7 7, P8 8, P9 9)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6, P7 7, P8 8, P9 9, P10 10)
    (P0 0, P1 1, P2 2, P3 3, P4 4, P5 5, P6 6, P7 7, P8 8, P9 9, P10 10, P11 11)
}

type RunFn = Arc<dyn Fn(&mut KernelCall<'_>) -> Result<(), KernelFault> + Send + Sync>;

/// A closure registration: the names and parameter lists handed to the
/// registry must be `'static`, so each name's are leaked once and reused.
struct Entry {
    name: &'static str,
    specs: &'static [ParamSpec],
    run: RunFn,
}

fn closures() -> &'static Mutex<HashMap<String, Entry>> {
    static CLOSURES: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();
    CLOSURES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What the registry calls for every closure-registered kernel: finds the
/// closure by the kernel's name and runs it outside the lock.
fn trampoline(call: &mut KernelCall<'_>) -> Result<(), KernelFault> {
    let run = closures().lock().unwrap_or_else(|p| p.into_inner()).get(call.name()).map(|e| e.run.clone());
    match run {
        Some(run) => run(call),
        None => Err(KernelFault::BadParam {
            kernel: call.name().to_owned(),
            param: 0,
            what: "no closure registered under this name".into(),
        }),
    }
}

/// Registers (or replaces) the CPU version of kernel `name` with the typed
/// signature `S` — the same `S` the program declares with
/// [`Module::kernel`](crate::Module::kernel). On the simulator every module
/// then has a kernel `name` whose parameter sizes, and whose reads and writes
/// for the race oracle, follow from `S`; a launch runs `f` once for the
/// whole grid with one view per parameter (see [`SimParam`]). A kernel whose
/// threads each do their own part is better registered with
/// [`register_per_thread`], which runs it once per thread, as the GPU does.
///
/// `f` runs inside the simulator and may not call the driver: a gpu-sync
/// call inside it fails with `CUDA_ERROR_NOT_PERMITTED` (before any lock),
/// as does a driver call through `cuda_sys`, and what it drops is released
/// later on an ordinary thread, as in a host function. A panic in it fails
/// the launch with `CUDA_ERROR_LAUNCH_FAILED`. The
/// simulated duration is the simulator's device model's
/// (`cuda_sim::model::kernel_ns`) for the bytes its buffers may hold (each
/// pointer to the end of its allocation): at least 1 µs, never faster than
/// the simulated device's 3352 GB/s.
///
/// ```
/// use gpu_sync::{sim, In, Out};
/// // saxpy(const float* x, float* y, float a, u64 n)
/// sim::register::<(In<f32>, Out<f32>, f32, u64)>("saxpy", |(x, y, a, n)| {
///     for i in 0..n as usize {
///         y[i] += a * x[i];
///     }
/// });
/// ```
pub fn register<S: SimSignature>(name: &str, f: impl for<'a> Fn(S::Views<'a>) + Send + Sync + 'static) {
    register_run::<S>(
        name,
        Arc::new(move |call: &mut KernelCall<'_>| {
            let mut staged = S::load(call)?;
            // The simulator runs `f` holding its global lock, maybe inside a
            // driver call gpu-sync made under one of its own locks: while `f`
            // runs, every gpu-sync call refuses before any lock
            // (`CUDA_ERROR_NOT_PERMITTED`) and drops are deferred, exactly as
            // in a host function.
            let inside = crate::engine::Inside::enter();
            f(S::views(&mut staged));
            drop(inside);
            S::store(call, staged)
        }),
    );
}

/// One GPU thread of a launch, as a per-thread CPU version sees it
/// ([`register_per_thread`]): CUDA's `blockIdx`, `threadIdx`, `gridDim` and
/// `blockDim`.
///
/// ```
/// use gpu_sync::{Device, DeviceBuffer, LaunchConfig, Len, Module, Out, Stream, sim};
/// let _session = sim::session(0)?;
/// // iota(u32* y, u64 n): `if (i < n) y[i] = i;`, one element a thread.
/// sim::register_per_thread::<(Out<u32>, Len)>("iota", |t, (y, n)| {
///     let i = t.global_x();
///     if i < n {
///         y[i as usize] = i as u32;
///     }
/// });
/// let device = Device::get(0)?;
/// let stream = Stream::new(&device)?;
/// // SAFETY: iota writes y[i] for i < n only, n a Len checked against y.
/// let iota = unsafe { Module::load(&device, sim::PTX_STUB)?.kernel::<(Out<u32>, Len)>("iota")? };
/// let mut y = DeviceBuffer::<u32>::zeroed(&stream, 8)?;
/// // A grid of 2 blocks of 2 threads covers 4 of the 8 elements, as on a GPU.
/// iota.launch(&stream, LaunchConfig::new(2, 2), (&mut y, 8u64))?;
/// assert_eq!(stream.to_vec(&y)?, [0, 1, 2, 3, 0, 0, 0, 0]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thread {
    /// `blockIdx`.
    pub block_idx: [u32; 3],
    /// `threadIdx`.
    pub thread_idx: [u32; 3],
    /// `gridDim`.
    pub grid_dim: [u32; 3],
    /// `blockDim`.
    pub block_dim: [u32; 3],
}

impl Thread {
    /// `blockIdx.x * blockDim.x + threadIdx.x`, the usual 1-D index.
    pub fn global_x(&self) -> u64 {
        u64::from(self.block_idx[0]) * u64::from(self.block_dim[0]) + u64::from(self.thread_idx[0])
    }

    /// `gridDim.x * blockDim.x`, the stride of a 1-D grid-stride loop.
    pub fn stride_x(&self) -> u64 {
        u64::from(self.grid_dim[0]) * u64::from(self.block_dim[0])
    }
}

/// As [`register`], but `f` is the kernel's body for one thread, and a
/// launch runs it once per thread of its grid, with that thread's indices
/// ([`Thread`]), as the GPU does: a grid too small for the data then leaves
/// the same elements unwritten on the simulator as on a GPU, where a
/// whole-range CPU version would hide the bug. For kernels whose threads
/// do not cooperate (no shared memory, no `__syncthreads`, no atomics whose
/// order matters): element-wise and grid-stride kernels.
///
/// ```
/// use gpu_sync::{sim, In, Len, Out};
/// // vadd(const float* x, const float* y, float* out, u64 n), one element a
/// // thread: `if (i < n) out[i] = x[i] + y[i];`
/// sim::register_per_thread::<(In<f32>, In<f32>, Out<f32>, Len)>("vadd_per_thread", |t, (x, y, out, n)| {
///     let i = t.global_x() as usize;
///     if (i as u64) < n {
///         out[i] = x[i] + y[i];
///     }
/// });
/// ```
pub fn register_per_thread<S: SimSignature>(
    name: &str,
    f: impl for<'a> Fn(Thread, S::Views<'a>) + Send + Sync + 'static,
) {
    register_run::<S>(
        name,
        Arc::new(move |call: &mut KernelCall<'_>| {
            let mut staged = S::load(call)?;
            let (grid_dim, block_dim) = (call.grid(), call.block());
            let inside = crate::engine::Inside::enter();
            for bz in 0..grid_dim[2] {
                for by in 0..grid_dim[1] {
                    for bx in 0..grid_dim[0] {
                        for tz in 0..block_dim[2] {
                            for ty in 0..block_dim[1] {
                                for tx in 0..block_dim[0] {
                                    let t = Thread {
                                        block_idx: [bx, by, bz],
                                        thread_idx: [tx, ty, tz],
                                        grid_dim,
                                        block_dim,
                                    };
                                    f(t, S::views(&mut staged));
                                }
                            }
                        }
                    }
                }
            }
            drop(inside);
            S::store(call, staged)
        }),
    );
}

/// Registers `run` as kernel `name` with `S`'s parameters (both
/// registrations).
fn register_run<S: SimSignature>(name: &str, run: RunFn) {
    let specs = S::specs();
    let spec = {
        let mut map = closures().lock().unwrap_or_else(|p| p.into_inner());
        let (name, specs) = match map.get(name) {
            Some(e) if e.specs == specs.as_slice() => (e.name, e.specs),
            Some(e) => (e.name, &*Box::leak(specs.into_boxed_slice())),
            None => (&*Box::leak(name.to_owned().into_boxed_str()), &*Box::leak(specs.into_boxed_slice())),
        };
        map.insert(name.to_owned(), Entry { name, specs, run });
        KernelSpec { name, params: specs, run: trampoline, duration: None }
    };
    cuda_sim::register_kernel(spec);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_follow_the_signature() {
        let specs = <(In<f32>, Out<u16>, u32, f64) as SimSignature>::specs();
        assert_eq!(
            specs,
            vec![
                ParamSpec::read(),
                ParamSpec::read_write(),
                ParamSpec::scalar::<u32>(),
                ParamSpec::scalar::<f64>()
            ]
        );
    }
}

//! NCCL collectives as tracked stream operations: no `record_stream`, no
//! `wait()`, memory reusable the moment the GPU is done with it.
//!
//! PyTorch's ProcessGroupNCCL had to record every tensor of a collective on
//! its side stream (`record_stream`, which held memory too long) and now
//! holds them on the host until `wait()`. gpu-sync already knows, per
//! buffer, which streams used it: a collective is one more tracked
//! operation — its buffers are ordered against every other use, later work
//! on any stream waits for it on the GPU, and a buffer dropped after it is
//! freed stream-ordered after it, with no host call.
//!
//! - [`Communicator`]: one rank, non-blocking, made for every local GPU by
//!   one process ([`Communicator::init_all`]), or one per process from a
//!   [`UniqueId`] ([`Communicator::init_rank`], [`Communicator::from_env`]
//!   under `torchrun`); dropping it never hangs.
//! - [`spawn_local`]: one process per GPU without a launcher — this program
//!   re-executed once per rank with torchrun's variables and an
//!   `NCCL_COMM_ID`, failures and timeouts reported by rank.
//! - [`group`]: the operations of one NCCL group, collected in a closure
//!   ([`Group`]) and issued as **one** engine operation over their streams
//!   (`engine::submit_group`): the streams wait for their buffers' earlier
//!   uses, `ncclGroupStart` … `ncclGroupEnd` runs with no user code inside,
//!   and each stream's uses are recorded once NCCL has enqueued the work.
//!   A group of one operation on a stream that is not capturing (one
//!   process per GPU, where each rank issues its own part) is the engine's
//!   single-stream operation, as a kernel launch is.
//! - [`NcclType`], [`ReduceOp`]: typed element kinds and reductions.
//!
//! Unsafe code, for this folder: NCCL's calls take raw communicators and
//! device pointers (`cuda_sys::nccl::result`). Each `unsafe` block argues
//! its call.
//!
//! NCCL is loaded at run time (`cuda_sys::nccl`: `CUDA_SYS_LIBNCCL`, an NCCL
//! already in the process, the Python `nvidia.nccl` package, the loader
//! path); on the simulator (`GPU_SYNC_DRIVER=sim`) cuda-sim's simulated
//! NCCL answers instead. Keep NVLink multicast off where NCCL runs on
//! shared machines (`NCCL_NVLS_ENABLE=0`).

#![allow(unsafe_code)]

mod comm;
mod group;
mod inner;
mod spawn;
mod types;

pub use comm::{CommOptions, Communicator, DEFAULT_TIMEOUT, UniqueId};
pub use group::{Group, group};
pub use spawn::{DEFAULT_SPAWN_TIMEOUT, RankEnv, SpawnError, SpawnOptions, SpawnRole, spawn_local};
pub use types::{Fp8E4M3, Fp8E5M2, NcclType, ReduceOp};

use crate::error::{Error, Result};
use cuda_sys::nccl::Nccl;

/// The NCCL table in use: on the simulator, the simulated NCCL it
/// installed (never a real library beside a simulated driver); else the
/// process-wide one (`cuda_sys::nccl::nccl`: loaded on first use).
///
/// # Errors
/// [`Error::NcclLoad`] naming where it looked and what to install;
/// [`Error::InvalidArgument`] on a simulator without a simulated NCCL.
fn table() -> Result<&'static Nccl> {
    crate::backend::honour_env_on_first_use()?;
    if crate::backend::Backend::current().is_some_and(crate::backend::Backend::is_sim) {
        return cuda_sys::nccl::installed_nccl().ok_or_else(|| {
            Error::InvalidArgument("the simulator in use installed no simulated NCCL".into())
        });
    }
    Ok(cuda_sys::nccl::nccl()?)
}

impl Communicator {
    /// All-reduce on this rank alone, as a group of one
    /// ([`Group::all_reduce`], made as one single-stream operation when the
    /// stream is not capturing): for one process per GPU, where each
    /// process issues its own rank's part. From one thread holding several
    /// ranks, a clique's first collective must be a group of every rank:
    /// NCCL connects the ranks on first use, and a rank's first call alone
    /// waits for the others'.
    ///
    /// # Errors
    /// As [`group`] and [`Group::all_reduce`].
    pub fn all_reduce<T: NcclType>(
        &self,
        stream: &crate::Stream,
        send: &(impl crate::AsDeviceSlice<T> + ?Sized),
        recv: &mut (impl crate::AsDeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<()> {
        group(|g| g.all_reduce(self, stream, send, recv, op))
    }

    /// [`Communicator::all_reduce`] in place.
    ///
    /// # Errors
    /// As [`Communicator::all_reduce`].
    pub fn all_reduce_in_place<T: NcclType>(
        &self,
        stream: &crate::Stream,
        buf: &mut (impl crate::AsDeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<()> {
        group(|g| g.all_reduce_in_place(self, stream, buf, op))
    }
}

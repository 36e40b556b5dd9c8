//! Collectives as tracked operations: a [`Group`] collects NCCL operations
//! (each on a communicator, a stream of its device, and buffers borrowed
//! for the group's life); when the scope ends, all of them are issued
//! between one `ncclGroupStart` and `ncclGroupEnd` as **one** engine
//! operation over their streams (`engine::submit_group`): each stream
//! first waits (device-side) for the earlier uses of its operation's
//! buffers, and after `ncclGroupEnd` — and, on a non-blocking
//! communicator, once NCCL reports the work enqueued — each stream's uses
//! are recorded. No user code runs between `ncclGroupStart` and
//! `ncclGroupEnd`, so the group is ended on every path, error and panic
//! included, and an event can never be recorded inside it.
//!
//! A group of one operation on a stream that is not capturing (one process
//! per GPU, each rank issuing its own part) is the engine's single-stream
//! operation (`engine::submit`, as a kernel launch is), its NCCL call made
//! alone — NCCL makes a lone call its own group — but for all-to-all, whose
//! sends and receives keep their `ncclGroupStart` … `ncclGroupEnd`. The
//! ordering and the uses recorded are the same; the path is shorter.
//!
//! On capturing streams ([`crate::Stream::capture`]) the group is captured
//! like other work (`engine::submit_group_capturable`): every stream of the
//! group must capture — each in its own capture, one graph per device is
//! the usual shape — or none; a group mixing them is refused
//! ([`Error::Capturing`]). Each graph then holds its rank's part and keeps
//! its communicator alive; launching it runs the collective, which finishes
//! once every rank's graph has been launched (launch them all, as one
//! process driving every rank: a rank's graph alone waits for its peers).

use super::comm::{Communicator, in_progress_ok};
use super::types::{NcclType, ReduceOp};
use crate::engine::{self, Access, Allocation, Part, Target, Use};
use crate::error::{Error, Result};
use crate::memory::buffer::{AsDeviceSlice, AsDeviceSliceMut};
use crate::stream::Stream;
use cuda_sys::nccl::result as nc;
use cuda_sys::nccl_bindings::{cudaStream_t, ncclDataType_t, ncclRedOp_t};
use cuda_sys::{BorrowedStream, CUdeviceptr};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::sync::Arc;

#[path = "group_blocking.rs"]
mod blocking;
use blocking::{Member, one_collective_per_rank, refuse_waits_forever};

/// What one collected operation asks NCCL.
#[derive(Clone, Copy)]
enum Call {
    AllReduce {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        count: usize,
        op: ncclRedOp_t,
    },
    Broadcast {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        count: usize,
        root: usize,
    },
    Reduce {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        count: usize,
        op: ncclRedOp_t,
        root: usize,
    },
    AllGather {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        count: usize,
    },
    ReduceScatter {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        count: usize,
        op: ncclRedOp_t,
    },
    Send {
        buf: CUdeviceptr,
        count: usize,
        peer: usize,
    },
    Recv {
        buf: CUdeviceptr,
        count: usize,
        peer: usize,
    },
    /// Grouped sends and receives of `block` elements with every rank.
    AllToAll {
        send: CUdeviceptr,
        recv: CUdeviceptr,
        block: usize,
        block_bytes: usize,
        size: usize,
    },
}

impl Call {
    /// What every rank of a clique must give alike for this collective
    /// (kind, count, element kind, operation, root); `None` for a send or
    /// a receive, which pair instead.
    fn collective(&self, ty: ncclDataType_t) -> Option<(u8, usize, u32, u32, usize)> {
        let t = ty.0;
        Some(match *self {
            Call::AllReduce { count, op, .. } => (0, count, t, op.0, 0),
            Call::Broadcast { count, root, .. } => (1, count, t, 0, root),
            Call::Reduce { count, op, root, .. } => (2, count, t, op.0, root),
            Call::AllGather { count, .. } => (3, count, t, 0, 0),
            Call::ReduceScatter { count, op, .. } => (4, count, t, op.0, 0),
            Call::AllToAll { block, .. } => (5, block, t, 0, 0),
            Call::Send { .. } | Call::Recv { .. } => return None,
        })
    }
}

/// The uses of one collected operation: one or two (every NCCL call reads
/// and writes at most a buffer each). Plain data, so a group's operations
/// need no drop (a `SmallVec` of uses per operation cost a drop check
/// each, and a spill check at every read).
#[derive(Clone, Copy)]
struct OpUses<'a> {
    at: [Use<'a>; 2],
    n: u8,
}

impl<'a> OpUses<'a> {
    /// One use.
    fn one(u: Use<'a>) -> OpUses<'a> {
        OpUses { at: [u, u], n: 1 }
    }

    /// Two uses, in order.
    fn two(a: Use<'a>, b: Use<'a>) -> OpUses<'a> {
        OpUses { at: [a, b], n: 2 }
    }

    /// `first`, then `second` when there is one.
    fn maybe(first: Use<'a>, second: Option<Use<'a>>) -> OpUses<'a> {
        match second {
            Some(b) => OpUses::two(first, b),
            None => OpUses::one(first),
        }
    }

    /// The uses, in order.
    #[inline(always)]
    fn as_slice(&self) -> &[Use<'a>] {
        &self.at[..usize::from(self.n)]
    }
}

/// One collected operation.
#[derive(Clone, Copy)]
struct Pending<'a> {
    comm: &'a Communicator,
    stream: &'a Stream,
    uses: OpUses<'a>,
    ty: ncclDataType_t,
    call: Call,
}

impl Pending<'_> {
    /// What the blocking check reads of it.
    fn member(&self) -> Member {
        Member {
            clique: self.comm.inner.clique,
            rank: self.comm.rank(),
            size: self.comm.size(),
            ty: self.ty,
            call: self.call,
        }
    }
}

/// The operations a group holds without allocating (a collective over up
/// to 8 ranks, the GPUs of one machine); a larger group spills to the heap.
const INLINE: usize = 8;

/// The NCCL operations of one group, collected by the closure given to
/// [`group`] and issued together when it returns (see the module docs).
/// Each method checks its arguments at once (lengths, ranks, devices) and
/// borrows its buffers until the group is issued.
///
/// ```
/// # gpu_sync::sim::install()?;
/// use gpu_sync::nccl::{self, Communicator, ReduceOp};
/// use gpu_sync::{Device, DeviceBuffer, Stream};
/// let devices = Device::all()?;
/// let comms = Communicator::init_all(&devices)?;
/// let streams: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_, _>>()?;
/// let mut bufs: Vec<DeviceBuffer<f32>> = streams
///     .iter()
///     .enumerate()
///     .map(|(r, s)| DeviceBuffer::from_slice(s, &[r as f32 + 1.0; 4]))
///     .collect::<Result<_, _>>()?;
/// nccl::group(|g| {
///     for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
///         g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
///     }
///     Ok(())
/// })?;
/// let n = devices.len() as f32;
/// // Read on another stream: ordered after the all-reduce, no wait written.
/// let reader = Stream::new(&devices[0])?;
/// assert_eq!(reader.to_vec(&bufs[0])?, [n * (n + 1.0) / 2.0; 4]);
/// # Ok::<(), gpu_sync::Error>(())
/// ```
#[derive(Default)]
pub struct Group<'a> {
    ops: SmallVec<[Pending<'a>; INLINE]>,
}

/// Runs `collect`, which adds NCCL operations to a [`Group`], then issues
/// them all as one group (`ncclGroupStart` … `ncclGroupEnd`) and one
/// tracked operation over their streams — a group of one operation on a
/// stream that is not capturing as one single-stream operation, its NCCL
/// call made alone (see the module docs). One process driving several GPUs
/// must give each collective's operation of every rank in one group (NCCL
/// runs a collective once every rank has issued it). When `collect`
/// returns an error or panics, nothing is issued.
///
/// # Errors
/// `collect`'s error; [`Error::InvalidArgument`] when one buffer is
/// written by one operation and used by another of the group (they run
/// concurrently), or — on blocking communicators
/// ([`super::CommOptions::blocking`]) — a group that could wait forever (a
/// rank of a clique missing, ranks giving different collectives, a send its
/// peer does not receive alike; a send, receive or all-to-all on a
/// communicator with ranks in other processes) or that mixes blocking and
/// non-blocking communicators; [`Error::Capturing`] when some of the streams capture a
/// graph and others do not (all capturing: the group is captured, see the
/// module docs); NCCL's error
/// (the work NCCL may have enqueued is tracked all the same);
/// [`Error::NcclTimeout`] when NCCL did not finish enqueuing in time (the
/// communicators involved are aborted).
pub fn group<'a, R>(collect: impl FnOnce(&mut Group<'a>) -> Result<R>) -> Result<R> {
    let mut g = Group { ops: SmallVec::new() };
    let r = collect(&mut g)?;
    g.issue()?;
    Ok(r)
}

impl<'a> Group<'a> {
    /// Collects one operation. In line (each collective's one call site):
    /// the checks are a few compares, their errors made out of line.
    #[inline(always)]
    fn push(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        uses: OpUses<'a>,
        ty: ncclDataType_t,
        call: Call,
        what: &'static str,
    ) -> Result<()> {
        comm.inner.usable(what)?;
        if !stream.device().same(&comm.inner.device) {
            return Err(wrong_device(comm, stream));
        }
        if !comm.inner.nccl.supports(ty) {
            return Err(kind_unsupported(comm, what));
        }
        self.ops.push(Pending { comm, stream, uses, ty, call });
        Ok(())
    }

    /// All-reduce: every rank's `recv` becomes the reduction by `op` of
    /// every rank's `send` (`ncclAllReduce`; same length on every rank).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::DeviceMismatch`] for a stream
    /// of another device than the communicator's; [`Error::InvalidArgument`]
    /// for an aborted communicator or an element kind the loaded NCCL lacks.
    pub fn all_reduce<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: &'a (impl AsDeviceSlice<T> + ?Sized),
        recv: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<()> {
        let (s, r) = (send.view(), recv.view());
        same_len("all_reduce", s.len, r.len)?;
        let uses = read_write(s.alloc, r.alloc);
        let call = Call::AllReduce { send: s.ptr(), recv: r.ptr(), count: s.len, op: op.raw() };
        self.push(comm, stream, uses, T::KIND, call, "all_reduce")
    }

    /// [`Group::all_reduce`] in place: `buf` is both `send` and `recv`.
    ///
    /// # Errors
    /// As [`Group::all_reduce`].
    pub fn all_reduce_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        buf: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<()> {
        let b = buf.view();
        let uses = OpUses::one((Target::Device(b.alloc), Access::Write));
        let call = Call::AllReduce { send: b.ptr(), recv: b.ptr(), count: b.len, op: op.raw() };
        self.push(comm, stream, uses, T::KIND, call, "all_reduce_in_place")
    }

    /// Broadcast, in place: every rank's `buf` becomes rank `root`'s `buf`
    /// (`ncclBroadcast`, in place).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root that is no rank; as
    /// [`Group::all_reduce`].
    pub fn broadcast_in_place<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        buf: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        root: usize,
    ) -> Result<()> {
        rank_in("broadcast_in_place", comm, root)?;
        let b = buf.view();
        // The root's buffer counts as written too: in place, NCCL may still
        // copy it onto itself.
        let uses = OpUses::one((Target::Device(b.alloc), Access::Write));
        let call = Call::Broadcast { send: b.ptr(), recv: b.ptr(), count: b.len, root };
        self.push(comm, stream, uses, T::KIND, call, "broadcast_in_place")
    }

    /// Broadcast: every rank's `recv` becomes rank `root`'s `send`
    /// (`ncclBroadcast`, out of place); `send` is given on the root only
    /// (`None` elsewhere), of `recv`'s length.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root that is no rank, a root
    /// without `send` or another rank with one; [`Error::LengthMismatch`];
    /// as [`Group::all_reduce`].
    pub fn broadcast<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: Option<&'a (impl AsDeviceSlice<T> + ?Sized)>,
        recv: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        root: usize,
    ) -> Result<()> {
        rank_in("broadcast", comm, root)?;
        let r = recv.view();
        let write = (Target::Device(r.alloc), Access::Write);
        let send =
            root_only("broadcast", "sends", "a send buffer (or use broadcast_in_place)", comm, root, send)?;
        // NCCL reads `sendbuff` on the root only.
        let (send_ptr, uses) = match send.map(|s| s.view()) {
            Some(s) => {
                same_len("broadcast", s.len, r.len)?;
                (s.ptr(), OpUses::two((Target::Device(s.alloc), Access::Read), write))
            }
            None => (r.ptr(), OpUses::one(write)),
        };
        let call = Call::Broadcast { send: send_ptr, recv: r.ptr(), count: r.len, root };
        self.push(comm, stream, uses, T::KIND, call, "broadcast")
    }

    /// Reduce: rank `root`'s `recv` becomes the reduction by `op` of every
    /// rank's `send` (`ncclReduce`); `recv` is only written on the root
    /// (give `None` elsewhere).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root without `recv` (or another
    /// rank with one); as [`Group::broadcast`].
    pub fn reduce<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: &'a (impl AsDeviceSlice<T> + ?Sized),
        recv: Option<&'a mut (impl AsDeviceSliceMut<T> + ?Sized)>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        rank_in("reduce", comm, root)?;
        let s = send.view();
        let recv = root_only("reduce", "receives", "a recv buffer", comm, root, recv)?;
        let (recv_ptr, write) = match recv.map(|r| r.view()) {
            Some(r) => {
                same_len("reduce", s.len, r.len)?;
                (r.ptr(), Some((Target::Device(r.alloc), Access::Write)))
            }
            None => (0, None),
        };
        let uses = OpUses::maybe((Target::Device(s.alloc), Access::Read), write);
        let call = Call::Reduce { send: s.ptr(), recv: recv_ptr, count: s.len, op: op.raw(), root };
        self.push(comm, stream, uses, T::KIND, call, "reduce")
    }

    /// All-gather: every rank's `recv` becomes the concatenation, in rank
    /// order, of every rank's `send` (`ncclAllGather`; `recv` is `size`
    /// times as long as `send`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; as [`Group::all_reduce`].
    pub fn all_gather<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: &'a (impl AsDeviceSlice<T> + ?Sized),
        recv: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let (s, r) = (send.view(), recv.view());
        same_len("all_gather (recv = size × send)", s.len * comm.size(), r.len)?;
        let uses = read_write(s.alloc, r.alloc);
        let call = Call::AllGather { send: s.ptr(), recv: r.ptr(), count: s.len };
        self.push(comm, stream, uses, T::KIND, call, "all_gather")
    }

    /// Reduce-scatter: every rank's `recv` becomes its block (rank order)
    /// of the reduction by `op` of every rank's `send`
    /// (`ncclReduceScatter`; `send` is `size` times as long as `recv`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; as [`Group::all_reduce`].
    pub fn reduce_scatter<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: &'a (impl AsDeviceSlice<T> + ?Sized),
        recv: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        op: ReduceOp,
    ) -> Result<()> {
        let (s, r) = (send.view(), recv.view());
        same_len("reduce_scatter (send = size × recv)", r.len * comm.size(), s.len)?;
        let uses = read_write(s.alloc, r.alloc);
        let call = Call::ReduceScatter { send: s.ptr(), recv: r.ptr(), count: r.len, op: op.raw() };
        self.push(comm, stream, uses, T::KIND, call, "reduce_scatter")
    }

    /// Sends `buf` to rank `peer` (`ncclSend`; the peer must
    /// [`Group::recv`] as many elements).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a peer that is no rank; as
    /// [`Group::all_reduce`].
    pub fn send<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        buf: &'a (impl AsDeviceSlice<T> + ?Sized),
        peer: usize,
    ) -> Result<()> {
        rank_in("send", comm, peer)?;
        let b = buf.view();
        let uses = OpUses::one((Target::Device(b.alloc), Access::Read));
        self.push(comm, stream, uses, T::KIND, Call::Send { buf: b.ptr(), count: b.len, peer }, "send")
    }

    /// Receives `buf` from rank `peer` (`ncclRecv`).
    ///
    /// # Errors
    /// As [`Group::send`].
    pub fn recv<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        buf: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
        peer: usize,
    ) -> Result<()> {
        rank_in("recv", comm, peer)?;
        let b = buf.view();
        let uses = OpUses::one((Target::Device(b.alloc), Access::Write));
        self.push(comm, stream, uses, T::KIND, Call::Recv { buf: b.ptr(), count: b.len, peer }, "recv")
    }

    /// All-to-all: block `j` of every rank `i`'s `send` becomes block `i`
    /// of rank `j`'s `recv` (grouped `ncclSend`/`ncclRecv` with every rank,
    /// itself included: NCCL has no all-to-all call). `send` and `recv`
    /// are `size` blocks long; every rank gives the same block length.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless both lengths are the same multiple
    /// of the number of ranks; as [`Group::all_reduce`].
    pub fn all_to_all<T: NcclType>(
        &mut self,
        comm: &'a Communicator,
        stream: &'a Stream,
        send: &'a (impl AsDeviceSlice<T> + ?Sized),
        recv: &'a mut (impl AsDeviceSliceMut<T> + ?Sized),
    ) -> Result<()> {
        let (s, r) = (send.view(), recv.view());
        let size = comm.size();
        same_len("all_to_all", s.len, r.len)?;
        if s.len % size != 0 {
            return Err(Error::LengthMismatch {
                op: "all_to_all (a whole block per rank)",
                src: s.len,
                dst: s.len / size * size,
            });
        }
        let uses = read_write(s.alloc, r.alloc);
        let block = s.len / size;
        let call = Call::AllToAll {
            send: s.ptr(),
            recv: r.ptr(),
            block,
            block_bytes: block * std::mem::size_of::<T>(),
            size,
        };
        self.push(comm, stream, uses, T::KIND, call, "all_to_all")
    }

    /// Refuses a group of blocking communicators that could wait forever
    /// (see [`super::CommOptions::blocking`]): for each blocking clique,
    /// every rank must take part with the same collectives, in the same
    /// order, and every send must meet a receive of the same count and
    /// element kind on its peer ([`refuse_waits_forever`]). Returns whether
    /// the group is blocking.
    fn check_blocking(&self) -> Result<bool> {
        let ops = &self.ops;
        let Some(first) = ops.first() else { return Ok(false) };
        let blocking = first.comm.inner.blocking;
        if ops.iter().any(|p| p.comm.inner.blocking != blocking) {
            return Err(Error::InvalidArgument(
                "an NCCL group holds blocking and non-blocking communicators (NCCL refuses to mix them)"
                    .into(),
            ));
        }
        if !blocking {
            return Ok(false);
        }
        // Every rank in this process (the one-process groups of the hot
        // path): the clique check over the operations as they are.
        if ops.iter().all(|p| p.comm.inner.clique != 0) {
            if !one_collective_per_rank(ops.len(), |i| ops[i].member()) {
                refuse_waits_forever(ops.len(), |i| ops[i].member())?;
            }
            return Ok(true);
        }
        // Ranks in other processes (clique 0): collectives only, their
        // connections made at init (`Communicator::init_rank`); the rest
        // must hold every rank of their cliques.
        let mut here: SmallVec<[usize; INLINE]> = SmallVec::new();
        for (i, p) in ops.iter().enumerate() {
            if p.comm.inner.clique != 0 {
                here.push(i);
            } else if matches!(p.call, Call::Send { .. } | Call::Recv { .. } | Call::AllToAll { .. }) {
                return Err(point_to_point_refused(p.comm));
            }
        }
        refuse_waits_forever(here.len(), |i| ops[here[i]].member())?;
        Ok(true)
    }

    /// Issues the collected operations (see the module docs).
    fn issue(&self) -> Result<()> {
        let Some(first) = self.ops.first() else { return Ok(()) };
        let nccl = first.comm.inner.nccl;
        let blocking = self.check_blocking()?;
        if let [p] = self.ops.as_slice()
            && !p.stream.inner.capture_hint()
        {
            return issue_alone(p, nccl, blocking);
        }
        // On capturing streams, each graph keeps its parts' communicators.
        // Pushed one by one: a collect's generic extend costs more than
        // the few parts of a group.
        let mut parts: SmallVec<[Part<'_>; 4]> = SmallVec::new();
        for p in &self.ops {
            parts.push(Part::new(&p.stream.inner, p.uses.as_slice()).keeping(&p.comm.inner));
        }
        let submitted = engine::submit_group_capturable("nccl group", &parts, |raws| {
            // Refused before any lock by the engine inside host functions;
            // here every NCCL call is made under the books, one group.
            nc::group_start(nccl)?;
            let mut first_err: Option<Error> = None;
            for (p, raw) in self.ops.iter().zip(raws) {
                if let Err(e) = issue_one(p, *raw) {
                    first_err = Some(e);
                    break;
                }
            }
            let ended = in_progress_ok(nc::group_end(nccl));
            if let Some(e) = first_err {
                return Err(e);
            }
            ended?;
            // Blocking: `ncclGroupEnd` returned once the work was enqueued.
            // Non-blocking: the work is enqueued once every communicator
            // reports success (the first use connects the ranks).
            for (i, p) in self.ops.iter().enumerate().filter(|_| !blocking) {
                if !self.ops[..i].iter().any(|q| std::ptr::eq(q.comm, p.comm)) {
                    p.comm.inner.wait_ready("an NCCL group")?;
                }
            }
            Ok(())
        });
        // Noted on failure too (the uses are recorded then as well: NCCL
        // may have enqueued part of the group), so a communicator's drop
        // waits for these streams.
        for p in &self.ops {
            p.comm.inner.note(&p.stream.inner);
        }
        submitted.map(drop)
    }
}

/// A group of one operation on a stream that is not capturing (one
/// process per GPU, where each rank issues its own part, and
/// [`Communicator::all_reduce`]): the engine's single-stream operation
/// (`engine::submit`), as a kernel launch is, where the group flavor over
/// one part would do the same work in more steps. It never joins a capture
/// (`Kind::Uncaptured`): a capture begun after the hint was read is refused
/// under the book ([`Error::Capturing`]), as the group flavor refuses it.
/// The NCCL call is made alone, as NCCL makes a lone call its own group,
/// but for all-to-all, whose sends and receives need their group. Once
/// NCCL was called, its uses are recorded whatever it answered (the call
/// may have enqueued work before failing, as the group flavor assumes): the
/// engine's call returns NCCL's answer as its value, not as its error — so
/// a recording (`crate::trace`) keeps a failed call's record, where the
/// group flavor's is dropped. The communicator notes the stream either way,
/// so its drop waits for what may have been enqueued.
fn issue_alone(p: &Pending<'_>, nccl: &'static cuda_sys::nccl::Nccl, blocking: bool) -> Result<()> {
    let op = engine::Op::new("nccl group", engine::Kind::Uncaptured, p.uses.as_slice());
    let (answer, _ticket) = engine::submit(&p.stream.inner, op, |raw| {
        let issued = if matches!(p.call, Call::AllToAll { .. }) {
            nc::group_start(nccl)?;
            let r = issue_one(p, raw);
            let ended = in_progress_ok(nc::group_end(nccl));
            r.and(ended)
        } else {
            issue_one(p, raw)
        };
        // Non-blocking: the work is enqueued once the communicator reports
        // success (its first use connects the ranks).
        Ok(issued.and_then(|()| if blocking { Ok(()) } else { p.comm.inner.wait_ready("an NCCL group") }))
    })?;
    p.comm.inner.note(&p.stream.inner);
    answer
}

/// [`Group::check_blocking`]'s error for a send, receive or all-to-all on
/// a blocking communicator with ranks in other processes.
#[cold]
#[inline(never)]
fn point_to_point_refused(comm: &Communicator) -> Error {
    Error::InvalidArgument(format!(
        "an NCCL group sends or receives on rank {} of {}, a blocking communicator with ranks in other \
         processes: NCCL connects a send's peers on its first use, which could wait on the host for another \
         process; use a non-blocking communicator for sends, receives and all-to-all",
        comm.rank(),
        comm.size()
    ))
}

/// [`Group::push`]'s error for a stream of another device than the
/// communicator's.
#[cold]
#[inline(never)]
fn wrong_device(comm: &Communicator, stream: &Stream) -> Error {
    Error::DeviceMismatch {
        what: "the stream of an NCCL operation",
        expected: comm.inner.device.ordinal(),
        found: stream.device().ordinal(),
    }
}

/// [`Group::push`]'s error for an element kind the loaded NCCL lacks.
#[cold]
#[inline(never)]
fn kind_unsupported(comm: &Communicator, what: &str) -> Error {
    Error::InvalidArgument(format!(
        "{what}: this element kind needs NCCL 2.24 or later; the loaded NCCL is {}",
        cuda_sys::nccl::nccl_version_string(comm.inner.nccl.version)
    ))
}

/// The uses of an operation that reads `send` and writes `recv`.
fn read_write<'a>(send: &'a Arc<Allocation>, recv: &'a Arc<Allocation>) -> OpUses<'a> {
    OpUses::two((Target::Device(send), Access::Read), (Target::Device(recv), Access::Write))
}

/// Makes `p`'s NCCL call on `raw` (inside the group, or alone for a group
/// of one).
fn issue_one(p: &Pending<'_>, raw: BorrowedStream<'_>) -> Result<()> {
    let (nccl, comm, ty) = (p.comm.inner.nccl, p.comm.inner.raw.get(), p.ty);
    let stream: cudaStream_t = raw.as_raw();
    let ptr = |a: CUdeviceptr| a as usize as *mut c_void;
    let cptr = |a: CUdeviceptr| a as usize as *const c_void;
    let rank =
        |r: usize| i32::try_from(r).map_err(|_| Error::InvalidArgument(format!("rank {r} is out of range")));
    // Every call below: `comm` is live (the communicator outlives
    // the group, which borrows it) and of `stream`'s device (checked when
    // collected); every pointer is a view of a buffer borrowed for the
    // group, of the count given (checked when collected), on the
    // communicator's device (the engine's device rule); the engine orders
    // the call after every conflicting use and records its uses once NCCL
    // has been called (after `ncclGroupEnd`, or after the call alone), so
    // nothing else touches the buffers until it is done.
    // SAFETY: the obligations 1–4 of `cuda_sys::nccl::result`, argued above.
    let r = unsafe {
        match p.call {
            Call::AllReduce { send, recv, count, op } => {
                nc::all_reduce(nccl, cptr(send), ptr(recv), count, ty, op, comm, stream)
            }
            Call::Broadcast { send, recv, count, root } => {
                nc::broadcast(nccl, cptr(send), ptr(recv), count, ty, rank(root)?, comm, stream)
            }
            Call::Reduce { send, recv, count, op, root } => {
                nc::reduce(nccl, cptr(send), ptr(recv), count, ty, op, rank(root)?, comm, stream)
            }
            Call::AllGather { send, recv, count } => {
                nc::all_gather(nccl, cptr(send), ptr(recv), count, ty, comm, stream)
            }
            Call::ReduceScatter { send, recv, count, op } => {
                nc::reduce_scatter(nccl, cptr(send), ptr(recv), count, ty, op, comm, stream)
            }
            Call::Send { buf, count, peer } => {
                nc::send(nccl, cptr(buf), count, ty, rank(peer)?, comm, stream)
            }
            Call::Recv { buf, count, peer } => nc::recv(nccl, ptr(buf), count, ty, rank(peer)?, comm, stream),
            Call::AllToAll { send, recv, block, block_bytes, size } => {
                // Block `j` of `send` to rank `j`, block `j` of `recv` from
                // it: each within its buffer, `size` blocks long.
                for j in 0..size {
                    let off = (j * block_bytes) as CUdeviceptr;
                    in_progress_ok(nc::send(nccl, cptr(send + off), block, ty, rank(j)?, comm, stream))?;
                    in_progress_ok(nc::recv(nccl, ptr(recv + off), block, ty, rank(j)?, comm, stream))?;
                }
                Ok(())
            }
        }
    };
    in_progress_ok(r)
}

/// [`Error::LengthMismatch`] (`src` the length the send side implies,
/// `dst` the receive side's) unless they agree.
fn same_len(op: &'static str, src: usize, dst: usize) -> Result<()> {
    if src == dst { Ok(()) } else { Err(Error::LengthMismatch { op, src, dst }) }
}

/// `buf`, which the root must give and every other rank must not (a root's
/// own buffer of broadcast or reduce): [`Error::InvalidArgument`] naming
/// `what`, what the rank `does` with it, and what the root `needs`.
fn root_only<X>(
    what: &'static str,
    does: &str,
    needs: &str,
    comm: &Communicator,
    root: usize,
    buf: Option<X>,
) -> Result<Option<X>> {
    match (buf, comm.rank() == root) {
        (b @ Some(_), true) | (b @ None, false) => Ok(b),
        (Some(_), false) => Err(Error::InvalidArgument(format!(
            "{what}: rank {} is not the root ({root}) and {does} nothing: give None",
            comm.rank()
        ))),
        (None, true) => Err(Error::InvalidArgument(format!("{what}: the root (rank {root}) needs {needs}"))),
    }
}

/// [`Error::InvalidArgument`] unless `r` is a rank of `comm`.
fn rank_in(what: &'static str, comm: &Communicator, r: usize) -> Result<()> {
    if r < comm.size() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{what}: rank {r} of a communicator of {} ranks", comm.size())))
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;

//! The blocking check without allocation (`refuse_waits_forever`) against
//! the one it replaced (two `BTreeMap`s of `Vec`s per group, kept here as
//! the reference): the same verdict, refusal and message for every group of
//! a seeded random sample, each refusal met many times.

use super::{Call, Member, one_collective_per_rank, refuse_waits_forever};
use crate::error::{Error, Result};
use cuda_sys::nccl_bindings::{ncclDataType_t, ncclRedOp_t};
use std::collections::BTreeMap;

/// The check as it was written with maps (`Group::check_blocking` before
/// the allocation-free one), over the same members.
fn reference(ops: &[Member]) -> Result<()> {
    type Collective = (u8, usize, u32, u32, usize);
    type Pairs = BTreeMap<(u64, usize, usize), [Vec<(usize, u32)>; 2]>;
    let mut ranks: BTreeMap<u64, Vec<Option<Vec<Collective>>>> = BTreeMap::new();
    let mut pairs = Pairs::new();
    for p in ops {
        let (c, r) = (p.clique, p.rank);
        let seen = ranks.entry(c).or_insert_with(|| vec![None; p.size]);
        let mine = seen[r].get_or_insert_with(Vec::new);
        match p.call {
            Call::Send { count, peer, .. } => pairs.entry((c, r, peer)).or_default()[0].push((count, p.ty.0)),
            Call::Recv { count, peer, .. } => pairs.entry((c, peer, r)).or_default()[1].push((count, p.ty.0)),
            call => mine.extend(call.collective(p.ty)),
        }
    }
    for seen in ranks.values() {
        let n = seen.len();
        if let Some(r) = seen.iter().position(Option::is_none) {
            return Err(Error::InvalidArgument(format!(
                "an NCCL group on blocking communicators has no operation for rank {r} of its {n}: \
                 NCCL would wait for it on the host; give every rank's part in one group \
                 (or use non-blocking communicators)"
            )));
        }
        let first = seen[0].as_deref().unwrap_or_default();
        if let Some(r) = seen.iter().position(|s| s.as_deref().unwrap_or_default() != first) {
            return Err(Error::InvalidArgument(format!(
                "an NCCL group on blocking communicators gives rank {r} other collectives (kinds, \
                 counts, element kinds, operations or roots, in order) than rank 0: NCCL would wait \
                 for them on the host"
            )));
        }
    }
    if let Some(((_, from, to), _)) = pairs.iter().find(|(_, [s, r])| s != r) {
        return Err(Error::InvalidArgument(format!(
            "an NCCL group on blocking communicators sends from rank {from} to rank {to} what rank {to} \
             does not receive (counts and element kinds, in order): NCCL would wait for it on the host"
        )));
    }
    Ok(())
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }
}

/// A random group of 1 to 9 operations over 1 or 2 cliques (sizes 2 and
/// 3), biased toward groups that pass: every rank of each clique usually
/// takes part with the same collective, sends usually meet receives.
fn group(rng: &mut Rng) -> Vec<Member> {
    let sizes = [2usize, 3];
    let cliques = 1 + rng.below(2) as usize;
    let mut ops = Vec::new();
    for (c, &size) in sizes.iter().enumerate().take(cliques) {
        let member = |rank: usize, call: Call, ty: u32| Member {
            clique: 10 + c as u64,
            rank,
            size,
            ty: ncclDataType_t(ty),
            call,
        };
        match rng.below(3) {
            // One collective per rank, sometimes one rank's differs or is
            // left out.
            0 => {
                let kind = rng.below(3);
                for rank in 0..size {
                    if rng.below(8) == 0 {
                        continue;
                    }
                    let odd = u32::from(rng.below(6) == 0);
                    let call = match kind {
                        0 => Call::AllReduce { send: 0, recv: 0, count: 4, op: ncclRedOp_t(odd) },
                        1 => Call::Broadcast { send: 0, recv: 0, count: 4, root: odd as usize },
                        _ => Call::AllGather { send: 0, recv: 0, count: 4 + odd as usize },
                    };
                    ops.push(member(rank, call, 7));
                }
            }
            // A ring of sends and receives, sometimes one of them changed
            // (count, kind, peer) or missing.
            _ => {
                for rank in 0..size {
                    let to = (rank + 1) % size;
                    let count = 4 + usize::from(rng.below(8) == 0);
                    let ty = if rng.below(10) == 0 { 3 } else { 7 };
                    if rng.below(10) != 0 {
                        ops.push(member(rank, Call::Send { buf: 0, count, peer: to }, ty));
                    }
                    let peer = if rng.below(12) == 0 { to } else { (rank + size - 1) % size };
                    if rng.below(10) != 0 {
                        ops.push(member(rank, Call::Recv { buf: 0, count: 4, peer }, 7));
                    }
                }
            }
        }
    }
    // Shuffled: the check must not depend on the order the ranks came in
    // (except each rank's own order, which the shuffle can change too).
    for i in (1..ops.len()).rev() {
        ops.swap(i, rng.below(i as u64 + 1) as usize);
    }
    ops
}

#[test]
fn the_allocation_free_blocking_check_refuses_what_the_maps_refused_with_the_same_message() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // [passed, a rank missing, other collectives, a send not received]
    let mut seen = [0usize; 4];
    // Groups the one-pass shortcut accepted without the full check.
    let mut shortcut = 0;
    for _ in 0..20_000 {
        let ops = group(&mut rng);
        let want = reference(&ops);
        let got = refuse_waits_forever(ops.len(), |i| ops[i]);
        let (w, g) = (format!("{want:?}"), format!("{got:?}"));
        assert_eq!(g, w, "group of {} operations", ops.len());
        if one_collective_per_rank(ops.len(), |i| ops[i]) {
            // The shortcut never lets through what the check refuses.
            assert!(want.is_ok(), "the shortcut accepted a group the check refuses: {w}");
            shortcut += 1;
        }
        let kind = match &want {
            Ok(()) => 0,
            Err(e) if e.to_string().contains("no operation for rank") => 1,
            Err(e) if e.to_string().contains("other collectives") => 2,
            Err(_) => 3,
        };
        seen[kind] += 1;
    }
    assert!(seen.iter().all(|&n| n >= 500), "every verdict met often enough: {seen:?}");
    assert!(shortcut >= 500, "the shortcut taken {shortcut} times");
}

/// A blocking rank whose clique has ranks in other processes (clique 0, as
/// `Communicator::init_rank` makes it): a send, a receive or an all-to-all
/// is refused before anything is issued (NCCL would connect the peers on
/// first use, a wait on the host under the engine's books); a collective
/// passes the check, with no other rank of the clique in the group. (The
/// simulator's NCCL joins no other process: the rank is a twin of an
/// `init_all` rank's handle, relabelled clique 0, never finalized itself.)
#[test]
fn a_blocking_rank_with_ranks_in_other_processes_runs_collectives_only() -> Result<()> {
    use super::super::{CommOptions, Communicator};
    use super::{Group, group};
    use crate::{Device, DeviceBuffer, Stream};
    cuda_sim::install().map_err(|e| Error::DriverSelection(format!("cannot install the simulator: {e}")))?;
    let devices = Device::all()?;
    let blocking = CommOptions { blocking: true, ..CommOptions::default() };
    let comms = Communicator::init_all_with(&devices, blocking)?;
    let c = &comms[0];
    // Never dropped: the clique's own rank finalizes the handle, on every
    // path (an assertion that fails here included).
    let twin = std::mem::ManuallyDrop::new(Communicator::wrap(
        c.inner.nccl,
        c.inner.raw.get(),
        c.device(),
        0,
        c.size(),
        blocking,
        0,
    ));
    let twin: &Communicator = &twin;
    let stream = Stream::new(&devices[0])?;
    let mut buf = DeviceBuffer::<f32>::zeroed(&stream, 64)?;
    let mut out = DeviceBuffer::<f32>::zeroed(&stream, 64)?;
    let refused = |r: Result<()>| match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("ranks in other processes"), "{m}"),
        other => panic!("expected the refusal, got {other:?}"),
    };
    refused(group(|g| g.send(twin, &stream, &buf, 1)));
    refused(group(|g| g.recv(twin, &stream, &mut buf, 1)));
    refused(group(|g| g.all_to_all(twin, &stream, &buf, &mut out)));
    let mut g = Group::default();
    g.all_reduce(twin, &stream, &buf, &mut out, super::super::ReduceOp::Sum)?;
    assert!(g.check_blocking()?, "a collective passes, and the group is blocking");
    Ok(())
}

//! The blocking check of a group ([`super::Group::check_blocking`]): on
//! blocking communicators NCCL waits on the host for the ranks and peers a
//! group names, so a group that lacks a rank, gives ranks different
//! collectives, or sends what its peer does not receive would wait for
//! ever. Checked without allocation for a group of up to
//! [`super::INLINE`] operations.

use super::{Call, INLINE};
use crate::error::{Error, Result};
use cuda_sys::nccl_bindings::ncclDataType_t;
use smallvec::SmallVec;

/// What the blocking check ([`refuse_waits_forever`]) reads of one
/// operation: its communicator's clique, rank and size, and its call.
#[derive(Clone, Copy)]
pub(super) struct Member {
    pub(super) clique: u64,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) ty: ncclDataType_t,
    pub(super) call: Call,
}

impl Member {
    /// The (clique, from, to) of a send or a receive; `None` for a
    /// collective.
    fn pair(&self) -> Option<(u64, usize, usize)> {
        match self.call {
            Call::Send { peer, .. } => Some((self.clique, self.rank, peer)),
            Call::Recv { peer, .. } => Some((self.clique, peer, self.rank)),
            _ => None,
        }
    }
}

/// Whether the `len` operations (`at(i)` reads the `i`-th) have the usual
/// shape of a one-process group — one clique, every rank once, in rank
/// order, each giving the same collective — which [`refuse_waits_forever`]
/// always accepts: one pass, no sort.
pub(super) fn one_collective_per_rank(len: usize, at: impl Fn(usize) -> Member) -> bool {
    if len == 0 {
        return true;
    }
    let m = at(0);
    let Some(kind) = m.call.collective(m.ty) else { return false };
    len == m.size
        && (0..len).all(|i| {
            let o = at(i);
            o.clique == m.clique && o.rank == i && o.call.collective(o.ty) == Some(kind)
        })
}

/// The blocking check of [`super::Group::check_blocking`] over `len` operations
/// (`at(i)` reads the `i`-th): [`Error::InvalidArgument`] for a clique with
/// a rank missing, a rank giving other collectives than rank 0, or a
/// (from, to) pair whose sends and receives differ. Cliques, ranks and
/// pairs are checked in ascending order (the first refusal is named), over
/// the operations' indices sorted in place: no allocation for a group of up
/// to [`super::INLINE`] operations.
pub(super) fn refuse_waits_forever(len: usize, at: impl Fn(usize) -> Member) -> Result<()> {
    let at = &at;
    let clique = |i: usize| at(i).clique;
    let rank = |i: usize| at(i).rank;
    // Every operation by (clique, rank, order).
    let mut by_rank: SmallVec<[usize; INLINE]> = (0..len).collect();
    by_rank.sort_unstable_by_key(|&i| (clique(i), rank(i), i));
    for members in by_rank.chunk_by(|&a, &b| clique(a) == clique(b)) {
        let n = at(members[0]).size;
        let ranks = members.chunk_by(|&a, &b| rank(a) == rank(b));
        // The ranks present, ascending: the first gap is the first
        // missing rank.
        let present = ranks.clone().zip(0..).take_while(|(run, r)| rank(run[0]) == *r).count();
        if present < n {
            return Err(Error::InvalidArgument(format!(
                "an NCCL group on blocking communicators has no operation for rank {present} of its {n}: \
                 NCCL would wait for it on the host; give every rank's part in one group \
                 (or use non-blocking communicators)"
            )));
        }
        let mut ranks = ranks;
        let Some(zero) = ranks.next() else { continue };
        if let Some(run) = ranks.find(|run| !collectives(at, run).eq(collectives(at, zero))) {
            return Err(Error::InvalidArgument(format!(
                "an NCCL group on blocking communicators gives rank {} other collectives (kinds, \
                 counts, element kinds, operations or roots, in order) than rank 0: NCCL would wait \
                 for them on the host",
                rank(run[0])
            )));
        }
    }
    // Every send and receive by (clique, from, to, order).
    let pair = |i: usize| at(i).pair();
    let mut by_pair: SmallVec<[usize; INLINE]> = (0..len).filter(|&i| pair(i).is_some()).collect();
    by_pair.sort_unstable_by_key(|&i| (pair(i), i));
    for run in by_pair.chunk_by(|&a, &b| pair(a) == pair(b)) {
        // The sends' and the receives' (count, kind), in order.
        let side = |sends: bool| {
            run.iter().filter_map(move |&i| {
                let m = at(i);
                match m.call {
                    Call::Send { count, .. } if sends => Some((count, m.ty.0)),
                    Call::Recv { count, .. } if !sends => Some((count, m.ty.0)),
                    _ => None,
                }
            })
        };
        if let Some((_, from, to)) = pair(run[0]).filter(|_| !side(true).eq(side(false))) {
            return Err(Error::InvalidArgument(format!(
                "an NCCL group on blocking communicators sends from rank {from} to rank {to} what rank {to} \
                 does not receive (counts and element kinds, in order): NCCL would wait for it on the host"
            )));
        }
    }
    Ok(())
}

/// What the operations `run` (indices, read by `at`) give as collectives,
/// in order (`Call::collective`).
fn collectives<'s>(
    at: &'s impl Fn(usize) -> Member,
    run: &'s [usize],
) -> impl Iterator<Item = (u8, usize, u32, u32, usize)> + 's {
    run.iter().filter_map(|&i| {
        let m = at(i);
        m.call.collective(m.ty)
    })
}

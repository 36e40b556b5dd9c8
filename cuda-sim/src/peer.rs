//! Peer access between simulated devices, per session (a session is the
//! simulator's process): which device's work may touch which device's
//! memory, and which link a copy between two devices takes.
//!
//! As on the driver, two grants are separate: a context's peer access
//! (`cuCtxEnablePeerAccess`, a pair of contexts) opens the owner's
//! `cuMemAlloc` memory; a pool's access (`cuMemPoolSetAccess`, a pool and a
//! device) opens the owner's `cuMemAllocAsync` memory from that pool.

use crate::memory::Kind;
use crate::model::Path;
use crate::ops::{Loc, Work};
use crate::state::State;

/// The most peers one context may have enabled at once; the next
/// `cuCtxEnablePeerAccess` returns `CUDA_ERROR_TOO_MANY_PEERS` (the
/// driver's limit on systems without NVSwitch).
pub(crate) const MAX_PEERS: usize = 8;

/// What work on one device may touch, as of now: bit `j` of `ctx` is device
/// `j`'s `cuMemAlloc` memory, of `pool` device `j`'s pool memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reach {
    /// The device the work runs on; `None` reaches everything (host-side
    /// checks and unit tests).
    device: Option<i32>,
    ctx: u64,
    pool: u64,
}

impl Reach {
    /// Reaches every device's memory.
    pub(crate) const ALL: Reach = Reach { device: None, ctx: 0, pool: 0 };

    /// What work of `session` on `device` reaches now.
    pub(crate) fn of(st: &State, session: u64, device: i32) -> Reach {
        let mut r = Reach { device: Some(device), ctx: 0, pool: 0 };
        if let Some(s) = st.sessions.get(&session) {
            for &(me, owner) in &s.peers {
                if me == device && (0..64).contains(&owner) {
                    r.ctx |= 1 << owner;
                }
            }
            for &(me, owner) in &s.pool_access {
                if me == device && (0..64).contains(&owner) {
                    r.pool |= 1 << owner;
                }
            }
        }
        r
    }

    /// Whether memory of `kind` is within reach (host memory always is,
    /// as far as peer access goes).
    pub(crate) fn allows(&self, kind: Kind) -> bool {
        let Some(me) = self.device else { return true };
        match kind {
            Kind::Device { device, .. } if device == me => true,
            Kind::Device { device, pooled } if (0..64).contains(&device) => {
                let bits = if pooled { self.pool } else { self.ctx };
                bits & (1 << device) != 0
            }
            Kind::Device { .. } => false,
            Kind::Pinned { .. } => true,
        }
    }

    /// The path by which work on this device reaches memory of `kind`
    /// (`None` out of reach); with no device ([`Reach::ALL`]) device memory
    /// counts as the device's own.
    pub(crate) fn path(&self, kind: Kind) -> Option<Path> {
        if !self.allows(kind) {
            return None;
        }
        Some(match (kind, self.device) {
            (Kind::Pinned { .. }, _) => Path::Host,
            (Kind::Device { device, .. }, Some(me)) if device != me => Path::Peer,
            (Kind::Device { .. }, _) => Path::Device,
        })
    }
}

/// How a copy between device memory of two devices moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Not a copy between two devices.
    None,
    /// Over the peer link: one device's copy engine reaches the other's memory.
    Peer,
    /// Staged through host memory: neither device reaches the other's memory.
    Staged,
}

/// The link a piece of work of `session` takes.
pub(crate) fn link(st: &State, session: u64, work: &Work) -> Link {
    let Work::Copy { dst: Loc::Device(d), src: Loc::Device(s), len, .. } = work else { return Link::None };
    let kind = |a: u64| st.mem.place(a, (*len).max(1)).map(|p| p.kind);
    let (Some(dk @ Kind::Device { device: dd, .. }), Some(sk @ Kind::Device { device: sd, .. })) =
        (kind(*d), kind(*s))
    else {
        return Link::None;
    };
    if dd == sd {
        return Link::None;
    }
    if Reach::of(st, session, dd).allows(sk) || Reach::of(st, session, sd).allows(dk) {
        Link::Peer
    } else {
        Link::Staged
    }
}

/// Simulated duration of `work` of `session` queued on `device` (ns): a
/// copy between two devices at the link's rate ([`crate::model::peer_ns`]
/// or, staged, [`crate::model::pcie_ns`]), anything else as
/// [`crate::ops::duration`], a kernel's accesses priced by the path each
/// takes from `device`.
pub(crate) fn duration(st: &State, session: u64, device: i32, work: &Work) -> u64 {
    match (link(st, session, work), work) {
        (Link::Peer, Work::Copy { len, .. }) => crate::model::peer_ns(*len),
        (Link::Staged, Work::Copy { len, .. }) => crate::model::pcie_ns(*len),
        _ => crate::ops::duration(work, &st.mem, Reach::of(st, session, device)),
    }
}

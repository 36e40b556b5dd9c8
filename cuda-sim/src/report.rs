//! What the race oracle reports: two conflicting accesses and why.

use std::fmt;

/// Who performed an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Actor {
    /// The host (a session's host thread or threads: host program order).
    Host,
    /// A stream created with `cuStreamCreateWithPriority`, numbered in the
    /// order the session created its streams (0-based, default streams
    /// included).
    Stream(u32),
    /// The session's legacy default stream (`NULL` / `CU_STREAM_LEGACY`) of
    /// a device.
    LegacyStream {
        /// The device.
        device: i32,
    },
    /// A per-thread default stream (`CU_STREAM_PER_THREAD`), numbered like
    /// [`Actor::Stream`].
    PerThreadStream(u32),
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Host => write!(f, "host"),
            Actor::Stream(i) => write!(f, "stream #{i}"),
            Actor::LegacyStream { device } => write!(f, "legacy default stream (device {device})"),
            Actor::PerThreadStream(i) => write!(f, "per-thread default stream #{i}"),
        }
    }
}

/// One access to memory, as the oracle saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Who.
    pub actor: Actor,
    /// The operation, e.g. `"kernel mix_u32 param 2 (write)"`,
    /// `"cuMemcpyDtoHAsync source"`, `"cuMemFreeAsync"`, `"host_read"`.
    pub op: String,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Whether it wrote (frees and stream-ordered allocations count as writes).
    pub write: bool,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.write { "write" } else { "read" };
        let end = self.addr.saturating_add(self.len);
        write!(
            f,
            "{} on {}: {kind} of [{:#x}, {end:#x}) ({} bytes)",
            self.op, self.actor, self.addr, self.len
        )
    }
}

/// The kind of bug found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RaceKind {
    /// Two accesses to overlapping bytes, at least one a write, with no
    /// happens-before order between them.
    DataRace,
    /// A free (`cuMemFreeAsync`, `cuMemFree`, `cuMemFreeHost`) unordered
    /// with an access to the same allocation: the memory may be released
    /// while still in use.
    UnorderedFree,
    /// An access ordered after the allocation was freed.
    UseAfterFree,
    /// An allocation freed a second time.
    DoubleFree,
}

impl fmt::Display for RaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RaceKind::DataRace => "data race",
            RaceKind::UnorderedFree => "free unordered with a use",
            RaceKind::UseAfterFree => "use after free",
            RaceKind::DoubleFree => "double free",
        })
    }
}

/// A bug the oracle found: the two accesses involved, first the one that
/// came first in simulated execution (for frees: the free first in
/// [`RaceKind::UseAfterFree`] and [`RaceKind::DoubleFree`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceReport {
    /// What kind of bug.
    pub kind: RaceKind,
    /// Base address of the allocation involved.
    pub allocation: u64,
    /// The earlier access.
    pub first: Access,
    /// The later access.
    pub second: Access,
}

impl fmt::Display for RaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on allocation {:#x}:\n  first:  {}\n  second: {}",
            self.kind, self.allocation, self.first, self.second
        )?;
        if self.kind == RaceKind::DataRace || self.kind == RaceKind::UnorderedFree {
            write!(f, "\n  (no event wait or host synchronization orders them)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_read_well() {
        let r = RaceReport {
            kind: RaceKind::DataRace,
            allocation: 0x1000,
            first: Access {
                actor: Actor::Stream(1),
                op: "kernel k param 0 (write)".into(),
                addr: 0x1000,
                len: 16,
                write: true,
            },
            second: Access { actor: Actor::Host, op: "host_read".into(), addr: 0x1008, len: 4, write: false },
        };
        let s = r.to_string();
        assert!(s.starts_with("data race on allocation 0x1000"), "{s}");
        assert!(
            s.contains("kernel k param 0 (write) on stream #1: write of [0x1000, 0x1010) (16 bytes)"),
            "{s}"
        );
        assert!(s.contains("host_read on host: read of [0x1008, 0x100c)"), "{s}");
    }
}

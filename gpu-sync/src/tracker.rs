//! record_stream by construction: every tracked operation records, on each
//! resource it touches, which stream used it, how, and at which point of that
//! stream's timeline; and makes the operation wait (device-side) for the
//! conflicting uses on other streams first.
//!
//! Rules (PyTorch's `record_stream` contract, made automatic):
//! - a read waits for the last write if it was on another stream;
//! - a write waits for the last write and for every read since it, each on
//!   other streams; readers are kept **per stream** (one point per stream), so
//!   no reader is lost when several streams read one buffer;
//! - same-stream uses are ordered by the stream's FIFO and cost a counter
//!   write;
//! - uses a host wait proved complete are dropped.

use crate::buffer::Allocation;
use crate::error::{Error, Result};
use crate::stream::{Point, Stream};
use cuda_sys::CUstream;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static NEXT_RESOURCE_ID: AtomicU64 = AtomicU64::new(1);

/// How an operation uses a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Only reads it.
    Read,
    /// Writes it (and may read it).
    Write,
}

/// The uses of one resource (a device allocation or a pinned host buffer).
#[derive(Default)]
pub(crate) struct Tracker {
    pub write: Option<Point>,
    pub reads: SmallVec<[Point; 2]>,
}

impl Tracker {
    fn prune(&mut self) {
        if self.write.as_ref().is_some_and(Point::is_complete) {
            self.write = None;
        }
        self.reads.retain(|p| !p.is_complete());
    }

    /// Points on other streams that an `access` on `stream` must wait for.
    fn deps_into(&self, stream: u64, access: Access, out: &mut SmallVec<[Point; 4]>) {
        if let Some(w) = &self.write
            && w.stream.id != stream
        {
            out.push(w.clone());
        }
        if access == Access::Write {
            out.extend(self.reads.iter().filter(|p| p.stream.id != stream).cloned());
        }
    }

    fn record(&mut self, point: &Point, access: Access) {
        match access {
            Access::Read => {
                if let Some(r) = self.reads.iter_mut().find(|r| r.stream.id == point.stream.id) {
                    r.ticket = r.ticket.max(point.ticket);
                } else {
                    self.reads.push(point.clone());
                }
            }
            Access::Write => {
                self.write = Some(point.clone());
                self.reads.clear();
            }
        }
    }

    /// Every use not yet known complete.
    pub fn outstanding(&mut self) -> SmallVec<[Point; 4]> {
        self.prune();
        self.write.iter().chain(self.reads.iter()).cloned().collect()
    }
}

/// A tracked resource: an id (for lock ordering) and its uses.
pub(crate) struct Resource {
    pub id: u64,
    tracker: Mutex<Tracker>,
}

impl Resource {
    pub fn new() -> Resource {
        Resource {
            id: NEXT_RESOURCE_ID.fetch_add(1, Ordering::Relaxed),
            tracker: Mutex::new(Tracker::default()),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Tracker> {
        self.tracker.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get_mut(&mut self) -> &mut Tracker {
        self.tracker.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks the host until every recorded use has completed.
    pub fn host_wait_all(&self) -> Result<()> {
        let points = self.lock().outstanding();
        for p in &points {
            p.host_wait()?;
        }
        Ok(())
    }
}

/// A resource an operation touches.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// Device memory (can be captured into a graph).
    Device(&'a Arc<Allocation>),
    /// A pinned host buffer (never captured).
    Host(&'a Resource),
}

impl Target<'_> {
    fn res(&self) -> &Resource {
        match self {
            Target::Device(a) => &a.res,
            Target::Host(r) => r,
        }
    }
}

/// One use of a resource by an operation.
pub(crate) type Use<'a> = (Target<'a>, Access);

/// Runs `op` on `stream` as a tracked operation over `uses`: waits for
/// conflicting uses on other streams, submits, and records the new uses.
/// Returns `op`'s result and the operation's ticket (0 when it was captured
/// into a graph instead: on a capturing stream the operation joins the
/// capture).
pub(crate) fn run_tracked<R>(
    stream: &Stream,
    op_name: &'static str,
    uses: &[Use<'_>],
    keep: Option<crate::graph::KeepAlive>,
    op: impl FnOnce(CUstream) -> Result<R>,
) -> Result<(R, u64)> {
    let s = &stream.inner;
    if s.capturing.load(Ordering::Acquire) {
        return crate::graph::run_captured(stream, op_name, uses, keep, op).map(|r| (r, 0));
    }
    // Lock each resource once, in id order (a write dominates a read of the
    // same resource), so concurrent operations cannot deadlock.
    let mut order: SmallVec<[(usize, Access); 8]> =
        uses.iter().enumerate().map(|(i, (_, a))| (i, *a)).collect();
    order.sort_by_key(|(i, _)| uses[*i].0.res().id);
    let mut merged: SmallVec<[(usize, Access); 8]> = SmallVec::new();
    for (i, a) in order {
        match merged.last_mut() {
            Some((j, b)) if uses[*j].0.res().id == uses[i].0.res().id => {
                if a == Access::Write {
                    *b = Access::Write;
                }
            }
            _ => merged.push((i, a)),
        }
    }
    let mut guards: SmallVec<[(MutexGuard<'_, Tracker>, Access); 8]> = SmallVec::new();
    let mut deps: SmallVec<[Point; 4]> = SmallVec::new();
    for (i, a) in &merged {
        let mut g = uses[*i].0.res().lock();
        g.prune();
        g.deps_into(s.id, *a, &mut deps);
        guards.push((g, *a));
    }
    let (r, ticket) = s.submit(op_name, &deps, op)?;
    let point = Point { stream: s.clone(), ticket };
    for (g, a) in &mut guards {
        g.record(&point, *a);
    }
    Ok((r, ticket))
}

/// Checks that a device allocation lives on `stream`'s device.
pub(crate) fn same_device(stream: &Stream, alloc: &Allocation, what: &'static str) -> Result<()> {
    if alloc.device.same(stream.device()) {
        Ok(())
    } else {
        Err(Error::DeviceMismatch {
            what,
            expected: stream.device().ordinal(),
            found: alloc.device.ordinal(),
        })
    }
}

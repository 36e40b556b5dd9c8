//! Host-side accesses to pinned memory, which the simulator cannot
//! intercept: tests declare them with [`host_read`] / [`host_write`], and
//! host frees are checked the same way.

use crate::oracle::{Record, check_pending};
use crate::scheduler::touch;
use crate::session;
use crate::state::{self, State};
use std::ops::Range;
use std::sync::Arc;

/// Checks the host access `range` of the allocation at `base`
/// against queued (not yet executed) operations and the allocation's
/// history, and records it. Returns the access record.
pub(crate) fn host_access(
    st: &mut State,
    session: u64,
    base: u64,
    range: Range<u64>,
    write: bool,
    free: bool,
    op: &str,
) -> Record {
    let stamp = st.session_mut(session).host_stamp();
    let rec = Record { stamp, start: range.start, end: range.end, write, free, op: Arc::from(op) };
    let mut found = Vec::new();
    for o in st.ops.values() {
        for d in o.declared.iter().filter(|d| d.base == base) {
            if let Some(r) = check_pending(&d.record(&o.stamp), &rec, base) {
                found.push((o.stamp.clone(), r));
            }
        }
    }
    let s = st.session_mut(session);
    for (first, r) in found {
        s.report(&first, &rec.stamp, r);
    }
    touch(st, session, base, rec.clone());
    rec
}

fn declare(ptr: *const u8, len: usize, write: bool) {
    if len == 0 {
        return;
    }
    let Ok(mut st) = state::enter() else {
        log::warn!("cuda-sim: host_read/host_write inside a host function are ignored");
        return;
    };
    let session = session::current();
    let addr = ptr.addr() as u64;
    let Some(base) = st.mem.containing(addr, len as u64) else { return };
    if !st.mem.block(base).is_some_and(|b| b.is_pinned()) {
        return;
    }
    let op = if write { "host_write" } else { "host_read" };
    host_access(&mut st, session, base, addr..addr + len as u64, write, false, op);
}

/// Declares that the host (the calling thread's session) reads `len` bytes
/// at `ptr`. For pinned memory from `cuMemHostAlloc` the access is checked
/// against device work that is queued or done but not synchronized with
/// the host, and reported as a race if unordered (e.g. reading a D2H
/// destination before waiting for the copy). Other pointers are ignored.
/// Never runs the scheduler.
pub fn host_read(ptr: *const u8, len: usize) {
    declare(ptr, len, false);
}

/// Declares that the host writes `len` bytes at `ptr`; see [`host_read`]
/// (e.g. refilling an H2D source while the copy may still read it).
pub fn host_write(ptr: *const u8, len: usize) {
    declare(ptr, len, true);
}

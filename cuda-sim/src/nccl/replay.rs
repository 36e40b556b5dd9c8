//! Collectives captured into graphs, replayed.
//!
//! A collective issued on a capturing stream is a node of the capture
//! holding its rank's part with no instance drawn (`issue::queue`). A launch
//! of a graph holding such nodes is queued as steps on the launch's stream,
//! in the order the nodes were captured: each run of other nodes is one
//! graph operation, and each captured part is one collective part whose
//! instances are drawn at this launch — the next collective (or send,
//! receive) of its communicator, as if it were issued now. So the ranks
//! pair up at replay, across the graphs of the devices: the k-th collective
//! a communicator's rank runs, eagerly or replayed, meets the k-th of every
//! other rank, and a graph launched without the other ranks' waits for
//! them like any part whose peers have not issued theirs.

use super::coll::Part;
use super::issue::enqueue_part;
use crate::graph::{GraphBody, Node, critical_path};
use crate::ops::Work;
use crate::result::{ILLEGAL_STATE, Res};
use crate::state::State;
use crate::stream::Waits;
use cuda_sys::nccl_bindings::ncclResult_t;
use std::collections::HashMap;
use std::sync::Arc;

/// One step of a graph launch.
pub(crate) enum Step {
    /// Captured nodes without a collective between them: one operation.
    Nodes(Arc<GraphBody>),
    /// A captured collective part: one operation, its instances drawn when
    /// it is queued.
    Part(Arc<Part>),
}

/// Whether `body` holds a captured collective.
pub(crate) fn has_collectives(body: &GraphBody) -> bool {
    body.nodes.iter().any(|n| matches!(n.work, Work::Nccl(_)))
}

/// The steps of a launch of `body`: its nodes in capture order (a
/// topological order: a node's dependencies are captured before it), cut
/// at each collective. A dependency on a node of an earlier step is kept
/// by the stream's order.
pub(crate) fn steps(body: &GraphBody) -> Vec<Step> {
    let mut out = Vec::new();
    let mut run: Vec<Node> = Vec::new();
    let mut at: HashMap<usize, usize> = HashMap::new();
    let flush = |run: &mut Vec<Node>, at: &mut HashMap<usize, usize>, out: &mut Vec<Step>| {
        if !run.is_empty() {
            let nodes = std::mem::take(run);
            let duration = critical_path(&nodes);
            out.push(Step::Nodes(Arc::new(GraphBody { nodes, duration })));
        }
        at.clear();
    };
    for (i, n) in body.nodes.iter().enumerate() {
        if let Work::Nccl(p) = &n.work {
            flush(&mut run, &mut at, &mut out);
            out.push(Step::Part(p.clone()));
        } else {
            let deps = n.deps.iter().filter_map(|d| at.get(d).copied()).collect();
            at.insert(i, run.len());
            run.push(Node { work: n.work.clone(), deps, duration: n.duration });
        }
    }
    flush(&mut run, &mut at, &mut out);
    out
}

/// Refuses a launch of `body` (`CUDA_ERROR_ILLEGAL_STATE`, with the reason
/// as NCCL's last error) when a communicator of a captured collective was
/// destroyed, finalized, or failed since the capture: nothing is queued.
pub(crate) fn check(st: &State, body: &GraphBody) -> Res {
    for n in &body.nodes {
        let Work::Nccl(p) = &n.work else { continue };
        let why = match st.nccl.comms.get(&p.comm) {
            None => "was destroyed",
            Some(c) if c.finalized => "was finalized",
            Some(c) if c.error != ncclResult_t::ncclSuccess => "has failed",
            Some(_) => continue,
        };
        super::fail(
            ncclResult_t::ncclInvalidUsage,
            &format!(
                "cuGraphLaunch: the communicator of a captured collective (rank {} of {}) {why} since the capture",
                p.rank, p.nranks
            ),
        );
        return Err(ILLEGAL_STATE);
    }
    Ok(())
}

/// Queues captured part `p` on stream `sid` after `waits`, its instances
/// drawn now; returns the operation.
pub(crate) fn enqueue(st: &mut State, sid: u64, p: &Part, waits: Waits) -> Res<u64> {
    enqueue_part(st, p.comm, sid, p.items.clone(), waits).map_err(|_| ILLEGAL_STATE)
}

//! Graphs ([Graph Management][graph]). Graph objects are not internally
//! synchronized: [`OwnedGraph`] and [`OwnedGraphExec`] are `Send` but not
//! `Sync`, so calls on one are serialized by the borrow checker.
//!
//! [graph]: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html

use super::Result;
use crate::handle::{AsBorrowed, Owned, OwnedGraph, OwnedGraphExec, kind, same_driver};
use crate::{CUgraphExec, CUgraphNode};

/// Instantiates the graph into an executable graph
/// (`cuGraphInstantiateWithFlags`); `flags` from `CUgraphInstantiate_flags`.
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code; `Unsupported` before CUDA 11.4.
pub fn instantiate_with_flags(graph: impl AsBorrowed<kind::GraphKind>, flags: u64) -> Result<OwnedGraphExec> {
    let g = graph.as_borrowed();
    let mut e: CUgraphExec = std::ptr::null_mut();
    // SAFETY: a live graph, used by this thread only (not `Sync`); writes
    // one exec handle through a valid pointer.
    unsafe { call!(g.driver(), cuGraphInstantiateWithFlags(&mut e, g.as_raw(), flags)) }?;
    super::non_null("cuGraphInstantiateWithFlags", e)?;
    // SAFETY: a new exec of this table, owned by nobody else.
    Ok(unsafe { Owned::from_raw(g.driver(), e) })
}

/// Queues one replay of the executable graph on the stream (`cuGraphLaunch`).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code; `Refused` for handles of two tables; `Unsupported`
/// without the entry point.
pub fn launch(
    exec: impl AsBorrowed<kind::GraphExecKind>,
    stream: impl AsBorrowed<kind::StreamKind>,
) -> Result<()> {
    let (e, s) = (exec.as_borrowed(), stream.as_borrowed());
    same_driver("cuGraphLaunch", e.driver(), s.driver())?;
    // SAFETY: a live exec, used by this thread only (not `Sync`), and a live
    // stream of one table. What the graph's nodes touch was vouched for when
    // their work was captured.
    unsafe { call!(e.driver(), cuGraphLaunch(e.as_raw(), s.as_raw())) }
}

/// Destroys the graph (`cuGraphDestroy`); the same as [`Owned::destroy`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code (the graph is then leaked); `Unsupported` without the
/// entry point.
pub fn destroy(graph: OwnedGraph) -> Result<()> {
    graph.destroy()
}

/// Destroys the executable graph (`cuGraphExecDestroy`); the same as
/// [`Owned::destroy`].
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code (the exec is then leaked); `Unsupported` without the
/// entry point.
pub fn exec_destroy(exec: OwnedGraphExec) -> Result<()> {
    exec.destroy()
}

/// Number of nodes of the graph (`cuGraphGetNodes` with a null array).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn node_count(graph: impl AsBorrowed<kind::GraphKind>) -> Result<usize> {
    let g = graph.as_borrowed();
    let mut n = 0usize;
    // SAFETY: a live graph, used by this thread only; with a null array the
    // call only writes the count.
    unsafe { call!(g.driver(), cuGraphGetNodes(g.as_raw(), std::ptr::null_mut(), &mut n)) }?;
    Ok(n)
}

/// The graph's nodes (`cuGraphGetNodes`, count then fill).
/// [Reference](https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__GRAPH.html)
///
/// # Errors
/// The driver's code; `Unsupported` without the entry point.
pub fn get_nodes(graph: impl AsBorrowed<kind::GraphKind>) -> Result<Vec<CUgraphNode>> {
    let g = graph.as_borrowed();
    let mut n = node_count(g)?;
    let mut nodes = vec![std::ptr::null_mut(); n];
    // SAFETY: a live graph, used by this thread only; the array holds `n`
    // entries and the driver writes at most `n` (and the count it wrote).
    unsafe { call!(g.driver(), cuGraphGetNodes(g.as_raw(), nodes.as_mut_ptr(), &mut n)) }?;
    nodes.truncate(n);
    Ok(nodes)
}

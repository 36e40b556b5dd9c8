//! The sweep of one element kind: communicators, streams and buffers per
//! rank; each collective issued over this process's ranks in one group
//! (every rank, or its own one per process) — eagerly, or the timed
//! iterations captured into one graph per device and the graphs launched;
//! timed by events per device (and, with the CUPTI check, by the kernels'
//! own records); checked against the CPU reference. With one
//! process per GPU every rank's longest and shortest span and its wrong
//! elements are reduced over the ranks by NCCL, so each row is what one
//! process over every device would report.

use super::algo::{TuningLog, choose};
use super::element::{Element, input, modulus};
use super::gpu_check::{DeviceKernels, KernelCheck};
use super::{Collective, Launch, NcclOptions, Row};
use crate::spans::DeviceSpans;
use gpu_sync::nccl::{self, Communicator, ReduceOp};
use gpu_sync::{DeviceBuffer, DeviceSlice, DeviceSliceMut, GraphExec, Stream, capture_each};
use smallvec::SmallVec;

/// One rank: its communicator, stream and buffers (allocated once at the
/// largest size; each size uses their first elements).
struct Rank<T: Element> {
    comm: Communicator,
    stream: Stream,
    /// The rank's input pattern (and broadcast's root buffer).
    send: DeviceBuffer<T>,
    /// The output of every collective but all-to-all.
    recv: DeviceBuffer<T>,
    /// All-to-all's output, one allocation per source rank: a group may not
    /// write one allocation from two of its operations (gpu-sync refuses
    /// it, even for disjoint ranges on one stream).
    blocks: Vec<DeviceBuffer<T>>,
}

/// Runs every collective of `opts` at every size over `comms`: every rank
/// of one clique, or (one process per GPU) this process's own. With `log`,
/// each row names the choice NCCL logged for its calls (the lines they
/// added: everything up to its checked iterations; the reductions over
/// the ranks after them are read and dropped).
pub(super) fn run<T: Element>(
    comms: Vec<Communicator>,
    opts: &NcclOptions,
    mut log: Option<&mut TuningLog>,
    progress: &mut dyn FnMut(&str),
) -> crate::Result<Vec<Row>> {
    let n = comms.first().map_or(0, Communicator::size);
    let elt = std::mem::size_of::<T>();
    let max_count = (opts.max_bytes / elt).max(1);
    let m = modulus::<T>(n);
    let mut ranks = Vec::with_capacity(comms.len());
    for comm in comms {
        let (r, d) = (comm.rank(), comm.device().clone());
        progress(&format!("nccl: rank {r}: {} B of buffers and its input", 3 * max_count * elt));
        let stream = Stream::new(&d)?;
        let pattern: Vec<T> = (0..max_count).map(|i| T::whole(input(r, i, m))).collect();
        let mut send = DeviceBuffer::alloc(&stream, max_count)?;
        stream.upload_pageable(&pattern, &mut send)?;
        drop(pattern);
        let recv = DeviceBuffer::alloc(&stream, max_count)?;
        let blocks =
            (0..n).map(|_| DeviceBuffer::alloc(&stream, (max_count / n).max(1))).collect::<Result<_, _>>()?;
        ranks.push(Rank { comm, stream, send, recv, blocks });
    }
    let spans = DeviceSpans::new(ranks.iter().map(|r| &r.stream))?;
    let kernels = if opts.cupti {
        Some(KernelCheck::new(ranks.iter().map(|r| &r.stream), opts.kernel_records)?)
    } else {
        None
    };
    // One process per GPU: this process holds fewer ranks than the clique.
    let others = ranks.len() < n;
    let sizes = opts.sizes();
    let steps = opts.collectives.len() * sizes.len();
    // Every collective at every size first, untimed, as nccl-tests warms
    // up ("warm-up for all sizes") before it times any, so both time their
    // first sizes alike (issue 30: on four H200s our first sizes had read
    // about 1–3 µs a call slower than the later ones, where nccl-tests'
    // did not; on two H200s the warm-up changed nothing that was seen).
    // Each size gets its own warm-up again below.
    for &c in &opts.collectives {
        progress(&format!("nccl: {c}: warm-up at every size"));
        for &bytes in &sizes {
            let Some(shape) = c.shape(bytes, elt, n) else { continue };
            for _ in 0..opts.warmup_iters {
                issue(c, &mut ranks, shape.count, opts.in_place)?;
            }
        }
    }
    for r in &ranks {
        r.stream.synchronize()?;
    }
    let mut rows = Vec::new();
    for (ci, &c) in opts.collectives.iter().enumerate() {
        for (si, &bytes) in sizes.iter().enumerate() {
            let Some(shape) = c.shape(bytes, elt, n) else { continue };
            // Whatever was logged before this row is not its own.
            if let Some(l) = log.as_deref_mut() {
                l.take();
            }
            progress(&format!("nccl: {c} {} B ({}/{steps})", shape.bytes, ci * sizes.len() + si + 1));
            let p = shape.count;
            for _ in 0..opts.warmup_iters {
                issue(c, &mut ranks, p, opts.in_place)?;
            }
            // With graphs: the timed iterations captured into one graph per
            // device (nothing runs), launched `graph_launches` times.
            let execs =
                if opts.graph_launches > 0 { Some(capture(c, &mut ranks, p, opts.iters)?) } else { None };
            // The CUPTI check: the warmup finished (as nccl-tests waits for
            // it), so every kernel recorded from here is a timed one.
            if let Some(k) = &kernels {
                for r in &ranks {
                    r.stream.synchronize()?;
                }
                k.clear()?;
            }
            spans.start_all(ranks.iter().map(|r| &r.stream))?;
            match &execs {
                None => {
                    // The views made once: the loop times the groups.
                    let mut views = Views::new(c, &mut ranks, p)?;
                    for _ in 0..opts.iters {
                        views.issue(c, opts.in_place)?;
                    }
                }
                Some(execs) => {
                    for _ in 0..opts.graph_launches {
                        launch_all(execs, &ranks)?;
                    }
                }
            }
            spans.end_all(ranks.iter().map(|r| &r.stream))?;
            let reading = spans.read()?;
            let mut longest = reading.longest();
            let mut shortest = reading.shortest();
            // The longest device's kernel span and busy time (each device
            // on its own, as the events): read() synchronized every stream.
            let mut gpu = match &kernels {
                None => None,
                Some(k) => {
                    let each = k.read()?;
                    let most = |f: fn(&DeviceKernels) -> f64| each.iter().map(f).fold(0.0, f64::max);
                    Some((most(|d| d.span_s), most(|d| d.busy_s)))
                }
            };
            let mut wrong = if opts.check_iters == 0 {
                None
            } else {
                let mut w = 0;
                for _ in 0..opts.check_iters {
                    // The graphs, launched once, checked as one iteration:
                    // every iteration they hold writes the same outputs.
                    let mut once = |ranks: &mut [Rank<T>]| match &execs {
                        None => issue(c, ranks, p, opts.in_place),
                        Some(execs) => launch_all(execs, ranks),
                    };
                    w += check(c, &mut ranks, p, m, (opts.plant_wrong, opts.in_place), &mut once)?;
                }
                Some(w)
            };
            // Every call of this row has been enqueued and has finished:
            // its lines are in the log (NCCL writes it line-buffered).
            let algorithm = log.as_deref_mut().and_then(|l| choose(&l.take(), c, shape.bytes, n));
            if others {
                let v = across(&ranks[0], ReduceOp::Max, &[longest, -shortest])?;
                (longest, shortest) = (v[0], -v[1]);
                if let Some((span, busy)) = gpu.as_mut() {
                    let v = across(&ranks[0], ReduceOp::Max, &[*span, *busy])?;
                    (*span, *busy) = (v[0], v[1]);
                }
                if let Some(w) = wrong.as_mut() {
                    *w = across(&ranks[0], ReduceOp::Sum, &[*w as f64])?[0] as u64;
                }
            }
            let timed = opts.iters.max(1) * if execs.is_some() { opts.graph_launches } else { 1 };
            let secs = longest / timed as f64;
            let algbw = if secs > 0.0 { shape.bytes as f64 / secs / 1e9 } else { 0.0 };
            let busbw = algbw * c.bus_factor(n);
            let mut errors = Vec::new();
            if let Some(w) = wrong.filter(|&w| w > 0) {
                errors.push(format!("{w} wrong elements"));
            }
            if let Some(peak) = opts.peer_peak_gbs.filter(|&pk| busbw > pk) {
                errors.push(format!(
                    "busbw {busbw:.1} GB/s is above the copy engine's measured one-way peer peak {peak:.1} GB/s: \
                     a timing error, not a result"
                ));
            }
            rows.push(Row {
                collective: c,
                launch: if execs.is_some() { Launch::Graph } else { Launch::Eager },
                bytes: shape.bytes,
                count: p,
                time_us: secs * 1e6,
                spread_pct: if longest > 0.0 { (longest - shortest) / longest * 100.0 } else { 0.0 },
                algbw_gbs: algbw,
                busbw_gbs: busbw,
                wrong,
                error: (!errors.is_empty()).then(|| errors.join("; ")),
                algorithm,
                gpu_us: gpu.map(|(span, _)| span / timed as f64 * 1e6),
                busy_us: gpu.map(|(_, busy)| busy / timed as f64 * 1e6),
            });
        }
    }
    Ok(rows)
}

/// `v` reduced element-wise with `op` over every rank of `rank`'s clique
/// (an NCCL all-reduce of f64s on its stream): one process per GPU.
fn across<T: Element>(rank: &Rank<T>, op: ReduceOp, v: &[f64]) -> gpu_sync::Result<Vec<f64>> {
    let mut b = DeviceBuffer::from_slice(&rank.stream, v)?;
    rank.comm.all_reduce_in_place(&rank.stream, &mut b, op)?;
    rank.stream.to_vec(&b)
}

/// The number of ranks of the clique `ranks` belong to (this process may
/// hold only some).
fn world<T: Element>(ranks: &[Rank<T>]) -> usize {
    ranks.first().map_or(0, |r| r.comm.size())
}

/// Captures `iters` iterations of `c` with count `p` on every rank's
/// stream, one graph per device, and instantiates them (nccl-tests' `-G`).
fn capture<T: Element>(
    c: Collective,
    ranks: &mut [Rank<T>],
    p: usize,
    iters: usize,
) -> gpu_sync::Result<Vec<GraphExec>> {
    let streams: Vec<Stream> = ranks.iter().map(|r| r.stream.clone()).collect();
    let graphs = capture_each(&streams, || {
        for _ in 0..iters {
            // In place is eager only (`NcclOptions::validate`).
            issue(c, ranks, p, false)?;
        }
        Ok(())
    })?;
    graphs.iter().map(|g| g.instantiate()).collect()
}

/// Launches every rank's graph on its stream (the collectives finish once
/// every rank's graph is launched).
fn launch_all<T: Element>(execs: &[GraphExec], ranks: &[Rank<T>]) -> gpu_sync::Result<()> {
    for (e, r) in execs.iter().zip(ranks) {
        e.launch(&r.stream)?;
    }
    Ok(())
}

/// One rank's communicator, stream, input view and output view, for one
/// group of [`Views::issue`].
type RankView<'a, T> = (&'a Communicator, &'a Stream, DeviceSlice<'a, T>, DeviceSliceMut<'a, T>);

/// The views one iteration of a collective issues on, made once for a
/// row's timed loop (as nccl-tests computes its pointers outside the call):
/// a view of each rank's buffers, checked when made.
enum Views<'a, T: Element> {
    /// All-reduce, all-gather, reduce-scatter, send/recv: each rank's input
    /// and output (on the stack: a machine's ranks).
    Pairs(SmallVec<[RankView<'a, T>; 8]>),
    /// Broadcast in place: rank 0's input, the others' output.
    Broadcast(SmallVec<[(&'a Communicator, &'a Stream, DeviceSliceMut<'a, T>); 8]>),
    /// All-to-all: each rank's input blocks and output blocks.
    AllToAll(Vec<(&'a Communicator, &'a Stream, AllToAllParts<'a, T>)>),
}

/// A rank's all-to-all blocks: its input's, and one output per source.
type AllToAllParts<'b, T> = (Vec<DeviceSlice<'b, T>>, Vec<DeviceSliceMut<'b, T>>);

impl<'a, T: Element> Views<'a, T> {
    /// The views of `c` with count `p` per call over `ranks`.
    fn new(c: Collective, ranks: &'a mut [Rank<T>], p: usize) -> gpu_sync::Result<Views<'a, T>> {
        let n = world(ranks);
        Ok(match c {
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::SendRecv => {
                let (sl, rl) = match c {
                    Collective::AllGather => (p, n * p),
                    Collective::ReduceScatter => (n * p, p),
                    _ => (p, p),
                };
                let mut views = SmallVec::new();
                for Rank { comm, stream, send, recv, .. } in ranks.iter_mut() {
                    views.push((&*comm, &*stream, send.slice(..sl)?, recv.slice_mut(..rl)?));
                }
                Views::Pairs(views)
            }
            Collective::Broadcast => {
                let mut views = SmallVec::new();
                for Rank { comm, stream, send, recv, .. } in ranks.iter_mut() {
                    let buf = if comm.rank() == 0 { send } else { recv };
                    views.push((&*comm, &*stream, buf.slice_mut(..p)?));
                }
                Views::Broadcast(views)
            }
            Collective::AllToAll => {
                let mut views = Vec::with_capacity(n);
                for Rank { comm, stream, send, blocks, .. } in ranks.iter_mut() {
                    let sends = (0..n).map(|j| send.slice(j * p..(j + 1) * p)).collect::<Result<_, _>>()?;
                    let recvs = blocks.iter_mut().map(|b| b.slice_mut(..p)).collect::<Result<_, _>>()?;
                    views.push((&*comm, &*stream, (sends, recvs)));
                }
                Views::AllToAll(views)
            }
        })
    }

    /// Issues one iteration of `c` (the collective the views were made
    /// for): this process's ranks' parts in one group; an all-reduce
    /// `in_place` on the output.
    fn issue(&mut self, c: Collective, in_place: bool) -> gpu_sync::Result<()> {
        match self {
            Views::Pairs(views) => {
                let n = views.first().map_or(0, |v| v.0.size());
                nccl::group(|g| {
                    for (comm, stream, s, d) in views.iter_mut() {
                        let (comm, stream) = (*comm, *stream);
                        match c {
                            Collective::AllReduce if in_place => {
                                g.all_reduce_in_place(comm, stream, d, ReduceOp::Sum)?
                            }
                            Collective::AllReduce => g.all_reduce(comm, stream, &*s, d, ReduceOp::Sum)?,
                            Collective::AllGather => g.all_gather(comm, stream, &*s, d)?,
                            Collective::ReduceScatter => {
                                g.reduce_scatter(comm, stream, &*s, d, ReduceOp::Sum)?
                            }
                            _ => {
                                let r = comm.rank();
                                g.send(comm, stream, &*s, (r + 1) % n)?;
                                g.recv(comm, stream, d, (r + n - 1) % n)?;
                            }
                        }
                    }
                    Ok(())
                })
            }
            Views::Broadcast(views) => nccl::group(|g| {
                for (comm, stream, b) in views.iter_mut() {
                    g.broadcast_in_place(comm, stream, b, 0)?;
                }
                Ok(())
            }),
            Views::AllToAll(views) => nccl::group(|g| {
                for (comm, stream, (sends, recvs)) in views.iter_mut() {
                    for (j, (s, d)) in sends.iter().zip(recvs.iter_mut()).enumerate() {
                        g.send(comm, stream, s, j)?;
                        g.recv(comm, stream, d, j)?;
                    }
                }
                Ok(())
            }),
        }
    }
}

/// Issues one iteration of `c` with count `p` per call over `ranks`, its
/// views made for it alone (warm-up, capture, the checked iterations).
fn issue<T: Element>(c: Collective, ranks: &mut [Rank<T>], p: usize, in_place: bool) -> gpu_sync::Result<()> {
    Views::new(c, ranks, p)?.issue(c, in_place)
}

/// One checked iteration: every output cleared (every byte `0xFF`; an
/// all-reduce `in_place` gets its input there instead), `c` run by `once`
/// (issued, or the graphs launched), each output read back and compared
/// with the reference. Returns the wrong elements over this process's
/// ranks.
fn check<T: Element>(
    c: Collective,
    ranks: &mut [Rank<T>],
    p: usize,
    m: u64,
    (plant, in_place): (usize, bool),
    once: &mut dyn FnMut(&mut [Rank<T>]) -> gpu_sync::Result<()>,
) -> crate::Result<u64> {
    let n = world(ranks);
    for rank in ranks.iter_mut() {
        let Rank { comm, stream, send, recv, blocks } = rank;
        let r = comm.rank();
        match c {
            Collective::AllReduce if in_place => stream.copy(&send.slice(..p)?, &mut recv.slice_mut(..p)?)?,
            Collective::AllToAll => {
                for b in blocks.iter_mut() {
                    stream.fill_bytes(&mut b.slice_mut(..p)?, 0xFF)?;
                }
            }
            Collective::Broadcast if r == 0 => {}
            _ => stream.fill_bytes(&mut recv.slice_mut(..out_len(c, n, p))?, 0xFF)?,
        }
    }
    once(ranks)?;
    let mut wrong = 0;
    for rank in ranks.iter() {
        let r = rank.comm.rank();
        let plant = if r == 0 { plant } else { 0 };
        match c {
            Collective::AllToAll => {
                for (j, b) in rank.blocks.iter().enumerate() {
                    let got = rank.stream.to_vec(&b.slice(..p)?)?;
                    wrong += count_wrong(&got, plant, |i| input(j, r * p + i, m));
                }
            }
            _ => {
                let out = if c == Collective::Broadcast && r == 0 { &rank.send } else { &rank.recv };
                let got = rank.stream.to_vec(&out.slice(..out_len(c, n, p))?)?;
                wrong += count_wrong(&got, plant, |i| expected(c, r, n, p, m, i));
            }
        }
    }
    Ok(wrong)
}

/// The output length of `c` (all but all-to-all) at count `p`.
fn out_len(c: Collective, n: usize, p: usize) -> usize {
    if c == Collective::AllGather { n * p } else { p }
}

/// Rank `r`'s expected output element `i` of `c` (all but all-to-all),
/// as a whole number.
fn expected(c: Collective, r: usize, n: usize, p: usize, m: u64, i: usize) -> u64 {
    match c {
        Collective::AllReduce => (0..n).map(|k| input(k, i, m)).sum(),
        Collective::ReduceScatter => (0..n).map(|k| input(k, r * p + i, m)).sum(),
        Collective::AllGather => input(i / p, i % p, m),
        Collective::Broadcast => input(0, i, m),
        Collective::SendRecv => input((r + n - 1) % n, i, m),
        Collective::AllToAll => input(i / p, r * p + i % p, m),
    }
}

/// The elements of `got` that differ from `want(i)`, the first `plant`
/// references altered (their lowest bit flipped: still exact, never the
/// right value). Counted on every core for large outputs.
fn count_wrong<T: Element>(got: &[T], plant: usize, want: impl Fn(usize) -> u64 + Sync) -> u64 {
    let chunk = 1 << 20;
    let count = |start: usize, part: &[T]| {
        part.iter()
            .enumerate()
            .filter(|&(k, v)| {
                let i = start + k;
                let w = if i < plant { want(i) ^ 1 } else { want(i) };
                *v != T::whole(w)
            })
            .count() as u64
    };
    if got.len() <= chunk {
        return count(0, got);
    }
    let threads = std::thread::available_parallelism().map_or(4, usize::from);
    let per = got.len().div_ceil(threads).max(chunk);
    std::thread::scope(|s| {
        let handles: Vec<_> = got
            .chunks(per)
            .enumerate()
            .map(|(t, part)| {
                let count = &count;
                s.spawn(move || count(t * per, part))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(u64::MAX)).sum()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_follow_nccl_semantics() {
        let (n, p, m) = (3, 4, 1000);
        // All-gather: block k of the output is rank k's input.
        assert_eq!(expected(Collective::AllGather, 1, n, p, m, 2 * p + 1), input(2, 1, m));
        // Reduce-scatter: rank r gets block r of the sum.
        let want: u64 = (0..n).map(|k| input(k, 2 * p + 3, m)).sum();
        assert_eq!(expected(Collective::ReduceScatter, 2, n, p, m, 3), want);
        // The ring: rank 0 receives from rank n - 1.
        assert_eq!(expected(Collective::SendRecv, 0, n, p, m, 5), input(2, 5, m));
        assert_eq!(expected(Collective::AllToAll, 1, n, p, m, 2 * p), input(2, p, m));
    }

    #[test]
    fn wrong_elements_are_counted_and_a_planted_reference_is_caught() {
        let want = |i: usize| (i as u64 * 7) % 100;
        let mut got: Vec<f32> = (0..3_000_000).map(|i| want(i) as f32).collect();
        assert_eq!(count_wrong(&got, 0, want), 0);
        assert_eq!(count_wrong(&got, 5, want), 5);
        got[2_500_000] = -1.0;
        got[7] = f32::NAN;
        assert_eq!(count_wrong(&got, 0, want), 2);
    }
}

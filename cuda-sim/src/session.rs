//! Sessions: per-test isolation inside one process.
//!
//! `cargo test` runs tests as threads of one process, all sharing the one
//! simulated machine. A [`Session`] gives a test its own seed, its own
//! default streams, its own race reports, call log, fault plan, attribute
//! overrides, memory-pool statistics and sticky-error state; the scheduler
//! runs only the session's own work when one of its threads synchronizes.

use crate::clock::VClock;
use crate::faults::FaultPlan;
use crate::oracle::{Stamp, pair_key};
use crate::pool::PoolStats;
use crate::report::{Actor, RaceReport};
use crate::result::CUresult;
use crate::retire::Drained;
use crate::rng::Rng;
use crate::state;
use std::cell::Cell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Id of the session a thread uses when it entered none (seed 0).
pub(crate) const DEFAULT_SESSION: u64 = 0;

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(DEFAULT_SESSION) };
}

/// The session of the calling thread.
pub(crate) fn current() -> u64 {
    CURRENT.with(Cell::get)
}

/// Objects a session created that are still alive (not destroyed or freed
/// by the program; a stream-ordered free counts when it is issued).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveCounts {
    /// Device allocations (`cuMemAlloc`, `cuMemAllocAsync`).
    pub device_allocations: usize,
    /// Pinned host allocations (`cuMemHostAlloc`).
    pub pinned_allocations: usize,
    /// Streams (`cuStreamCreateWithPriority`; default streams not counted).
    pub streams: usize,
    /// Events.
    pub events: usize,
    /// Loaded modules.
    pub modules: usize,
    /// Graphs (from `cuStreamEndCapture`).
    pub graphs: usize,
    /// Instantiated graphs.
    pub graph_execs: usize,
}

/// What the simulator holds for a session, and process-wide, at one moment:
/// a diagnostic for tests that check that state is released when its owner
/// is destroyed and that per-operation costs stay flat
/// ([`Session::footprint`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The session's streams still in the simulator (default streams and
    /// destroyed streams still draining included).
    pub streams: usize,
    /// The session's events not destroyed.
    pub events: usize,
    /// The session's queued operations not yet executed.
    pub ops: usize,
    /// Entries of the session's host vector clock.
    pub host_clock: usize,
    /// Entries of the longest vector clock among the session's streams
    /// (what each new operation's stamp copies).
    pub longest_stream_clock: usize,
    /// Destroyed, drained streams of the session the host has not observed
    /// to their last operation. A count only: the simulator keeps one
    /// clock per device for all of them (`drained_clock`), and a context
    /// synchronization observes them.
    pub retiring: usize,
    /// Entries of the longest of the session's drained clocks (per device,
    /// the merged knowledge of its destroyed streams).
    pub drained_clock: usize,
    /// Allocations of the session not freed (or whose free has not run).
    pub allocations: usize,
    /// Freed allocations of the session still quarantined (bounded by the
    /// quarantine, see the crate docs).
    pub quarantined: usize,
    /// Access records in the histories of those allocations.
    pub access_records: usize,
    /// Process-wide: destroyed streams still named by some clock.
    pub retired_index: usize,
    /// Process-wide: streams in the simulator, every session.
    pub all_streams: usize,
}

impl LiveCounts {
    /// Whether nothing is alive (a test cleaned up everything).
    pub fn is_empty(&self) -> bool {
        *self == LiveCounts::default()
    }
}

/// Everything the simulator keeps per session.
#[derive(Debug)]
pub(crate) struct SessionState {
    pub(crate) seed: u64,
    /// Randomness for queries (how much work a query runs first).
    pub(crate) rng: Rng,
    /// The host's actor id and clock (host program order).
    pub(crate) host_actor: u64,
    pub(crate) host_clock: VClock,
    /// Simulated time the host has observed (ns).
    pub(crate) host_now: u64,
    /// Streams created so far (the next stream's index).
    pub(crate) stream_count: u32,
    /// Every stream of the session still in the simulator (default streams
    /// and destroyed streams still draining included).
    pub(crate) streams: BTreeSet<u64>,
    /// Its destroyed, drained streams, one clock per device
    /// (`crate::retire`).
    pub(crate) drained: HashMap<i32, Drained>,
    /// Host covers given so far (the last `RX` number, `crate::retire`).
    pub(crate) retired: u64,
    pub(crate) races: Vec<RaceReport>,
    /// NCCL deadlocks found by host waits (`crate::nccl`).
    pub(crate) deadlocks: Vec<String>,
    seen: HashSet<(u64, u64, u64, u64, u64)>,
    /// The last [`CALL_LOG`] calls, oldest first.
    pub(crate) calls: std::collections::VecDeque<&'static str>,
    /// Calls ever made (the log keeps the last [`CALL_LOG`]).
    total_calls: u64,
    per_name: HashMap<&'static str, u64>,
    pub(crate) faults: FaultPlan,
    /// A sticky error: every later call returns it.
    pub(crate) sticky: Option<CUresult>,
    /// An asynchronous, non-sticky error reported by the next sync.
    pub(crate) async_error: Option<CUresult>,
    pub(crate) attrs: HashMap<(i32, u32), i32>,
    pub(crate) live: LiveCounts,
    pub(crate) pools: HashMap<i32, PoolStats>,
    /// Context peer access: `(device, owner)`, work on `device` may touch
    /// `owner`'s `cuMemAlloc` memory.
    pub(crate) peers: HashSet<(i32, i32)>,
    /// Pool access beyond the owner: `(device, owner)`, work on `device`
    /// may touch memory of `owner`'s default pool.
    pub(crate) pool_access: HashSet<(i32, i32)>,
    pub(crate) primary_refs: HashMap<i32, u32>,
    /// With [`Session::set_wall_clock`]: the origin of the simulated clock
    /// on the host's real clock.
    pub(crate) wall: Option<std::time::Instant>,
}

impl SessionState {
    pub(crate) fn new(_id: u64, seed: u64, host_actor: u64) -> SessionState {
        SessionState {
            seed,
            rng: Rng::derive(seed, u64::MAX),
            host_actor,
            host_clock: VClock::default(),
            host_now: 0,
            stream_count: 0,
            streams: BTreeSet::new(),
            drained: HashMap::new(),
            retired: 0,
            races: Vec::new(),
            deadlocks: Vec::new(),
            seen: HashSet::new(),
            calls: std::collections::VecDeque::new(),
            total_calls: 0,
            per_name: HashMap::new(),
            faults: FaultPlan::new(),
            sticky: None,
            async_error: None,
            attrs: HashMap::new(),
            live: LiveCounts::default(),
            pools: HashMap::new(),
            peers: HashSet::new(),
            pool_access: HashSet::new(),
            primary_refs: HashMap::new(),
            wall: None,
        }
    }

    /// The simulated time the host has reached: what it observed, and with
    /// a wall clock at least the real time since the clock's origin.
    pub(crate) fn host_time(&self) -> u64 {
        match self.wall {
            Some(origin) => {
                let real = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.host_now.max(real)
            }
            None => self.host_now,
        }
    }

    /// Logs a call of `name`; returns its index among all calls and among
    /// calls of that name.
    pub(crate) fn count_call(&mut self, name: &'static str) -> (u64, u64) {
        if self.calls.len() == CALL_LOG {
            self.calls.pop_front();
        }
        self.calls.push_back(name);
        self.total_calls += 1;
        let k = self.per_name.entry(name).or_insert(0);
        *k += 1;
        (self.total_calls - 1, *k - 1)
    }

    /// A stamp for a new host access (ticks the host clock).
    pub(crate) fn host_stamp(&mut self) -> Stamp {
        let tick = self.host_clock.tick(self.host_actor);
        Stamp {
            actor: self.host_actor,
            tick,
            clock: Arc::new(self.host_clock.clone()),
            label: Actor::Host,
            retired: None,
        }
    }

    /// The host observed work up to `clock`, finishing at simulated `time`
    /// (only the merge: callers go through [`crate::retire::host_sync`],
    /// which also retires the destroyed streams it covers).
    pub(crate) fn host_sync(&mut self, clock: &VClock, time: u64) {
        self.host_clock.merge(clock);
        self.host_now = self.host_now.max(time);
    }

    /// Adds a report unless the same pair was reported already.
    pub(crate) fn report(&mut self, a: &Stamp, b: &Stamp, r: RaceReport) {
        if self.seen.insert(pair_key(a, b, r.allocation)) {
            log::warn!("cuda-sim: {r}");
            self.races.push(r);
        }
    }

    /// Makes `code` this session's sticky error (the first one wins).
    pub(crate) fn poison(&mut self, code: CUresult) {
        if self.sticky.is_none() {
            self.sticky = Some(code);
        }
    }

    /// Records an asynchronous error (sticky ones poison the session).
    pub(crate) fn async_fault(&mut self, code: CUresult) {
        if crate::result::is_sticky(code) {
            self.poison(code);
        } else if self.async_error.is_none() {
            self.async_error = Some(code);
        }
    }
}

/// Calls a session's log keeps (the most recent): 16 bytes each, 4 MiB in
/// all, however long the session runs.
pub const CALL_LOG: usize = 1 << 18;

/// A test's private view of the simulator: per-test isolation inside one
/// process.
///
/// `cargo test` runs tests as threads of one process sharing the one
/// simulated machine. A session gives a test its own seed, default streams,
/// race reports, call log, fault plan, attribute overrides, memory-pool
/// statistics and sticky-error state; the scheduler runs only the session's
/// own work when one of its threads synchronizes.
///
/// Creating one makes it current on the calling thread (the previous one is
/// restored when it is dropped on that thread); [`Session::enter`] makes it
/// current on another thread. Every stream, event, allocation, module and
/// graph remembers the session that created it, and queued work belongs to
/// the session of its stream. A thread that entered no session uses a
/// default session with seed 0.
#[derive(Debug)]
pub struct Session {
    id: u64,
    seed: u64,
    prev: u64,
}

/// Keeps a [`Session`] current on this thread until dropped; see
/// [`Session::enter`].
#[derive(Debug)]
pub struct SessionGuard<'a> {
    id: u64,
    prev: u64,
    _session: PhantomData<&'a Session>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for SessionGuard<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            if c.get() == self.id {
                c.set(self.prev);
            }
        });
    }
}

impl Session {
    /// A new session with `seed`, current on the calling thread.
    pub fn new(seed: u64) -> Session {
        let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut st) = state::enter() {
            let host = st.new_handle();
            st.sessions.insert(id, SessionState::new(id, seed, host));
        }
        let prev = CURRENT.with(|c| c.replace(id));
        Session { id, seed, prev }
    }

    /// Makes this session current on the calling thread until the guard drops.
    pub fn enter(&self) -> SessionGuard<'_> {
        let prev = CURRENT.with(|c| c.replace(self.id));
        SessionGuard { id: self.id, prev, _session: PhantomData, _not_send: PhantomData }
    }

    /// The session's id (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The seed it was created with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The id of the session current on the calling thread (0: the default).
    pub fn current_id() -> u64 {
        current()
    }

    fn with<T>(&self, default: T, f: impl FnOnce(&mut SessionState) -> T) -> T {
        let Ok(mut st) = state::enter() else {
            log::warn!("cuda-sim: Session methods cannot be used inside a host function");
            return default;
        };
        match st.sessions.get_mut(&self.id) {
            Some(s) => f(s),
            None => default,
        }
    }

    /// The races, use-after-frees and double frees found so far in this
    /// session's work.
    pub fn races(&self) -> Vec<RaceReport> {
        self.with(Vec::new(), |s| s.races.clone())
    }

    /// Like [`Session::races`], and clears them.
    pub fn take_races(&self) -> Vec<RaceReport> {
        self.with(Vec::new(), |s| std::mem::take(&mut s.races))
    }

    /// The NCCL deadlocks found so far in this session's host waits (or by
    /// `ncclCommGetAsyncError`), each described: collectives issued in
    /// different orders on different devices, waiting for each other (see
    /// [`crate::nccl`]).
    pub fn deadlocks(&self) -> Vec<String> {
        self.with(Vec::new(), |s| s.deadlocks.clone())
    }

    /// Objects this session created that are still alive.
    pub fn live(&self) -> LiveCounts {
        self.with(LiveCounts::default(), |s| s.live)
    }

    /// Entry points called by threads in this session, in order (the
    /// formatting calls `cuGetErrorName` / `cuGetErrorString` excluded):
    /// the last [`CALL_LOG`] of them, so a long-running session's memory
    /// stays flat ([`Session::total_calls`] counts them all).
    pub fn calls(&self) -> Vec<&'static str> {
        self.with(Vec::new(), |s| s.calls.iter().copied().collect())
    }

    /// How many entry points this session has called in all.
    pub fn total_calls(&self) -> u64 {
        self.with(0, |s| s.total_calls)
    }

    /// Replaces the session's fault plan.
    pub fn inject(&self, plan: FaultPlan) {
        self.with((), |s| s.faults = plan);
    }

    /// Removes the fault plan (a sticky error already raised stays).
    pub fn clear_faults(&self) {
        self.with((), |s| s.faults = FaultPlan::new());
    }

    /// The session's sticky error, if its context is poisoned.
    pub fn sticky_error(&self) -> Option<CUresult> {
        self.with(None, |s| s.sticky)
    }

    /// Overrides a device attribute for calls made in this session (for
    /// example `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 0`, which also
    /// makes the stream-ordered allocator calls fail with
    /// `CUDA_ERROR_NOT_SUPPORTED`, as on a device without pools).
    pub fn set_attribute(&self, device: cuda_sys::CUdevice, attr: cuda_sys::CUdevice_attribute, value: i32) {
        self.with((), |s| {
            s.attrs.insert((device, attr.0), value);
        });
    }

    /// Makes the session's simulated clock follow the host's real one (or
    /// stop following it): an operation enqueued at real time `t` (ns since
    /// this call) starts no earlier than simulated time `t`, so device times
    /// (events, CUPTI records) never run behind the host calls that made
    /// them, as on a GPU. Off by default: simulated times then depend only
    /// on the program and the device model (reproducible durations).
    pub fn set_wall_clock(&self, on: bool) {
        self.with((), |s| {
            // What the host already observed stays: the clock only moves on.
            s.wall = on.then(std::time::Instant::now);
        });
    }

    /// What the simulator holds for this session now (and a few
    /// process-wide totals): see [`Footprint`]. Walks the simulator's
    /// tables, so it is for tests, not for hot loops.
    pub fn footprint(&self) -> Footprint {
        let Ok(st) = state::enter() else { return Footprint::default() };
        let Some(s) = st.sessions.get(&self.id) else { return Footprint::default() };
        let mine = st.streams.values().filter(|x| x.session == self.id);
        let (allocations, quarantined, access_records) = st.mem.session_records(self.id);
        Footprint {
            streams: s.streams.len(),
            events: st.events.values().filter(|e| e.session == self.id).count(),
            ops: st.ops.values().filter(|o| o.session == self.id).count(),
            host_clock: s.host_clock.len(),
            longest_stream_clock: mine.map(|x| x.clock.len()).max().unwrap_or(0),
            retiring: s.drained.values().map(Drained::unobserved).sum(),
            drained_clock: s.drained.values().map(Drained::clock_len).max().unwrap_or(0),
            allocations,
            quarantined,
            access_records,
            retired_index: st.retirements.len(),
            all_streams: st.streams.len(),
        }
    }

    /// Number of queued operations of this session not yet executed.
    pub fn pending(&self) -> usize {
        let Ok(st) = state::enter() else { return 0 };
        st.ops.values().filter(|o| o.session == self.id).count()
    }
}

impl Drop for Session {
    /// Restores the previous session on this thread, and lets the
    /// simulator forget what the session no longer needs: its idle default
    /// streams, its logs, and its whole state when nothing it created is
    /// still alive or queued (a test that leaks keeps its objects working).
    fn drop(&mut self) {
        CURRENT.with(|c| {
            if c.get() == self.id {
                c.set(self.prev);
            }
        });
        let Ok(mut st) = state::enter() else { return };
        let st = &mut *st;
        let id = self.id;
        let defaults: Vec<(state::DefaultKey, u64)> =
            st.default_streams.iter().filter(|(k, _)| k.0 == id).map(|(k, v)| (*k, *v)).collect();
        for (key, sid) in defaults {
            if st.streams.get(&sid).is_some_and(|s| s.idle() && s.capture.is_none()) {
                crate::stream::remove(st, sid);
                st.default_streams.remove(&key);
            }
        }
        let pending = st.ops.values().any(|o| o.session == id);
        if let Some(s) = st.sessions.get_mut(&id) {
            if s.streams.is_empty() && s.live.is_empty() && !pending {
                st.sessions.remove(&id);
            } else {
                s.calls = std::collections::VecDeque::new();
                s.races = Vec::new();
                s.seen = HashSet::new();
            }
        }
    }
}

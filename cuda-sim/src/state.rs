//! The simulator's global state: one mutex over everything, the handle
//! space, contexts, and the per-thread bindings (current context, whether a
//! host function is running).

use crate::config::Config;
use crate::event::Event;
use crate::graph::{Capture, Graph, GraphExec};
use crate::memory::Memory;
use crate::module::{Function, Module};
use crate::ops::Op;
use crate::result::{INVALID_CONTEXT, INVALID_DEVICE, Res};
use crate::session::SessionState;
use crate::stream::Stream;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::thread::ThreadId;

/// First handle value; handles step by 16 so they look like pointers and
/// never collide with `CU_STREAM_LEGACY` (1) or `CU_STREAM_PER_THREAD` (2).
const FIRST_HANDLE: u64 = 0x5100_0000;

/// Per device: its primary context and default memory pool handles.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeviceState {
    pub(crate) ctx: u64,
    pub(crate) pool: u64,
}

/// Key of a lazily created default stream: session, device, and for a
/// per-thread stream the owning thread.
pub(crate) type DefaultKey = (u64, i32, Option<ThreadId>);

/// Everything the simulator knows.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: Config,
    pub(crate) initialized: bool,
    next_handle: u64,
    pub(crate) next_op: u64,
    pub(crate) sessions: HashMap<u64, SessionState>,
    pub(crate) devices: Vec<DeviceState>,
    pub(crate) mem: Memory,
    pub(crate) streams: HashMap<u64, Stream>,
    pub(crate) default_streams: HashMap<DefaultKey, u64>,
    pub(crate) events: HashMap<u64, Event>,
    pub(crate) modules: HashMap<u64, Module>,
    pub(crate) functions: HashMap<u64, Function>,
    pub(crate) graphs: HashMap<u64, Graph>,
    pub(crate) execs: HashMap<u64, GraphExec>,
    pub(crate) captures: HashMap<u64, Capture>,
    /// Queued operations not yet executed, by id (an id absent here is
    /// complete: ids are never reused).
    pub(crate) ops: HashMap<u64, Op>,
    /// The CUPTI subset's state (enabled kinds, pending records).
    pub(crate) cupti: crate::cupti::CuptiState,
    /// Destroyed streams retired from the vector clocks (`crate::retire`).
    pub(crate) retirements: crate::retire::Retirements,
    /// The simulated NCCL's communicators and collectives in flight.
    pub(crate) nccl: crate::nccl::NcclState,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    Mutex::new(State {
        config: Config::default(),
        initialized: false,
        next_handle: FIRST_HANDLE,
        next_op: 1,
        sessions: HashMap::new(),
        devices: Vec::new(),
        mem: Memory::default(),
        streams: HashMap::new(),
        default_streams: HashMap::new(),
        events: HashMap::new(),
        modules: HashMap::new(),
        functions: HashMap::new(),
        graphs: HashMap::new(),
        execs: HashMap::new(),
        captures: HashMap::new(),
        ops: HashMap::new(),
        cupti: crate::cupti::CuptiState::default(),
        retirements: crate::retire::Retirements::default(),
        nccl: crate::nccl::NcclState::default(),
    })
});

/// The door every way into the simulator goes through: each table's entry
/// points (the driver's, CUPTI's, any later library's) and the test-facing
/// API ([`crate::Session`], [`crate::host_read`]) get the state only from
/// here, so none can forget the re-entry check ([`STATE`] is private to
/// this module, and nothing else here locks it).
///
/// A thread inside the simulator ([`inside`]: a host function or a
/// registered kernel's CPU version, run by the scheduler while this very
/// thread holds the lock) is refused with [`Reentered`] before the lock is
/// taken: locking again would deadlock. Each table turns the refusal into
/// its own result code (`From<Reentered>` below).
///
/// A panic while the lock was held (only possible in a test's own code,
/// the simulator does not panic) leaves the state usable: it is kept
/// consistent between statements that can fail.
pub(crate) fn enter() -> Result<MutexGuard<'static, State>, Reentered> {
    if IN_SIMULATOR.with(Cell::get) {
        return Err(Reentered);
    }
    Ok(STATE.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A call made from inside the simulator (see [`enter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reentered;

/// The driver table's answer: `CUDA_ERROR_NOT_PERMITTED`, as the CUDA
/// documentation of `cuLaunchHostFunc` says of driver calls from a host
/// function ("may not make any CUDA API calls" — the driver may answer it).
impl From<Reentered> for cuda_sys::CUresult {
    fn from(_: Reentered) -> cuda_sys::CUresult {
        crate::result::NOT_PERMITTED
    }
}

/// The CUPTI table's answer: `CUPTI_ERROR_INVALID_OPERATION` ("the current
/// operation cannot be performed due to dependency on other factors"),
/// CUPTI's closest code for a call that is not allowed where it is made; it
/// says nothing about the state of CUPTI itself, which
/// `CUPTI_ERROR_NOT_INITIALIZED` would.
impl From<Reentered> for cuda_sys::cupti_bindings::CUptiResult {
    fn from(_: Reentered) -> cuda_sys::cupti_bindings::CUptiResult {
        cuda_sys::cupti_bindings::CUptiResult::CUPTI_ERROR_INVALID_OPERATION
    }
}

/// The NCCL table's answer: `ncclInvalidUsage` (NCCL's code for a call
/// made where the API forbids it; a host function "may not make any CUDA
/// API calls").
impl From<Reentered> for cuda_sys::nccl_bindings::ncclResult_t {
    fn from(_: Reentered) -> cuda_sys::nccl_bindings::ncclResult_t {
        cuda_sys::nccl_bindings::ncclResult_t::ncclInvalidUsage
    }
}

thread_local! {
    /// The context current on this thread (a handle; 0 for none).
    static CURRENT_CTX: Cell<u64> = const { Cell::new(0) };
    /// Set while this thread runs a host function or a kernel's CPU
    /// version from the scheduler (with the lock held): [`enter`] refuses.
    static IN_SIMULATOR: Cell<bool> = const { Cell::new(false) };
}

/// The context handle current on this thread, if any.
pub(crate) fn current_ctx() -> Option<u64> {
    let c = CURRENT_CTX.with(Cell::get);
    (c != 0).then_some(c)
}

/// Binds `ctx` (0 for none) to this thread.
pub(crate) fn set_current_ctx(ctx: u64) {
    CURRENT_CTX.with(|c| c.set(ctx));
}

/// Marks this thread as inside the simulator until the returned guard
/// drops: the scheduler holds one (with the lock) while it runs a host
/// function or a kernel's CPU version, so calls back from them are refused
/// by [`enter`]. The guard restores the previous mark, also when a
/// kernel's CPU version unwinds.
pub(crate) fn inside() -> Inside {
    Inside { prev: IN_SIMULATOR.with(|c| c.replace(true)) }
}

/// See [`inside`].
#[must_use = "the thread is inside the simulator only while the guard lives"]
pub(crate) struct Inside {
    prev: bool,
}

impl Drop for Inside {
    fn drop(&mut self) {
        IN_SIMULATOR.with(|c| c.set(self.prev));
    }
}

/// Who is calling: the session and thread, and the thread's context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    pub(crate) session: u64,
    pub(crate) thread: ThreadId,
    pub(crate) ctx: Option<u64>,
}

impl State {
    /// A fresh handle (also used as a global actor id).
    pub(crate) fn new_handle(&mut self) -> u64 {
        let h = self.next_handle;
        self.next_handle += 0x10;
        h
    }

    /// A fresh operation id.
    pub(crate) fn new_op_id(&mut self) -> u64 {
        let id = self.next_op;
        self.next_op += 1;
        id
    }

    /// Freezes the configuration and creates the devices (at `cuInit`).
    pub(crate) fn init_devices(&mut self) {
        if self.initialized {
            return;
        }
        self.config = crate::config::freeze();
        self.initialized = true;
        for _ in 0..self.config.devices {
            let ctx = self.new_handle();
            let pool = self.new_handle();
            self.devices.push(DeviceState { ctx, pool });
        }
    }

    /// Number of devices.
    pub(crate) fn device_count(&self) -> i32 {
        self.devices.len() as i32
    }

    /// Checks a device ordinal.
    pub(crate) fn device(&self, dev: i32) -> Res<i32> {
        if dev >= 0 && (dev as usize) < self.devices.len() { Ok(dev) } else { Err(INVALID_DEVICE) }
    }

    /// The device of a context handle.
    pub(crate) fn ctx_device(&self, ctx: u64) -> Option<i32> {
        self.devices.iter().position(|d| d.ctx == ctx).map(|i| i as i32)
    }

    /// The device of a memory pool handle.
    pub(crate) fn pool_device(&self, pool: u64) -> Option<i32> {
        self.devices.iter().position(|d| d.pool == pool).map(|i| i as i32)
    }

    /// The device of the caller's current context.
    pub(crate) fn current_device(&self, caller: &Caller) -> Res<i32> {
        caller.ctx.and_then(|c| self.ctx_device(c)).ok_or(INVALID_CONTEXT)
    }

    /// The primary context handle of `dev`.
    pub(crate) fn ctx_of(&self, dev: i32) -> u64 {
        usize::try_from(dev).ok().and_then(|i| self.devices.get(i)).map_or(0, |d| d.ctx)
    }

    /// The session `id`, created (with seed 0) if it is the default session
    /// or unknown.
    pub(crate) fn session_mut(&mut self, id: u64) -> &mut SessionState {
        if !self.sessions.contains_key(&id) {
            let host = self.new_handle();
            self.sessions.insert(id, SessionState::new(id, 0, host));
        }
        // The entry exists: inserted just above if it was missing.
        self.sessions.entry(id).or_insert_with(|| SessionState::new(id, 0, 0))
    }
}

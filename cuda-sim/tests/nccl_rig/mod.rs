//! The simulated NCCL's test rig, shared by the NCCL test binaries: eight
//! simulated devices, a stream per device, buffers filled and read through
//! the driver, element kinds encoded independently of the simulator, and a
//! checked all-reduce of every rank in one group.
#![allow(dead_code, unreachable_pub)]

use super::common::*;
use cuda_sys::nccl::{Nccl, NcclError, result as nr};
use cuda_sys::nccl_bindings::{NCCL_CONFIG_INITIALIZER, ncclComm_t, ncclDataType_t as T, ncclRedOp_t as O};
use std::ffi::c_void;

/// Eight devices, configured before this binary's first `cuInit`.
pub fn eight_devices() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let cfg = cuda_sim::Config { devices: 8, ..Default::default() };
        cuda_sim::configure(cfg).expect("configured before the first cuInit");
    });
}

pub fn nccl() -> &'static Nccl {
    d();
    let n = cuda_sys::nccl::nccl().expect("the simulator's NCCL is installed with its driver");
    assert_eq!(n.origin, cuda_sim::nccl::ORIGIN);
    n
}

/// Makes device `dev`'s primary context current.
pub fn on(dev: i32) {
    let ctx = primary_ctx::retain(d(), dev).expect("cuDevicePrimaryCtxRetain");
    context::set_current(d(), Some(ctx)).expect("cuCtxSetCurrent");
}

/// One stream per device of `0..n`, each made with its device current.
pub struct Rig {
    pub streams: Vec<OwnedStream>,
}

impl Rig {
    pub fn new(n: i32) -> Rig {
        let streams = (0..n)
            .map(|dev| {
                on(dev);
                stream::create_with_priority(d(), CUstream_flags::CU_STREAM_NON_BLOCKING.0, 0).unwrap()
            })
            .collect();
        on(0);
        Rig { streams }
    }

    pub fn raw(&self, r: usize) -> CUstream {
        self.streams[r].as_raw()
    }

    /// `bytes` on device `dev`, filled from `data` (padded with zeros).
    pub fn alloc(&self, dev: i32, bytes: usize, data: &[u8]) -> CUdeviceptr {
        on(dev);
        let p = memory::alloc(d(), bytes.max(1)).unwrap();
        let mut init = data.to_vec();
        init.resize(bytes, 0);
        sim::htod(p, init.as_ptr(), bytes, BorrowedStream::null(d())).unwrap();
        // The rig's streams are non-blocking: the fill must be done first.
        stream::synchronize(BorrowedStream::null(d())).unwrap();
        on(0);
        p
    }

    pub fn read(&self, p: CUdeviceptr, bytes: usize) -> Vec<u8> {
        let mut out = vec![0u8; bytes];
        sim::dtoh(out.as_mut_ptr(), p, bytes, BorrowedStream::null(d())).unwrap();
        out
    }

    pub fn sync(&self) {
        for s in &self.streams {
            stream::synchronize(s).unwrap();
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.streams.clear();
        for dev in 0..8 {
            // SAFETY: the tests are done with the contexts; the simulator's
            // contexts outlive their last release anyway.
            let _ = unsafe { primary_ctx::release(d(), dev) };
        }
    }
}

pub fn free(p: CUdeviceptr) {
    sim::free(p).unwrap();
}

// ---- element kinds, encoded independently of the simulator ----

pub const KINDS: [T; 9] = [
    T::ncclFloat32,
    T::ncclFloat64,
    T::ncclFloat16,
    T::ncclBfloat16,
    T::ncclInt32,
    T::ncclInt64,
    T::ncclUint8,
    T::ncclUint32,
    T::ncclUint64,
];

pub fn size(ty: T) -> usize {
    match ty {
        T::ncclUint8 => 1,
        T::ncclFloat16 | T::ncclBfloat16 => 2,
        T::ncclFloat32 | T::ncclInt32 | T::ncclUint32 => 4,
        _ => 8,
    }
}

pub fn is_float(ty: T) -> bool {
    matches!(ty, T::ncclFloat32 | T::ncclFloat64 | T::ncclFloat16 | T::ncclBfloat16)
}

/// The bytes of small integer `v` (exactly representable in every kind,
/// wrapped for the unsigned ones).
pub fn enc(ty: T, v: i64) -> Vec<u8> {
    match ty {
        T::ncclFloat32 => (v as f32).to_le_bytes().to_vec(),
        T::ncclFloat64 => (v as f64).to_le_bytes().to_vec(),
        T::ncclBfloat16 => (((v as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        T::ncclFloat16 => {
            let k = v.unsigned_abs();
            assert!(k <= 2048);
            let bits = if k == 0 {
                0
            } else {
                let e = 63 - k.leading_zeros() as u64;
                ((e + 15) << 10) | ((k - (1 << e)) << (10 - e))
            };
            ((bits as u16) | if v < 0 { 0x8000 } else { 0 }).to_le_bytes().to_vec()
        }
        T::ncclInt32 => (v as i32).to_le_bytes().to_vec(),
        T::ncclInt64 => v.to_le_bytes().to_vec(),
        T::ncclUint8 => vec![v as u8],
        T::ncclUint32 => (v as u32).to_le_bytes().to_vec(),
        _ => (v as u64).to_le_bytes().to_vec(),
    }
}

pub fn encode(ty: T, vs: &[i64]) -> Vec<u8> {
    vs.iter().flat_map(|v| enc(ty, *v)).collect()
}

/// What `op` over `inputs` (rank order) is for integers of `ty`: exact
/// arithmetic wrapped to the kind's width (the floats' values stay exact).
pub fn expect(ty: T, op: O, inputs: &[i64]) -> i64 {
    let n = inputs.len() as i64;
    let wrap = |v: i128| -> i64 {
        match ty {
            T::ncclUint8 => (v as u8) as i64,
            T::ncclInt32 => (v as i32) as i64,
            T::ncclUint32 => (v as u32) as i64,
            _ => v as i64,
        }
    };
    match op {
        O::ncclSum => wrap(inputs.iter().map(|v| *v as i128).sum()),
        O::ncclProd => wrap(inputs.iter().map(|v| *v as i128).product()),
        O::ncclMin => *inputs.iter().min().unwrap(),
        O::ncclMax => *inputs.iter().max().unwrap(),
        _ => wrap(inputs.iter().map(|v| *v as i128).sum()) / n,
    }
}

/// Rank `r`'s element `i` for `op`: products of ones and twos (exact in
/// bf16 for 8 ranks), averages of odd numbers (their sum n² divides by n),
/// small integers otherwise, negative ones for the signed kinds.
pub fn value(ty: T, op: O, r: usize, i: usize) -> i64 {
    let signed = matches!(ty, T::ncclInt32 | T::ncclInt64) || is_float(ty);
    match op {
        O::ncclProd => 1 + ((r + i) % 2) as i64,
        O::ncclAvg => 2 * r as i64 + 1,
        _ => {
            let v = ((r * 7 + i * 3) % 11) as i64 + 1;
            if signed && (r + i).is_multiple_of(3) { -v } else { v }
        }
    }
}

pub const COUNT: usize = 5;

/// Runs all-reduce with `op` over `n` ranks from one thread in a group, and
/// checks every rank's result.
pub fn all_reduce_case(n: &Nccl, rig: &Rig, comms: &[ncclComm_t], ty: T, op: O) {
    let ranks = comms.len();
    let es = size(ty);
    let vals: Vec<Vec<i64>> = (0..ranks).map(|r| (0..COUNT).map(|i| value(ty, op, r, i)).collect()).collect();
    let send: Vec<CUdeviceptr> =
        (0..ranks).map(|r| rig.alloc(r as i32, COUNT * es, &encode(ty, &vals[r]))).collect();
    let recv: Vec<CUdeviceptr> = (0..ranks).map(|r| rig.alloc(r as i32, COUNT * es, &[])).collect();
    nr::group_start(n).unwrap();
    for r in 0..ranks {
        // SAFETY: live communicator and stream of device r; buffers of
        // COUNT elements on device r, kept until the stream syncs below.
        unsafe {
            nr::all_reduce(
                n,
                send[r] as *const c_void,
                recv[r] as *mut c_void,
                COUNT,
                ty,
                op,
                comms[r],
                rig.raw(r),
            )
        }
        .unwrap();
    }
    nr::group_end(n).unwrap();
    rig.sync();
    let want: Vec<i64> =
        (0..COUNT).map(|i| expect(ty, op, &vals.iter().map(|v| v[i]).collect::<Vec<_>>())).collect();
    for r in 0..ranks {
        assert_eq!(
            rig.read(recv[r], COUNT * es),
            encode(ty, &want),
            "all-reduce {ty:?} {op:?} rank {r} of {ranks}"
        );
        free(send[r]);
        free(recv[r]);
    }
}

pub fn init_all(n: &Nccl, ranks: i32) -> Vec<ncclComm_t> {
    let devs: Vec<i32> = (0..ranks).collect();
    nr::comm_init_all(n, &devs).unwrap()
}

pub fn destroy(n: &Nccl, comms: &[ncclComm_t]) {
    for c in comms {
        // SAFETY: a live communicator of `n`, unused afterwards.
        unsafe { nr::comm_destroy(n, *c) }.unwrap();
    }
}

/// A non-blocking clique of `ranks` (devices `0..ranks`), every rank made
/// from this thread in one group (`ncclCommInitRankConfig` with an id from
/// `ncclGetUniqueId`); the group's end says in progress. Device 0's context
/// is current afterwards.
pub fn nonblocking_clique(n: &Nccl, ranks: usize) -> Vec<ncclComm_t> {
    let id = nr::get_unique_id(n).unwrap();
    let mut comms = vec![std::ptr::null_mut(); ranks];
    nr::group_start(n).unwrap();
    for (r, c) in comms.iter_mut().enumerate() {
        on(r as i32);
        let mut cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        // SAFETY: a context is current; the config starts from the initializer.
        unsafe { nr::comm_init_rank_config(n, c, ranks, id, r, &mut cfg) }.unwrap();
    }
    assert_eq!(nr::group_end(n), Err(NcclError::InProgress { call: "ncclGroupEnd" }));
    on(0);
    comms
}

/// Each rank's buffer of `count` ints, all `r + 1` for rank `r`, on
/// device `devices[r]`.
pub fn rank_ints(rig: &Rig, devices: &[i32], count: usize) -> Vec<CUdeviceptr> {
    (0..devices.len())
        .map(|r| rig.alloc(devices[r], count * 4, &encode(T::ncclInt32, &vec![r as i64 + 1; count])))
        .collect()
}

/// Rank `r`'s in-place sum of the `count` ints at `buf` on the rig stream
/// of device `r`: made alone, or as one part of the caller's group.
pub fn all_reduce_alone(
    n: &Nccl,
    rig: &Rig,
    comm: ncclComm_t,
    r: usize,
    buf: CUdeviceptr,
    count: usize,
) -> Result<(), NcclError> {
    // SAFETY: a live communicator of device r, its rig stream, and a buffer
    // of `count` ints there, kept until the rig syncs (the caller's part).
    unsafe {
        nr::all_reduce(
            n,
            buf as *const c_void,
            buf as *mut c_void,
            count,
            T::ncclInt32,
            O::ncclSum,
            comm,
            rig.raw(r),
        )
    }
}

//! One process, every GPU: each GPU computes its own "gradient" with a
//! kernel, one NCCL all-reduce sums them across the GPUs, and every GPU
//! reads the sum with a kernel of its own — with no event, no wait and no
//! `record_stream` in the code. The all-reduce runs on a communication
//! stream per GPU; gpu-sync makes it wait for the kernel that wrote its
//! input (on the compute stream), makes the next kernel wait for it, and
//! frees the gradient buffer, dropped right after the all-reduce, only
//! once the GPU is done with it. On a machine with one GPU there is no one
//! to reduce with, and the example says so.
//!
//! One process per GPU: `--spawn N` (`nccl::spawn_local` re-runs this
//! program as N ranks), or under torchrun (`NCCL_COMM_ID=127.0.0.1:29501
//! torchrun --nproc-per-node N --no-python all_reduce`): each rank makes
//! its own gradient and issues its own part of the all-reduce
//! (`Communicator::all_reduce`), with a communicator from
//! `Communicator::from_env`; not on the simulator, whose NCCL lives in one
//! process.
//!
//! On a shared multi-GPU host keep NVLink multicast off:
//! `NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1`.
use gpu_sync::nccl::{self, CommOptions, Communicator, ReduceOp, SpawnOptions, SpawnRole};
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::Kernels;

const N: usize = 1 << 16;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> BoxResult<()> {
    main_with(std::env::args().skip(1).collect())
}

/// One process for every GPU; with `--spawn N`, or as a rank a launcher
/// started (`RANK` set), one process per GPU.
fn main_with(args: Vec<String>) -> BoxResult<()> {
    let spawn = match &args[..] {
        [] => None,
        [flag, n] if flag == "--spawn" => {
            Some(n.parse::<usize>().map_err(|e| format!("--spawn {n:?}: {e}"))?)
        }
        _ => return Err(format!("unexpected arguments {args:?} (only --spawn N)").into()),
    };
    let per_process = std::env::var_os("RANK").is_some() || spawn.is_some();
    if gpu_sync::select_driver()?.is_sim() {
        if per_process {
            return Err(
                "one process per GPU needs GPUs: cuda-sim cannot join the ranks of different processes"
                    .into(),
            );
        }
        kernels::register_sim_kernels();
    }
    if std::env::var("NCCL_NVLS_ENABLE").is_ok_and(|v| v != "0") {
        return Err(
            "NCCL_NVLS_ENABLE must be 0 here: NVLink multicast can take a shared host's GPUs out of service"
                .into(),
        );
    }
    if !per_process {
        return one_process();
    }
    match nccl::spawn_local(spawn.unwrap_or(1), &SpawnOptions::default())? {
        SpawnRole::Parent => Ok(()),
        SpawnRole::Rank(_) => one_rank(),
    }
}

/// This process's rank: its gradient, its part of the all-reduce, its check.
fn one_rank() -> BoxResult<()> {
    let comm = Communicator::from_env(CommOptions::default())?;
    let device = comm.device();
    let (compute, comm_stream, k) = (Stream::new(device)?, Stream::new(device)?, Kernels::load(device)?);
    let x = DeviceBuffer::from_slice(&compute, &vec![1.0f32; N])?;
    let mut grad = DeviceBuffer::alloc(&compute, N)?;
    k.scale(&compute, &x, &mut grad, (comm.rank() + 1) as f32)?;
    let mut sum = DeviceBuffer::<f32>::alloc(&comm_stream, N)?;
    comm.all_reduce(&comm_stream, &grad, &mut sum, ReduceOp::Sum)?;
    drop(grad);
    let n = comm.size() as f32;
    let want = 0.5 * n * (n + 1.0) / 2.0;
    let mut half = DeviceBuffer::alloc(&compute, N)?;
    k.scale(&compute, &sum, &mut half, 0.5)?;
    let wrong = compute.to_vec(&half)?.iter().filter(|&&v| v != want).count();
    println!(
        "rank {} of {}: all-reduce of {N} floats: {wrong} wrong (each element {want})",
        comm.rank(),
        comm.size()
    );
    if wrong > 0 {
        return Err(format!("rank {}: {wrong} elements differ from {want}", comm.rank()).into());
    }
    Ok(())
}

/// Every GPU from this process.
fn one_process() -> BoxResult<()> {
    let devices = Device::all()?;
    if devices.len() < 2 {
        println!("one GPU in this machine: nothing to all-reduce with");
        return Ok(());
    }
    let comms = Communicator::init_all(&devices)?;
    let compute: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_, _>>()?;
    let comm_streams: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_, _>>()?;
    let ks: Vec<Kernels> = devices.iter().map(Kernels::load).collect::<Result<_, _>>()?;
    let ones: Vec<f32> = vec![1.0; N];
    // Each GPU's gradient: 1.0 scaled by (rank + 1), on its compute stream.
    let mut grads = Vec::new();
    for (r, (k, s)) in ks.iter().zip(&compute).enumerate() {
        let x = DeviceBuffer::from_slice(s, &ones)?;
        let mut g = DeviceBuffer::alloc(s, N)?;
        k.scale(s, &x, &mut g, (r + 1) as f32)?;
        grads.push(g);
    }
    // The sum across GPUs, into a fresh buffer per GPU, on the
    // communication streams.
    let mut sums: Vec<DeviceBuffer<f32>> =
        comm_streams.iter().map(|s| DeviceBuffer::alloc(s, N)).collect::<Result<_, _>>()?;
    nccl::group(|g| {
        for (((c, s), grad), sum) in comms.iter().zip(&comm_streams).zip(&grads).zip(sums.iter_mut()) {
            g.all_reduce(c, s, grad, sum, ReduceOp::Sum)?;
        }
        Ok(())
    })?;
    // Dropped at once: each is freed after the all-reduce has read it.
    drop(grads);
    // Each GPU halves the sum on its compute stream (after the all-reduce).
    let n = devices.len() as f32;
    let want = 0.5 * n * (n + 1.0) / 2.0;
    let mut wrong = 0;
    for ((k, s), sum) in ks.iter().zip(&compute).zip(&sums) {
        let mut half = DeviceBuffer::alloc(s, N)?;
        k.scale(s, sum, &mut half, 0.5)?;
        wrong += s.to_vec(&half)?.iter().filter(|&&v| v != want).count();
    }
    println!(
        "all-reduce over {} GPUs of {N} floats each: {wrong} wrong (each element {want})",
        devices.len()
    );
    if wrong > 0 {
        return Err(format!("{wrong} elements differ from {want}").into());
    }
    Ok(())
}

#[test]
fn runs_on_the_simulator() {
    // CI has no GPU: `select_driver` picks the simulator (two devices).
    main_with(Vec::new()).expect("the example failed");
}

#[test]
fn one_process_per_gpu_is_refused_on_the_simulator() -> BoxResult<()> {
    assert!(main_with(vec!["--spawn".into()]).is_err(), "--spawn without a number accepted");
    // The simulator's NCCL lives in one process: refused before any rank
    // starts. On a GPU `--spawn 2` would start two ranks of this test binary
    // (the GPU bundle runs it there): nothing to prove, so nothing started.
    if !gpu_sync::select_driver()?.is_sim() || std::env::var_os("RANK").is_some() {
        return Ok(());
    }
    match main_with(vec!["--spawn".into(), "2".into()]) {
        Ok(()) => Err("--spawn 2 ran on the simulator".into()),
        Err(e) if e.to_string().contains("cuda-sim cannot join") => Ok(()),
        Err(e) => Err(format!("--spawn 2 on the simulator failed otherwise: {e}").into()),
    }
}

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
//! On a shared multi-GPU host keep NVLink multicast off:
//! `NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1`.
use gpu_sync::nccl::{self, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::Kernels;

const N: usize = 1 << 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if gpu_sync::select_driver()?.is_sim() {
        kernels::register_sim_kernels();
    }
    if std::env::var("NCCL_NVLS_ENABLE").is_ok_and(|v| v != "0") {
        return Err(
            "NCCL_NVLS_ENABLE must be 0 here: NVLink multicast can take a shared host's GPUs out of service"
                .into(),
        );
    }
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
    main().expect("the example failed");
}

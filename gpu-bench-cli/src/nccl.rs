//! `gpu-bench nccl`: NCCL collectives over every GPU from one process, as
//! nccl-tests runs them. The method is `gpu_bench::nccl`; this file checks
//! the environment and the inputs, reads the peer peak, and writes.

use crate::common::{Ctx, Failure};
use gpu_bench::nccl::{Collective, Dtype, NcclOptions};
use gpu_bench::p2p::P2pReport;
use gpu_bench::render::{Format, write_text};
use gpu_bench_cli::cli::{CollectiveArg, DtypeArg};
use gpu_sync::Device;
use std::path::{Path, PathBuf};

/// `gpu-bench nccl`'s flags.
pub use gpu_bench_cli::cli::NcclArgs as Args;

/// The switches that keep NVLink multicast off, as the user must export
/// them.
const MULTICAST_OFF: &str = "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1";

/// Refuses to run unless `NCCL_NVLS_ENABLE` is `0`: NVLink multicast
/// (NVLS) can take a shared host's GPUs out of service, and NCCL turns it
/// on by itself where the hardware has it. Nothing is set here: the user
/// exports the switches, so every program of the session keeps them.
///
/// # Errors
/// [`Failure::Usage`] naming the variable's state and what to export.
fn multicast_off(value: Option<String>) -> Result<(), Failure> {
    match value.as_deref().map(str::trim) {
        Some("0") => Ok(()),
        v => Err(Failure::Usage(format!(
            "NCCL_NVLS_ENABLE is {}: NVLink multicast can take a shared host's GPUs out of service; \
             export {MULTICAST_OFF} and run again",
            v.map_or("not set".to_owned(), |v| format!("{v:?}, not 0"))
        ))),
    }
}

/// The one-way peer peak of a `gpu-bench p2p` results.json: its fastest
/// copy with peer access.
///
/// # Errors
/// [`Failure::Usage`] naming `--peers`, the file and what is wrong.
fn peer_peak(path: &Path) -> Result<f64, Failure> {
    let bad = |m: String| Failure::Usage(format!("--peers {}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let report: P2pReport =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a gpu-bench p2p results.json ({e})")))?;
    let mut peak: Option<f64> = None;
    for (i, p) in report.pairs.iter().enumerate() {
        if let Some(v) = p.copy_on_gbs.value() {
            if !v.is_finite() || v <= 0.0 {
                return Err(bad(format!("pairs[{i}].copy_on_gbs is {v}, not a positive number")));
            }
            peak = Some(peak.map_or(v, |p: f64| p.max(v)));
        }
    }
    peak.ok_or_else(|| bad("no pair has a one-way copy with peer access (copy_on_gbs)".into()))
}

fn collective(c: CollectiveArg) -> Collective {
    match c {
        CollectiveArg::AllReduce => Collective::AllReduce,
        CollectiveArg::AllGather => Collective::AllGather,
        CollectiveArg::ReduceScatter => Collective::ReduceScatter,
        CollectiveArg::Broadcast => Collective::Broadcast,
        CollectiveArg::SendRecv => Collective::SendRecv,
        CollectiveArg::AllToAll => Collective::AllToAll,
    }
}

fn dtype(d: DtypeArg) -> Dtype {
    match d {
        DtypeArg::F32 => Dtype::F32,
        DtypeArg::F64 => Dtype::F64,
        DtypeArg::F16 => Dtype::F16,
        DtypeArg::Bf16 => Dtype::Bf16,
        DtypeArg::I32 => Dtype::I32,
        DtypeArg::I64 => Dtype::I64,
        DtypeArg::U8 => Dtype::U8,
    }
}

/// The devices of `--devices` (every device when empty), each present and
/// given once.
///
/// # Errors
/// [`Failure::Usage`] for an ordinal not present, one given twice, or
/// fewer than two devices.
fn devices(list: &[i32]) -> Result<Vec<Device>, Failure> {
    let present = Device::count()?;
    let ordinals: Vec<i32> = if list.is_empty() { (0..present as i32).collect() } else { list.to_vec() };
    for (i, &o) in ordinals.iter().enumerate() {
        if o as usize >= present {
            return Err(Failure::Usage(format!(
                "--devices: device {o} is not present ({present} devices, ordinals 0..{})",
                present.saturating_sub(1)
            )));
        }
        if ordinals[..i].contains(&o) {
            return Err(Failure::Usage(format!(
                "--devices: device {o} is given twice (one rank per device)"
            )));
        }
    }
    if ordinals.len() < 2 {
        return Err(Failure::Usage(format!(
            "nccl needs two devices; {} given or present (on the simulator: CUDA_SIM_DEVICES=2)",
            ordinals.len()
        )));
    }
    Ok(ordinals.into_iter().map(Device::get).collect::<Result<_, _>>()?)
}

/// Runs the sweep and writes it: stdout in `format`; with `out`,
/// report.md, results.json, results.csv and busbw.svg there. Returns the
/// exit status: 1 when a collective's average busbw is below
/// `--min-busbw`.
///
/// # Errors
/// [`Failure::Usage`] for bad inputs or `NCCL_NVLS_ENABLE` not 0 (before
/// anything runs); [`Failure::Check`] after writing, when a row has wrong
/// elements or a busbw above the peer peak; a driver or NCCL error.
pub fn run(ctx: &Ctx, args: &Args, format: Format, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let peak = match &args.peers {
        Some(p) => Some(peer_peak(p)?),
        None => args.peer_peak,
    };
    let small = ctx.quick || ctx.sim;
    let opts = NcclOptions {
        collectives: if args.collectives.is_empty() {
            Collective::ALL.to_vec()
        } else {
            args.collectives.iter().map(|&c| collective(c)).collect()
        },
        dtype: dtype(args.dtype),
        min_bytes: args.min_bytes.unwrap_or(8),
        max_bytes: args.max_bytes.unwrap_or(if small { 1 << 20 } else { 4 << 30 }),
        factor: args.factor.unwrap_or(2),
        warmup_iters: args.warmup_iters.unwrap_or(if small { 1 } else { 5 }),
        iters: args.iters.unwrap_or(if small { 5 } else { 20 }),
        check_iters: args.check_iters.unwrap_or(1),
        peer_peak_gbs: peak,
        plant_wrong: args.plant_wrong,
        graph_launches: args.graph.unwrap_or(0),
    };
    if opts.min_bytes > opts.max_bytes {
        return Err(Failure::Usage(format!(
            "--min-bytes {} is above --max-bytes {}: no size to run",
            opts.min_bytes, opts.max_bytes
        )));
    }
    let devices = devices(&args.devices)?;
    multicast_off(std::env::var("NCCL_NVLS_ENABLE").ok())?;
    // Per device: the input, the output and all-to-all's blocks at the
    // largest size; on the host, one rank's input and one read-back.
    let max = opts.max_bytes as u64;
    for d in &devices {
        crate::args::fits(&format!("nccl --max-bytes {max}"), d, 2 * max, 3 * max)?;
    }
    let report = gpu_bench::nccl::run(&devices, &opts, &mut |m| ctx.progress.step(m))?;
    ctx.progress.finish();
    let json = serde_json::to_string_pretty(&report).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    crate::emit(format, out, &report.to_markdown(), &json, &report.to_csv())?;
    if let Some(dir) = out {
        write_text(&dir.join("busbw.svg"), &report.busbw_svg()).map_err(Failure::Io)?;
    }
    let failed: Vec<String> = report
        .failed_rows()
        .map(|r| format!("{} {} B: {}", r.collective, r.bytes, r.error.as_deref().unwrap_or("")))
        .collect();
    if !failed.is_empty() {
        return Err(Failure::Check(format!(
            "{} rows are errors, not results:\n  {}",
            failed.len(),
            failed.join("\n  ")
        )));
    }
    if let Some(min) = args.min_busbw {
        let below = report.below(min);
        if !below.is_empty() {
            for (c, v) in &below {
                eprintln!("gpu-bench: {c}: average busbw {v:.2} GB/s is below --min-busbw {min} GB/s");
            }
            return Ok(crate::EXIT_REGRESSION);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multicast_must_be_off() {
        assert!(multicast_off(Some("0".into())).is_ok());
        for v in [None, Some("1".to_owned()), Some(String::new())] {
            let e = multicast_off(v).unwrap_err().to_string();
            assert!(e.contains("export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1"), "{e}");
        }
    }
}

//! `gpu-bench p2p`: every ordered pair of devices — copy-engine bandwidth
//! one way and both ways, peer access off and on, the SM copy kernel
//! (`copy_u32x4`) pushing and pulling across the link, the 4-byte latency
//! (GPU time and host round trip), the cross-device handoff A → B → A of
//! tiny kernels, the NVLink count per pair, and beside gpu-sync's figures
//! their raw-driver twins (the `cuMemcpyPeerAsync` loop, the SM copy by
//! `cuLaunchKernel`, the handoff by raw events and waits). The method is
//! `gpu_bench::p2p`; this file parses and writes.

use crate::common::{Ctx, Failure};
use gpu_bench::p2p::P2pOptions;
use gpu_bench::render::{Format, write_text};
use gpu_sync::Device;
use std::path::PathBuf;

/// `gpu-bench p2p`'s flags.
pub use gpu_bench_cli::cli::P2pArgs as Args;

/// Runs the measurement and writes it: stdout in `format`; with `out`,
/// report.md, results.json, results.csv and heatmap.svg there.
///
/// # Errors
/// [`Failure::Usage`] with fewer than two devices; [`Failure::Check`] when
/// a copy's data is wrong; a driver error.
pub fn run(ctx: &Ctx, args: &Args, format: Format, out: Option<&PathBuf>) -> Result<i32, Failure> {
    let devices = Device::all()?;
    if devices.len() < 2 {
        return Err(Failure::Usage(format!(
            "p2p needs two devices; this machine has {} (on the simulator: CUDA_SIM_DEVICES=2)",
            devices.len()
        )));
    }
    let small = ctx.quick || ctx.sim;
    let opts = P2pOptions {
        bytes: args.bytes.unwrap_or(if small { 1 << 20 } else { 256 << 20 }),
        repeats: args.repeat.unwrap_or(if small { 5 } else { 20 }),
        handoff_hops: args.handoff_hops.unwrap_or(P2pOptions::default().handoff_hops),
    };
    // Four buffers of the size on each device of a pair.
    for d in &devices {
        crate::args::fits(&format!("p2p --bytes {}", opts.bytes), d, 0, 4 * opts.bytes as u64)?;
    }
    ctx.progress.step(format!("p2p: {} devices, {} bytes", devices.len(), opts.bytes));
    let report = gpu_bench::p2p::run(&devices, opts).map_err(|e| match e {
        gpu_bench::Error::Check(m) => Failure::Check(m),
        e => Failure::from(e),
    })?;
    ctx.progress.finish();
    let json = serde_json::to_string_pretty(&report).map_err(|e| Failure::Io(e.to_string()))? + "\n";
    crate::emit(format, out, &report.to_markdown(), &json, &report.to_csv())?;
    if let Some(dir) = out {
        write_text(&dir.join("heatmap.svg"), &report.heatmap_svg()).map_err(Failure::Io)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use gpu_bench_cli::bounds::{copy_bytes, handoff_hops};

    #[test]
    fn copy_sizes_have_ranges() {
        assert_eq!(copy_bytes("268435456"), Ok(256 << 20));
        assert!(copy_bytes("15").is_err() && copy_bytes("17").is_err() && copy_bytes("-16").is_err());
        let m = copy_bytes("24").err().unwrap_or_default();
        assert!(m.contains("multiple of 16") && m.contains("16 to"), "{m}");
        assert!(copy_bytes(&(32u64 << 30).to_string()).is_err());
    }

    #[test]
    fn handoff_hops_are_even_and_bounded() {
        assert_eq!(handoff_hops("2"), Ok(2));
        assert_eq!(handoff_hops("128"), Ok(128));
        let odd = handoff_hops("63").err().unwrap_or_default();
        assert!(odd.contains("odd") && odd.ends_with("(expected a whole number from 2 to 128)"), "{odd}");
        assert!(handoff_hops("0").is_err() && handoff_hops("130").is_err() && handoff_hops("-2").is_err());
    }
}

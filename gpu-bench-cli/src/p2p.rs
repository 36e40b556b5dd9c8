//! `gpu-bench p2p`: every ordered pair of devices — copy-engine bandwidth
//! one way and both ways, peer access off and on, the SM copy kernel
//! (`copy_u32x4`) pushing and pulling across the link, the 4-byte latency
//! (GPU time and host round trip), the NVLink count per pair, and the raw
//! `cuMemcpyPeerAsync` loop beside gpu-sync's copies. The method is
//! `gpu_bench::p2p`; this file parses, picks the kernels and writes.

use crate::common::{Ctx, Failure};
use gpu_bench::p2p::{P2pOptions, SmCopy};
use gpu_bench::render::{Format, write_text};
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::Kernels;
use std::collections::HashMap;
use std::path::PathBuf;

/// `gpu-bench p2p`'s flags.
#[derive(clap::Args)]
pub struct Args {
    /// Bytes per bandwidth copy (a multiple of 16, at most 16 GiB); default
    /// 256 MiB, 1 MiB with --quick or on the simulator.
    #[arg(long, value_parser = bytes)]
    pub bytes: Option<usize>,
    /// Timed runs per figure (the median is reported), 1 to 1000; default
    /// 20, 5 with --quick or on the simulator.
    #[arg(long, value_parser = repeats)]
    pub repeats: Option<usize>,
}

/// A byte count: 16 B to 16 GiB, a multiple of 16.
fn bytes(s: &str) -> Result<usize, String> {
    let n: u64 = s.trim().parse().map_err(|_| format!("{s:?} is not a whole number of bytes"))?;
    if !(16..=16 << 30).contains(&n) || !n.is_multiple_of(16) {
        return Err(format!("{n} bytes: give a multiple of 16 from 16 to 17179869184 (16 GiB)"));
    }
    usize::try_from(n).map_err(|_| format!("{n} bytes do not fit this machine's address space"))
}

/// Timed runs: 1 to 1000.
fn repeats(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1000).contains(&n) => Ok(n),
        _ => Err(format!("{s:?}: give a whole number of runs from 1 to 1000")),
    }
}

/// The workspace's `copy_u32x4`, loaded on each device it runs on.
struct Kernel {
    loaded: std::sync::Mutex<HashMap<i32, Kernels>>,
}

impl SmCopy for Kernel {
    fn copy(
        &self,
        stream: &Stream,
        src: &DeviceBuffer<u32>,
        dst: &mut DeviceBuffer<u32>,
    ) -> gpu_sync::Result<()> {
        let dev = stream.device();
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let k = match loaded.entry(dev.ordinal()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(Kernels::load(dev)?),
        };
        k.copy(stream, src, dst)
    }
}

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
        repeats: args.repeats.unwrap_or(if small { 5 } else { 20 }),
    };
    // Four buffers of the size on each device of a pair.
    for d in &devices {
        crate::args::fits(&format!("p2p --bytes {}", opts.bytes), d, 0, 4 * opts.bytes as u64)?;
    }
    ctx.progress.step(format!("p2p: {} devices, {} bytes", devices.len(), opts.bytes));
    let kernel = Kernel { loaded: std::sync::Mutex::new(HashMap::new()) };
    let report = gpu_bench::p2p::run(&devices, opts, Some(&kernel)).map_err(|e| match e {
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
    use super::*;

    #[test]
    fn sizes_and_repeats_have_ranges() {
        assert_eq!(bytes("268435456"), Ok(256 << 20));
        assert!(bytes("15").is_err() && bytes("17").is_err() && bytes("-16").is_err());
        assert!(bytes(&(32u64 << 30).to_string()).is_err());
        assert_eq!(repeats("20"), Ok(20));
        assert!(repeats("0").is_err() && repeats("1001").is_err());
    }
}

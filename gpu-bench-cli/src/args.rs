//! The checks made before anything is allocated: sizes against host and
//! device memory, `--out` writable, the device ordinal in range (the value
//! parsers and ranges of the numeric flags are in the library's `bounds`).
//! Each refusal is a usage error (exit status 2).

use crate::common::Failure;
use std::path::Path;

/// `--device N` names a device that is there.
///
/// # Errors
/// A usage error naming how many devices there are.
pub fn device_in_range(ordinal: i32) -> Result<(), Failure> {
    let n = gpu_sync::Device::count()?;
    if ordinal as usize >= n {
        return Err(Failure::Usage(format!(
            "--device {ordinal}: there {} {n} device{} (ordinals 0..{})",
            if n == 1 { "is" } else { "are" },
            if n == 1 { "" } else { "s" },
            n.saturating_sub(1)
        )));
    }
    Ok(())
}

/// `--out DIR` can be written: made if missing, a file written and removed.
///
/// # Errors
/// A usage error naming the folder and why.
pub fn out_writable(dir: &Path) -> Result<(), Failure> {
    let bad =
        |e: std::io::Error| Failure::Usage(format!("--out {}: cannot write there ({e})", dir.display()));
    std::fs::create_dir_all(dir).map_err(bad)?;
    let probe = dir.join(".gpu-bench-write-check");
    std::fs::write(&probe, b"").map_err(bad)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Host memory available now (`MemAvailable` of /proc/meminfo), bytes;
/// `None` where it cannot be read.
fn host_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The sizes a subcommand is about to allocate fit: `host` bytes of host
/// memory (at most 3/4 of what is available) and `device` bytes of device
/// memory (at most 9/10 of what is free).
///
/// # Errors
/// A usage error naming the flag, the sizes and what is there.
pub fn fits(what: &str, device: &gpu_sync::Device, host: u64, dev: u64) -> Result<(), Failure> {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    if let Some(avail) = host_available()
        && host > avail / 4 * 3
    {
        return Err(Failure::Usage(format!(
            "{what}: needs {:.1} GiB of host memory, {:.1} GiB is available",
            gib(host),
            gib(avail)
        )));
    }
    let (free, _total) = device.memory_info()?;
    if dev > free / 10 * 9 {
        return Err(Failure::Usage(format!(
            "{what}: needs {:.1} GiB of device memory, {:.1} GiB is free",
            gib(dev),
            gib(free)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_out_is_a_usage_error() {
        let e = out_writable(Path::new("/proc/gpu-bench-cannot-write-here")).unwrap_err();
        assert!(matches!(e, Failure::Usage(_)), "{e}");
        assert!(e.to_string().contains("cannot write there"), "{e}");
    }
}

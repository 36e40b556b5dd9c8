//! Value parsers for the command's numeric flags: every flag has a range,
//! negative numbers are parsed (not taken for flags) and refused by range,
//! NaN and infinities refused, each message naming the bound. And the
//! checks made before anything is allocated: sizes against host and device
//! memory, `--out` writable, the device ordinal in range. Each refusal is a
//! usage error (exit status 2).

use crate::common::Failure;
use std::path::Path;

/// Largest size any MiB flag takes (16 TiB): beyond it the byte count would
/// not be a size on any machine.
const MAX_MIB: u64 = 1 << 24;

fn whole(s: &str) -> Result<i128, String> {
    s.trim().parse::<i128>().map_err(|_| format!("{s:?} is not a whole number"))
}

/// A whole number in `lo..=hi`.
fn ranged(s: &str, lo: i128, hi: i128) -> Result<usize, String> {
    match whole(s)? {
        n if n < lo => Err(format!("{n} is below {lo}")),
        n if n > hi => Err(format!("{n} is above {hi}")),
        n => Ok(n as usize),
    }
}

/// A count of at least 1 (at most 10^7: sample counts).
pub fn count(s: &str) -> Result<usize, String> {
    ranged(s, 1, 10_000_000)
}

/// Runs per batch: 1 to 4096 (a batch is queued behind the spin gate, and
/// a driver's queue holds about a thousand entries before the host blocks).
pub fn batch_runs(s: &str) -> Result<usize, String> {
    ranged(s, 1, 4096)
}

/// Batches or submissions per batch of `overhead`: 1 to 10,000.
pub fn batches(s: &str) -> Result<usize, String> {
    ranged(s, 1, 10_000)
}

/// Repetitions: 1 to 1,000.
pub fn repeat(s: &str) -> Result<usize, String> {
    ranged(s, 1, 1000)
}

/// Launches per case of `truth --launch-only`: 1 to 100,000.
pub fn launches(s: &str) -> Result<usize, String> {
    ranged(s, 1, 100_000)
}

/// A number of seconds for sampling limits: finite, 0 to 86,400 (a day).
pub fn limit_secs(s: &str) -> Result<f64, String> {
    let v = secs(s)?;
    if v > 86_400.0 { Err(format!("{v} is above 86400 (a day)")) } else { Ok(v) }
}

/// A count of at least 2 (chunks: one to copy while another computes).
pub fn count2(s: &str) -> Result<usize, String> {
    match count(s)? {
        1 => Err("1 is below 2".into()),
        n => Ok(n),
    }
}

/// A size in MiB, at least 1 and at most 16 TiB.
pub fn mib(s: &str) -> Result<usize, String> {
    match whole(s)? {
        n if n < 1 => Err(format!("{n} MiB is below 1")),
        n if n as u64 > MAX_MIB => Err(format!("{n} MiB is above {MAX_MIB} (16 TiB)")),
        n => Ok(n as usize),
    }
}

/// A finite number of seconds, at least 0.
pub fn secs(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{s} is not a finite number"));
    }
    if v < 0.0 { Err(format!("{v} is below 0")) } else { Ok(v) }
}

/// A finite percentage above 0 and at most 100.
pub fn pct(s: &str) -> Result<f64, String> {
    let v = secs(s)?;
    if v == 0.0 || v > 100.0 { Err(format!("{v} is not in (0, 100]")) } else { Ok(v) }
}

/// A device ordinal, at least 0 (its upper bound is checked against the
/// devices present, [`device_in_range`]).
pub fn ordinal(s: &str) -> Result<i32, String> {
    match whole(s)? {
        n if n < 0 => Err(format!("{n} is below 0")),
        n if n > i128::from(i32::MAX) => Err(format!("{n} is not a device ordinal")),
        n => Ok(n as i32),
    }
}

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
    fn ranges_refuse_with_the_bound_named() {
        assert_eq!(count("3"), Ok(3));
        assert_eq!(count("0").unwrap_err(), "0 is below 1");
        assert_eq!(count("-1").unwrap_err(), "-1 is below 1");
        assert!(count("x").unwrap_err().contains("not a whole number"));
        assert_eq!(count2("1").unwrap_err(), "1 is below 2");
        assert!(mib("99999999").unwrap_err().contains("above"));
        assert_eq!(mib("64"), Ok(64));
        assert!(secs("NaN").unwrap_err().contains("finite"));
        assert!(secs("inf").unwrap_err().contains("finite"));
        assert_eq!(secs("-0.5").unwrap_err(), "-0.5 is below 0");
        assert_eq!(secs("1.5"), Ok(1.5));
        assert!(pct("0").is_err() && pct("101").is_err() && pct("2") == Ok(2.0));
        assert_eq!(ordinal("-1").unwrap_err(), "-1 is below 0");
    }

    #[test]
    fn an_unwritable_out_is_a_usage_error() {
        let e = out_writable(Path::new("/proc/gpu-bench-cannot-write-here")).unwrap_err();
        assert!(matches!(e, Failure::Usage(_)), "{e}");
        assert!(e.to_string().contains("cannot write there"), "{e}");
    }
}

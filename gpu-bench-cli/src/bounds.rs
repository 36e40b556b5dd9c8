//! The documented range of every numeric flag and the value parsers that
//! enforce it: negative numbers are parsed (not taken for flags) and
//! refused by range, NaN and infinities refused, and every refusal ends with
//! the flag's whole range (`expected a whole number from 1 to 10000`), so
//! a message always names the bound that was broken. [`RANGES`] lists them
//! by flag; `--help` shows each flag's range from it, and the bound test
//! (tests/bounds.rs) tries each numeric flag of the command at and beyond
//! its bounds.

/// Largest size any MiB flag takes (16 TiB): beyond it the byte count would
/// not be a size on any machine.
pub const MAX_MIB: u64 = 1 << 24;

/// A flag's range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    /// Only whole numbers.
    pub whole: bool,
    /// Least value.
    pub lo: f64,
    /// The least value itself is refused (`(0, 100]`).
    pub lo_open: bool,
    /// Greatest value (inclusive).
    pub hi: f64,
    /// The unit the value is in (`"MiB"`, `"s"`, `"%"`), or empty.
    pub unit: &'static str,
}

impl Range {
    const fn whole(lo: u64, hi: u64, unit: &'static str) -> Range {
        Range { whole: true, lo: lo as f64, lo_open: false, hi: hi as f64, unit }
    }

    fn num(v: f64, unit: &str) -> String {
        if unit.is_empty() { format!("{v}") } else { format!("{v} {unit}") }
    }

    /// What the flag expects, as every refusal ends:
    /// `expected a whole number from 1 to 10000`.
    pub fn expected(&self) -> String {
        let (lo, hi) = (Range::num(self.lo, ""), Range::num(self.hi, self.unit));
        match (self.whole, self.lo_open) {
            (true, _) => format!("expected a whole number from {lo} to {hi}"),
            (false, false) => format!("expected a number from {lo} to {hi}"),
            (false, true) => format!("expected a number above {lo} and at most {hi}"),
        }
    }

    /// The value of `s` if it is in range.
    ///
    /// # Errors
    /// Why not, ending with [`Range::expected`].
    pub fn parse(&self, s: &str) -> Result<f64, String> {
        let t = s.trim();
        let v = if self.whole {
            match t.parse::<i128>() {
                Ok(n) => n as f64,
                Err(_) => return Err(format!("{s:?} is not a whole number ({})", self.expected())),
            }
        } else {
            match t.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                Ok(_) => return Err(format!("{s} is not a finite number ({})", self.expected())),
                Err(_) => return Err(format!("{s:?} is not a number ({})", self.expected())),
            }
        };
        let shown = Range::num(v, self.unit);
        if v < self.lo || (self.lo_open && v == self.lo) {
            let bound = Range::num(self.lo, self.unit);
            let how = if self.lo_open { "is not above" } else { "is below" };
            return Err(format!("{shown} {how} {bound} ({})", self.expected()));
        }
        if v > self.hi {
            return Err(format!("{shown} is above {} ({})", Range::num(self.hi, self.unit), self.expected()));
        }
        Ok(v)
    }

    fn usize(&self, s: &str) -> Result<usize, String> {
        self.parse(s).map(|v| v as usize)
    }
}

/// Sample counts: 1 to 10^7.
pub const COUNT: Range = Range::whole(1, 10_000_000, "");
/// Chunks: at least 2 (one to copy while another computes), at most 10^7.
pub const COUNT2: Range = Range::whole(2, 10_000_000, "");
/// Runs per batch: 1 to 4096 (a batch is queued behind the spin gate, and
/// a driver's queue holds about a thousand entries before the host blocks).
pub const BATCH_RUNS: Range = Range::whole(1, 4096, "");
/// Batches or submissions per batch of `overhead`: 1 to 10,000.
pub const BATCHES: Range = Range::whole(1, 10_000, "");
/// Repetitions: 1 to 1,000.
pub const REPEAT: Range = Range::whole(1, 1000, "");
/// Launches per case of `truth --launch-only`: 1 to 100,000.
pub const LAUNCHES: Range = Range::whole(1, 100_000, "");
/// A size in whole MiB: 1 MiB to 16 TiB.
pub const MIB: Range = Range::whole(1, MAX_MIB, "MiB");
/// A chunk in MiB, fractions allowed (the simulator's default is 0.25):
/// 1/16 MiB (64 KiB) to 16 TiB.
pub const CHUNK_MIB: Range =
    Range { whole: false, lo: 0.0625, lo_open: false, hi: MAX_MIB as f64, unit: "MiB" };
/// Seconds of a sampling limit that may be 0: 0 to a day.
pub const SECS: Range = Range { whole: false, lo: 0.0, lo_open: false, hi: 86_400.0, unit: "s" };
/// Seconds of a limit that must be above 0: up to a day.
pub const POSITIVE_SECS: Range = Range { whole: false, lo: 0.0, lo_open: true, hi: 86_400.0, unit: "s" };
/// A percentage above 0 and at most 100.
pub const PCT: Range = Range { whole: false, lo: 0.0, lo_open: true, hi: 100.0, unit: "%" };
/// A device ordinal: 0 to `i32::MAX` (checked against the devices present
/// before anything runs).
pub const ORDINAL: Range = Range::whole(0, i32::MAX as u64, "");

/// Bytes per peer copy (`p2p --bytes`): 16 B to 16 GiB (and a multiple of
/// 16, checked by [`copy_bytes`]).
pub const COPY_BYTES: Range = Range::whole(16, 16 << 30, "B");

/// Hops of `p2p`'s cross-device handoff (`p2p --handoff-hops`): 2 to
/// [`gpu_bench::p2p::MAX_HANDOFF_HOPS`] (what one gated batch can queue),
/// and even ([`handoff_hops`]: the chain A → B → A … ends on A, where its
/// events are).
pub const HANDOFF_HOPS: Range = Range::whole(2, gpu_bench::p2p::MAX_HANDOFF_HOPS as u64, "");
/// A size of `nccl` (`--min-bytes`, `--max-bytes`): 1 B to 16 GiB.
pub const NCCL_BYTES: Range = Range::whole(1, 16 << 30, "B");
/// The factor between `nccl`'s sizes: 2 to 1024.
pub const FACTOR: Range = Range::whole(2, 1024, "");
/// Ranks of `nccl --procs`: 2 (a collective needs two) to 1024.
pub const PROCS: Range = Range::whole(2, 1024, "");
/// Timed iterations per size: 1 to 100,000.
pub const ITERS: Range = Range::whole(1, 100_000, "");
/// Warmup or checked iterations per size: 0 to 100,000.
pub const ITERS0: Range = Range::whole(0, 100_000, "");
/// Launches of each size's graphs (`nccl --graph`): 0 (eager) to 10,000.
pub const GRAPH_LAUNCHES: Range = Range::whole(0, 10_000, "");
/// A bandwidth in GB/s above 0 (at most 10^6: no link is near it).
pub const GBPS: Range = Range { whole: false, lo: 0.0, lo_open: true, hi: 1e6, unit: "GB/s" };
/// Elements of a reference altered for a test of the check: 0 to 10^9.
pub const PLANT: Range = Range::whole(0, 1_000_000_000, "");

/// Every numeric flag of the command (its long name) and its range.
pub const RANGES: &[(&str, Range)] = &[
    ("device", ORDINAL),
    ("min-samples", COUNT),
    ("max-samples", COUNT),
    ("warmup-min", COUNT),
    ("warmup-max", COUNT),
    ("min-time-s", SECS),
    ("timeout-s", POSITIVE_SECS),
    ("max-noise-pct", PCT),
    ("batch-runs", BATCH_RUNS),
    ("threshold-pct", PCT),
    ("array-mib", MIB),
    ("batches", BATCHES),
    ("per-batch", BATCHES),
    ("repeat", REPEAT),
    ("launch-only", LAUNCHES),
    ("max-mib", MIB),
    ("chunk-mib", CHUNK_MIB),
    ("chunks", COUNT2),
    ("bytes", COPY_BYTES),
    ("handoff-hops", HANDOFF_HOPS),
    ("devices", ORDINAL),
    ("min-bytes", NCCL_BYTES),
    ("max-bytes", NCCL_BYTES),
    ("factor", FACTOR),
    ("warmup-iters", ITERS0),
    ("iters", ITERS),
    ("check-iters", ITERS0),
    ("graph", GRAPH_LAUNCHES),
    ("min-busbw", GBPS),
    ("peer-peak", GBPS),
    ("plant-wrong", PLANT),
    ("procs", PROCS),
];

/// The range of the numeric flag `--long`.
pub fn range_of(long: &str) -> Option<Range> {
    RANGES.iter().find(|(l, _)| *l == long).map(|(_, r)| *r)
}

/// A sample count ([`COUNT`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn count(s: &str) -> Result<usize, String> {
    COUNT.usize(s)
}

/// Chunks ([`COUNT2`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn count2(s: &str) -> Result<usize, String> {
    COUNT2.usize(s)
}

/// Runs per batch ([`BATCH_RUNS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn batch_runs(s: &str) -> Result<usize, String> {
    BATCH_RUNS.usize(s)
}

/// Batches or submissions per batch ([`BATCHES`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn batches(s: &str) -> Result<usize, String> {
    BATCHES.usize(s)
}

/// Repetitions ([`REPEAT`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn repeat(s: &str) -> Result<usize, String> {
    REPEAT.usize(s)
}

/// Launches per case ([`LAUNCHES`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn launches(s: &str) -> Result<usize, String> {
    LAUNCHES.usize(s)
}

/// Bytes per peer copy ([`COPY_BYTES`]), a multiple of 16 (the SM copy
/// moves 16-byte vectors).
///
/// # Errors
/// The refusal, naming the bound.
pub fn copy_bytes(s: &str) -> Result<usize, String> {
    let n = COPY_BYTES.usize(s)?;
    if n.is_multiple_of(16) {
        Ok(n)
    } else {
        Err(format!("{n} B is not a multiple of 16 ({})", COPY_BYTES.expected()))
    }
}

/// Handoff hops ([`HANDOFF_HOPS`]), an even number.
///
/// # Errors
/// The refusal, naming the bound.
pub fn handoff_hops(s: &str) -> Result<usize, String> {
    let n = HANDOFF_HOPS.usize(s)?;
    if n.is_multiple_of(2) {
        Ok(n)
    } else {
        Err(format!(
            "{n} is odd: the chain A → B → A … must end on A, where its events are ({})",
            HANDOFF_HOPS.expected()
        ))
    }
}

/// A size of `nccl` ([`NCCL_BYTES`]): a whole number of bytes, or one of
/// KiB, MiB or GiB with the suffix `K`, `M` or `G` as nccl-tests takes them
/// (`4G`).
///
/// # Errors
/// The refusal, naming the bound.
pub fn nccl_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    if shift == 0 {
        return NCCL_BYTES.usize(t);
    }
    match digits.parse::<u64>() {
        Ok(v) => NCCL_BYTES.usize(&v.saturating_mul(1 << shift).to_string()),
        Err(_) => Err(format!("{s:?} is not a whole number of bytes, K, M or G ({})", NCCL_BYTES.expected())),
    }
}

/// The factor between sizes ([`FACTOR`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn factor(s: &str) -> Result<usize, String> {
    FACTOR.usize(s)
}

/// Ranks of `nccl --procs` ([`PROCS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn procs(s: &str) -> Result<usize, String> {
    PROCS.usize(s)
}

/// Timed iterations ([`ITERS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn iters(s: &str) -> Result<usize, String> {
    ITERS.usize(s)
}

/// Warmup or checked iterations ([`ITERS0`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn iters0(s: &str) -> Result<usize, String> {
    ITERS0.usize(s)
}

/// Launches of each size's graphs ([`GRAPH_LAUNCHES`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn graph_launches(s: &str) -> Result<usize, String> {
    GRAPH_LAUNCHES.usize(s)
}

/// A bandwidth in GB/s ([`GBPS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn gbps(s: &str) -> Result<f64, String> {
    GBPS.parse(s)
}

/// Elements to alter ([`PLANT`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn plant(s: &str) -> Result<usize, String> {
    PLANT.usize(s)
}

/// A size in whole MiB ([`MIB`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn mib(s: &str) -> Result<usize, String> {
    MIB.usize(s)
}

/// A chunk size in MiB, fractions allowed ([`CHUNK_MIB`]); returns bytes,
/// rounded down to a multiple of 4 KiB.
///
/// # Errors
/// The refusal, naming the bound.
pub fn chunk_bytes(s: &str) -> Result<usize, String> {
    let v = CHUNK_MIB.parse(s)?;
    Ok(((v * (1u64 << 20) as f64) as u64 / 4096 * 4096) as usize)
}

/// Seconds that may be 0 ([`SECS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn secs(s: &str) -> Result<f64, String> {
    SECS.parse(s)
}

/// Seconds above 0 ([`POSITIVE_SECS`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn positive_secs(s: &str) -> Result<f64, String> {
    POSITIVE_SECS.parse(s)
}

/// A percentage ([`PCT`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn pct(s: &str) -> Result<f64, String> {
    PCT.parse(s)
}

/// A device ordinal ([`ORDINAL`]).
///
/// # Errors
/// The refusal, naming the bound.
pub fn ordinal(s: &str) -> Result<i32, String> {
    ORDINAL.parse(s).map(|v| v as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_refuse_with_the_bound_named() {
        assert_eq!(count("3"), Ok(3));
        assert_eq!(count("0").unwrap_err(), "0 is below 1 (expected a whole number from 1 to 10000000)");
        assert!(count("-1").unwrap_err().starts_with("-1 is below 1 ("));
        assert!(count("x").unwrap_err().contains("not a whole number (expected a whole number from 1"));
        assert!(count2("1").unwrap_err().starts_with("1 is below 2 ("));
        assert!(mib("99999999").unwrap_err().starts_with("99999999 MiB is above 16777216 MiB ("));
        assert!(mib("-1").unwrap_err().starts_with("-1 MiB is below 1 MiB ("), "{:?}", mib("-1"));
        assert_eq!(mib("64"), Ok(64));
        assert!(secs("NaN").unwrap_err().contains("finite"));
        assert!(secs("inf").unwrap_err().contains("finite"));
        assert!(secs("-0.5").unwrap_err().starts_with("-0.5 s is below 0 s ("));
        assert_eq!(secs("1.5"), Ok(1.5));
        assert!(positive_secs("0").unwrap_err().starts_with("0 s is not above 0 s ("));
        assert!(pct("0").is_err() && pct("101").is_err() && pct("2") == Ok(2.0));
        assert!(ordinal("-1").unwrap_err().starts_with("-1 is below 0 ("));
        assert_eq!(chunk_bytes("0.25"), Ok(256 << 10));
        assert_eq!(chunk_bytes("32"), Ok(32 << 20));
        assert!(chunk_bytes("0.01").unwrap_err().contains("below 0.0625 MiB"));
        assert_eq!(nccl_bytes("4G"), Ok(4 << 30));
        assert_eq!(nccl_bytes("8"), Ok(8));
        assert_eq!(nccl_bytes("32k"), Ok(32 << 10));
        assert!(nccl_bytes("17G").unwrap_err().starts_with("18253611008 B is above 17179869184 B ("));
        assert!(nccl_bytes("1.5G").unwrap_err().contains("not a whole number of bytes"));
        assert!(nccl_bytes("0").unwrap_err().starts_with("0 B is below 1 B ("));
        assert!(factor("1").is_err() && iters("0").is_err() && iters0("0") == Ok(0));
        assert!(gbps("0").unwrap_err().starts_with("0 GB/s is not above 0 GB/s ("));
    }

    #[test]
    fn every_range_is_stated_in_its_refusals() {
        for (flag, r) in RANGES {
            for bad in ["-1", "NaN", "x", "1e30"] {
                let e = r.parse(bad).expect_err(flag);
                assert!(e.ends_with(&format!("({})", r.expected())), "--{flag} {bad}: {e}");
            }
        }
    }
}

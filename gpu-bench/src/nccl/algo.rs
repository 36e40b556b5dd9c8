//! The algorithm and protocol NCCL chose, read from its tuning log.
//!
//! With `NCCL_DEBUG=INFO` and `NCCL_DEBUG_SUBSYS` including `TUNING`, the
//! rank 0 of each communicator logs one line per collective it enqueues
//! (`src/enqueue.cc`), in NCCL 2.2x:
//!
//! ```text
//! host:pid:tid [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}
//! ```
//!
//! and in older releases the indices (`Algo 1 proto 2 time 2860.208008`).
//! The bytes are the call's count × element size: the whole array for
//! all-reduce and broadcast, one rank's block for all-gather (its send) and
//! reduce-scatter (its receive). Send/recv and all-to-all log no such line.
//! `NCCL_DEBUG_FILE` names the file (`%h` the host name up to its first
//! dot, `%p` the process id); NCCL opens it line-buffered, so what a
//! synchronized collective logged is in the file when it returns.
//!
//! [`TuningLog`] reads the lines a row's calls added ([`parse_line`]) and
//! [`choose`] names the choice most of them made.

use super::Collective;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// NCCL's algorithms in the order of its index (`NCCL_ALGO_*`), as older
/// releases logged them.
const ALGOS: [&str; 7] = ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"];
/// NCCL's protocols in the order of its index (`NCCL_PROTO_*`).
const PROTOS: [&str; 3] = ["LL", "LL128", "SIMPLE"];
/// The collectives NCCL logs a tuning line for, as it names them.
const FUNCS: [&str; 5] = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"];

/// One tuning line: a collective NCCL enqueued and what it chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningLine {
    /// The collective as NCCL names it (`AllReduce`, `AllGather`, …).
    pub func: &'static str,
    /// The bytes NCCL logged: count × element size of the call.
    pub bytes: u64,
    /// The algorithm, upper case (`RING`, `TREE`, `NVLS`, …).
    pub algo: String,
    /// The protocol, upper case (`LL`, `LL128`, `SIMPLE`).
    pub proto: String,
    /// The channels used (`Hi − Lo + 1`), where the line gives them.
    pub channels: Option<u32>,
}

/// A name (`Ring`, `SIMPLE`) upper-cased, or an index (`1`) looked up in
/// `table`; `None` for anything else.
fn name_or_index(token: &str, table: &[&str]) -> Option<String> {
    if let Ok(i) = token.parse::<usize>() {
        return table.get(i).map(|s| (*s).to_owned());
    }
    let ident = token.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident.then(|| token.to_ascii_uppercase())
}

/// `{Lo..Hi}` after `={` in `rest` (spaces already removed): `Hi − Lo + 1`.
fn channels(rest: &str) -> Option<u32> {
    let body = &rest[rest.find("={")? + 2..];
    let (lo, hi) = body[..body.find('}')?].split_once("..")?;
    let (lo, hi): (u32, u32) = (lo.parse().ok()?, hi.parse().ok()?);
    (hi >= lo).then(|| hi - lo + 1)
}

/// One line of the log as a [`TuningLine`]; `None` for any other line.
///
/// ```
/// use gpu_bench::nccl::algo::parse_line;
/// let l = parse_line("h:1:2 [0] NCCL INFO AllGather: 1024 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..3}").unwrap();
/// assert_eq!((l.func, l.bytes, l.algo.as_str(), l.proto.as_str(), l.channels), ("AllGather", 1024, "RING", "LL", Some(4)));
/// assert!(parse_line("h:1:2 [0] NCCL INFO Channel 00/02 : 0 1").is_none());
/// ```
pub fn parse_line(line: &str) -> Option<TuningLine> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    // `<Func>: <n> Bytes -> Algo <a> proto <p>`, wherever it starts.
    let at = tokens.windows(3).position(|w| w[0] == "Bytes" && w[1] == "->" && w[2] == "Algo")?;
    if at < 2 || tokens.len() < at + 6 || tokens[at + 4] != "proto" {
        return None;
    }
    let bytes = tokens[at - 1].parse().ok()?;
    // The name carries its colon (`AllReduce:`), or the colon stands apart.
    let name = match tokens[at - 2] {
        ":" if at >= 3 => tokens[at - 3],
        t => t.strip_suffix(':')?,
    };
    let func = FUNCS.iter().find(|f| f.eq_ignore_ascii_case(name))?;
    let algo = name_or_index(tokens[at + 3], &ALGOS)?;
    let proto = name_or_index(tokens[at + 5], &PROTOS)?;
    let rest: String = tokens[at + 6..].concat();
    Some(TuningLine { func, bytes, algo, proto, channels: channels(&rest) })
}

/// The name NCCL logs `c` under; `None` for send/recv and all-to-all (no
/// algorithm: NCCL logs no tuning line for them).
pub fn nccl_name(c: Collective) -> Option<&'static str> {
    match c {
        Collective::AllReduce => Some("AllReduce"),
        Collective::AllGather => Some("AllGather"),
        Collective::ReduceScatter => Some("ReduceScatter"),
        Collective::Broadcast => Some("Broadcast"),
        Collective::SendRecv | Collective::AllToAll => None,
    }
}

/// The choice most of `lines` made for `c` at `bytes` (a row's S) over `n`
/// ranks: `RING/LL (2 ch)`, followed by `, 18 of 25` when not every line
/// agrees. A line counts when it names `c` and logged S, S / n or S × n
/// bytes (what NCCL logs per call differs between collectives and
/// releases). `None` when no line counts, or `c` has no algorithm.
///
/// ```
/// use gpu_bench::nccl::{Collective, algo::{choose, parse_line}};
/// let lines: Vec<_> = ["AllGather: 256 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
///     "AllGather: 256 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}"]
///     .iter().filter_map(|l| parse_line(l)).collect();
/// // 1 KiB gathered over 4 ranks: each call sends 256 B.
/// assert_eq!(choose(&lines, Collective::AllGather, 1024, 4).as_deref(), Some("RING/LL (2 ch)"));
/// assert_eq!(choose(&lines, Collective::AllReduce, 1024, 4), None);
/// ```
pub fn choose(lines: &[TuningLine], c: Collective, bytes: u64, n: usize) -> Option<String> {
    let name = nccl_name(c)?;
    let n = n.max(1) as u64;
    let sizes = [bytes, bytes / n, bytes.saturating_mul(n)];
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    let mut total = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.func != name || !sizes.contains(&l.bytes) {
            continue;
        }
        let ch = l.channels.map_or(String::new(), |k| format!(" ({k} ch)"));
        let e = counts.entry(format!("{}/{}{ch}", l.algo, l.proto)).or_insert((0, i));
        e.0 += 1;
        total += 1;
    }
    // The most frequent; on a tie, the first seen.
    let (best, (k, _)) = counts.into_iter().max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.1.1.cmp(&a.1.1)))?;
    Some(if k == total { best } else { format!("{best}, {k} of {total}") })
}

/// The file NCCL writes for `pattern` (`NCCL_DEBUG_FILE`) in this process:
/// `%p` this process's id, `%%` a `%`, and `%h` (the host name) whatever
/// file of the directory matches around it. `None` while no file matches.
pub fn resolve(pattern: &Path) -> Option<PathBuf> {
    let name = pattern.file_name()?.to_str()?;
    let name = name.replace("%p", &std::process::id().to_string()).replace("%%", "%");
    let dir = pattern.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some((before, after)) = name.split_once("%h") else {
        let p = dir.join(&name);
        return p.is_file().then_some(p);
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
                f.len() > before.len() + after.len() && f.starts_with(before) && f.ends_with(after)
            })
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// NCCL's tuning log of this process, read a row at a time: each
/// [`TuningLog::take`] returns the lines logged since the one before.
#[derive(Debug)]
pub struct TuningLog {
    /// `NCCL_DEBUG_FILE` as given (`%h`, `%p` unexpanded).
    pattern: PathBuf,
    /// The file, once NCCL has created it.
    path: Option<PathBuf>,
    /// Bytes of it already read.
    offset: u64,
    /// Tuning lines read in all.
    pub lines: usize,
    /// The last failure to read it, if any.
    pub error: Option<String>,
}

impl TuningLog {
    /// The log NCCL writes for `pattern` (see [`resolve`]), nothing read
    /// yet.
    pub fn new(pattern: &Path) -> TuningLog {
        TuningLog { pattern: pattern.to_owned(), path: None, offset: 0, lines: 0, error: None }
    }

    /// The file, once found.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The tuning lines added since the last call (whole lines only). A
    /// file not there yet or unreadable gives none (the reason kept in
    /// [`TuningLog::error`]): a missing log never fails a run.
    pub fn take(&mut self) -> Vec<TuningLine> {
        if self.path.is_none() {
            self.path = resolve(&self.pattern);
        }
        let Some(path) = &self.path else { return Vec::new() };
        let mut text = Vec::new();
        let read = std::fs::File::open(path)
            .and_then(|mut f| f.seek(SeekFrom::Start(self.offset)).and_then(|_| f.read_to_end(&mut text)));
        if let Err(e) = read {
            self.error = Some(format!("{}: {e}", path.display()));
            return Vec::new();
        }
        // A line still being written waits for the next call.
        let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        let lines: Vec<TuningLine> =
            String::from_utf8_lossy(&text[..whole]).lines().filter_map(parse_line).collect();
        self.lines += lines.len();
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_parse() {
        let new = "gpu3:4242:4250 [0] NCCL INFO ReduceScatter: 37748736 Bytes -> Algo NVLS_TREE proto Simple channel{Lo..Hi}={0..15}";
        let l = parse_line(new).expect("2.2x line");
        assert_eq!(l.func, "ReduceScatter");
        assert_eq!(l.bytes, 37_748_736);
        assert_eq!((l.algo.as_str(), l.proto.as_str(), l.channels), ("NVLS_TREE", "SIMPLE", Some(16)));
        let old = "host:12:13 [0] NCCL INFO AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.208008";
        let l = parse_line(old).expect("older line");
        assert_eq!(
            (l.func, l.bytes, l.algo.as_str(), l.proto.as_str(), l.channels),
            ("AllGather", 37_756_928, "RING", "SIMPLE", None)
        );
        let l = parse_line("x [0] NCCL INFO Broadcast: 8 Bytes -> Algo 0 proto 0 time 3.5").expect("indices");
        assert_eq!((l.algo.as_str(), l.proto.as_str()), ("TREE", "LL"));
        // A trailing `comm 0x…` (some releases) changes nothing.
        let l = parse_line(
            "[0] NCCL INFO AllReduce: 4 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0} comm 0x55a7",
        )
        .expect("with comm");
        assert_eq!(l.channels, Some(1));
    }

    #[test]
    fn odd_spacing_and_case_parse() {
        let l = parse_line("  h:1:1  [0]   NCCL INFO   allreduce :\t4096   Bytes ->  Algo  ring   proto ll128  channel{Lo..Hi}= { 2 .. 5 }\r")
            .expect("odd spacing");
        assert_eq!((l.func, l.bytes), ("AllReduce", 4096));
        assert_eq!((l.algo.as_str(), l.proto.as_str(), l.channels), ("RING", "LL128", Some(4)));
    }

    #[test]
    fn garbage_is_ignored() {
        for g in [
            "",
            "garbage",
            "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
            "h:1:1 [0] NCCL INFO AllReduce: many Bytes -> Algo RING proto SIMPLE",
            "h:1:1 [0] NCCL INFO AllReduce: 64 Bytes -> Algo 9 proto 2 time 1.0",
            "h:1:1 [0] NCCL INFO AllReduce: 64 Bytes -> Algo RING proto 7",
            "h:1:1 [0] NCCL INFO AllReduce: 64 Bytes -> Algo RING",
            "h:1:1 [0] NCCL INFO Frobnicate: 64 Bytes -> Algo RING proto LL",
            "Bytes -> Algo RING proto LL",
            "AllReduce 64 Bytes -> Algo RING proto LL",
            "h:1:1 [0] NCCL INFO AllReduce: 64 Bytes -> Algo R!NG proto LL",
        ] {
            assert_eq!(parse_line(g), None, "{g:?}");
        }
        // A broken channel range leaves the channels unknown, not the line.
        let l = parse_line("AllReduce: 64 Bytes -> Algo RING proto LL channel{Lo..Hi}={3..1}").expect("line");
        assert_eq!(l.channels, None);
    }

    fn lines(text: &[&str]) -> Vec<TuningLine> {
        text.iter().filter_map(|l| parse_line(l)).collect()
    }

    #[test]
    fn the_most_frequent_choice_of_the_rows_size_is_named() {
        let ls = lines(&[
            "AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}",
            "AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
            "AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}",
            // Another size (the procs' reductions) and another collective: not counted.
            "AllReduce: 16 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}",
            "AllReduce: 16 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}",
            "Broadcast: 4096 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..0}",
        ]);
        assert_eq!(choose(&ls, Collective::AllReduce, 4096, 2).as_deref(), Some("RING/LL (2 ch), 2 of 3"));
        assert_eq!(choose(&ls, Collective::Broadcast, 4096, 2).as_deref(), Some("TREE/SIMPLE (1 ch)"));
        assert_eq!(choose(&ls, Collective::AllReduce, 64, 2), None);
        // Reduce-scatter logs one rank's block, all-gather too: S / n.
        let rs = lines(&["ReduceScatter: 1024 Bytes -> Algo 1 proto 2 time 9.0"]);
        assert_eq!(choose(&rs, Collective::ReduceScatter, 4096, 4).as_deref(), Some("RING/SIMPLE"));
        assert_eq!(choose(&rs, Collective::ReduceScatter, 1024, 4).as_deref(), Some("RING/SIMPLE"));
        assert_eq!(choose(&rs, Collective::ReduceScatter, 2048, 4), None);
        // No algorithm for point-to-point.
        assert_eq!(choose(&ls, Collective::SendRecv, 4096, 2), None);
        assert_eq!(choose(&ls, Collective::AllToAll, 4096, 2), None);
        // A tie goes to the first seen.
        let tie =
            lines(&["AllReduce: 8 Bytes -> Algo TREE proto LL", "AllReduce: 8 Bytes -> Algo RING proto LL"]);
        assert_eq!(choose(&tie, Collective::AllReduce, 8, 2).as_deref(), Some("TREE/LL, 1 of 2"));
    }

    #[test]
    fn the_log_is_read_a_row_at_a_time_and_a_missing_one_gives_nothing() {
        use std::io::Write as _;
        let dir = std::env::temp_dir().join(format!("gpu-bench-algo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut log = TuningLog::new(&dir.join("nccl-tuning.%h.%p"));
        assert!(log.take().is_empty() && log.path().is_none(), "not there yet");
        let file = dir.join(format!("nccl-tuning.myhost.{}", std::process::id()));
        let mut f = std::fs::File::create(&file).expect("log file");
        writeln!(
            f,
            "h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{{Lo..Hi}}={{0..0}}"
        )
        .expect("write");
        writeln!(f, "h:1:1 [0] NCCL WARN something else").expect("write");
        let first = log.take();
        assert_eq!(first.len(), 1);
        assert_eq!(log.path(), Some(file.as_path()));
        // A line still being written waits for the next take.
        write!(f, "h:1:1 [0] NCCL INFO AllGather: 16 Bytes -> Algo RING").expect("write");
        assert!(log.take().is_empty());
        writeln!(f, " proto SIMPLE").expect("write");
        let second = log.take();
        assert_eq!((second.len(), second[0].func, log.lines), (1, "AllGather", 2));
        // Another process's file (another pid) is never taken for ours.
        assert!(resolve(&dir.join("nccl-tuning.%h.1")).is_none_or(|p| p != file));
        std::fs::remove_file(&file).expect("remove");
        assert!(log.take().is_empty() && log.error.is_some(), "gone: nothing, and why");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

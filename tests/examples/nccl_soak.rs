//! A soak of collectives, copies and kernels from several host threads over
//! every GPU (issue 30): `--threads` threads (default 4) for `--seconds`
//! (default 60) of random tracked work on one clique of communicators, one
//! per device (`Communicator::init_all`). Each round of a thread is one of:
//!
//! - an all-reduce group over every rank, in place, on the thread's own
//!   stream of each device, of a random length, then one rank's result read
//!   back and compared with the exact sum;
//! - a copy to another device (a peer copy) and back, compared;
//! - a `scale` kernel on one device, compared;
//!
//! and every buffer is dropped as soon as it is issued or read: gpu-sync
//! frees it after its last use on the GPU, with no host wait written.
//! Every 5 s it prints the rounds done, their rate and the process's
//! resident memory (`VmRSS`). At the end it checks that no element was
//! wrong, that (on the simulator) the race oracle saw nothing, and — for
//! runs of 10 s or more — that RSS at the end is within 10 % of RSS after
//! the first fifth of the run (on the simulator: and after its quarantine
//! of freed blocks stopped growing); it exits nonzero otherwise. NVLink multicast stays off: run with
//! `NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1`.
//!
//! ```text
//! cargo run --release -p sync-tests --example nccl_soak -- --seconds 60 --threads 4
//! ```

use gpu_sync::nccl::{self, Communicator, ReduceOp};
use gpu_sync::{Device, DeviceBuffer, Stream};
use kernels::Kernels;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The longest buffer, f32 elements: 4 MiB on a GPU, 16 KiB on the
/// simulator (which copies every byte on the host).
fn max_len(sim: bool) -> usize {
    if sim { 1 << 12 } else { 1 << 20 }
}

/// Runs shorter than this check no memory bound: the first fifth is
/// warm-up (pools, the simulator's tables), not a plateau.
const RSS_CHECKED_FROM_S: f64 = 10.0;

/// A small deterministic generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What the soak counted.
#[derive(Default)]
struct Totals {
    rounds: AtomicU64,
    wrong: AtomicU64,
}

/// What every thread shares.
struct Shared {
    devices: Vec<Device>,
    comms: Vec<Communicator>,
    kernels: Vec<Kernels>,
    /// `scale`'s input per device, `max` long.
    ones: Vec<DeviceBuffer<f32>>,
    stop: AtomicBool,
    totals: Totals,
    /// The longest buffer, elements.
    max: usize,
    /// Only rounds of this kind (0 collective, 1 copy, 2 kernel): `SOAK_ONLY`.
    only: Option<usize>,
    /// The simulator's session, entered by every thread (so the race
    /// oracle and the footprint see the threads' work).
    session: Option<gpu_sync::sim::Session>,
}

/// One thread's rounds until `stop`.
fn worker(id: usize, sh: &Shared) -> Result<(), Error> {
    let _in = sh.session.as_ref().map(|s| s.enter());
    let Shared { devices, comms, kernels, ones, stop, totals, max, .. } = sh;
    let max = *max;
    let streams: Vec<Stream> = devices.iter().map(Stream::new).collect::<Result<_, _>>()?;
    let n = devices.len();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1));
    while !stop.load(Ordering::Relaxed) {
        let len = 4 * (1 + rng.below(max / 4));
        let kind = match sh.only {
            Some(k) => k,
            None => rng.below(3),
        };
        let wrong = match kind {
            0 => {
                // Rank r holds r + 1 + k (small integers: every sum is exact).
                let k = rng.below(100) as f32;
                let mut bufs: Vec<DeviceBuffer<f32>> = streams
                    .iter()
                    .enumerate()
                    .map(|(r, s)| DeviceBuffer::from_slice(s, &vec![r as f32 + 1.0 + k; len]))
                    .collect::<Result<_, _>>()?;
                nccl::group(|g| {
                    for ((c, s), b) in comms.iter().zip(&streams).zip(bufs.iter_mut()) {
                        g.all_reduce_in_place(c, s, b, ReduceOp::Sum)?;
                    }
                    Ok(())
                })?;
                let want = (n * (n + 1) / 2) as f32 + n as f32 * k;
                // Read on another rank's stream than the one that reduced it
                // now and then: gpu-sync orders the read.
                let r = rng.below(n);
                let reader = &streams[(r + rng.below(2)) % n];
                let got = if reader.device().ordinal() == devices[r].ordinal() {
                    reader.to_vec(&bufs[r])?
                } else {
                    streams[r].to_vec(&bufs[r])?
                };
                got.iter().filter(|&&v| v != want).count()
            }
            1 => {
                // A peer copy to another device and back.
                let (a, b) = (rng.below(n), rng.below(n));
                let v = rng.below(1000) as f32;
                let src = DeviceBuffer::from_slice(&streams[a], &vec![v; len])?;
                let mut there = DeviceBuffer::<f32>::alloc(&streams[b], len)?;
                streams[b].copy(&src, &mut there)?;
                drop(src);
                let mut back = DeviceBuffer::<f32>::alloc(&streams[a], len)?;
                streams[a].copy(&there, &mut back)?;
                drop(there);
                streams[a].to_vec(&back)?.iter().filter(|&&x| x != v).count()
            }
            _ => {
                let d = rng.below(n);
                let s = rng.below(50) as f32;
                let mut y = DeviceBuffer::<f32>::alloc(&streams[d], len)?;
                kernels[d].scale(&streams[d], &ones[d].slice(..len)?, &mut y, s)?;
                streams[d].to_vec(&y)?.iter().filter(|&&x| x != s).count()
            }
        };
        totals.wrong.fetch_add(wrong as u64, Ordering::Relaxed);
        totals.rounds.fetch_add(1, Ordering::Relaxed);
    }
    for s in &streams {
        s.synchronize()?;
    }
    Ok(())
}

/// Runs the soak; `Err` on a wrong element, a race, memory that grew or
/// any failure. Prints its progress and figures.
fn soak(seconds: f64, threads: usize) -> Result<(), Error> {
    let sim = gpu_sync::select_driver()?.is_sim();
    let max = max_len(sim);
    let session = if sim {
        kernels::register_sim_kernels();
        Some(gpu_sync::sim::session(0x5041)?)
    } else {
        None
    };
    let devices = Device::all()?;
    if devices.len() < 2 {
        println!("{} device(s): a collective needs two", devices.len());
        return Ok(());
    }
    let comms = Communicator::init_all(&devices)?;
    let kernels: Vec<Kernels> = devices.iter().map(Kernels::load).collect::<Result<_, _>>()?;
    let ones: Vec<DeviceBuffer<f32>> = devices
        .iter()
        .map(|d| {
            let s = Stream::new(d)?;
            let b = DeviceBuffer::from_slice(&s, &vec![1.0f32; max])?;
            s.synchronize()?;
            Ok(b)
        })
        .collect::<Result<_, gpu_sync::Error>>()?;
    let sh = Shared {
        devices,
        comms,
        kernels,
        ones,
        stop: AtomicBool::new(false),
        totals: Totals::default(),
        max,
        only: std::env::var("SOAK_ONLY").ok().and_then(|v| v.parse().ok()).filter(|&k: &usize| k < 3),
        session,
    };
    let session = sh.session.as_ref();
    let (devices, stop, totals) = (&sh.devices, &sh.stop, &sh.totals);
    let start = Instant::now();
    let (mut rss_early, mut samples) = (None, Vec::new());
    let result: Result<(), Error> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|id| {
                let sh = &sh;
                sc.spawn(move || worker(id, sh))
            })
            .collect();
        let tick = Duration::from_secs_f64((seconds / 12.0).clamp(0.25, 5.0));
        let mut last = (Instant::now(), 0u64);
        // On the simulator, memory grows until its quarantine of freed
        // blocks is full (cuda-sim keeps the latest 16,384 to catch a use
        // after free): the baseline waits for it to stop growing.
        let mut quarantine = (usize::MAX, false);
        while start.elapsed().as_secs_f64() < seconds && !handles.iter().any(|h| h.is_finished()) {
            std::thread::sleep(tick);
            let (now, rounds) = (Instant::now(), totals.rounds.load(Ordering::Relaxed));
            let rate = (rounds - last.1) as f64 / now.duration_since(last.0).as_secs_f64();
            let rss = sync_tests::rss_mib();
            let footprint = session.map(|s| s.footprint());
            if let Some(f) = &footprint {
                quarantine = (f.quarantined, quarantine.1 || f.quarantined == quarantine.0);
            }
            let settled = footprint.is_none() || quarantine.1;
            let held = footprint
                .map(|f| format!("  simulator: quarantined {}, streams {}", f.quarantined, f.streams))
                .unwrap_or_default();
            println!(
                "{:>7.1} s  {rounds:>9} rounds  {rate:>9.0}/s  RSS {rss:.1} MiB{held}",
                start.elapsed().as_secs_f64()
            );
            if rss_early.is_none() && settled && start.elapsed().as_secs_f64() >= seconds / 5.0 {
                rss_early = Some(rss);
            }
            samples.push(rss);
            last = (now, rounds);
        }
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().map_err(|_| "a soak thread panicked")??;
        }
        Ok(())
    });
    result?;
    let (rounds, wrong) = (totals.rounds.load(Ordering::Relaxed), totals.wrong.load(Ordering::Relaxed));
    let rss_end = sync_tests::rss_mib();
    let early = rss_early.or(samples.first().copied()).unwrap_or(rss_end);
    let growth = (rss_end - early) / early;
    println!(
        "nccl soak: {} GPUs, {threads} threads, {:.1} s: {rounds} rounds, {wrong} wrong elements; RSS {early:.1} MiB \
         after the first fifth, {rss_end:.1} MiB at the end ({:+.1} %)",
        devices.len(),
        start.elapsed().as_secs_f64(),
        growth * 100.0
    );
    if wrong > 0 {
        return Err(format!("{wrong} wrong elements").into());
    }
    if rounds == 0 {
        return Err("no round finished".into());
    }
    if let Some(s) = &session {
        let races = s.races();
        if !races.is_empty() {
            return Err(format!("the race oracle reported {} races: {:?}", races.len(), races.first()).into());
        }
    }
    if seconds >= RSS_CHECKED_FROM_S && growth > 0.10 {
        return Err(format!("RSS grew {:.1} % after the first fifth of the run", growth * 100.0).into());
    }
    Ok(())
}

/// `--seconds S` and `--threads N`.
fn args() -> Result<(f64, usize), Error> {
    let (mut seconds, mut threads) = (60.0, 4);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--seconds" => {
                seconds = v.parse().map_err(|e| format!("--seconds {v}: {e}"))?;
                if !(seconds > 0.0 && seconds <= 86_400.0) {
                    return Err(format!("--seconds {v}: must be in (0, 86400]").into());
                }
            }
            "--threads" => {
                threads = v.parse().map_err(|e| format!("--threads {v}: {e}"))?;
                if !(1..=64).contains(&threads) {
                    return Err(format!("--threads {v}: must be in 1..=64").into());
                }
            }
            _ => return Err(format!("unknown argument {a} (--seconds S, --threads N)").into()),
        }
    }
    Ok((seconds, threads))
}

fn main() -> Result<(), Error> {
    let (seconds, threads) = args()?;
    soak(seconds, threads)
}

#[test]
fn a_short_soak_loses_nothing() {
    // CI (the simulator's two devices): two threads for two seconds; the
    // same checks as the long run but the memory bound (too short for a
    // plateau). SOAK_SECONDS lengthens it (the GPU bundle).
    let seconds = std::env::var("SOAK_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2.0);
    soak(seconds, 2).expect("the soak");
}

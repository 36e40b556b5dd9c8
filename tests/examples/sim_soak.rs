//! A long soak of the simulator with churn, run by hand (issue 27): `--threads`
//! threads (default 4) for `--minutes` (default 10) of random tracked work
//! through gpu-sync that creates and drops streams, events, buffers and
//! graphs, on one simulator session. Every 10 s it prints the operations
//! done, their rate over the last 10 s, the process's resident memory
//! (`VmRSS`) and what the simulator holds ([`cuda_sim::Footprint`]: streams,
//! host clock entries, the longest stream clock, retired streams still
//! indexed), so a simulator whose memory or cost grows with the number of
//! streams that ever existed shows it. At the end it checks each thread's
//! counter (bumped by a kernel on a long-lived stream, read back now and
//! then), that the race oracle saw no race, and that no stream of
//! the session is left in the simulator.
//!
//! ```text
//! cargo run --release -p sync-tests --example sim_soak -- --minutes 2
//! ```

use gpu_sync::{Device, DeviceBuffer, Stream, SyncEvent};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Words per buffer (a multiple of 4 for `copy_u32x4`).
const WORDS: usize = 1024;

/// The resident set of this process, in MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// `--minutes M` (a positive number, fractions allowed) and `--threads N`.
fn args() -> Result<(f64, usize), Error> {
    let (mut minutes, mut threads) = (10.0, 4);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let v = it.next().ok_or_else(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--minutes" => {
                minutes = v.parse().map_err(|e| format!("--minutes {v}: {e}"))?;
                if !(minutes > 0.0 && minutes <= 24.0 * 60.0) {
                    return Err(format!("--minutes {v}: must be in (0, 1440]").into());
                }
            }
            "--threads" => {
                threads = v.parse().map_err(|e| format!("--threads {v}: {e}"))?;
                if !(1..=64).contains(&threads) {
                    return Err(format!("--threads {v}: must be in 1..=64").into());
                }
            }
            _ => return Err(format!("unknown argument {a} (--minutes M, --threads N)").into()),
        }
    }
    Ok((minutes, threads))
}

/// A small seeded generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Counts of what a worker did.
#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    streams: AtomicU64,
}

/// One worker: a long-lived `home` stream and counter `acc`; each round a
/// new stream, event and buffer, used and dropped, in a random mix.
fn worker(t: u64, device: &Device, k: &kernels::Kernels, stop: &AtomicBool, n: &Counts) -> Result<(), Error> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t + 1));
    let home = Stream::new(device)?;
    let mut acc = DeviceBuffer::<u32>::zeroed(&home, WORDS)?;
    let mut bumps = 0u32;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let s = Stream::new(device)?;
        n.streams.fetch_add(1, Ordering::Relaxed);
        let mut ops = 0;
        // A buffer copied from the counter on the new stream (gpu-sync
        // orders it after the counter's last bump on `home`). Short-lived
        // streams get copies and fills, not kernel launches: a launch keeps
        // its stream alive in gpu-sync for the process's life (reported with
        // issue 27), which would measure gpu-sync, not the simulator.
        let mut tmp = DeviceBuffer::<u32>::alloc(&s, WORDS)?;
        s.copy(&acc, &mut tmp)?;
        ops += 2;
        match rng.below(4) {
            0 => {
                // An event recorded on the new stream, waited on by `home`.
                let ev = SyncEvent::new(device)?;
                s.fill_u32(&mut tmp, 1)?;
                ev.record(&s)?;
                home.wait(&ev)?;
                ops += 3;
            }
            1 => {
                // A graph captured on the new stream, replayed on `home`.
                let g = s.capture(|c| c.stream().fill_u32(&mut tmp, 5))?;
                let exec = g.instantiate()?;
                exec.launch(&home)?;
                ops += 2;
            }
            2 => {
                // The new stream synchronized before it is dropped.
                s.fill_u32(&mut tmp, 2)?;
                s.synchronize()?;
                ops += 2;
            }
            _ => {
                // Dropped with its work pending.
                s.fill_u32(&mut tmp, 3)?;
                ops += 1;
            }
        }
        k.bump(&home, &mut acc, 1)?;
        bumps += 1;
        ops += 1;
        drop(tmp);
        drop(s);
        if round.is_multiple_of(32) {
            let v = home.to_vec(&acc)?;
            ops += 1;
            if v.iter().any(|&x| x != bumps) {
                return Err(format!("thread {t}: counter {} after {bumps} bumps", v[0]).into());
            }
        }
        n.ops.fetch_add(ops, Ordering::Relaxed);
    }
    home.synchronize()?;
    let v = home.to_vec(&acc)?;
    if v.iter().any(|&x| x != bumps) {
        return Err(format!("thread {t}: counter {} after {bumps} bumps at the end", v[0]).into());
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let (minutes, threads) = args()?;
    let session = gpu_sync::sim::session(27)?;
    kernels::register_sim_kernels();
    let device = Device::get(0)?;
    let k = kernels::Kernels::load(&device)?;
    let stop = AtomicBool::new(false);
    let counts = Counts::default();
    let total = Duration::from_secs_f64(minutes * 60.0);
    println!("sim_soak: {threads} threads x {minutes} min");
    let t0 = Instant::now();
    std::thread::scope(|scope| -> Result<(), Error> {
        let mut workers = Vec::new();
        for t in 0..threads as u64 {
            let (session, device, k, stop, counts) = (&session, &device, &k, &stop, &counts);
            workers.push(scope.spawn(move || {
                let _in = session.enter();
                let r = worker(t, device, k, stop, counts);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            }));
        }
        let mut last = (0u64, Instant::now());
        while t0.elapsed() < total && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(10).min(total.saturating_sub(t0.elapsed())));
            let n = counts.ops.load(Ordering::Relaxed);
            let f = session.footprint();
            println!(
                "t={:>6.1} s  ops {:>10}  rate {:>8.0}/s  streams made {:>8}  rss {:>7.1} MiB  | sim: streams {} \
                 host clock {} longest stream clock {} retiring {} retired indexed {}",
                t0.elapsed().as_secs_f64(),
                n,
                (n - last.0) as f64 / last.1.elapsed().as_secs_f64(),
                counts.streams.load(Ordering::Relaxed),
                rss_mib(),
                f.streams,
                f.host_clock,
                f.longest_stream_clock,
                f.retiring,
                f.retired_index,
            );
            last = (n, Instant::now());
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().map_err(|_| "a worker panicked")??;
        }
        Ok(())
    })?;
    session.assert_no_races();
    let f = session.footprint();
    println!(
        "done: {} operations, {} streams made and dropped, rss {:.1} MiB, {:?}",
        counts.ops.load(Ordering::Relaxed),
        counts.streams.load(Ordering::Relaxed),
        rss_mib(),
        f
    );
    // Every user stream is gone (default streams may remain until the
    // session ends).
    if session.live().streams != 0 || f.retiring != 0 {
        return Err(format!("streams left behind: {:?}, {f:?}", session.live()).into());
    }
    Ok(())
}

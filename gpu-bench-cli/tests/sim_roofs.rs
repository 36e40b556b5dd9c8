//! No simulated figure beats the simulated device (issue 27): every rate
//! `gpu-bench` reports on the simulator — the copies of `bandwidth` and
//! `overlap`, the copies and SM copies of `p2p` — is at most the roof of the
//! path it uses in cuda-sim's device model (the host link, the peer link,
//! HBM); and on the simulator no host-clock figure sits in a column of
//! simulated times. (The kernels of `truth` are held to HBM by gpu-bench
//! itself, which refuses a simulated figure above the simulated device's
//! memory bandwidth; `cli.rs` runs `truth` on the simulator.)

mod support;

use cuda_sim::model::{HBM_BYTES_PER_NS, NVLINK_BYTES_PER_NS, PCIE_BYTES_PER_NS};
use gpu_bench::p2p::P2pReport;
use gpu_bench::{Mode, Report, Unit};
use std::process::{Command, Output};

/// Relative slack for the reports' rounding (a rate is computed from a
/// median of whole simulated nanoseconds, always at or below the roof).
const SLACK: f64 = 1e-9;

fn run(devices: u32, args: &[&str]) -> Output {
    let out = Command::new(support::gpu_bench())
        .env_remove("RUST_LOG")
        .env("CUDA_SIM_DEVICES", devices.to_string())
        .args(["--driver", "sim", "--format", "json"])
        .args(args)
        .output()
        .expect("gpu-bench runs");
    assert!(out.status.success(), "{args:?}: {:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    out
}

fn report(args: &[&str]) -> Report {
    serde_json::from_slice(&run(1, args).stdout).expect("a JSON report on stdout")
}

/// Every bandwidth figure of `r` with the roof `roof_of` gives its record,
/// bytes per second; returns how many were checked.
fn check_rates(r: &Report, roof_of: impl Fn(&str) -> f64) -> usize {
    assert!(r.simulated);
    let mut checked = 0;
    for rec in &r.records {
        for m in &rec.modes {
            for c in m.counters.iter().filter(|c| c.unit == Unit::BytesPerSecond) {
                let roof = roof_of(&rec.name);
                assert!(
                    c.value <= roof * (1.0 + SLACK),
                    "{} {}: {:.1} GB/s above the simulated roof of {:.1} GB/s",
                    rec.key(),
                    m.mode.name(),
                    c.value / 1e9,
                    roof / 1e9
                );
                checked += 1;
            }
        }
    }
    checked
}

const HBM: f64 = HBM_BYTES_PER_NS * 1e9;
const PCIE: f64 = PCIE_BYTES_PER_NS * 1e9;
const NVLINK: f64 = NVLINK_BYTES_PER_NS * 1e9;

#[test]
fn host_copies_read_no_faster_than_the_simulated_host_link() {
    let r = report(&["--quick", "bandwidth"]);
    // One direction of the host link, or both at once.
    let roof = |name: &str| if name.contains("at once") { 2.0 * PCIE } else { PCIE };
    assert!(check_rates(&r, roof) >= 20, "the copies' rates were checked");
    assert!(check_rates(&report(&["--quick", "overlap"]), |_| HBM) > 0);
}

#[test]
fn peer_copies_and_sm_copies_read_no_faster_than_the_simulated_link() {
    let out = run(2, &["p2p", "--bytes", "4194304", "--repeat", "3"]);
    let r: P2pReport = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(r.simulated && !r.pairs.is_empty());
    for p in &r.pairs {
        let pair = format!("{} -> {}", p.src, p.dst);
        let figures = [
            ("copy, peer access on", &p.copy_on_gbs, NVLINK),
            ("raw copy, peer access on", &p.raw_on_gbs, NVLINK),
            ("copy both ways, peer access on", &p.copy_both_on_gbs, 2.0 * NVLINK),
            ("SM copy push", &p.sm_push_gbs, NVLINK),
            ("SM copy pull", &p.sm_pull_gbs, NVLINK),
            ("copy, staged", &p.copy_off_gbs, PCIE),
        ];
        for (what, f, roof) in figures {
            let gbs = f.value().unwrap_or_else(|| panic!("{pair}: {what} measured"));
            assert!(
                gbs * 1e9 <= roof * (1.0 + SLACK),
                "{pair}: {what} reads {gbs:.1} GB/s above the simulated roof of {:.1} GB/s",
                roof / 1e9
            );
        }
    }
}

#[test]
fn first_call_on_the_simulator_reads_the_simulated_clock() {
    // `timer` times a spin kernel of known length in every mode, first-call
    // included: on the simulator the first call reads the simulated clock
    // too (the simulator models no module load), so it is the spin's length,
    // not the host's time around it.
    let r = report(&["--quick", "timer"]);
    let mut seen = 0;
    for rec in r.records.iter().filter(|rec| rec.name == "spin") {
        let (Some(first), Some(hot)) = (rec.mode(Mode::FirstCall), rec.mode(Mode::Hot)) else { continue };
        assert!(
            (first.median() - hot.median()).abs() <= 1e-9 * hot.median().max(1e-6),
            "{}: first call {} s beside hot {} s: not one clock",
            rec.key(),
            first.median(),
            hot.median()
        );
        seen += 1;
    }
    assert!(seen >= 2, "the spin lengths of timer were checked");
}

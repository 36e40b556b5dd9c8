//! `gpu-bench roofline` end to end without a GPU: the whole main job on the
//! simulator with `--quick`, and `--replay` of the committed H100 result.

use std::path::{Path, PathBuf};
use std::process::Command;

fn out_dir(name: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("roofline-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn quick_roofline_on_the_simulator() {
    let dir = out_dir("sim");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .args(["--driver", "sim", "--quick", "roofline", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = read(&dir, "report.md");
    assert!(md.contains("Simulated"), "the report must say its rates are simulated");
    for ceiling in ["HBM read", "HBM copy", "HBM triad", "FP32 FMA", "BF16 tensor", "L2", "shared"] {
        assert!(md.contains(&format!("| {ceiling} |")), "no {ceiling} row");
    }
    assert!(md.contains("elementwise scale_f32"));
    let json = read(&dir, "results.json");
    let report = gpu_bench::roofline::RooflineReport::from_json(&json).unwrap();
    assert!(report.simulated() && report.scaled_down);
    assert!(report.placements.len() >= 9, "{}", report.placements.len());
    assert!(report.sweeps.iter().any(|s| s.on_roofline && s.points.len() >= 5));
    let svg = read(&dir, "roofline.svg");
    assert!(svg.contains("<svg") && svg.contains("SIMULATED"));
    assert!(read(&dir, "cache.svg").contains("Working-set sweeps"));
    // Phases are reported on stderr.
    let err = String::from_utf8_lossy(&out.stderr);
    for phase in ["HBM", "FMA", "tensor", "caches", "intensity sweep", "placement"] {
        assert!(err.contains(&format!("roofline: {phase} done")), "{err}");
    }
}

#[test]
fn replay_of_the_committed_h100_result() {
    let json =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results/2026-11-25-h100-roofline/results.json");
    let dir = out_dir("replay");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .args(["roofline", "--replay"])
        .arg(&json)
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = read(&dir, "report.md");
    assert!(md.contains("NVIDIA H100 80GB HBM3"));
    assert!(!md.contains("Simulated"));
    assert!(read(&dir, "roofline.svg").contains("HBM read"));
    // A file of another schema is refused with a usage error (exit 2).
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"other\", \"version\": 1}").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-bench"))
        .args(["roofline", "--replay"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

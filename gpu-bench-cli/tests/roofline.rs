//! `gpu-bench roofline` end to end without a GPU: the whole main job on the
//! simulator with `--quick`, and `--replay` of the committed H100 result.

mod support;

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
    let out = Command::new(support::gpu_bench())
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
    // The L2 probe's four candidates, each measured and checked, the HBM
    // read's five and the copy's five (the bulk engine's many-block shapes
    // among them).
    let tried = |probe: &str| report.tuning.iter().filter(|t| t.probe.starts_with(probe)).count();
    assert_eq!(tried("L2 (whole working sets)"), 4);
    assert_eq!(tried("HBM read"), 5);
    assert_eq!(tried("HBM copy"), 5);
    assert!(report.tuning.iter().any(|t| t.config.starts_with("read_bulk bulk 2 x 32 KiB")));
    for grid in ["1 blocks/SM of 512", "2 blocks/SM of 512", "512 blocks/SM of 128"] {
        let config = format!("bulk 2 x 32 KiB, {grid}");
        assert!(
            report.tuning.iter().any(|t| t.probe.starts_with("HBM read") && t.config == config),
            "{config}"
        );
    }
    for config in [
        "bulk copy engine, 3 x 32 KiB stages, 512 blocks/SM of 128",
        "bulk copy engine, 2 x 32 KiB stages, 512 blocks/SM of 128",
    ] {
        assert!(
            report.tuning.iter().any(|t| t.probe.starts_with("HBM copy") && t.config == config),
            "{config}"
        );
    }
    assert!(report.sweeps.iter().any(|s| s.on_roofline && s.points.len() >= 5));
    // One intensity sweep per precision, each held against its own FMA
    // ceiling, with its empirical ridge in the JSON and the report.
    for prec in ["FP32", "FP64", "FP16"] {
        let s = report
            .sweeps
            .iter()
            .find(|s| s.on_roofline && s.ceiling.as_deref() == Some(&format!("{prec} FMA")))
            .unwrap_or_else(|| panic!("no {prec} intensity sweep"));
        assert!(s.points.len() >= 5 && s.points.iter().all(|p| p.y2.is_some()), "{prec}");
        let ridge = s.ridge.unwrap_or_else(|| panic!("{prec}: no ridge"));
        assert!(ridge > 0.0 && ridge.is_finite(), "{prec}: {ridge}");
        assert!(md.contains(&format!("against the {prec} FMA ceiling")), "{prec}");
    }
    // sm_90 (the simulated device): the tensor ceilings come from wgmma.
    assert_eq!(report.tensor_path.as_deref(), Some("wgmma (sm_90)"));
    assert!(md.contains("| tensor path | wgmma (sm_90) |"));
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
fn forced_mma_path_tensor_phase_alone() {
    let dir = out_dir("mma");
    let out = Command::new(support::gpu_bench())
        .args(["--driver", "sim", "--quick", "roofline", "--only-tensor", "--tensor-path", "mma", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report = gpu_bench::roofline::RooflineReport::from_json(&read(&dir, "results.json")).unwrap();
    assert_eq!(report.tensor_path.as_deref(), Some("mma.sync (forced by --tensor-path mma)"));
    let kernels: Vec<&str> = report.ceilings.iter().map(|c| c.kernel.as_str()).collect();
    assert_eq!(kernels, ["mma_bf16_probe", "mma_f16_probe", "mma_e4m3_probe"]);
    assert!(report.ceilings.iter().all(|c| c.check.starts_with("32x32 result within")));
    assert!(read(&dir, "report.md").contains("| tensor path | mma.sync (forced by --tensor-path mma) |"));
    // The tensor phase alone: no other phase ran, and no chart was drawn.
    assert_eq!(report.phases.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["tensor"]);
    assert!(!dir.join("roofline.svg").exists());
}

#[test]
fn replay_of_the_committed_h100_result() {
    let json =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results/2026-11-25-h100-roofline/results.json");
    let dir = out_dir("replay");
    let out = Command::new(support::gpu_bench())
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
    // The newest H100 result (schema v1) re-renders the committed report
    // byte for byte, and comes back as the current schema.
    let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results/2026-11-25-h100-roofline-2");
    let dir2 = out_dir("replay2");
    let out = Command::new(support::gpu_bench())
        .args(["roofline", "--replay"])
        .arg(v1.join("results.json"))
        .arg("--out")
        .arg(&dir2)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read(&dir2, "report.md"), read(&v1, "report.md"));
    assert!(
        read(&dir2, "results.json")
            .contains(&format!("\"version\": {}", gpu_bench::roofline::SCHEMA_VERSION))
    );
    // The newest results of both GPUs (the H100's final run and the H200's)
    // re-render their committed reports and charts byte for byte.
    for (run, gpu) in [
        ("2026-11-26-final/verify-after-review", "NVIDIA H100 80GB HBM3"),
        ("2026-11-26-h200/call12", "NVIDIA H200"),
    ] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/results").join(run).join("roofline");
        let dir3 = out_dir(&format!("replay-{}", run.replace('/', "-")));
        let out = Command::new(support::gpu_bench())
            .args(["roofline", "--replay"])
            .arg(src.join("results.json"))
            .arg("--out")
            .arg(&dir3)
            .output()
            .unwrap();
        assert!(out.status.success(), "{run}: {}", String::from_utf8_lossy(&out.stderr));
        let md = read(&dir3, "report.md");
        assert!(md.contains(&format!("# Roofline: {gpu}\n")), "{run}");
        assert_eq!(md, read(&src, "report.md"), "{run}");
        assert_eq!(read(&dir3, "roofline.svg"), read(&src, "roofline.svg"), "{run}");
        let _ = std::fs::remove_dir_all(&dir3);
    }
    // A file of another schema is refused with a usage error (exit 2).
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"other\", \"version\": 1}").unwrap();
    let out = Command::new(support::gpu_bench()).args(["roofline", "--replay"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn only_tensor_links_no_chart_it_did_not_draw() {
    let dir = out_dir("only-tensor");
    let out = Command::new(support::gpu_bench())
        .args(["--driver", "sim", "--quick", "roofline", "--only-tensor", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let md = read(&dir, "report.md");
    assert!(md.contains("| BF16 tensor |"), "the tensor phase ran");
    assert!(!dir.join("roofline.svg").exists(), "no chart under --only-tensor");
    assert!(!md.contains("roofline.svg"), "the report links a chart that was not drawn");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_tuning_sweep_on_the_simulator() {
    let dir = out_dir("tune");
    let out = Command::new(support::gpu_bench())
        .args(["--driver", "sim", "--quick", "roofline", "--tune-reads", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = read(&dir, "tune.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    for level in ["L2", "HBM"] {
        let of = |stage: &str| rows.iter().filter(|r| r.starts_with(&format!("{level},{stage},"))).count();
        assert!(of("1") > 200 && of("2") > 10, "{level}: {} and {} rows", of("1"), of("2"));
    }
    // Every flavor, both layouts, the bulk engine and the old probes.
    for shape in [
        "loads cg,",
        "loads ca,",
        "loads lu,",
        "loads nc,",
        "loads cg 8-byte,",
        "loads cg.L2::256B,",
        "loads nc.L2::256B,",
        "per-block slices",
        "bulk 2 x 32 KiB",
        "cache_read",
        "hbm_read",
    ] {
        assert!(csv.contains(shape), "no {shape} row");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("## L2, stage 2"));
}

/// `--tune` of the HBM probes on the simulator: the copy's search tries
/// every bulk-copy pipeline (`copy_bulk`) at the grids whose stages fit the
/// SM, besides `hbm_copy`'s variants, and the job still checks the copy it
/// keeps.
#[test]
fn hbm_tuning_search_tries_every_copy_pipeline() {
    let dir = out_dir("tune-hbm");
    let out = Command::new(support::gpu_bench())
        .args(["--driver", "sim", "--quick", "roofline", "--tune", "--only-hbm-fma", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = read(&dir, "results.json");
    let report = gpu_bench::roofline::RooflineReport::from_json(&json).unwrap();
    let copies: Vec<&str> =
        report.tuning.iter().filter(|t| t.probe == "HBM copy").map(|t| t.config.as_str()).collect();
    // (stages, KiB) and the blocks a SM whose stages fit 227 KiB together;
    // 512 short blocks a SM for every pipeline.
    for (stages, kib, per_sm) in
        [(2, 32, 3), (4, 16, 3), (3, 32, 2), (2, 16, 4), (4, 32, 1), (6, 16, 2), (8, 8, 3)]
    {
        for n in [1, 2, 3, 4, 512] {
            let config = format!("bulk copy engine, {stages} x {kib} KiB stages, {n} blocks/SM of 128");
            assert_eq!(copies.contains(&config.as_str()), n <= per_sm || n == 512, "{config}");
        }
    }
    assert!(copies.len() > 40, "{} copy configurations", copies.len());
    let md = read(&dir, "report.md");
    assert!(md.contains("| HBM copy |") && md.contains("every word matches the pattern"));
    let _ = std::fs::remove_dir_all(&dir);
}

//! `cargo xtask gpu-bundle`: builds every test binary (release) and gpu-bench
//! into `target/gpu-bundle/`, with a `run.sh` that runs them against the real
//! driver on a GPU machine (`--include-ignored`), then the compute-sanitizer
//! passes, then the benchmarks. The bundle is stripped to stay small.

use crate::util::{build_gpu_bench, cargo, root, run as run_cmd};
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::{Command, Stdio};

/// Test targets left out of the bundle: those that cannot run on the GPU
/// machine (they need cargo, the `gpu-bench` binary of the build tree, or
/// read the sources), and those that install the simulator whatever the
/// driver (they would test nothing more there, and the bundle must stay
/// under the device tool's 64 MiB).
const SKIP: &[&str] = &[
    "compile_fail",
    "signatures",
    "cli",
    "bad_input",
    "roofline",
    "bounds",
    "compare",
    "p2p",
    "docs_links",
    "examples",
    "miri",
    "oracle",
    "faults",
    "sim_api",
    "engine",
];

/// Examples the bundle carries as programs in `bin/` (beside their test
/// binaries): the ones a launcher starts by name.
const BIN_EXAMPLES: &[&str] = &["all_reduce", "ddp_overlap"];

/// Packages whose tests never touch a GPU (the simulator's own): left out,
/// they would only spend device time.
const SKIP_PACKAGES: &[&str] = &["cuda-sim", "xtask"];

/// Runs the task.
pub fn run() -> Result<()> {
    let root = root();
    let bundle = root.join("target/gpu-bundle");
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle).with_context(|| format!("clearing {}", bundle.display()))?;
    }
    std::fs::create_dir_all(bundle.join("tests"))?;
    std::fs::create_dir_all(bundle.join("bin"))?;

    copy_stripped(&build_gpu_bench()?, &bundle.join("bin/gpu-bench"))?;
    std::fs::copy(root.join("gpu-bench-cli/peer/torch_peer.py"), bundle.join("bin/torch_peer.py"))
        .context("copying the PyTorch peer script")?;
    // The several-GPU examples as programs of their own (their test
    // binaries run `main` in-process only): `ddp_overlap --spawn N` re-runs
    // itself once per rank, and `torchrun --no-python` starts it by name.
    for example in BIN_EXAMPLES {
        eprintln!("building the {example} example (release)");
        run_cmd(Command::new(cargo()).current_dir(&root).args([
            "build",
            "--release",
            "--package",
            "gpu-sync-examples",
            "--example",
            example,
        ]))
        .with_context(|| format!("building the {example} example"))?;
        copy_stripped(
            &root.join("target/release/examples").join(example),
            &bundle.join("bin").join(example),
        )?;
    }

    eprintln!("building the test binaries (release)");
    let out = Command::new(cargo())
        .current_dir(&root)
        .args([
            "test",
            "--release",
            "--workspace",
            "--exclude",
            "xtask",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the test binaries failed");
    }
    let mut count = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else { continue };
        let target = msg["target"]["name"].as_str().unwrap_or("test");
        if SKIP.contains(&target) {
            continue;
        }
        let package = package_name(msg["package_id"].as_str().unwrap_or("pkg"));
        if SKIP_PACKAGES.contains(&package.as_str()) {
            continue;
        }
        let name = format!("{package}--{target}");
        copy_stripped(Path::new(exe), &bundle.join("tests").join(&name))?;
        count += 1;
    }
    if count == 0 {
        bail!("cargo reported no test binaries");
    }
    let script = bundle.join("run.sh");
    std::fs::write(&script, RUN_SH)?;
    make_executable(&script)?;
    let size = dir_size(&bundle)?;
    eprintln!(
        "gpu bundle: {count} test binaries + gpu-bench in {} ({:.1} MiB); on the GPU machine run `bash target/gpu-bundle/run.sh` from the repository root",
        bundle.display(),
        size as f64 / (1u64 << 20) as f64
    );
    if size > 60 << 20 {
        // Too large to carry as it is: an xz archive of it (stripped
        // binaries compress about tenfold) travels instead, unpacked on the
        // GPU machine before run.sh.
        let packed = root.join("target/bundle-xz");
        if packed.exists() {
            std::fs::remove_dir_all(&packed).with_context(|| format!("clearing {}", packed.display()))?;
        }
        std::fs::create_dir_all(&packed)?;
        let archive = packed.join("b.tar.xz");
        let status = Command::new("tar")
            .arg("cJf")
            .arg(&archive)
            .arg("-C")
            .arg(root.join("target"))
            .arg("gpu-bundle")
            .status()
            .context("running tar to compress the bundle")?;
        if !status.success() {
            bail!("tar cJf {} failed ({status})", archive.display());
        }
        let packed_size = std::fs::metadata(&archive)?.len();
        eprintln!(
            "the bundle is {:.1} MiB, over the 60 MiB the device tool carries comfortably: packed into {} ({:.1} MiB); \
             carry target/bundle-xz and run `tar xJf target/bundle-xz/b.tar.xz -C target` there first",
            size as f64 / (1u64 << 20) as f64,
            archive.display(),
            packed_size as f64 / (1u64 << 20) as f64
        );
        if packed_size > 50 << 20 {
            bail!(
                "even packed, the bundle is {:.1} MiB: too large to carry",
                packed_size as f64 / (1u64 << 20) as f64
            );
        }
    }
    Ok(())
}

/// The package name in a cargo package id: `path+file:///w/tests#sync-tests@0.1.0`
/// names it after `#`; `path+file:///w/gpu-sync#0.1.0` leaves it to the folder.
fn package_name(id: &str) -> String {
    let (path, rest) = id.rsplit_once('#').unwrap_or((id, ""));
    match rest.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => path.rsplit('/').next().unwrap_or("pkg").to_owned(),
    }
}

fn copy_stripped(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    // Debug info is already off in release; drop the symbol table too when
    // binutils' strip is there (the binaries still run without it).
    let _ = Command::new("strip").arg("--strip-all").arg(to).status();
    Ok(())
}

#[cfg(unix)]
fn make_executable(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(p)?.permissions();
    perm.set_mode(0o755);
    std::fs::set_permissions(p, perm)?;
    Ok(())
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<()> {
    Ok(())
}

fn dir_size(p: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() { dir_size(&e.path())? } else { m.len() };
    }
    Ok(total)
}

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-bundle`. Runs on a GPU machine, from the
# repository root: every test binary against the real driver (ignored GPU
# tests included), the compute-sanitizer passes, then the benchmarks.
#
#   bash target/gpu-bundle/run.sh [tests] [sanitize] [bench]   (default: all three)
#   SAN_BINS="kernels--gpu ..." SAN_TOOLS="memcheck ..." narrow the sanitizer passes.
#
# Results go to $OUT (or target/gpu-bundle/out). Exit status 1 if anything failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
stages=${*:-tests sanitize bench}
export GPU_SYNC_DRIVER=cuda
export RUST_BACKTRACE=1
# gpu-bench-cli's tests run this copy of gpu-bench (the path compiled into
# them is the build machine's).
export GPU_BENCH_BIN="$here/bin/gpu-bench"
# NVRTC (the run-time compilation tests): the machine's own libnvrtc — the
# toolkit's, else the one in Python's nvidia-cuda-nvrtc wheel (the library
# is ~100 MiB, too large to carry in the bundle).
if [ -z "${CUDA_SYS_LIBNVRTC:-}" ]; then
  for c in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.13 \
           $(find /opt /usr/local /usr/lib -name 'libnvrtc.so.13' 2>/dev/null | head -3); do
    if [ -e "$c" ]; then export CUDA_SYS_LIBNVRTC=$c; break; fi
  done
fi
echo "libnvrtc: ${CUDA_SYS_LIBNVRTC:-not found}"
failed=()
step() { echo; echo "=== $*"; }
want() { case " $stages " in *" $1 "*) return 0;; esac; return 1; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null || true

# Each binary gets a time limit, so one hang cannot eat the whole run.
limit=${TEST_TIMEOUT:-240}
if want tests; then
  # The GPU-facing binaries first.
  for t in "$here"/tests/sync-tests--* "$here"/tests/kernels--* "$here"/tests/*; do
    [ -x "$t" ] || continue
    case " ${ran:-} " in *" $t "*) continue;; esac
    ran="${ran:-} $t"
    step "test $(basename "$t")"
    timeout "$limit" "$t" --include-ignored --test-threads=1 || failed+=("test $(basename "$t")")
  done
fi

if want sanitize; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # Tests that fault on purpose skip that part under the sanitizer.
  export GPU_SANITIZER=1
  # Racecheck is slow on the capture race (171 s alone on the H200 of
  # 2026-11-23): a binary, or one test alone, gets this long.
  slimit=${SANITIZE_TIMEOUT:-420}
  # API errors are not reported: gpu-sync checks every call's result itself,
  # and its signature check ends each kernel's parameter list by asking for
  # one parameter past it, which the driver answers with
  # CUDA_ERROR_INVALID_VALUE by design (CUDA 13.0 has no count query).
  # Racecheck (compute-sanitizer 2025.3.1, driver 580.159.04) now and then
  # hangs inside cuStreamSynchronize, or reports "Internal Sanitizer Error:
  # Detected a failure to track a kernel launch", when several host threads
  # launch and synchronize at once after earlier work in the same process.
  # The hang reproduces with plain cuda-sys calls and no gpu-sync
  # (tests/examples/racecheck_threads.rs; docs/results/2026-11-23-h200,
  # session 3). So under racecheck gpu_api's one multi-threaded test runs
  # alone, in a process of its own, after the rest of the binary.
  racecheck_alone=streams_and_buffers_are_shared_across_threads
  # SAN_BINS (names under tests/, space-separated) narrows the list.
  san_bins=${SAN_BINS:-"sync-tests--gpu_api sync-tests--prop_programs sync-tests--ledger kernels--gpu
    sync-tests--host_memory sync-tests--kernel_contract sync-tests--capture_race sync-tests--prefetch
    sync-tests--book"}
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck}; do
    for b in $san_bins; do
      t="$here/tests/$b"
      [ -x "$t" ] || continue
      skip=()
      if [ "$tool" = racecheck ] && [ "$(basename "$t")" = sync-tests--gpu_api ]; then
        skip=(--skip "$racecheck_alone")
        step "compute-sanitizer --tool racecheck $(basename "$t") --exact $racecheck_alone (alone)"
        timeout "$slimit" "$cs" --tool racecheck --report-api-errors no --error-exitcode 99 --print-limit 20 \
          "$t" --include-ignored --exact "$racecheck_alone" || failed+=("racecheck $racecheck_alone alone")
      fi
      step "compute-sanitizer --tool $tool $(basename "$t") ${skip[*]}"
      if ! timeout "$slimit" "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 20 \
        "$t" --include-ignored --test-threads=1 "${skip[@]}"; then
        failed+=("$tool $(basename "$t")")
        # Which test? Each on its own, so one hang or report hides no other.
        for name in $("$t" --list --include-ignored 2>/dev/null | sed -n 's/: test$//p'); do
          if timeout "$slimit" "$cs" --tool "$tool" --report-api-errors no --error-exitcode 99 --print-limit 20 \
               "$t" --include-ignored --exact "$name" >/dev/null 2>&1; then
            echo "    alone: $name ok"
          else
            echo "    alone: $name FAILED (exit $?)"
          fi
        done
      fi
    done
  done
fi

if want bench; then
  # Every gpu-bench subcommand writes report.md, results.json and
  # results.csv under $out/bench/<command>/; then the PyTorch peer figures
  # (same call, same clock) go to $out/bench/peer/. About 2-4 minutes.
  gb="$here/bin/gpu-bench"
  bench="$out/bench"
  mkdir -p "$bench"
  step "gpu-bench info"
  "$gb" info --out "$bench/info" || failed+=("gpu-bench info")
  for cmd in timer sync-costs bandwidth overlap roofline overhead; do
    step "gpu-bench $cmd"
    timeout 600 "$gb" "$cmd" --out "$bench/$cmd" || failed+=("gpu-bench $cmd")
  done
  step "PyTorch peer figures"
  clock=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print((r.get("clock") or {}).get("steady_mhz") or r["device"]["sm_clock_mhz"])' "$bench/timer/results.json" 2>/dev/null || echo 1980)
  timeout 600 python3 "$here/bin/torch_peer.py" --clock-mhz "$clock" --out "$bench/peer" || failed+=("torch peer")
fi

if want overhead; then
  # Issue 8's speed targets, reproduced: the whole interleaved comparison
  # repeated, gated (the default method) and free-running (the method of
  # the first reports), each a report under $out/overhead/. A binary
  # bin/gpu-bench-before, if put in the bundle by hand (the same command
  # built against an older gpu-sync), runs alternately with this one for a
  # before/after on one machine.
  mkdir -p "$out/overhead"
  # Pinned to one core (the same for every run): the host's per-process
  # speed otherwise moves with the core it lands on.
  pin=""
  command -v taskset >/dev/null && pin="taskset -c ${OVERHEAD_CPU:-2}"
  for v in before after; do
    gb="$here/bin/gpu-bench"
    [ "$v" = before ] && gb="$here/bin/gpu-bench-before"
    [ -x "$gb" ] || continue
    step "gpu-bench overhead --repeat 7 (gated), $v"
    timeout 300 $pin "$gb" overhead --repeat 7 --out "$out/overhead/$v-gated" || failed+=("overhead gated $v")
  done
  for v in before after; do
    gb="$here/bin/gpu-bench"
    [ "$v" = before ] && gb="$here/bin/gpu-bench-before"
    [ -x "$gb" ] || continue
    step "gpu-bench overhead --repeat 3 --free-running, $v"
    timeout 300 $pin "$gb" overhead --repeat 3 --free-running --out "$out/overhead/$v-free-running" \
      || failed+=("overhead free-running $v")
  done
fi

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "=== ALL PASSED ($stages)"
else
  echo "=== FAILED: ${failed[*]}"
  exit 1
fi
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn package_names_come_from_either_form_of_the_id() {
        assert_eq!(super::package_name("path+file:///w/tests#sync-tests@0.1.0"), "sync-tests");
        assert_eq!(super::package_name("path+file:///w/gpu-sync#0.1.0"), "gpu-sync");
    }
}

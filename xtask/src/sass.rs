//! The SASS check of `cargo xtask kernels`: each fatbin's Hopper code
//! (sm_90 / sm_90a) is disassembled with `cuobjdump` + `nvdisasm` from pinned
//! PyPI wheels, the instructions each kernel was meant to use are counted
//! (16-byte loads, FFMA/DFMA/HFMA2, LDS.128, HGMMA/QGMMA, HMMA) and recorded as
//! `sass` lines in the MANIFEST; the build fails when a kernel lacks the one
//! it exists for.
//!
//! The 13.0 line of the disassembler wheels is not published on PyPI (the
//! oldest is 13.2.51); a newer disassembler reads older fatbins, so that
//! version is pinned here and named in every `sass` line's header comment.

use crate::util::{root, run};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned version of `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm`.
pub const SASS_TOOLS_VERSION: &str = "13.2.51";

/// Instruction prefixes counted in every kernel.
const WATCHED: &[&str] = &[
    "LDG.E.128",
    "STG.E.128",
    "LDS.128",
    "FFMA",
    "DFMA",
    "HFMA2",
    "HFMA2.MMA",
    "HGMMA",
    "QGMMA",
    "HMMA",
    "F2FP",
    "UBLKCP",
    "LDG.E ",
    "STG.E ",
];

/// What each kernel must contain: (kernel, opcode prefix, text the opcode
/// must not contain).
const REQUIRED: &[(&str, &str, &str)] = &[
    ("read_sum_u32x4", "LDG.E.128", ""),
    ("copy_u32x4", "LDG.E.128", ""),
    ("triad_f32", "LDG.E.128", ""),
    ("scale_f32", "LDG.E.128", ""),
    ("add_f32", "LDG.E.128", ""),
    ("mix_u32", "LDG.E.128", ""),
    ("bump_u32", "LDG.E.128", ""),
    ("hbm_read", "LDG.E.128", ""),
    ("hbm_copy", "LDG.E.128", ""),
    ("hbm_triad", "LDG.E.128", ""),
    ("cache_read", "LDG.E.128", ""),
    ("read_tune_u4", "LDG.E.128", ""),
    ("read_tune_u8", "LDG.E.128", ""),
    ("read_tune_u16", "LDG.E.128", ""),
    // The bulk copy engine: cp.async.bulk global -> shared is UBLKCP.S.G.
    ("read_bulk", "UBLKCP", ""),
    // copy_bulk: global -> shared (UBLKCP.S.G) and back (UBLKCP.G.S).
    ("copy_bulk", "UBLKCP.S.G", ""),
    ("copy_bulk", "UBLKCP.G.S", ""),
    ("intensity_f32", "LDG.E.128", ""),
    ("fma_f64", "DFMA", ""),
    ("fma_f32", "FFMA", ""),
    ("fma_f16x2", "HFMA2", "BF16"),
    // The 16-bit FMA probes reach the 2x-FP32 rate only with HFMA2 split
    // between the FMA pipe and the MMA pipe's FP16 path (`HFMA2.MMA`):
    // ptxas does it for register operands, never for immediates.
    ("fma_f16x2", "HFMA2.MMA", "BF16"),
    ("fma_bf16x2", "HFMA2.BF16", ""),
    ("fma_bf16x2", "HFMA2.MMA.BF16", ""),
    ("smem_read", "LDS.128", ""),
    ("tc_bf16_probe", "HGMMA.64x256x16.F32.BF16", ""),
    ("tc_f16_probe", "HGMMA.64x256x16.F32", "BF16"),
    ("tc_e4m3_probe", "QGMMA.64x256x32.F32.E4M3", ""),
    // The `mma.sync` fallback (mma.cu, sm_90 SASS). Hopper has no FP8
    // `mma.sync`: ptxas converts the e4m3 operands to FP16 (`F2FP`) and
    // issues FP16 HMMA, which is what the FP8 probe then measures there.
    ("mma_bf16_probe", "HMMA.16816.F32.BF16", ""),
    ("mma_f16_probe", "HMMA.16816.F32", "BF16"),
    ("mma_e4m3_probe", "HMMA.16816.F32", "BF16"),
    ("intensity_f64", "DFMA", ""),
    ("intensity_f64", "LDG.E.128", ""),
    // As fma_f16x2: register m and k, so HFMA2 on both pipes.
    ("intensity_f16x2", "HFMA2.MMA", "BF16"),
    ("intensity_f16x2", "LDG.E.128", ""),
];

fn prefix() -> PathBuf {
    root().join("target").join("cuda-sass-tools")
}

/// `cuobjdump` from the pinned wheels (installed on first use).
fn cuobjdump() -> Result<PathBuf> {
    let bin = prefix().join("nvidia").join("cu13").join("bin");
    let (objdump, disasm) = (bin.join("cuobjdump"), bin.join("nvdisasm"));
    if !(objdump.is_file() && disasm.is_file()) {
        eprintln!(
            "installing pinned cuobjdump/nvdisasm {SASS_TOOLS_VERSION} wheels into {}",
            prefix().display()
        );
        run(Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
            .arg(prefix())
            .arg(format!("nvidia-cuda-cuobjdump=={SASS_TOOLS_VERSION}"))
            .arg(format!("nvidia-cuda-nvdisasm=={SASS_TOOLS_VERSION}")))
        .context("pip could not install the cuobjdump/nvdisasm wheels (needs python3 with pip and PyPI)")?;
    }
    Ok(objdump)
}

/// Per (arch, kernel): opcode counts, from `cuobjdump -sass` text.
fn parse(text: &str) -> BTreeMap<(String, String), BTreeMap<String, usize>> {
    let mut out: BTreeMap<(String, String), BTreeMap<String, usize>> = BTreeMap::new();
    let mut arch = String::new();
    let mut func: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(a) = t.strip_prefix("arch = ") {
            arch = a.trim().to_owned();
            func = None;
        } else if let Some(f) = t.strip_prefix("Function : ") {
            func = Some(f.trim().to_owned());
            out.entry((arch.clone(), f.trim().to_owned())).or_default();
        } else if let (Some(f), Some(rest)) = (&func, t.strip_prefix("/*").and_then(|r| r.split_once("*/"))) {
            let mut words = rest.1.split_whitespace();
            let mut op = words.next().unwrap_or("");
            if op.starts_with('@') {
                op = words.next().unwrap_or("");
            }
            let op = op.trim_end_matches(';');
            if !op.is_empty() && op.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                *out.entry((arch.clone(), f.clone())).or_default().entry(op.to_owned()).or_default() += 1;
            }
        }
    }
    out
}

/// The MANIFEST's `sass` lines for one fatbin, or an error naming a kernel
/// without the instruction it exists for.
fn lines_for(
    parsed: &BTreeMap<(String, String), BTreeMap<String, usize>>,
    stem: &str,
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for ((arch, func), ops) in parsed {
        if !arch.starts_with("sm_90") {
            continue;
        }
        // `LDG.E.128` and `STG.E.128` stand for every 16-byte global access
        // (`LDG.E.NA.LTC256B.128.CONSTANT` too).
        let matches = |op: &str, prefix: &str| match prefix {
            "LDG.E.128" | "STG.E.128" => op.starts_with(&prefix[..3]) && op.contains(".128"),
            p => op.starts_with(p.trim_end()),
        };
        let count = |prefix: &str, exclude: &str| -> usize {
            ops.iter()
                .filter(|(op, _)| matches(op, prefix) && (exclude.is_empty() || !op.contains(exclude)))
                .filter(|(op, _)| !prefix.ends_with(' ') || op.as_str() == prefix.trim_end())
                .map(|(_, n)| n)
                .sum()
        };
        let seen: Vec<String> = WATCHED
            .iter()
            .map(|w| (w.trim_end(), count(w, "")))
            .filter(|(_, n)| *n > 0)
            .map(|(w, n)| format!("{w} x{n}"))
            .collect();
        let mut verdict = String::new();
        for (k, prefix, exclude) in REQUIRED.iter().filter(|(k, ..)| k == func) {
            let n = count(prefix, exclude);
            if n == 0 {
                bail!("cu/{stem}.cu: kernel {func} has no {prefix} in its {arch} SASS (cuobjdump -sass)");
            }
            verdict = if verdict.is_empty() {
                format!(" — required {prefix} present ({k})")
            } else {
                format!("{verdict}, {prefix} present")
            };
        }
        lines.push(format!("{arch} {func}: {}{verdict}", seen.join(", ")));
    }
    Ok(lines)
}

/// Disassembles `fatbin` and returns its `sass` lines.
///
/// # Errors
/// The tools cannot be installed or run, or a kernel lacks its required
/// instruction.
pub fn check(fatbin: &Path, stem: &str) -> Result<Vec<String>> {
    let objdump = cuobjdump()?;
    let bin = objdump.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&objdump)
        .env("PATH", path)
        .arg("-sass")
        .arg(fatbin)
        .output()
        .with_context(|| format!("could not run {}", objdump.display()))?;
    if !out.status.success() {
        bail!("cuobjdump -sass {} failed: {}", fatbin.display(), String::from_utf8_lossy(&out.stderr));
    }
    let mut lines = lines_for(&parse(&String::from_utf8_lossy(&out.stdout)), stem)?;
    if let Some(first) = lines.first_mut() {
        *first = format!("{first} [cuobjdump {SASS_TOOLS_VERSION}]");
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "
Fatbin elf code:
================
arch = sm_90
code version = [1,8]

        Function : fma_bf16x2
        /*0100*/                   HFMA2.BF16_V2 R4, R4, R5, R6 ;
        /*0110*/              @P0  HFMA2.BF16_V2 R4, R4, R5, R6 ;
        /*0120*/                   HFMA2.MMA.BF16_V2 R7, R7, R5, R6 ;
        Function : fma_f16x2
        /*0100*/                   HFMA2.BF16_V2 R4, R4, R5, R6 ;
        Function : hbm_read
        /*0100*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0110*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0120*/                   LDG.E.NA.LTC256B.128.CONSTANT R4, desc[UR4][R2.64] ;
";

    #[test]
    fn counts_and_requirements() {
        let p = parse(SAMPLE);
        let ops = &p[&("sm_90".to_owned(), "fma_bf16x2".to_owned())];
        assert_eq!(ops["HFMA2.BF16_V2"], 2);
        // fma_f16x2 with only BF16 HFMA2s fails its requirement.
        let err = lines_for(&p, "roofline").unwrap_err().to_string();
        assert!(err.contains("fma_f16x2") && err.contains("HFMA2"), "{err}");
        let mut ok = p.clone();
        ok.remove(&("sm_90".to_owned(), "fma_f16x2".to_owned()));
        let lines = lines_for(&ok, "roofline").unwrap();
        assert!(lines.iter().any(|l| l.starts_with("sm_90 hbm_read: LDG.E.128 x2, LDG.E x1")), "{lines:?}");
    }
}

//! `nccl_bindings.rs`: NCCL's types and one `PFN_` typedef per function the
//! `cuda_sys::nccl::Nccl` table binds, from `nccl.h` of the pinned
//! `nvidia-nccl-cu13` wheel, plus `NCCL_CONFIG_INITIALIZER` as a Rust
//! constant (the header's macro, translated field by field, so a changed
//! initializer changes the generated file rather than a hand-kept copy).

use anyhow::{Result, bail};

/// The pinned NCCL wheel: the 2.28 line the GPU machine's image carries.
pub const NCCL_WHEEL: &str = "nvidia-nccl-cu13==2.28.9";

/// The NCCL functions the table in `cuda-sys/src/nccl/load.rs` binds; each
/// gets a `PFN_<name>` typedef taken from its declaration with `__typeof__`,
/// so no signature is written by hand.
pub const NCCL_FUNCTIONS: &[&str] = &[
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRankConfig",
    "ncclCommInitAll",
    "ncclCommSplit",
    "ncclCommFinalize",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclCommCount",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclGetErrorString",
    "ncclGetLastError",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
];

/// The Rust text of `NCCL_CONFIG_UNDEF_INT` and `NCCL_CONFIG_INITIALIZER`,
/// translated from `nccl.h`'s macros: each line of the initializer is
/// `value, /* field */`; a value this translation does not know is an
/// error rather than a guess.
pub fn config_initializer(nccl_h: &str) -> Result<String> {
    if !nccl_h.lines().any(|l| l.split_whitespace().eq(["#define", "NCCL_CONFIG_UNDEF_INT", "INT_MIN"])) {
        bail!("nccl.h no longer defines NCCL_CONFIG_UNDEF_INT as INT_MIN; update xtask/src/bindgen/nccl.rs");
    }
    let mut lines = nccl_h.lines().skip_while(|l| !l.starts_with("#define NCCL_CONFIG_INITIALIZER {"));
    if lines.next().is_none() {
        bail!("nccl.h has no `#define NCCL_CONFIG_INITIALIZER {{`");
    }
    let mut fields = Vec::new();
    let mut closed = false;
    for line in lines {
        let line = line.trim().trim_end_matches('\\').trim();
        if line == "}" {
            closed = true;
            break;
        }
        let Some((value, comment)) = line.split_once("/*") else {
            bail!("NCCL_CONFIG_INITIALIZER line without a /* field */ comment: {line:?}");
        };
        let field = comment.trim().trim_end_matches("*/").trim();
        let value = value.trim().trim_end_matches(',').trim();
        let rust = match value {
            "sizeof(ncclConfig_t)" => "core::mem::size_of::<ncclConfig_t>()".to_owned(),
            "NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)" => "NCCL_VERSION_CODE".to_owned(),
            "NCCL_CONFIG_UNDEF_INT" => "NCCL_CONFIG_UNDEF_INT".to_owned(),
            "NCCL_CONFIG_UNDEF_PTR" => "core::ptr::null()".to_owned(),
            v if v.starts_with("0x") && u32::from_str_radix(&v[2..], 16).is_ok() => v.to_owned(),
            v => bail!("NCCL_CONFIG_INITIALIZER: no translation for `{v}` (field {field})"),
        };
        if field.is_empty() || !field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            bail!("NCCL_CONFIG_INITIALIZER: `{field}` is not a field name");
        }
        fields.push((field.to_owned(), rust));
    }
    if !closed || fields.is_empty() {
        bail!("NCCL_CONFIG_INITIALIZER in nccl.h has no closing `}}` or no fields");
    }
    let mut out = String::from(
        "/// `NCCL_CONFIG_UNDEF_INT` (`INT_MIN`): a configuration field NCCL fills\n\
         /// with its default.\n\
         pub const NCCL_CONFIG_UNDEF_INT: ::core::ffi::c_int = ::core::ffi::c_int::MIN;\n\
         /// `NCCL_CONFIG_INITIALIZER`: the configuration every `ncclConfig_t`\n\
         /// starts from (size, magic and version set; every other field undefined).\n\
         pub const NCCL_CONFIG_INITIALIZER: ncclConfig_t = ncclConfig_t {\n",
    );
    for (field, value) in &fields {
        out.push_str(&format!("    {field}: {value},\n"));
    }
    out.push_str("};\n");
    Ok(out)
}

#[cfg(feature = "codegen")]
/// Writes `nccl_bindings.rs` into `out`.
pub fn generate_nccl(out: &std::path::Path) -> Result<()> {
    use crate::util::{root, sha256_hex};
    use anyhow::Context;
    use std::fmt::Write as _;

    let cuda_home = crate::wheels::ensure(&["nvidia-cuda-runtime", "nvidia-cuda-crt", NCCL_WHEEL])?;
    let include = crate::wheels::prefix().join("nvidia").join("nccl").join("include");
    let nccl_h = std::fs::read_to_string(include.join("nccl.h"))
        .with_context(|| format!("reading nccl.h (wheel {NCCL_WHEEL})"))?;
    // nccl.h includes cuda_fp16.h and cuda_bf16.h, which need CCCL's
    // `nv/target` (another wheel); no declaration of NCCL's C API uses
    // their types, so their include guards are set and they read as empty.
    let mut wrapper = String::from("#define __CUDA_FP16_H__\n#define __CUDA_BF16_H__\n#include <nccl.h>\n");
    for f in NCCL_FUNCTIONS {
        writeln!(wrapper, "typedef __typeof__({f}) *PFN_{f};")?;
    }
    let mut builder = super::generate::common(
        bindgen::Builder::default()
            .header_contents("nccl_table.h", &wrapper)
            .clang_arg(format!("-I{}", include.display()))
            .clang_arg(format!("-I{}", cuda_home.join("include").display())),
    )
    .use_core()
    // `cudaStream_t` is `struct CUstream_st *`, the driver's `CUstream`:
    // one type, so a stream of the driver table passes to NCCL as is.
    .blocklist_type("CUstream_st")
    .raw_line("use crate::bindings::CUstream_st;")
    .allowlist_var("NCCL_MAJOR")
    .allowlist_var("NCCL_MINOR")
    .allowlist_var("NCCL_PATCH")
    .allowlist_var("NCCL_VERSION_CODE")
    .allowlist_var("NCCL_UNIQUE_ID_BYTES")
    .allowlist_var("NCCL_SPLIT_NOCOLOR")
    .allowlist_type("ncclComm_t")
    .allowlist_type("ncclUniqueId")
    .allowlist_type("ncclConfig_t")
    .allowlist_type("ncclResult_t")
    .allowlist_type("ncclDataType_t")
    .allowlist_type("ncclRedOp_t");
    for f in NCCL_FUNCTIONS {
        builder = builder.allowlist_type(format!("PFN_{f}"));
    }
    let bindings =
        builder.generate().map_err(|e| anyhow::anyhow!("bindgen failed on nccl.h: {e}"))?.to_string();
    let banner = format!(
        "// Generated by `cargo xtask bindgen` from nccl.h of the PyPI wheel\n\
         // {NCCL_WHEEL} (sha256 {}). Do not edit.\n",
        sha256_hex(nccl_h.as_bytes())
    );
    let file = out.join("nccl_bindings.rs");
    std::fs::write(&file, format!("{banner}\n{bindings}\n{}", config_initializer(&nccl_h)?))?;
    // Formatted with the workspace's settings, as cupti_bindings.rs is.
    crate::util::run(
        std::process::Command::new("rustfmt")
            .args(["--edition", "2024", "--config-path"])
            .arg(root().join("rustfmt.toml"))
            .arg(&file),
    )
    .context("rustfmt on nccl_bindings.rs")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::config_initializer;

    const HEADER: &str = "\
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_INITIALIZER {                                       \\
  sizeof(ncclConfig_t), /* size */                                      \\
  0xcafebeef,           /* magic */                                     \\
  NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */       \\
  NCCL_CONFIG_UNDEF_INT,                    /* blocking */              \\
  NCCL_CONFIG_UNDEF_PTR,                    /* netName */               \\
}
";

    #[test]
    fn the_initializer_macro_becomes_a_struct_literal_field_by_field() {
        let text = config_initializer(HEADER).expect("translates");
        assert!(text.contains("pub const NCCL_CONFIG_INITIALIZER: ncclConfig_t = ncclConfig_t {"), "{text}");
        for line in [
            "    size: core::mem::size_of::<ncclConfig_t>(),",
            "    magic: 0xcafebeef,",
            "    version: NCCL_VERSION_CODE,",
            "    blocking: NCCL_CONFIG_UNDEF_INT,",
            "    netName: core::ptr::null(),",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn the_committed_bindings_are_of_the_pinned_wheel_and_type_every_function() {
        let path = crate::util::root().join(crate::bindgen::GENERATED_DIR).join("nccl_bindings.rs");
        let text = std::fs::read_to_string(&path).expect("nccl_bindings.rs is committed");
        assert!(text.lines().nth(1).is_some_and(|l| l.contains(super::NCCL_WHEEL)), "banner of {path:?}");
        for f in super::NCCL_FUNCTIONS {
            assert!(text.contains(&format!("pub type PFN_{f} =")), "no PFN_{f} in {path:?}");
        }
    }

    #[test]
    fn an_unknown_initializer_value_is_an_error_naming_it() {
        let changed = HEADER.replace("NCCL_CONFIG_UNDEF_PTR, ", "NCCL_SOMETHING_NEW,");
        let err = config_initializer(&changed).expect_err("unknown value").to_string();
        assert!(err.contains("NCCL_SOMETHING_NEW") && err.contains("netName"), "{err}");
        let redefined = HEADER.replace("INT_MIN", "(-1)");
        assert!(config_initializer(&redefined).is_err());
    }
}

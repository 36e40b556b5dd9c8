//! The spec table (`kernels::KernelId::info`) against the `extern "C"`
//! signatures in `kernels/cu/*.cu`: same kernels per module, same parameter
//! names, order, types and constness. Catches drift between the CUDA sources
//! and the Rust side.

use kernels::{KernelId, ModuleId, ParamAccess, ParamKind, Ty};
use std::collections::BTreeSet;
use std::path::Path;

/// One parsed parameter: C type without qualifiers, pointer?, const pointee?, name.
#[derive(Debug)]
struct CParam {
    ty: String,
    pointer: bool,
    const_pointee: bool,
    name: String,
}

/// Removes `//` and `/* */` comments.
fn strip_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Removes `__launch_bounds__(…)` annotations (they sit between `void` and
/// the kernel's name).
fn strip_launch_bounds(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(at) = rest.find("__launch_bounds__(") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        rest = after.find(')').map_or("", |i| &after[i + 1..]);
    }
    out.push_str(rest);
    out
}

/// Every `extern "C" __global__ void name(params)` in a source.
fn kernels_in(src: &str) -> Vec<(String, Vec<CParam>)> {
    let src = strip_launch_bounds(&strip_comments(src));
    let mut out = Vec::new();
    for (at, _) in src.match_indices("extern \"C\"") {
        let rest = &src[at + "extern \"C\"".len()..];
        let open = rest.find('(').unwrap();
        let head: Vec<&str> = rest[..open].split_whitespace().collect();
        assert!(head.contains(&"__global__"), "not a kernel: {head:?}");
        assert!(head.contains(&"void"), "kernels return void: {head:?}");
        let name = head.last().unwrap().to_string();
        let close = rest[open..].find(')').unwrap() + open;
        // `()` holds no parameter (not one empty one).
        let params = rest[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let p = p.replace('*', " * ");
                let toks: Vec<&str> = p.split_whitespace().filter(|t| *t != "__restrict__").collect();
                let (name, ty_toks) = toks.split_last().unwrap();
                let pointer = ty_toks.contains(&"*");
                let star = ty_toks.iter().position(|t| *t == "*").unwrap_or(ty_toks.len());
                let const_pointee = ty_toks[..star].contains(&"const");
                let ty =
                    ty_toks[..star].iter().filter(|t| **t != "const").copied().collect::<Vec<_>>().join(" ");
                CParam { ty, pointer, const_pointee, name: name.to_string() }
            })
            .collect();
        out.push((name, params));
    }
    out
}

#[test]
fn spec_matches_cuda_signatures() {
    let cu = Path::new(env!("CARGO_MANIFEST_DIR")).join("cu");
    let mut on_disk = BTreeSet::new();
    for item in std::fs::read_dir(&cu).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_some_and(|e| e == "cu") {
            on_disk.insert(path.file_stem().unwrap().to_str().unwrap().to_owned());
        }
    }
    let modules: BTreeSet<_> = ModuleId::ALL.iter().map(|m| m.name().to_owned()).collect();
    assert_eq!(on_disk, modules, "kernels/cu/*.cu and ModuleId::ALL differ");

    let mut checked = 0;
    for module in ModuleId::ALL {
        let src = std::fs::read_to_string(cu.join(format!("{}.cu", module.name()))).unwrap();
        let found = kernels_in(&src);
        let in_src: BTreeSet<_> = found.iter().map(|(n, _)| n.as_str()).collect();
        let in_spec: BTreeSet<_> = module.kernels().map(|k| k.name).collect();
        assert_eq!(in_src, in_spec, "kernels of {}.cu", module.name());
        for (name, cparams) in &found {
            let info = KernelId::from_name(name).unwrap().info();
            assert_eq!(info.module, module);
            assert_eq!(cparams.len(), info.params.len(), "{name}: parameter count");
            for (c, p) in cparams.iter().zip(info.params) {
                let at = format!("{name}({})", c.name);
                assert_eq!(c.name, p.name, "{name}: parameter names/order");
                match p.kind {
                    ParamKind::Scalar(ty) => {
                        assert!(!c.pointer, "{at}: C has a pointer, spec a scalar");
                        assert_eq!(c.ty, ty.c_name(), "{at}: scalar type");
                        assert_eq!(p.size(), ty.size());
                    }
                    ParamKind::Pointer { elem, access, align, .. } => {
                        assert!(c.pointer, "{at}: C has a scalar, spec a pointer");
                        assert_eq!(p.size(), 8);
                        assert_eq!(c.ty, elem.c_name(), "{at}: element type");
                        assert_eq!(c.const_pointee, access == ParamAccess::Read, "{at}: const <=> read-only");
                        assert!(align >= elem.align());
                        if c.ty == Ty::U32x4.c_name() {
                            assert_eq!(align, 16);
                        }
                    }
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, KernelId::ALL.len());
}

#[test]
fn parser_sees_qualifiers() {
    let k = kernels_in(
        "// extern \"C\" __global__ void commented(int x)\n\
         extern \"C\" __global__ void f(const uint4* __restrict__ in, unsigned long long n,\n\
         /* c */ float *out) {}",
    );
    assert_eq!(k.len(), 1);
    let (name, p) = &k[0];
    assert_eq!(name, "f");
    assert_eq!(
        (p[0].ty.as_str(), p[0].pointer, p[0].const_pointee, p[0].name.as_str()),
        ("uint4", true, true, "in")
    );
    assert_eq!((p[1].ty.as_str(), p[1].pointer), ("unsigned long long", false));
    assert_eq!(
        (p[2].ty.as_str(), p[2].pointer, p[2].const_pointee, p[2].name.as_str()),
        ("float", true, false, "out")
    );
}

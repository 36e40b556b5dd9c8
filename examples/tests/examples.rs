//! The README's quick start is the `hello_gpu` example, character for
//! character (it runs as the README's doctest), and every other example runs
//! its own `main` in a `#[test]`.

/// Examples whose `main` is run by a `#[test]` in the example itself
/// (`[[example]] test = true` in Cargo.toml).
const SELF_TESTED: &[&str] = &[
    "vector_add_own_kernel",
    "pinned_overlap",
    "wait_scopes",
    "foreign_call",
    "nvrtc_kernel",
    "two_gpus",
    "all_reduce",
    "ddp_overlap",
];

/// The first ```rust block after the README's "Quick start" heading.
fn readme_quick_start(readme: &str) -> Option<&str> {
    let section = &readme[readme.find("## Quick start")?..];
    let start = section.find("```rust\n")? + "```rust\n".len();
    let len = section[start..].find("\n```")? + 1;
    Some(&section[start..start + len])
}

#[test]
fn the_readme_quick_start_is_the_hello_gpu_example() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/hello_gpu.rs");
    let block = readme_quick_start(readme).expect("README.md has a ```rust block under ## Quick start");
    assert!(
        block == example,
        "README.md's quick start differs from examples/examples/hello_gpu.rs; copy one to the other"
    );
}

#[test]
fn every_example_is_tested_here() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    if !std::path::Path::new(dir).exists() {
        eprintln!("skipped: the source tree ({dir}) is not on this machine");
        return;
    }
    let manifest = include_str!("../Cargo.toml");
    for entry in std::fs::read_dir(dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().and_then(|s| s.to_str()).expect("name").to_owned();
            let source = std::fs::read_to_string(&path).expect("example source");
            let tested = if name == "hello_gpu" {
                true // the README's doctest
            } else {
                SELF_TESTED.contains(&name.as_str()) && source.contains("#[test]")
            };
            assert!(tested, "examples/{name}.rs has no test running its main");
            let entry = format!("[[example]]\nname = \"{name}\"\ntest = true");
            assert!(manifest.contains(&entry), "examples/{name}.rs lacks `test = true` in Cargo.toml");
        }
    }
}

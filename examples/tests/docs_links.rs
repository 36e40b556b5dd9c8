//! Every relative link in README.md and docs/**/*.md names a file or folder
//! that exists in the repository (links to web pages and anchors are not
//! checked).

use std::path::{Path, PathBuf};

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable docs folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The targets of `[text](target)` links in `text`.
fn link_targets(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}

/// Paths to markdown files named in plain or `code` text: words with a `/`
/// that end in `.md` (generated reports under `target/` excepted).
fn named_md_paths(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || "`()[]<>\"',;".contains(c))
        .map(|w| w.trim_end_matches(['.', ':']))
        .filter(|w| w.ends_with(".md") && w.contains('/') && !w.contains("://") && !w.starts_with("target/"))
        .collect()
}

#[test]
fn named_markdown_paths_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    if !root.join("README.md").exists() {
        eprintln!("skipped: the source tree ({}) is not on this machine", root.display());
        return;
    }
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("markdown file");
        let base = file.parent().expect("file in a folder");
        for path in named_md_paths(&text) {
            if !base.join(path).exists() && !root.join(path).exists() {
                missing.push(format!("{}: {path}", file.strip_prefix(root).unwrap_or(file).display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "markdown files named but not in the repository:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn relative_links_name_existing_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    if !root.join("README.md").exists() {
        eprintln!("skipped: the source tree ({}) is not on this machine", root.display());
        return;
    }
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("markdown file");
        for target in link_targets(&text) {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            let base = file.parent().expect("file in a folder");
            if !base.join(path).exists() {
                broken.push(format!("{}: {target}", file.strip_prefix(root).unwrap_or(file).display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to files that do not exist:\n  {}", broken.join("\n  "));
}

#[test]
fn the_finders_find_links_and_paths() {
    assert_eq!(link_targets("see [a](x.md) and [b](../y/#z)."), ["x.md", "../y/#z"]);
    assert_eq!(
        named_md_paths("the brief (`shared/DESIGN.md`). ../shared/GPU.md lists target/r/report.md a.md"),
        ["shared/DESIGN.md", "../shared/GPU.md"]
    );
}

//! Every relative link in README.md and docs/**/*.md names a file or folder
//! that exists in the repository (links to web pages and anchors are not
//! checked). A raw result packed into a day's archive is cited as
//! `docs/results/archive/DAY.tar.xz#PATH`: the archive must exist and hold
//! PATH (read with `tar -tJf`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The member names of each `.tar.xz` archive read so far (`tar -tJf`).
#[derive(Default)]
struct Archives(HashMap<PathBuf, Vec<String>>);

impl Archives {
    /// Whether `reference` (`ARCHIVE.tar.xz#PATH`, relative to `base` or to
    /// `root`) names an archive that holds the file or folder PATH. `None`
    /// when `reference` is no archive citation.
    fn holds(&mut self, root: &Path, base: &Path, reference: &str) -> Option<bool> {
        let (archive, member) = reference.split_once(".tar.xz#")?;
        let archive = format!("{archive}.tar.xz");
        let Some(file) = [base.join(&archive), root.join(&archive)].into_iter().find(|p| p.is_file()) else {
            return Some(false);
        };
        let names = self.0.entry(file.clone()).or_insert_with(|| {
            let out = Command::new("tar").arg("-tJf").arg(&file).output().expect("tar runs");
            assert!(
                out.status.success(),
                "tar -tJf {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
        });
        let folder = format!("{}/", member.trim_end_matches('/'));
        Some(names.iter().any(|n| n == member || n.starts_with(&folder)))
    }
}

/// Archive citations (`ARCHIVE.tar.xz#PATH`) named anywhere in `text`,
/// inside a link or not.
fn archive_citations(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || "`()[]<>\"',;".contains(c))
        .map(|w| w.trim_end_matches(['.', ':']))
        .filter(|w| w.contains(".tar.xz#"))
        .collect()
}

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
        .filter(|w| {
            w.ends_with(".md")
                && w.contains('/')
                && !w.contains("://")
                && !w.contains(".tar.xz#")
                && !w.starts_with("target/")
        })
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
fn archive_citations_name_members_of_committed_archives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root");
    if !root.join("README.md").exists() {
        eprintln!("skipped: the source tree ({}) is not on this machine", root.display());
        return;
    }
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    let mut archives = Archives::default();
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("markdown file");
        let base = file.parent().expect("file in a folder");
        for reference in archive_citations(&text) {
            if archives.holds(root, base, reference) != Some(true) {
                missing.push(format!("{}: {reference}", file.strip_prefix(root).unwrap_or(file).display()));
            }
        }
    }
    assert!(missing.is_empty(), "archive citations of files not in the archive:\n  {}", missing.join("\n  "));
}

#[test]
fn the_finders_find_links_and_paths() {
    assert_eq!(link_targets("see [a](x.md) and [b](../y/#z)."), ["x.md", "../y/#z"]);
    assert_eq!(
        named_md_paths("the brief (`shared/DESIGN.md`). ../shared/GPU.md lists target/r/report.md a.md"),
        ["shared/DESIGN.md", "../shared/GPU.md"]
    );
    let text = "[r](../archive/2026-11-25.tar.xz#2026-11-25-h100-b/roofline/report.md) and `archive/d.tar.xz#a/b.log`.";
    assert_eq!(
        archive_citations(text),
        ["../archive/2026-11-25.tar.xz#2026-11-25-h100-b/roofline/report.md", "archive/d.tar.xz#a/b.log"]
    );
    assert!(named_md_paths(text).is_empty(), "an archive member is checked in its archive, not in the tree");
}

#[test]
fn an_archive_citation_must_name_a_member() {
    let dir = std::env::temp_dir().join(format!("docs-links-archive-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("day/run")).expect("temp folder");
    std::fs::write(dir.join("day/run/report.md"), "figures").expect("member");
    let status = Command::new("tar")
        .args(["cJf", "day.tar.xz", "day/run/report.md"])
        .current_dir(&dir)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let mut archives = Archives::default();
    assert_eq!(archives.holds(&dir, &dir, "day.tar.xz#day/run/report.md"), Some(true));
    assert_eq!(archives.holds(&dir, &dir, "day.tar.xz#day/run"), Some(true), "a folder of the archive");
    assert_eq!(archives.holds(&dir, &dir, "day.tar.xz#day/run/other.md"), Some(false));
    assert_eq!(archives.holds(&dir, &dir, "day.tar.xz#day/ru"), Some(false), "a prefix is not a folder");
    assert_eq!(archives.holds(&dir, &dir, "gone.tar.xz#day/run/report.md"), Some(false));
    assert_eq!(archives.holds(&dir, &dir, "day/run/report.md"), None);
    let _ = std::fs::remove_dir_all(&dir);
}

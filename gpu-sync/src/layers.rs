//! The module layers of gpu-sync, checked: every `crate::` path in the
//! source (re-exported names resolved through `lib.rs`) is an import of one
//! top-level module by another, and an import may point only down the
//! layers (or within one layer, without a cycle). A folder is one module:
//! its files may use each other freely.
//!
//! The imports that still point up are listed in [`UPWARD`], each a data
//! knot left to untie; the test fails when a new one appears and when a
//! listed one is gone (so the list only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// gpu-sync's `src/`, where these tests read the sources: the crate folder
/// cargo names at run time (`CARGO_MANIFEST_DIR`), else the one it was built
/// from. `None`, saying so, when the sources are not there (a test binary
/// copied to another machine, as the GPU bundle's): the tests then skip.
/// Where the sources are, every test runs and fails on what it finds.
fn source_dir() -> Option<PathBuf> {
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let src = root.join("src");
    if src.join("lib.rs").is_file() {
        Some(src)
    } else {
        eprintln!("skipped: sources not found at {}", src.display());
        None
    }
}

/// The layers, bottom-up: a module may import those of its own layer and
/// below.
const LAYERS: &[&[&str]] = &[
    // The driver door (the one path to cuda-sys's per-call layer) and the
    // choice of driver it honours at first use, errors, and the proofs host
    // waits return.
    &["error", "ffi", "backend", "safety", "scope"],
    // Recording: host ranges, the records of operations, their events and
    // calibration, the recorders alive (the engine's funnel and the ledger
    // hand it what they submit and count).
    &["trace"],
    // Devices and their primary contexts.
    &["device"],
    // The engine (private inside; its facade is all the layers above see,
    // which the compiler enforces): tickets, books, markers, captures,
    // deferred work, the one submission function.
    &["engine"],
    // Streams.
    &["stream"],
    // Events (and waiting on them: `Stream::wait`).
    &["event"],
    // Buffers, pinned memory, copies, the ledger, the prefetcher.
    &["memory"],
    // Kernels, modules, images, NVRTC; graphs.
    &["launch", "graph"],
    // NCCL: communicators, and collectives as tracked operations over
    // several streams.
    &["nccl"],
    // The simulator's API (installing it, sessions, CPU kernels).
    &["sim"],
];

/// Imports that point up the layers today: (from, to, the knot). Each is to
/// be removed by moving what it names down, never by adding to this list.
const UPWARD: &[(&str, &str, &str)] = &[];

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&unit))
}

/// The top-level module a source file belongs to.
fn unit_of(rel: &Path) -> String {
    let first =
        rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

fn sources(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read gpu-sync/src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tests.rs") {
            // A `tests.rs` holds a module's tests, which exercise it through
            // the API above it (streams, buffers, the simulator).
            let rel = path.strip_prefix(base).expect("under src");
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.push((unit_of(rel), text));
        }
    }
}

/// The code of a file, comment lines and the line comments after code left
/// out (docs may name any module).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with("//")).map(|l| l.split("//").next().unwrap_or(l))
}

/// Public names re-exported by `lib.rs` (`pub use stream::{Stream, …};`)
/// and the module each comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let code: String = code_lines(lib).collect::<Vec<_>>().join("\n");
    for stmt in code.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else { continue };
        let module = rest.split("::").next().unwrap_or("").trim().to_owned();
        let tail = rest.split_once('{').map_or_else(
            || rest.rsplit("::").next().unwrap_or("").to_owned(),
            |(_, t)| t.trim_end_matches('}').to_owned(),
        );
        for name in tail.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            names.insert(name.to_owned(), module.clone());
        }
    }
    names
}

/// Every `crate::x` in the code of `text`, as the module it names.
fn imports(text: &str, units: &BTreeSet<String>, names: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if units.contains(&ident) {
                out.insert(ident);
            } else if let Some(m) = names.get(&ident) {
                out.insert(m.clone());
            } else if ident.is_empty() && rest.starts_with('{') {
                // `crate::{A, b::C}`: every name in the group.
                let group = rest[1..].split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let head = item.trim().split("::").next().unwrap_or("").to_owned();
                    if units.contains(&head) {
                        out.insert(head);
                    } else if let Some(m) = names.get(&head) {
                        out.insert(m.clone());
                    }
                }
            }
        }
    }
    out
}

/// The module graph: for each module, those it imports.
fn graph(base: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(base, base, &mut files);
    let units: BTreeSet<String> = files.iter().map(|(u, _)| u.clone()).filter(|u| u != "lib").collect();
    let lib = files.iter().find(|(u, _)| u == "lib").map(|(_, t)| t.as_str()).expect("lib.rs");
    let names = reexports(lib);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (unit, text) in &files {
        if unit == "lib" || unit == "layers" {
            continue;
        }
        let deps = g.entry(unit.clone()).or_default();
        deps.extend(imports(text, &units, &names).into_iter().filter(|d| d != unit && d != "layers"));
    }
    g
}

#[test]
fn every_module_has_a_layer() {
    let Some(src) = source_dir() else { return };
    let unplaced: Vec<String> = graph(&src).into_keys().filter(|u| layer_of(u).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from layers::LAYERS (place each in its layer): {unplaced:?}"
    );
}

#[test]
fn imports_point_down_the_layers() {
    let Some(src) = source_dir() else { return };
    let g = graph(&src);
    let mut up = BTreeSet::new();
    for (from, deps) in &g {
        for to in deps {
            if let (Some(a), Some(b)) = (layer_of(from), layer_of(to))
                && b > a
            {
                up.insert((from.clone(), to.clone()));
            }
        }
    }
    let allowed: BTreeSet<(String, String)> =
        UPWARD.iter().map(|(a, b, _)| ((*a).to_owned(), (*b).to_owned())).collect();
    let new: Vec<_> = up.difference(&allowed).collect();
    assert!(new.is_empty(), "imports pointing up the layers (move what they name down instead): {new:?}");
    let gone: Vec<_> = allowed.difference(&up).collect();
    assert!(gone.is_empty(), "no longer pointing up: remove from layers::UPWARD: {gone:?}");
}

#[test]
fn no_cycle_but_through_the_listed_upward_imports() {
    let Some(src) = source_dir() else { return };
    let mut g = graph(&src);
    for (a, b, _) in UPWARD {
        if let Some(deps) = g.get_mut(*a) {
            deps.remove(*b);
        }
    }
    // Kahn's algorithm: what is left after removing every module that imports
    // nothing left is a cycle.
    let mut left = g.clone();
    loop {
        let leaves: Vec<String> = left
            .iter()
            .filter(|(_, d)| d.iter().all(|x| !left.contains_key(x)))
            .map(|(u, _)| u.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for l in leaves {
            left.remove(&l);
        }
    }
    assert!(left.is_empty(), "an import cycle among modules: {left:?}");
}

#[test]
fn the_parser_sees_paths_groups_and_reexports() {
    let units: BTreeSet<String> = ["stream", "memory"].iter().map(|s| (*s).to_owned()).collect();
    let names: BTreeMap<String, String> = [("DeviceBuffer".to_owned(), "memory".to_owned())].into();
    let code = "use crate::stream::Point;\n// crate::graph in a comment\nlet b: crate::DeviceBuffer<u8>;";
    let got = imports(code, &units, &names);
    assert_eq!(got, units);
    let got = imports("use crate::{stream::Point, DeviceBuffer};", &units, &names);
    assert_eq!(got, units);
    let lib = "pub use memory::buffer::{DeviceBuffer, View};\npub use stream::Stream;";
    let r = reexports(lib);
    assert_eq!(r.get("View").map(String::as_str), Some("memory"));
    assert_eq!(r.get("Stream").map(String::as_str), Some("stream"));
}

/// Every source file, as (path under `src/`, text).
fn files(base: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("read gpu-sync/src") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(base).expect("under src").to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&path).expect("read a source file")));
            }
        }
    }
    let mut out = Vec::new();
    walk(base, base, &mut out);
    out.sort();
    out
}

#[test]
fn unsafe_is_opted_into_by_six_files() {
    let Some(src) = source_dir() else { return };
    // `lib.rs` denies unsafe code; these modules (a folder's `mod.rs` counts
    // for the folder) allow it back, each saying why in its docs.
    let allowing: Vec<String> = files(&src)
        .into_iter()
        .filter(|(_, t)| code_lines(t).any(|l| l.trim_start().starts_with("#![allow(unsafe_code)]")))
        .map(|(p, _)| p)
        .collect();
    // The engine's three: host functions' callback, releasing owned
    // handles, and the frees of device allocations.
    assert_eq!(
        allowing,
        [
            "engine/capture/mod.rs",
            "engine/release.rs",
            "engine/track/alloc.rs",
            "launch/mod.rs",
            "memory/mod.rs",
            "nccl/mod.rs"
        ]
    );
}

#[test]
fn no_unsafe_impl() {
    let Some(src) = source_dir() else { return };
    // Send/Sync come from cuda-sys's handles, argued once in its `handle`
    // module: a pinned buffer holds an `OwnedHostAlloc`, a kernel names its
    // function with a `RawHandle` (the module it keeps loaded keeps the
    // function alive), everything else holds owned or borrowed handles.
    let impls: Vec<(String, usize)> = files(&src)
        .into_iter()
        .map(|(p, t)| {
            let n = code_lines(&t).filter(|l| l.trim_start().starts_with("unsafe impl")).count();
            (p, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    assert!(
        impls.is_empty(),
        "unsafe impl in gpu-sync (derive Send/Sync from cuda-sys's handles): {impls:?}"
    );
}

#[test]
fn the_driver_is_called_only_through_the_door() {
    let Some(src) = source_dir() else { return };
    // No module reaches into the driver's table (`drv.cuX(…)`, `match
    // drv.cuX`) or defines a calling macro: every call is a
    // `cuda_sys::result` function passed through `ffi::call`.
    for (path, text) in files(&src) {
        if path == "layers.rs" {
            continue;
        }
        for line in code_lines(&text) {
            assert!(!line.contains("macro_rules! cu"), "{path}: a driver-calling macro: {line}");
            let mut rest = line;
            while let Some(at) = rest.find(".cu") {
                rest = &rest[at + 3..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let after = rest[name.len()..].trim_start();
                let called = after.starts_with('(') || after.starts_with("{");
                assert!(
                    !(name.starts_with(|c: char| c.is_ascii_uppercase()) && called),
                    "{path}: a direct driver call: {line}"
                );
            }
        }
    }
}

#[test]
fn away_from_the_sources_each_test_skips_saying_so() {
    // This test binary run again with the sources said to be elsewhere (as
    // on the GPU machine, where the bundle's copy has none): the test passes,
    // printing why it checked nothing.
    let Ok(me) = std::env::current_exe() else { return };
    let nowhere = std::env::temp_dir().join("gpu-sync-layers-no-sources-here");
    let out = std::process::Command::new(me)
        .args(["--exact", "layers::imports_point_down_the_layers", "--nocapture", "--test-threads=1"])
        .env("CARGO_MANIFEST_DIR", &nowhere)
        .output()
        .expect("the test binary runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(
        text.contains(&format!("skipped: sources not found at {}", nowhere.join("src").display())),
        "{text}"
    );
}

/// The engine's items reachable from the whole crate (`pub(crate)`) outside
/// its facade (`engine/mod.rs`): the types the facade re-exports and the
/// methods the API files call on them, as (file under `engine/`, kind,
/// name). Everything else in `engine/` is `pub(in crate::engine)` at most,
/// so the compiler keeps the book, the ticket draw and the submission paths
/// behind the funnel. The test fails when an item is added (make it
/// `pub(in crate::engine)`, or argue it here) and when one goes (the list
/// only shrinks).
const ENGINE_CRATE_VISIBLE: &[(&str, &str, &str)] = &[
    ("capture/host_fn.rs", "fn", "enter"),
    ("capture/host_fn.rs", "fn", "launch"),
    ("capture/host_fn.rs", "struct", "Inside"),
    ("capture/host_fn.rs", "type", "HostFn"),
    ("flavor/captured.rs", "fn", "fork"),
    ("flavor/captured.rs", "struct", "Capture"),
    ("flavor/captured.rs", "struct", "Ended"),
    ("flavor/captured.rs", "type", "KeepAlive"),
    // A group operation's parts and tickets, built by the API files that
    // submit one (`ForeignGroup::launch`): data the facade's
    // `submit_group` takes, no lock or ticket behind them.
    ("flavor/group.rs", "fn", "new"),
    // What a graph capturing a part keeps alive (an NCCL group's
    // communicator): data too, handed to the capture's keep list.
    ("flavor/group.rs", "fn", "keeping"),
    ("flavor/group.rs", "struct", "Part"),
    // What `keeping` takes: a handle the capture clones into its keep list
    // only when the part is captured (an eager group clones nothing).
    ("flavor/group.rs", "trait", "Keep"),
    ("flavor/group.rs", "type", "Tickets"),
    ("release.rs", "fn", "close"),
    ("release.rs", "fn", "get"),
    ("release.rs", "fn", "leak"),
    ("release.rs", "fn", "new"),
    ("release.rs", "struct", "Held"),
    ("timeline/event.rs", "fn", "create"),
    ("timeline/event.rs", "fn", "device"),
    ("timeline/event.rs", "fn", "event"),
    ("timeline/event.rs", "fn", "is_recorded"),
    ("timeline/event.rs", "fn", "query"),
    ("timeline/event.rs", "fn", "record"),
    ("timeline/event.rs", "fn", "synchronize"),
    ("timeline/event.rs", "fn", "wait_on"),
    ("timeline/event.rs", "fn", "wait_on_default"),
    ("timeline/marker.rs", "fn", "host_wait"),
    ("timeline/marker.rs", "fn", "is_complete"),
    ("timeline/marker.rs", "fn", "tail_mark"),
    ("timeline/marker.rs", "struct", "TailMark"),
    ("timeline/mod.rs", "fn", "capture_hint"),
    ("timeline/mod.rs", "fn", "close"),
    ("timeline/mod.rs", "fn", "device"),
    ("timeline/mod.rs", "fn", "host_wait"),
    ("timeline/mod.rs", "fn", "id"),
    ("timeline/mod.rs", "fn", "new"),
    ("timeline/mod.rs", "fn", "priority"),
    ("timeline/mod.rs", "fn", "prove"),
    ("timeline/mod.rs", "fn", "raw"),
    ("timeline/mod.rs", "struct", "Point"),
    ("timeline/mod.rs", "struct", "Timeline"),
    ("timeline/pending.rs", "fn", "new"),
    ("timeline/ring.rs", "fn", "mark_tail"),
    ("timeline/wait.rs", "fn", "host_wait_all_so_far"),
    ("timeline/wait.rs", "fn", "prepare_host_wait"),
    ("timeline/wait.rs", "fn", "synchronize"),
    ("track/alloc.rs", "fn", "bytes"),
    ("track/alloc.rs", "fn", "device"),
    ("track/alloc.rs", "fn", "new"),
    ("track/alloc.rs", "fn", "ptr"),
    ("track/mod.rs", "enum", "Target"),
    ("track/mod.rs", "fn", "empty_like"),
    ("track/mod.rs", "fn", "host_wait_all"),
    ("track/mod.rs", "fn", "new"),
    ("track/mod.rs", "struct", "Resource"),
    ("track/mod.rs", "trait", "Uses"),
    ("track/mod.rs", "type", "Use"),
];

/// The items of `text` declared `pub(crate)` or `pub` (not `pub(in …)`,
/// not `pub(super)`): (kind, name), fields and re-exports left out.
fn crate_visible_items(text: &str) -> Vec<(String, String)> {
    const KINDS: &[&str] = &["fn", "struct", "enum", "type", "trait", "mod", "const", "static"];
    let mut out = Vec::new();
    for line in code_lines(text) {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub ")) else { continue };
        let rest = rest.trim_start_matches("unsafe ").trim_start_matches("const fn ").trim_start();
        let rest = if t.contains("const fn ") { &format!("fn {rest}") } else { rest };
        let mut words = rest.split(|c: char| !(c.is_alphanumeric() || c == '_'));
        let (Some(kind), Some(name)) = (words.next(), words.next()) else { continue };
        if KINDS.contains(&kind) {
            out.push((kind.to_owned(), name.to_owned()));
        }
    }
    out
}

/// Items of the engine outside its facade declared `pub(crate)`, as (file
/// under `engine/`, kind, name). Plain `pub` items there are the public API
/// of the types `lib.rs` re-exports (`Pending`, `Access`, `Point`'s waits)
/// or fields, and are not read.
fn engine_crate_visible(src: &Path) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for (path, text) in files(src) {
        let Some(rel) = path.strip_prefix("engine/") else { continue };
        if rel == "mod.rs" || rel.ends_with("tests.rs") {
            continue;
        }
        for (kind, name) in crate_visible_items(&text) {
            let declared_pub_crate = code_lines(&text).any(|l| {
                let l = l.trim_start();
                l.starts_with("pub(crate) ") && l.contains(&format!("{kind} {name}"))
            });
            // `pub` items of the user-visible types (Pending, Access,
            // NotCovered, Polled, Point's waits) are the crate's public API.
            if !declared_pub_crate {
                continue;
            }
            out.insert((rel.to_owned(), kind, name));
        }
    }
    out
}

#[test]
fn the_engine_is_sealed_at_the_method_level() {
    let Some(src) = source_dir() else { return };
    let found = engine_crate_visible(&src);
    let listed: BTreeSet<(String, String, String)> = ENGINE_CRATE_VISIBLE
        .iter()
        .map(|(f, k, n)| ((*f).to_owned(), (*k).to_owned(), (*n).to_owned()))
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    assert!(
        new.is_empty(),
        "engine items reachable from the whole crate, outside the facade and the list \
         (make them pub(in crate::engine), or add them to layers::ENGINE_CRATE_VISIBLE saying why): {new:?}"
    );
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(gone.is_empty(), "no longer crate-visible: remove from layers::ENGINE_CRATE_VISIBLE: {gone:?}");
}

/// The engine's internals no file outside `engine/` may name: the book and
/// its guards, the ticket draw, the submission paths under the book, the
/// device's ticket counter (`device.rs` defines it; only the engine moves
/// it).
const ENGINE_INTERNALS: &[&str] = &[
    "next_ticket",
    "draw_ticket",
    "submit_in",
    "submit_event_wait",
    "seal_marker",
    "lock_books",
    "wait_before",
    "Step::",
    "book_of",
    "BookList",
    "BookGuard",
    "BookSet",
    "DeviceBook",
    "record_use",
    "wait_same_device",
    ".ticket.",
    ".completed.",
];

#[test]
fn no_file_outside_the_engine_names_its_internals() {
    let Some(src) = source_dir() else { return };
    let mut hits = Vec::new();
    for (path, text) in files(&src) {
        if path.starts_with("engine/") || path == "layers.rs" {
            continue;
        }
        for line in code_lines(&text) {
            for name in ENGINE_INTERNALS {
                // `device.rs` defines the counter and its one draw.
                let defines =
                    path == "device.rs" && (line.contains("fn next_ticket") || line.contains("self.ticket."));
                if line.contains(name) && !defines {
                    hits.push(format!("{path}: {name}: {}", line.trim()));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "engine internals named outside engine/ (go through engine::submit):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_visibility_reader_sees_what_it_must() {
    let text = "pub(crate) fn a() {}\npub(in crate::engine) fn b() {}\n    pub(crate) struct C;\n// pub(crate) fn d\npub fn e() {}\npub(crate) unsafe fn f() {}";
    let got = crate_visible_items(text);
    let want: Vec<(String, String)> = [("fn", "a"), ("struct", "C"), ("fn", "e"), ("fn", "f")]
        .iter()
        .map(|(k, n)| ((*k).to_owned(), (*n).to_owned()))
        .collect();
    assert_eq!(got, want);
}

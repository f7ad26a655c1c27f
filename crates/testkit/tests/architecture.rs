//! `docs/ARCHITECTURE.md`'s list of crates and their dependencies is the code's: every workspace
//! crate is listed once, by its directory, with exactly the workspace crates it depends on
//! (normal dependencies, as `cargo metadata` reports them), and every dependency is listed above
//! the crate that depends on it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Directory name → the workspace crates (by directory) it depends on, from `cargo metadata`.
fn from_cargo(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let dir_of = |p: &serde_json::Value| {
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
        manifest
            .parent()
            .and_then(Path::file_name)
            .map(|d| d.to_string_lossy().into_owned())
            .expect("a crate directory")
    };
    let by_name: BTreeMap<String, String> = packages
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or("").to_string(), dir_of(p)))
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| by_name.get(d["name"].as_str().unwrap_or("")).cloned())
                .collect();
            (dir_of(p), deps)
        })
        .collect()
}

/// The same, from the crate list of `docs/ARCHITECTURE.md` (lines `crates/DIR  what  -> a, b`,
/// `(none)` for no dependency; the list is the first fenced block after `## Crates`), in the
/// order listed.
fn from_docs(text: &str) -> Vec<(String, BTreeSet<String>)> {
    let after = text
        .split("## Crates")
        .nth(1)
        .expect("a `## Crates` section");
    let block = after.split("```").nth(1).expect("a fenced crate list");
    let mut out: Vec<(String, BTreeSet<String>)> = Vec::new();
    for line in block.lines() {
        let Some(rest) = line.strip_prefix("crates/") else {
            continue;
        };
        let dir = rest
            .split_whitespace()
            .next()
            .expect("a directory")
            .to_string();
        let deps: BTreeSet<String> = if line.trim_end().ends_with("(none)") {
            BTreeSet::new()
        } else {
            let (_, list) = line
                .rsplit_once("-> ")
                .unwrap_or_else(|| panic!("no `-> deps` or `(none)` on: {line}"));
            list.split(',').map(|d| d.trim().to_string()).collect()
        };
        assert!(out.iter().all(|(d, _)| *d != dir), "{dir} listed twice");
        out.push((dir, deps));
    }
    out
}

/// Every dependency that is not listed above the crate depending on it.
fn not_above(order: &[(String, BTreeSet<String>)]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (at, (dir, deps)) in order.iter().enumerate() {
        for dep in deps {
            if !order[..at].iter().any(|(d, _)| d == dep) {
                wrong.push(format!(
                    "crates/{dir} depends on {dep}, which is not listed above it"
                ));
            }
        }
    }
    wrong
}

#[test]
fn architecture_lists_the_real_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let docs = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("read the docs");
    let (order, real) = (from_docs(&docs), from_cargo(&root));
    let listed: BTreeMap<String, BTreeSet<String>> = order.iter().cloned().collect();
    let mut wrong = not_above(&order);
    for (dir, deps) in &real {
        match listed.get(dir) {
            None => wrong.push(format!("crates/{dir} is not listed")),
            Some(l) if l != deps => wrong.push(format!(
                "crates/{dir}: listed -> {}; Cargo.toml -> {}",
                l.iter().cloned().collect::<Vec<_>>().join(", "),
                deps.iter().cloned().collect::<Vec<_>>().join(", ")
            )),
            _ => {}
        }
    }
    for dir in listed.keys().filter(|d| !real.contains_key(*d)) {
        wrong.push(format!(
            "crates/{dir} is listed but is not a workspace crate"
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md is out of date:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_docs_parser_reads_what_it_should() {
    let docs = "## Crates\n\n```\ncrates/a  x  (none)\ncrates/b  y -> a\ncrates/c  z -> a, b\nfuzz/ -> c\n```\n";
    let m: BTreeMap<_, _> = from_docs(docs).into_iter().collect();
    assert_eq!(m.len(), 3);
    assert!(m["a"].is_empty());
    assert_eq!(
        m["c"],
        ["a".to_string(), "b".to_string()].into_iter().collect()
    );
}

#[test]
fn a_dependency_listed_below_is_found() {
    let docs = "## Crates\n\n```\ncrates/b  y -> a\ncrates/a  x  (none)\n```\n";
    assert_eq!(
        not_above(&from_docs(docs)),
        ["crates/b depends on a, which is not listed above it"]
    );
}

/// Every workspace crate `dir` depends on, directly or not.
fn closure(deps: &BTreeMap<String, BTreeSet<String>>, dir: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![dir.to_string()];
    while let Some(d) = todo.pop() {
        for dep in deps.get(&d).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

/// What an application links stays small: the daemon's C client reaches no engine, and the
/// libpcap-compatible library only the filter API and the engines it serves.
#[test]
fn applications_link_no_more_than_they_use() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let deps = from_cargo(&root);
    let engines = [
        "bpf", "jit", "swift", "ebpf", "lang", "filter", "graph", "classify", "offload", "fpl",
    ];
    let client = closure(&deps, "client-c");
    let linked: Vec<_> = engines.iter().filter(|e| client.contains(**e)).collect();
    assert!(linked.is_empty(), "client-c links {linked:?}");
    let pcap = closure(&deps, "pcap");
    let linked: Vec<_> = ["graph", "classify", "offload", "fpl", "daemon"]
        .iter()
        .filter(|e| pcap.contains(**e))
        .collect();
    assert!(linked.is_empty(), "pcap links {linked:?}");
    assert!(
        pcap.contains("filter"),
        "pcap compiles through the filter API"
    );
}

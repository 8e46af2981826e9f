//! Tidy checks (rust-analyzer's idea): the module layering written in ARCHITECTURE.md
//! ("## Layers"), no import cycle between top-level modules, and no oversized source file.
//!
//! Reads files only (no cargo invocation); `#[cfg(test)]` items are left out. Each check has an allow-list holding today's debts
//! exactly: a new violation fails, and so does an allow-listed entry that is no longer one, so the
//! lists only shrink. On failure the offending entries are printed ready to paste.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Largest number of code lines a source file may hold.
const MAX_CODE_LINES: usize = 600;

/// Upward arrows (`from -> to`, top-level modules) tolerated for now.
const ALLOWED_UPWARD: &[&str] = &[
    "api -> cli",
    "command -> metrics",
    "gofmt -> host",
    "rollout -> state",
    "up -> cli",
];

/// Top-level modules that are in an import cycle today (the members of each strongly connected
/// component, sorted, joined by ` `).
const ALLOWED_CYCLES: &[&str] = &["api cli daemon server up", "rollout state"];

/// Files over [`MAX_CODE_LINES`] tolerated for now (path under `src/`).
const ALLOWED_BIG_FILES: &[&str] = &[
    "api/history.rs",
    "api/mod.rs",
    "auth.rs",
    "command.rs",
    "daemon/agent.rs",
    "disruption.rs",
    "ignition/validate.rs",
    "main.rs",
    "sim.rs",
    "store/mod.rs",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under src/ (`src/api/mod.rs` -> `["api"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Code lines without comments and without `#[cfg(test)]` items: the attribute's item is
/// skipped to its end (a `mod tests;` line, or a block until its braces balance), so a test
/// helper in the middle of a file does not hide the code after it.
fn code_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut skipping, mut depth, mut opened) = (false, 0i64, false);
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[cfg(test)]") {
            (skipping, depth, opened) = (true, 0, false);
            continue;
        }
        if skipping {
            depth += t.matches('{').count() as i64 - t.matches('}').count() as i64;
            opened |= t.contains('{');
            if (opened && depth <= 0) || (!opened && t.ends_with(';')) {
                skipping = false;
            }
            continue;
        }
        out.push(t);
    }
    out
}

/// Top-level modules a file refers to through `crate::` or `super::` paths.
fn targets(module: &[String], lines: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines {
        let mut rest = *line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            if after.starts_with('{') {
                let end = after.find('}').unwrap_or(after.len());
                for item in after[1..end].split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    if !name.is_empty() {
                        out.insert(name.to_string());
                    }
                }
            } else {
                let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
            rest = after;
        }
        // `super::` from a depth-1 file (src/x.rs or src/x/mod.rs has depth 1) leaves the module.
        if module.len() == 1 && line.contains("super::") && !line.contains("crate::") {
            let mut rest = *line;
            while let Some(i) = rest.find("super::") {
                let after = &rest[i + "super::".len()..];
                let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != "super" {
                    out.insert(name);
                }
                rest = after;
            }
        }
    }
    out
}

/// The layer of each top-level module, parsed from ARCHITECTURE.md.
fn layers() -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let start = text
        .find("<!-- tidy:layers -->")
        .expect("ARCHITECTURE.md has a <!-- tidy:layers --> table");
    let end = text.find("<!-- /tidy:layers -->").unwrap();
    let mut out = BTreeMap::new();
    for line in text[start..end].lines().skip(1) {
        let Some(line) = line.strip_prefix("- L") else {
            continue;
        };
        let (level, mods) = line.split_once(':').unwrap();
        let level: usize = level.split_whitespace().next().unwrap().parse().unwrap();
        for m in mods.split(',') {
            out.insert(m.trim().to_string(), level);
        }
    }
    out
}

struct Scan {
    graph: BTreeMap<String, BTreeSet<String>>,
    big: Vec<(String, usize)>,
}

fn scan() -> Scan {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut big = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap().to_path_buf();
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = code_lines(&text);
        let name = rel.file_name().unwrap().to_string_lossy().into_owned();
        if name != "tests.rs" && lines.len() > MAX_CODE_LINES {
            big.push((rel.to_string_lossy().into_owned(), lines.len()));
        }
        let module = module_of(&rel);
        let Some(top) = module.first() else {
            continue; // lib.rs / main.rs
        };
        let deps = graph.entry(top.clone()).or_default();
        for t in targets(&module, &lines) {
            if &t != top {
                deps.insert(t);
            }
        }
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    Scan { graph, big }
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let names: Vec<&String> = graph.keys().collect();
    let idx: BTreeMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut counter, mut out) = (Vec::new(), 0, Vec::new());
    fn visit(
        v: usize,
        names: &[&String],
        idx: &BTreeMap<&String, usize>,
        graph: &BTreeMap<String, BTreeSet<String>>,
        st: (&mut Vec<usize>, &mut Vec<usize>, &mut Vec<bool>, &mut Vec<usize>),
        counter: &mut usize,
        out: &mut Vec<String>,
    ) {
        let (index, low, on, stack) = st;
        index[v] = *counter;
        low[v] = *counter;
        *counter += 1;
        stack.push(v);
        on[v] = true;
        for d in &graph[names[v]] {
            let w = idx[d];
            if index[w] == usize::MAX {
                visit(w, names, idx, graph, (index, low, on, stack), counter, out);
                low[v] = low[v].min(low[w]);
            } else if on[w] {
                low[v] = low[v].min(index[w]);
            }
        }
        if low[v] == index[v] {
            let mut comp = Vec::new();
            loop {
                let w = stack.pop().unwrap();
                on[w] = false;
                comp.push(names[w].clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                out.push(comp.join(" "));
            }
        }
    }
    for v in 0..n {
        if index[v] == usize::MAX {
            visit(
                v,
                &names,
                &idx,
                graph,
                (&mut index, &mut low, &mut on, &mut stack),
                &mut counter,
                &mut out,
            );
        }
    }
    out.sort();
    out
}

/// Compares what was found with an allow-list; returns a report of the differences.
fn compare(what: &str, found: &BTreeSet<String>, allowed: &[&str]) -> Option<String> {
    let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = found.difference(&allowed).collect();
    let gone: Vec<_> = allowed.difference(found).collect();
    if new.is_empty() && gone.is_empty() {
        return None;
    }
    let mut msg = format!("{what}:\n");
    for n in &new {
        msg += &format!("  new (fix it, or allow-list it):    {n:?},\n");
    }
    for g in &gone {
        msg += &format!("  fixed (remove from the allow-list): {g:?},\n");
    }
    Some(msg)
}

#[test]
fn every_module_has_a_layer() {
    let layers = layers();
    let scan = scan();
    let missing: Vec<_> = scan.graph.keys().filter(|m| !layers.contains_key(*m)).collect();
    assert!(
        missing.is_empty(),
        "modules missing from ARCHITECTURE.md's layer table: {missing:?}"
    );
}

#[test]
fn no_upward_arrows() {
    let layers = layers();
    let scan = scan();
    let mut found = BTreeSet::new();
    for (from, deps) in &scan.graph {
        for to in deps {
            if let (Some(a), Some(b)) = (layers.get(from), layers.get(to)) {
                if b > a {
                    found.insert(format!("{from} -> {to}"));
                }
            }
        }
    }
    if let Some(msg) = compare("upward arrows (ALLOWED_UPWARD)", &found, ALLOWED_UPWARD) {
        panic!("{msg}");
    }
}

#[test]
fn no_module_cycles() {
    let scan = scan();
    let found: BTreeSet<String> = cycles(&scan.graph).into_iter().collect();
    if let Some(msg) = compare("module cycles (ALLOWED_CYCLES)", &found, ALLOWED_CYCLES) {
        panic!("{msg}");
    }
}

#[test]
fn no_big_files() {
    let scan = scan();
    let found: BTreeSet<String> = scan.big.iter().map(|(f, _)| f.clone()).collect();
    let sizes: Vec<String> = scan.big.iter().map(|(f, n)| format!("{f}: {n}")).collect();
    if let Some(msg) = compare(
        &format!("files over {MAX_CODE_LINES} code lines (ALLOWED_BIG_FILES; sizes {sizes:?})"),
        &found,
        ALLOWED_BIG_FILES,
    ) {
        panic!("{msg}");
    }
}

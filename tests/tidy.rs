//! Tidy checks (rust-analyzer's idea): the module layering written in ARCHITECTURE.md
//! ("## Layers"), no import cycle between top-level modules, no oversized source file, and no
//! import cycle between the dashboard's ES modules (`web/`), whose entry `app.js` none imports.
//!
//! Reads files only (no cargo invocation); `#[cfg(test)]` items are left out. Each check has an allow-list holding today's debts
//! exactly: a new violation fails, and so does an allow-listed entry that is no longer one, so the
//! lists only shrink. On failure the offending entries are printed ready to paste.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Largest number of code lines a source file may hold.
const MAX_CODE_LINES: usize = 600;

/// Upward arrows (`from -> to`, top-level modules) tolerated for now.
const ALLOWED_UPWARD: &[&str] = &[];

/// Top-level modules that are in an import cycle today (the members of each strongly connected
/// component, sorted, joined by ` `).
const ALLOWED_CYCLES: &[&str] = &[];

/// Files in an import cycle today (each strongly connected component of the file graph, paths
/// under `src/` sorted and joined by ` `). The file graph leaves out module roots (`mod.rs`,
/// and `x.rs` beside an `x/` folder), whose children naturally refer back to them.
const ALLOWED_FILE_CYCLES: &[&str] = &[];

/// Files over [`MAX_CODE_LINES`] tolerated for now (path under `src/`).
const ALLOWED_BIG_FILES: &[&str] = &[];

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

/// Every path written after `crate::`, `super::` or `self::` on a line, as its segments with the
/// anchor first (`crate::a::{b::C, d}` gives `[crate, a, b, C]` and `[crate, a, d]`).
fn paths(line: &str) -> Vec<Vec<String>> {
    fn ident(s: &str) -> (&str, &str) {
        let n = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
        (&s[..n], &s[n..])
    }
    /// Parses a path tree at `s` after `prefix`; returns the rest of the text.
    fn tree<'a>(s: &'a str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> &'a str {
        let s = s.trim_start();
        if let Some(mut rest) = s.strip_prefix('{') {
            loop {
                rest = tree(rest, &mut prefix.clone(), out).trim_start();
                if let Some(r) = rest.strip_prefix(',') {
                    rest = r.trim_start();
                    if let Some(r) = rest.strip_prefix('}') {
                        return r;
                    }
                } else {
                    return rest.strip_prefix('}').unwrap_or(rest);
                }
            }
        }
        let (name, rest) = ident(s);
        if name.is_empty() {
            out.push(prefix.clone());
            return rest;
        }
        prefix.push(name.to_string());
        match rest.strip_prefix("::") {
            Some(more) => tree(more, prefix, out),
            None => {
                out.push(prefix.clone());
                rest
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.len() {
        let rest = &line[i..];
        let anchor = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|a| rest.starts_with(a));
        let boundary = i == 0 || !line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
        match anchor {
            Some(a) if boundary => {
                let mut prefix = vec![a.trim_end_matches("::").to_string()];
                let after = tree(&rest[a.len()..], &mut prefix, &mut out);
                i = line.len() - after.len();
            }
            _ => i += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// The file a path from module `module` names: its longest prefix that is a file's module
/// (`super` and `self` resolved against `module`).
fn resolve(module: &[String], path: &[String], files: &BTreeMap<Vec<String>, String>) -> Option<String> {
    let mut abs: Vec<String> = Vec::new();
    let mut segs = path.iter().peekable();
    match segs.next().map(String::as_str) {
        Some("crate") => {}
        Some("self") => abs.extend(module.iter().cloned()),
        Some("super") => {
            abs.extend(module.iter().cloned());
            abs.pop();
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                abs.pop();
            }
        }
        _ => return None,
    }
    abs.extend(segs.cloned());
    (1..=abs.len()).rev().find_map(|n| files.get(&abs[..n]).cloned())
}

/// The file graph: which source file refers to which other, module roots left out
/// ([`ALLOWED_FILE_CYCLES`]).
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut all = Vec::new();
    rust_files(&src, &mut all);
    let rel: Vec<PathBuf> = all
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap().to_path_buf())
        .collect();
    let is_root = |r: &Path| {
        let stem = r.file_stem().unwrap().to_string_lossy();
        matches!(&*stem, "mod" | "lib" | "main") || src.join(r.with_extension("")).is_dir()
    };
    let files: BTreeMap<Vec<String>, String> = rel
        .iter()
        .map(|r| (module_of(r), r.to_string_lossy().into_owned()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in rel.iter().filter(|r| !is_root(r)) {
        let name = r.to_string_lossy().into_owned();
        let module = module_of(r);
        let text = std::fs::read_to_string(src.join(r)).unwrap();
        let deps = graph.entry(name.clone()).or_default();
        for line in code_lines(&text) {
            for p in paths(line) {
                if let Some(f) = resolve(&module, &p, &files) {
                    if f != name && !is_root(Path::new(&f)) {
                        deps.insert(f);
                    }
                }
            }
        }
    }
    graph
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
fn no_file_cycles() {
    let found: BTreeSet<String> = cycles(&file_graph()).into_iter().collect();
    if let Some(msg) = compare("file cycles (ALLOWED_FILE_CYCLES)", &found, ALLOWED_FILE_CYCLES) {
        panic!("{msg}");
    }
}

#[test]
fn paths_are_read_through_braces_and_anchors() {
    let got = paths("use crate::daemon::{apply::{self, WriteMode}, drift}; super::x::y(self::z)");
    let want: Vec<Vec<&str>> = vec![
        vec!["crate", "daemon", "apply", "self"],
        vec!["crate", "daemon", "apply", "WriteMode"],
        vec!["crate", "daemon", "drift"],
        vec!["super", "x", "y"],
        vec!["self", "z"],
    ];
    assert_eq!(got, want);
    let files: BTreeMap<Vec<String>, String> = [
        (vec!["daemon".to_string()], "daemon/mod.rs".to_string()),
        (
            vec!["daemon".to_string(), "apply".to_string()],
            "daemon/apply.rs".to_string(),
        ),
    ]
    .into_iter()
    .collect();
    let agent = vec!["daemon".to_string(), "agent".to_string()];
    let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        resolve(&agent, &p(&["super", "apply", "f"]), &files).as_deref(),
        Some("daemon/apply.rs")
    );
    assert_eq!(
        resolve(&agent, &p(&["super", "Held"]), &files).as_deref(),
        Some("daemon/mod.rs")
    );
    assert_eq!(resolve(&agent, &p(&["crate", "model"]), &files), None);
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

/// The dashboard's module graph: each `web/**/*.js` file (path under `web/`) and the files its
/// static `import … from './x.js'` / `export … from` lines name, resolved against its folder.
fn web_graph() -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "js") {
                out.push(p);
            }
        }
    }
    let web = root().join("web");
    let mut files = Vec::new();
    walk(&web, &mut files);
    let mut graph = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&web).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let mut deps = BTreeSet::new();
        for line in text.lines().map(str::trim_start) {
            if !(line.starts_with("import ") || line.starts_with("export ")) {
                continue;
            }
            let Some(spec) = line.split(" from ").nth(1) else {
                continue;
            };
            let spec = spec
                .trim()
                .trim_end_matches(';')
                .trim_matches(|c| c == '\'' || c == '"');
            let mut parts: Vec<&str> = rel.parent().unwrap().iter().map(|s| s.to_str().unwrap()).collect();
            for seg in spec.split('/') {
                match seg {
                    "." => {}
                    ".." => assert!(parts.pop().is_some(), "{}: {spec} leaves web/", rel.display()),
                    s => parts.push(s),
                }
            }
            deps.insert(parts.join("/"));
        }
        graph.insert(rel.to_str().unwrap().replace('\\', "/"), deps);
    }
    graph
}

#[test]
fn no_web_module_cycles() {
    let graph = web_graph();
    // The parser sees the imports (the entry imports its views and the shared tables).
    assert!(graph["app.js"].contains("tables.js"), "{graph:?}");
    let mut errors = Vec::new();
    for (file, deps) in &graph {
        for d in deps {
            if !graph.contains_key(d) {
                errors.push(format!("{file} imports {d}, which is not a file under web/"));
            }
            if d == "app.js" {
                errors.push(format!(
                    "{file} imports app.js, the entry (move what it needs out of app.js)"
                ));
            }
        }
    }
    let graph: BTreeMap<String, BTreeSet<String>> = graph
        .iter()
        .map(|(f, ds)| {
            (
                f.clone(),
                ds.iter().filter(|d| graph.contains_key(*d)).cloned().collect(),
            )
        })
        .collect();
    for c in cycles(&graph) {
        errors.push(format!("web modules in an import cycle: {c}"));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

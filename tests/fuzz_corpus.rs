//! The fuzz targets' short run in CI (issue 12, item 9): `cargo +nightly fuzz` cannot run under
//! stable `cargo test`, so this replays every committed seed of `fuzz/corpus/<target>/` (and
//! every input a fuzzer run found and committed there, fixed panics included) through the same
//! entry points ([`mco::fuzzing`]), then a bounded random run: each seed mutated (bytes
//! replaced, inserted, cut) by proptest, a fixed number of cases per target (a few seconds).

use proptest::prelude::*;
use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: &[(&str, Target)] = &[
    ("manifest", mco::fuzzing::manifest),
    ("ignition", mco::fuzzing::ignition),
    ("data_url", mco::fuzzing::data_url),
    ("gzip", mco::fuzzing::gzip),
    ("label_selector", mco::fuzzing::label_selector),
    ("patch", mco::fuzzing::patch),
    ("watch_query", mco::fuzzing::watch_query),
];

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect()
}

/// Every committed input of every target runs without a panic.
#[test]
fn every_committed_input_replays() {
    let mut total = 0;
    for (name, run) in TARGETS {
        let seeds = corpus(name);
        assert!(seeds.len() >= 10, "{name}: a corpus of a few dozen seeds");
        for (path, data) in seeds {
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "{name}: {} panics", path.display());
            total += 1;
        }
    }
    assert!(total >= 100, "{total}");
}

/// Applies `edits` (position, byte: replace; odd byte: insert) and a cut to `seed`.
fn mutate(seed: &[u8], edits: &[(usize, u8)], cut: usize, tail: &[u8]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for &(at, b) in edits {
        let i = if out.is_empty() { 0 } else { at % (out.len() + 1) };
        if b % 2 == 1 || i == out.len() {
            out.insert(i, b);
        } else {
            out[i] = b;
        }
    }
    if cut > 0 && !out.is_empty() {
        out.truncate(out.len() - (cut % out.len()));
    }
    out.extend_from_slice(tail);
    out
}

fn random_run(name: &str, run: Target) {
    let seeds: Vec<Vec<u8>> = corpus(name).into_iter().map(|(_, d)| d).collect();
    let config = ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        pick in 0..seeds.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in 0usize..64,
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    )| {
        run(&mutate(&seeds[pick], &edits, cut, &tail));
    });
}

#[test]
fn random_manifest() {
    random_run("manifest", mco::fuzzing::manifest);
}

#[test]
fn random_ignition() {
    random_run("ignition", mco::fuzzing::ignition);
}

#[test]
fn random_data_url() {
    random_run("data_url", mco::fuzzing::data_url);
}

#[test]
fn random_gzip() {
    random_run("gzip", mco::fuzzing::gzip);
}

#[test]
fn random_label_selector() {
    random_run("label_selector", mco::fuzzing::label_selector);
}

#[test]
fn random_patch() {
    random_run("patch", mco::fuzzing::patch);
}

#[test]
fn random_watch_query() {
    random_run("watch_query", mco::fuzzing::watch_query);
}

/// Fixed by the `patch` target: json-patch 5.0.0's in-place `patch` leaves a failed `move`
/// half applied (the source removed). mco patches a copy, so a failed patch changes nothing and
/// the stored object keeps its labels.
#[test]
fn a_failed_move_changes_nothing() {
    let doc = serde_json::json!({"kind": "MachineConfig", "metadata": {"name": "a", "labels": {"x": "y"}}});
    let ops: json_patch::Patch = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/patch/crash-move-half-applied"))
            .unwrap(),
    )
    .unwrap();
    let err = mco::api::fields::apply_json_patch(&doc, &ops).unwrap_err();
    assert!(
        err.to_string().contains("/metadata/annotatio/metadata/labelsns"),
        "{err}"
    );
    assert_eq!(doc["metadata"]["labels"]["x"], "y");
    // A move that applies moves.
    let ok: json_patch::Patch = serde_json::from_value(
        serde_json::json!([{"op": "move", "from": "/metadata/labels", "path": "/metadata/annotations"}]),
    )
    .unwrap();
    let moved = mco::api::fields::apply_json_patch(&doc, &ok).unwrap();
    assert_eq!(
        moved["metadata"],
        serde_json::json!({"name": "a", "annotations": {"x": "y"}})
    );
}

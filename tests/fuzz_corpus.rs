//! The fuzz targets' short run in CI (issue 12, item 9): `cargo +nightly fuzz` cannot run under
//! stable `cargo test`, so this replays every committed seed of `fuzz/corpus/<target>/` (and
//! every input a fuzzer run found and committed there, fixed panics included) through the same
//! entry points ([`mco::fuzzing`]), then a bounded random run: each seed mutated (bytes
//! replaced, inserted, cut) by proptest, a fixed number of cases per target (a few seconds);
//! and the manifest, patch and Ignition inputs as request bodies through a real server, where
//! no answer may be a 5xx and no handler may panic.

mod common;

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

/// The committed `manifest`, `patch` and `ignition` inputs, and mutations of them, as request
/// bodies through a real server (issue 23, item 8): created, replaced, patched by every patch
/// type, server-side applied and sent as DeleteOptions, in JSON and YAML. Every answer is below
/// 500, and no handler panicked (`mco_api_handler_panics_total` stays 0; the server's drop in a
/// debug build fails the test on one too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_replay_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let s = common::start_server(dir.path()).await;
    let http = s.admin_http();
    let mcs = "/apis/machineconfiguration.openshift.io/v1/machineconfigs";
    let pools = "/apis/machineconfiguration.openshift.io/v1/machineconfigpools";
    let routes: [(&str, String, &str); 12] = [
        ("POST", mcs.to_string(), "application/json"),
        ("POST", mcs.to_string(), "application/yaml"),
        ("POST", "/api/v1/nodes".to_string(), "application/json"),
        ("PUT", format!("{pools}/worker"), "application/json"),
        ("PUT", format!("{pools}/worker/status"), "application/json"),
        ("PATCH", format!("{pools}/worker"), "application/merge-patch+json"),
        ("PATCH", format!("{pools}/worker"), "application/json-patch+json"),
        (
            "PATCH",
            format!("{pools}/worker?fieldManager=f"),
            "application/apply-patch+yaml",
        ),
        (
            "PATCH",
            format!("{mcs}/fuzz-missing?fieldManager=f"),
            "application/apply-patch+yaml",
        ),
        ("DELETE", format!("{mcs}/fuzz-missing"), "application/json"),
        (
            "POST",
            "/apis/history.mco.dev/v1/previews".to_string(),
            "application/json",
        ),
        ("POST", "/apis/auth.mco.dev/v1/tokens".to_string(), "application/json"),
    ];
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for target in ["manifest", "patch", "ignition"] {
        let seeds: Vec<Vec<u8>> = corpus(target).into_iter().map(|(_, d)| d).collect();
        // A few deterministic mutations of each seed (no proptest runner in an async test):
        // bytes replaced and inserted at spread positions, and cuts.
        for (i, seed) in seeds.iter().enumerate() {
            let n = seed.len().max(1);
            let edits: Vec<(usize, u8)> = (0..4)
                .map(|j| ((i * 7919 + j * 104_729) % n, (i * 31 + j * 17) as u8))
                .collect();
            inputs.push(mutate(seed, &edits, 0, b""));
            inputs.push(mutate(seed, &[], (i * 13) % n, b""));
        }
        inputs.extend(seeds);
    }
    let mut answered = 0;
    for body in &inputs {
        for (method, path, ct) in &routes {
            let resp = http
                .request(method.parse().unwrap(), format!("{}{path}", s.url()))
                .header("content-type", *ct)
                .body(body.clone())
                .send()
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "{method} {path}: no answer ({e}) to {:?}",
                        String::from_utf8_lossy(body)
                    )
                });
            let code = resp.status().as_u16();
            assert!(
                code < 500,
                "{method} {path} ({ct}): {code} {} for {:?}",
                resp.text().await.unwrap_or_default(),
                String::from_utf8_lossy(body)
            );
            answered += 1;
        }
    }
    assert!(answered >= 1000, "{answered}");
    assert_eq!(s.take_handler_panics(), 0, "handler panics (the log names them)");
    s.stop().await;
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

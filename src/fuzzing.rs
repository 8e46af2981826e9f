//! Entry points of the fuzz targets (`fuzz/`, cargo-fuzz) and of their replay in `cargo test`
//! (`tests/fuzz_corpus.rs`): one function per target, from raw bytes to the public functions
//! that parse untrusted input, checking the properties that must hold for every input.
//!
//! Owns nothing but the wiring: each function calls the same library functions the server, the
//! CLI or the daemon call, and panics only when a property is broken (which the fuzzer reports).
//! It must not hold parsing logic of its own.

use serde_json::Value;

/// The limit the `gzip` target decompresses to: small, so a million inputs stay fast.
pub const FUZZ_GZIP_CAP: u64 = 1 << 20;

/// Manifest parsing ([`crate::manifest::parse_with_source`]): any text, YAML or JSON, one or
/// many documents (Ignition validation of what they carry is the `ignition` target's).
/// Property: no panic, and every accepted document re-reads from its JSON as one document.
pub fn manifest(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for doc in crate::manifest::parse_with_source(&text).into_iter().flatten() {
        let again = crate::manifest::parse_with_source(&doc.raw.to_string());
        assert_eq!(again.len(), 1, "an accepted document reads back as one");
    }
}

/// Ignition parsing and validation ([`crate::ignition::parse_config_with`]) of a JSON value;
/// when the bytes are not JSON, of a config whose one file's source is the input as text.
/// Property: no panic, errors name a field under `spec.config`.
pub fn ignition(data: &[u8]) {
    let raw = match serde_json::from_slice::<Value>(data) {
        Ok(v) => v,
        Err(_) => serde_json::json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": "/etc/fuzz", "contents": {"source": String::from_utf8_lossy(data)}}]}}),
    };
    if let Err(errors) = crate::ignition::parse_config_with(
        &raw,
        "spec.config",
        crate::limits::ContentLimits {
            max_file_bytes: FUZZ_GZIP_CAP,
            ..Default::default()
        },
    ) {
        for e in errors {
            assert!(e.field.starts_with("spec.config"), "{e}");
        }
    }
}

/// `data:` URL decoding ([`crate::ignition::decode_data_url`]). Property: no panic; decoded
/// bytes are never more than the URL's length.
pub fn data_url(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(bytes) = crate::ignition::decode_data_url(&text) {
        assert!(bytes.len() <= text.len());
    }
}

/// Capped gzip decoding ([`crate::limits::gunzip_capped`]). Property: no panic, never more than
/// the cap out.
pub fn gzip(data: &[u8]) {
    if let Ok(out) = crate::limits::gunzip_capped(data, FUZZ_GZIP_CAP) {
        assert!(out.len() as u64 <= FUZZ_GZIP_CAP);
    }
}

/// Label and field selectors ([`crate::api::selectors::LabelQuery::parse`],
/// [`crate::api::selectors::FieldQuery::parse`]), then matching a small object. Property: no
/// panic.
pub fn label_selector(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let obj = serde_json::json!({"metadata": {"name": "worker-0", "labels": {
        "node-role.kubernetes.io/worker": "", "app": "x", "tier": "1"}}});
    if let Ok(q) = crate::api::selectors::LabelQuery::parse(&text) {
        let _ = q.matches(&obj);
    }
    if let Ok(q) = crate::api::selectors::FieldQuery::parse(&text) {
        let _ = q.matches(&obj);
    }
}

/// JSON patch, merge patch and strategic merge patch application, as the API applies them
/// ([`crate::api::fields::apply_json_patch`], `json_patch::merge`,
/// [`crate::api::fields::strategic_merge`]): the input is a patch applied to a fixed
/// MachineConfig, or `document\npatch` when it holds a newline and both halves are JSON.
/// Property: no panic.
pub fn patch(data: &[u8]) {
    let default_doc = serde_json::json!({"apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig", "metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/etc/a"}]}}}});
    let (doc, patch_bytes) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => match serde_json::from_slice::<Value>(&data[..i]) {
            Ok(d) => (d, &data[i + 1..]),
            Err(_) => (default_doc, data),
        },
        None => (default_doc, data),
    };
    let Ok(p) = serde_json::from_slice::<Value>(patch_bytes) else {
        return;
    };
    let mut merged = doc.clone();
    json_patch::merge(&mut merged, &p);
    let mut strategic = doc.clone();
    crate::api::fields::strategic_merge(&mut strategic, &p);
    if let Ok(ops) = serde_json::from_value::<json_patch::Patch>(p) {
        // All or nothing: an error leaves `doc` untouched (it is borrowed), a success applies
        // every operation, so the result passes every `test` operation of the patch that is
        // not followed by a later change.
        let _ = crate::api::fields::apply_json_patch(&doc, &ops);
    }
}

/// The list and watch query parser ([`crate::api::check_list_query`]): `resourceVersion`,
/// selectors, `resourceVersionMatch`, `asOf`. Property: no panic.
pub fn watch_query(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::api::check_list_query(&text);
}

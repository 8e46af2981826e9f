//! Rules of mco-facts 8.3 on registries.conf; expected values from the facts.

use super::*;
use serde_json::json;

fn idms(name: &str, entries: Value) -> ImageDigestMirrorSet {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"imageDigestMirrors": entries}})).unwrap()
}

fn itms(name: &str, entries: Value) -> ImageTagMirrorSet {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"imageTagMirrors": entries}})).unwrap()
}

fn regs(inputs: &Inputs) -> Vec<toml::Value> {
    let files = generated_files(crate::generate::templates::base_registries_conf(), inputs).unwrap();
    let t: toml::Table = files[0].1.parse().unwrap();
    t["registry"].as_array().unwrap().clone()
}

#[test]
fn digest_and_tag_mirrors_of_one_source_share_one_entry() {
    let inputs = Inputs {
        idms: vec![idms("d", json!([{"source": "quay.io/a", "mirrors": ["m1.example/a"]}]))],
        itms: vec![itms("t", json!([{"source": "quay.io/a", "mirrors": ["m2.example/a"]}]))],
        ..Default::default()
    };
    let r = regs(&inputs);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["location"].as_str(), Some("quay.io/a"));
    let m = r[0]["mirror"].as_array().unwrap();
    assert_eq!(m[0]["location"].as_str(), Some("m1.example/a"));
    assert_eq!(m[0]["pull-from-mirror"].as_str(), Some("digest-only"));
    assert_eq!(m[1]["location"].as_str(), Some("m2.example/a"));
    assert_eq!(m[1]["pull-from-mirror"].as_str(), Some("tag-only"));
    assert!(r[0].get("blocked").is_none());
}

#[test]
fn never_contact_source_blocks_and_mirror_equal_to_source_is_ignored() {
    let inputs = Inputs {
        idms: vec![idms(
            "d",
            json!([{"source": "quay.io/a", "mirrors": ["quay.io/a", "m.example/a"]}, {"source": "r.io/x", "mirrors": ["m.example/x"], "mirrorSourcePolicy": "NeverContactSource"}]),
        )],
        ..Default::default()
    };
    let r = regs(&inputs);
    assert_eq!(r[0]["mirror"].as_array().unwrap().len(), 1);
    assert_eq!(r[1]["blocked"].as_bool(), Some(true));
}

#[test]
fn mirrors_merge_across_objects_in_name_order_and_conflicts_are_named() {
    let inputs = Inputs {
        idms: vec![
            idms(
                "b",
                json!([{"source": "quay.io/a", "mirrors": ["m2.example/a", "m1.example/a"]}]),
            ),
            idms("a", json!([{"source": "quay.io/a", "mirrors": ["m1.example/a"]}])),
        ],
        ..Default::default()
    };
    let r = regs(&inputs);
    let locs: Vec<&str> = r[0]["mirror"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["location"].as_str().unwrap())
        .collect();
    assert_eq!(locs, ["m1.example/a", "m2.example/a"]);
    let bad = Inputs {
        idms: vec![
            idms(
                "a",
                json!([{"source": "quay.io/a", "mirrors": ["m.example/a"], "mirrorSourcePolicy": "NeverContactSource"}]),
            ),
            idms(
                "b",
                json!([{"source": "quay.io/a", "mirrors": ["m.example/a"], "mirrorSourcePolicy": "AllowContactingSource"}]),
            ),
        ],
        ..Default::default()
    };
    let e = generated_files("", &bad).unwrap_err();
    assert!(
        e.contains("conflicting mirrorSourcePolicy")
            && e.contains("ImageDigestMirrorSet \"b\" spec.imageDigestMirrors[0].mirrorSourcePolicy"),
        "{e}"
    );
}

#[test]
fn nested_blocked_scope_gets_the_parent_mirrors_and_image_config_applies() {
    let image: Image = serde_json::from_value(json!({"metadata": {"name": "cluster"}, "spec": {"registrySources": {
        "blockedRegistries": ["quay.io/a/b"], "insecureRegistries": ["insecure.example"], "containerRuntimeSearchRegistries": ["reg.example"]}}})).unwrap();
    let inputs = Inputs {
        idms: vec![idms("d", json!([{"source": "quay.io/a", "mirrors": ["m.example/a"]}]))],
        image: Some(image),
        ..Default::default()
    };
    let files = generated_files(crate::generate::templates::base_registries_conf(), &inputs).unwrap();
    let t: toml::Table = files[0].1.parse().unwrap();
    let r = t["registry"].as_array().unwrap();
    let nested = r
        .iter()
        .find(|e| e["location"].as_str() == Some("quay.io/a/b"))
        .unwrap();
    assert_eq!(nested["blocked"].as_bool(), Some(true));
    assert_eq!(nested["mirror"][0]["location"].as_str(), Some("m.example/a/b"));
    let insecure = r
        .iter()
        .find(|e| e["location"].as_str() == Some("insecure.example"))
        .unwrap();
    assert_eq!(insecure["insecure"].as_bool(), Some(true));
    assert_eq!(files[1].0, SEARCH_REGISTRIES);
    assert!(files[1].1.contains("reg.example"));
}

#[test]
fn admission_names_each_bad_field() {
    let v = json!({"spec": {"imageDigestMirrors": [{"source": "quay.io/a@sha256:00", "mirrors": ["http://m"], "mirrorSourcePolicy": "Sometimes"}]}});
    let fields: Vec<String> = admit(Kind::ImageDigestMirrorSet, &v)
        .into_iter()
        .map(|f| f.field)
        .collect();
    assert_eq!(
        fields,
        [
            "spec.imageDigestMirrors[0].source",
            "spec.imageDigestMirrors[0].mirrors[0]",
            "spec.imageDigestMirrors[0].mirrorSourcePolicy"
        ]
    );
    for ok in [
        "quay.io",
        "quay.io:5000/ns/repo",
        "*.example.com",
        "registry.redhat.io/ubi8",
    ] {
        assert!(valid_scope(ok), "{ok}");
    }
}

#[test]
fn image_config_admission_and_icsp_as_digest_mirrors() {
    let bad = json!({"metadata": {"name": "other"}, "spec": {"registrySources": {
        "allowedRegistries": ["a.io"], "blockedRegistries": ["b.io"], "insecureRegistries": ["http://x"]}}});
    let fields: Vec<String> = admit_image(&bad).into_iter().map(|f| f.field).collect();
    assert_eq!(
        fields,
        [
            "metadata.name",
            "spec.registrySources.insecureRegistries[0]",
            "spec.registrySources"
        ]
    );
    let icsp: ImageContentSourcePolicy = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"repositoryDigestMirrors": [{"source": "registry.redhat.io/ubi8", "mirrors": ["m.example/ubi8"]}]}}))
    .unwrap();
    let r = regs(&Inputs {
        icsp: vec![icsp],
        ..Default::default()
    });
    assert_eq!(r[0]["mirror"][0]["pull-from-mirror"].as_str(), Some("digest-only"));
    assert!(Inputs::default().is_empty());
}

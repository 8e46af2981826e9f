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
    // "b" orders m2 before m1 and "a" does not disagree: the topological merge keeps m2 first.
    assert_eq!(locs, ["m2.example/a", "m1.example/a"]);
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
    assert_eq!(
        files[1].1,
        "unqualified-search-registries = [\"reg.example\"]\nshort-name-mode = \"\"\nadditional-layer-store-auth-helper = \"\"\n"
    );
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

/// MCO's e2e test PolarionID:52520 expects exactly these three lines.
#[test]
fn search_registries_dropin_is_mcos_text() {
    assert_eq!(
        search_registries_dropin(&["quay.io".to_string()]),
        "unqualified-search-registries = [\"quay.io\"]\nshort-name-mode = \"\"\nadditional-layer-store-auth-helper = \"\"\n"
    );
}

/// containers-registries.conf(5): a wildcard scope is `prefix = "*.example.com"` and has no
/// `location`; for mirror-set sources and the Image config's insecure/blocked scopes alike.
#[test]
fn wildcard_scopes_are_prefixes_without_location() {
    let image: Image = serde_json::from_value(json!({"metadata": {"name": "cluster"}, "spec": {"registrySources": {
        "blockedRegistries": ["*.blocked.example"], "insecureRegistries": ["*.insecure.example"]}}}))
    .unwrap();
    let r = regs(&Inputs {
        idms: vec![idms(
            "d",
            json!([{"source": "*.example.com", "mirrors": ["m.example/x"]}]),
        )],
        image: Some(image),
        ..Default::default()
    });
    for (prefix, key) in [
        ("*.example.com", "mirror"),
        ("*.blocked.example", "blocked"),
        ("*.insecure.example", "insecure"),
    ] {
        let e = r
            .iter()
            .find(|e| e["prefix"].as_str() == Some(prefix))
            .unwrap_or_else(|| panic!("{prefix} in {r:?}"));
        assert!(e.get("location").is_none(), "{e:?}");
        assert!(e.get(key).is_some(), "{e:?}");
    }
}

/// MCO `validateMirrors`: an unset mirrorSourcePolicy counts as AllowContactingSource, so it
/// conflicts with NeverContactSource for the same source.
#[test]
fn unset_policy_conflicts_with_never_contact_source() {
    let bad = Inputs {
        idms: vec![
            idms("ic-a", json!([{"source": "quay.io/a", "mirrors": ["m.example/a"]}])),
            idms(
                "ic-b",
                json!([{"source": "quay.io/a", "mirrors": ["m.example/a"], "mirrorSourcePolicy": "NeverContactSource"}]),
            ),
        ],
        ..Default::default()
    };
    let e = generated_files("", &bad).unwrap_err();
    assert!(e.contains("conflicting mirrorSourcePolicy"), "{e}");
    // Both unset, or unset and explicit Allow: no conflict.
    let ok = Inputs {
        idms: vec![
            idms("a", json!([{"source": "quay.io/a", "mirrors": ["m.example/a"]}])),
            idms(
                "b",
                json!([{"source": "quay.io/a", "mirrors": ["n.example/a"], "mirrorSourcePolicy": "AllowContactingSource"}]),
            ),
        ],
        ..Default::default()
    };
    generated_files("", &ok).unwrap();
}

/// The topological merge: ICSP `[m2, src]` and IDMS `[m1, m2]` give m1 then m2 (the source
/// itself is dropped as a mirror; m1 must precede m2).
#[test]
fn mirrors_follow_the_topological_merge() {
    let icsp: ImageContentSourcePolicy = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"repositoryDigestMirrors": [{"source": "quay.io/src", "mirrors": ["m2.example/src", "quay.io/src"]}]}}))
    .unwrap();
    let r = regs(&Inputs {
        icsp: vec![icsp],
        idms: vec![idms(
            "d",
            json!([{"source": "quay.io/src", "mirrors": ["m1.example/src", "m2.example/src"]}]),
        )],
        ..Default::default()
    });
    let locs: Vec<&str> = r[0]["mirror"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["location"].as_str().unwrap())
        .collect();
    assert_eq!(locs, ["m1.example/src", "m2.example/src"]);
    let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (a, b) = (l(&["x", "y", "z"]), l(&["w", "y"]));
    assert_eq!(topo_merge(&[&a, &b]), l(&["x", "w", "y", "z"]));
}

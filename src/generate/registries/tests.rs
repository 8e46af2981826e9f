//! Rules of mco-facts 8.3 on registries.conf and policy.json. The tables named after MCO's
//! tests are ported from `pkg/controller/container-runtime-config/helpers_test.go`
//! (`TestUpdateRegistriesConfig`, `TestUpdatePolicyJSON`) with their expected values.

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
    assert!(
        e.contains(
            "ImageDigestMirrorSet \"ic-a\" spec.imageDigestMirrors[0].mirrorSourcePolicy: AllowContactingSource"
        ) && e.contains(
            "ImageDigestMirrorSet \"ic-b\" spec.imageDigestMirrors[0].mirrorSourcePolicy: NeverContactSource"
        ),
        "{e}"
    );
    // NeverContactSource with the source among its mirrors (MCO `validateMirrors`).
    let own = Inputs {
        idms: vec![idms(
            "own",
            json!([{"source": "quay.io/a", "mirrors": ["quay.io/a", "m.example/a"], "mirrorSourcePolicy": "NeverContactSource"}]),
        )],
        ..Default::default()
    };
    assert!(generated_files("", &own).unwrap_err().starts_with(
        "cannot set mirrorSourcePolicy: NeverContactSource if the source \"quay.io/a\" is one of the mirrors"
    ));
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

/// The worker template's registries.conf as MCO's test builds it.
fn template() -> RegistriesConf {
    RegistriesConf::parse(crate::generate::templates::base_registries_conf()).unwrap()
}

fn reg(location: &str) -> Registry {
    Registry {
        location: location.into(),
        ..Default::default()
    }
}

fn mirror(location: &str, pull: &str) -> Endpoint {
    Endpoint {
        location: location.into(),
        pull_from_mirror: pull.into(),
        ..Default::default()
    }
}

fn insecure_mirror(location: &str, pull: &str) -> Endpoint {
    Endpoint {
        insecure: true,
        ..mirror(location, pull)
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn entries(v: &[(&str, &[&str])]) -> Vec<ImageMirrors> {
    v.iter()
        .map(|(s, m)| ImageMirrors {
            source: s.to_string(),
            mirrors: strs(m),
            mirror_source_policy: None,
        })
        .collect()
}

fn edited(insecure: &[&str], blocked: &[&str], sets: &[edit::MirrorSet]) -> RegistriesConf {
    let mut conf = template();
    edit::edit_registries_conf(&mut conf, &strs(insecure), &strs(blocked), sets).unwrap();
    // What is written decodes to the same configuration.
    assert_eq!(RegistriesConf::parse(&conf.encode()).unwrap(), conf);
    conf
}

fn with(base: RegistriesConf, registries: Vec<Registry>) -> RegistriesConf {
    RegistriesConf { registries, ..base }
}

/// MCO TestUpdateRegistriesConfig "unchanged" and "insecure+blocked": blocked entries first
/// (in their order), then the insecure ones not already there; a scope in both is both.
#[test]
fn mco_update_registries_config_insecure_and_blocked() {
    assert_eq!(edited(&[], &[], &[]), template());
    let got = edited(
        &["registry.access.redhat.com", "insecure.com", "common.com"],
        &["blocked.com", "common.com", "docker.io"],
        &[],
    );
    let want = with(
        template(),
        vec![
            Registry {
                blocked: true,
                ..reg("blocked.com")
            },
            Registry {
                blocked: true,
                insecure: true,
                ..reg("common.com")
            },
            Registry {
                blocked: true,
                ..reg("docker.io")
            },
            Registry {
                insecure: true,
                ..reg("registry.access.redhat.com")
            },
            Registry {
                insecure: true,
                ..reg("insecure.com")
            },
        ],
    );
    assert_eq!(got, want);
}

/// The registries of MCO's "imageContentSourcePolicy" and "insecure+blocked prefixes with
/// wildcard entries" cases (the same expected list, from an ICSP and from an IDMS).
fn mco_wildcard_case_want() -> RegistriesConf {
    let d = edit::DIGEST_ONLY;
    let wild = |prefix: &str| Registry {
        prefix: prefix.into(),
        ..Default::default()
    };
    with(
        template(),
        vec![
            Registry {
                blocked: true,
                mirrors: vec![mirror("other.com/ns-o2", d), insecure_mirror("insecure.com/ns-i2", d)],
                ..reg("blocked.com/ns-b/ns2-b")
            },
            Registry {
                insecure: true,
                mirrors: vec![mirror("blocked.com/ns-b1", d), mirror("other.com/ns-o1", d)],
                ..reg("insecure.com/ns-i1")
            },
            Registry {
                mirrors: vec![
                    insecure_mirror("insecure.com/ns-i2", d),
                    mirror("blocked.com/ns-b/ns3-b", d),
                    insecure_mirror("foo.insecure-example.com/bar", d),
                ],
                ..reg("other.com/ns-o3")
            },
            Registry {
                blocked: true,
                ..reg("blocked.com")
            },
            Registry {
                blocked: true,
                insecure: true,
                ..wild("*.blocked.insecure-example.com")
            },
            Registry {
                blocked: true,
                ..wild("*.blocked-example.com")
            },
            Registry {
                insecure: true,
                ..reg("insecure.com")
            },
            Registry {
                insecure: true,
                ..wild("*.insecure-example.com")
            },
            Registry {
                blocked: true,
                insecure: true,
                ..wild("*.insecure.blocked-example.com")
            },
        ],
    )
}

#[test]
fn mco_update_registries_config_icsp_and_wildcards() {
    let list = entries(&[
        ("insecure.com/ns-i1", &["blocked.com/ns-b1", "other.com/ns-o1"]),
        ("blocked.com/ns-b/ns2-b", &["other.com/ns-o2", "insecure.com/ns-i2"]),
        (
            "other.com/ns-o3",
            &[
                "insecure.com/ns-i2",
                "blocked.com/ns-b/ns3-b",
                "foo.insecure-example.com/bar",
            ],
        ),
    ]);
    let insecure = [
        "insecure.com",
        "*.insecure-example.com",
        "*.insecure.blocked-example.com",
    ];
    let blocked = ["blocked.com", "*.blocked.insecure-example.com", "*.blocked-example.com"];
    for kind in ["ImageContentSourcePolicy", "ImageDigestMirrorSet"] {
        let sets = vec![(kind, "x".to_string(), list.clone(), edit::DIGEST_ONLY)];
        assert_eq!(edited(&insecure, &blocked, &sets), mco_wildcard_case_want(), "{kind}");
    }
}

/// MCO's "imageTagMirrorSet", "imageDigestMirrorSet + imageTagMirrorSet" and "... +
/// imageContentSourcePolicy merging" cases: digest mirrors, then tag mirrors, of one entry per
/// source; an ICSP repeating an IDMS's mirrors adds only its new ones.
#[test]
fn mco_update_registries_config_digest_tag_and_icsp_merging() {
    let (d, t) = (edit::DIGEST_ONLY, edit::TAG_ONLY);
    let itms = (
        "ImageTagMirrorSet",
        "t".to_string(),
        entries(&[
            ("registry-a.com", &["mirror-tag-1.registry-a.com"]),
            ("registry-b.com", &["mirror-tag-1.registry-b.com"]),
        ]),
        t,
    );
    let want = with(
        template(),
        vec![
            Registry {
                mirrors: vec![mirror("mirror-tag-1.registry-a.com", t)],
                ..reg("registry-a.com")
            },
            Registry {
                mirrors: vec![mirror("mirror-tag-1.registry-b.com", t)],
                ..reg("registry-b.com")
            },
        ],
    );
    assert_eq!(edited(&[], &[], &[itms]), want);

    let idms = (
        "ImageDigestMirrorSet",
        "d".to_string(),
        entries(&[
            (
                "registry-a.com",
                &["mirror-digest-1.registry-a.com", "mirror-digest-2.registry-a.com"],
            ),
            (
                "registry-b.com",
                &["mirror-digest-1.registry-b.com", "mirror-digest-2.registry-b.com"],
            ),
        ]),
        d,
    );
    let itms = (
        "ImageTagMirrorSet",
        "t".to_string(),
        entries(&[
            (
                "registry-a.com",
                &["mirror-tag-1.registry-a.com", "mirror-tag-2.registry-a.com"],
            ),
            (
                "registry-b.com",
                &["mirror-tag-1.registry-b.com", "mirror-tag-2.registry-b.com"],
            ),
        ]),
        t,
    );
    let both = |r: &str| Registry {
        mirrors: vec![
            mirror(&format!("mirror-digest-1.{r}"), d),
            mirror(&format!("mirror-digest-2.{r}"), d),
            mirror(&format!("mirror-tag-1.{r}"), t),
            mirror(&format!("mirror-tag-2.{r}"), t),
        ],
        ..reg(r)
    };
    assert_eq!(
        edited(&[], &[], &[idms.clone(), itms.clone()]),
        with(template(), vec![both("registry-a.com"), both("registry-b.com")])
    );

    let icsp = (
        "ImageContentSourcePolicy",
        "p".to_string(),
        entries(&[
            (
                "registry-a.com",
                &[
                    "mirror-digest-1.registry-a.com",
                    "mirror-digest-2.registry-a.com",
                    "mirror-icsp-1.registry-a.com",
                ],
            ),
            (
                "registry-b.com",
                &[
                    "mirror-digest-1.registry-b.com",
                    "mirror-digest-2.registry-b.com",
                    "mirror-icsp-1.registry-b.com",
                ],
            ),
            (
                "registry-c.com",
                &["mirror-icsp-1.registry-c.com", "mirror-icsp-2.registry-c.com"],
            ),
        ]),
        d,
    );
    let merged = |r: &str| Registry {
        mirrors: vec![
            mirror(&format!("mirror-digest-1.{r}"), d),
            mirror(&format!("mirror-digest-2.{r}"), d),
            mirror(&format!("mirror-icsp-1.{r}"), d),
            mirror(&format!("mirror-tag-1.{r}"), t),
            mirror(&format!("mirror-tag-2.{r}"), t),
        ],
        ..reg(r)
    };
    assert_eq!(
        edited(&[], &[], &[idms, icsp, itms]),
        with(
            template(),
            vec![
                merged("registry-a.com"),
                merged("registry-b.com"),
                Registry {
                    mirrors: vec![
                        mirror("mirror-icsp-1.registry-c.com", d),
                        mirror("mirror-icsp-2.registry-c.com", d)
                    ],
                    ..reg("registry-c.com")
                },
            ]
        )
    );
}

/// The degenerate mirror sets of runtime-utils `addMirrorSet` / `mergedMirrors`: a set with no
/// mirror, or whose only mirror is its source, is ignored with its `mirrorSourcePolicy` (no
/// `[[registry]]`, no file, so no new render); a source listed before another mirror stays in
/// its place; a source listed last is dropped; a repeated mirror is written once.
#[test]
fn degenerate_mirror_sets_as_runtime_utils() {
    let only_source = Inputs {
        idms: vec![idms("self", json!([{"source": "quay.io/a", "mirrors": ["quay.io/a"]}]))],
        itms: vec![itms("none", json!([{"source": "quay.io/b", "mirrors": []}]))],
        ..Default::default()
    };
    assert!(only_source.is_empty());
    assert_eq!(
        generated_files(crate::generate::templates::base_registries_conf(), &only_source).unwrap(),
        Vec::<(String, String)>::new()
    );
    // With another input, the degenerate set adds nothing.
    let mut with_other = only_source.clone();
    with_other.idms.push(idms(
        "real",
        json!([{"source": "quay.io/c", "mirrors": ["m.example/c"]}]),
    ));
    let alone = Inputs {
        idms: vec![idms(
            "real",
            json!([{"source": "quay.io/c", "mirrors": ["m.example/c"]}]),
        )],
        ..Default::default()
    };
    let base = crate::generate::templates::base_registries_conf();
    assert_eq!(
        generated_files(base, &with_other).unwrap(),
        generated_files(base, &alone).unwrap()
    );

    let d = edit::DIGEST_ONLY;
    let set = |m: &[&str]| ("ImageDigestMirrorSet", "x".to_string(), entries(&[("quay.io/a", m)]), d);
    let mirrors_of = |sets: &[edit::MirrorSet]| -> Vec<String> {
        edited(&[], &[], sets).registries[0]
            .mirrors
            .iter()
            .map(|m| m.location.clone())
            .collect()
    };
    assert_eq!(
        mirrors_of(&[set(&["m1", "quay.io/a", "m2"])]),
        strs(&["m1", "quay.io/a", "m2"])
    );
    assert_eq!(mirrors_of(&[set(&["m1", "quay.io/a"])]), strs(&["m1"]));
    assert_eq!(mirrors_of(&[set(&["m1", "m1", "m2"])]), strs(&["m1", "m2"]));
    // Two sets that disagree (a cycle): broken by name order, deterministically.
    assert_eq!(
        mirrors_of(&[set(&["m2", "m1"]), set(&["m1", "m2"])]),
        strs(&["m1", "m2"])
    );
    // Sets that agree merge into one order (runtime-utils' example: (B, C) and (A, B)).
    assert_eq!(
        mirrors_of(&[set(&["b", "c"]), set(&["a", "b"])]),
        strs(&["a", "b", "c"])
    );
}

/// runtime-utils `ScopeIsNestedInsideScope`.
#[test]
fn nested_scopes() {
    assert!(edit::scope_is_nested("quay.io", "quay.io"));
    assert!(edit::scope_is_nested("quay.io/ns/repo", "quay.io/ns"));
    assert!(!edit::scope_is_nested("quay.io/nsx", "quay.io/ns"));
    assert!(edit::scope_is_nested("foo.example.com/bar", "*.example.com"));
    assert!(edit::scope_is_nested("*.foo.example.com", "*.example.com"));
    assert!(edit::scope_is_nested("foo.example.com:5000/x", "*.example.com"));
    assert!(!edit::scope_is_nested("quay.io/bar.example.com", "*.example.com"));
    assert!(!edit::scope_is_nested("quay/bar.example.com:400", "*.example.com"));
}

/// MCO TestUpdatePolicyJSON (the cases without a release image or ClusterImagePolicy).
#[test]
fn mco_update_policy_json() {
    let template = crate::generate::templates::base_policy_json();
    let accept = json!([{"type": "insecureAcceptAnything"}]);
    let reject = json!([{"type": "reject"}]);
    let daemon = json!({"": accept});
    let parse = |s: String| -> Value { serde_json::from_str(&s).unwrap() };
    let got = parse(policy_json(template, &[], &strs(&["allow.io", "*.allowed-example.com"])).unwrap());
    let scopes = json!({"allow.io": accept, "*.allowed-example.com": accept});
    assert_eq!(
        got,
        json!({"default": reject, "transports": {"atomic": scopes, "docker": scopes, "docker-daemon": daemon}})
    );
    let got = parse(policy_json(template, &strs(&["block.com", "*.blocked-example.com"]), &[]).unwrap());
    let scopes = json!({"block.com": reject, "*.blocked-example.com": reject});
    assert_eq!(
        got,
        json!({"default": accept, "transports": {"atomic": scopes, "docker": scopes, "docker-daemon": daemon}})
    );
    assert!(policy_json(
        template,
        &strs(&["block.com", "another-block.io"]),
        &strs(&["allow.io"])
    )
    .is_err());
    let got = parse(
        policy_json(
            template,
            &[],
            &strs(&[
                "allow.io",
                "allow.io/namespace1/namespace2",
                "allowed-example.com/namespace1/namespace2/namespace3",
            ]),
        )
        .unwrap(),
    );
    assert_eq!(
        got["transports"]["atomic"],
        json!({"allow.io": accept, "allow.io/namespace1/namespace2": accept})
    );
    assert_eq!(got["transports"]["docker"].as_object().unwrap().len(), 3);
    let got = parse(
        policy_json(
            template,
            &strs(&[
                "block.com",
                "block.com/namespace1/namespace2",
                "blocked-example.com/namespace1/namespace2/namespace3",
            ]),
            &[],
        )
        .unwrap(),
    );
    assert_eq!(
        got["transports"]["atomic"],
        json!({"block.com": reject, "block.com/namespace1/namespace2": reject})
    );
    // Blocked registries are written to policy.json too, with the registries.conf entry.
    let image: Image = serde_json::from_value(
        json!({"metadata": {"name": "cluster"}, "spec": {"registrySources": {"blockedRegistries": ["block.com"]}}}),
    )
    .unwrap();
    let files = generated_files(
        crate::generate::templates::base_registries_conf(),
        &Inputs {
            image: Some(image),
            ..Default::default()
        },
    )
    .unwrap();
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        ["/etc/containers/registries.conf", "/etc/containers/policy.json"]
    );
}

/// The file as MCO's encoder writes it.
#[test]
fn registries_conf_is_encoded_as_mcos_toml_encoder() {
    let conf = edited(
        &["insecure.example.com"],
        &[],
        &[(
            "ImageDigestMirrorSet",
            "d".into(),
            entries(&[("quay.io/a", &["m.example/a"])]),
            edit::DIGEST_ONLY,
        )],
    );
    assert_eq!(
        conf.encode(),
        "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\nshort-name-mode = \"\"\nadditional-layer-store-auth-helper = \"\"\n\n[[registry]]\n  prefix = \"\"\n  location = \"quay.io/a\"\n\n  [[registry.mirror]]\n    location = \"m.example/a\"\n    pull-from-mirror = \"digest-only\"\n\n[[registry]]\n  prefix = \"\"\n  location = \"insecure.example.com\"\n  insecure = true\n"
    );
}

//! Policy decisions on hand-built pools: the canary count's rounding (Kubernetes' round-up of
//! a percentage), the field errors, windows holding a rollout, the canary wave, its bake time,
//! a failed canary pausing the pool once, the resume after the target moves, and the heal cap.

use super::*;
use crate::model::{Canary, MaintenanceWindow, RolloutPolicySpec, SelfHealing};
use serde_json::json;

const A: &str = "rendered-worker-a";
const B: &str = "rendered-worker-b";

fn node(name: &str, current: &str, desired: &str, state: &str, ready: bool, cordoned: bool) -> Node {
    let k = Keys::default();
    serde_json::from_value(json!({
        "metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z",
            "annotations": {k.current_config(): current, k.desired_config(): desired, k.state(): state,
                k.reason(): if state == "Degraded" { "boom" } else { "" }}},
        "spec": {"unschedulable": cordoned},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

fn done(name: &str, on: &str) -> Node {
    node(name, on, on, "Done", true, false)
}

fn policy(spec: RolloutPolicySpec) -> Parsed {
    parse(&RolloutPolicy {
        spec,
        ..Default::default()
    })
    .unwrap()
}

fn canary(size: IntOrString, bake: &str) -> Parsed {
    policy(RolloutPolicySpec {
        canary: Some(Canary {
            size: Some(size),
            bake_time: Some(bake.into()),
        }),
        ..Default::default()
    })
}

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn decide_at(spec: &Parsed, nodes: &[Node], paused: bool, prior: Option<&PoolProgress>, now: &str) -> PoolDecision {
    let input = PoolInput {
        pool: "worker",
        target: B,
        previous: A,
        paused,
        nodes: nodes.iter().collect(),
    };
    decide("p", spec, &input, &Keys::default(), prior, &[], t(now))
}

/// The decision once the paused pool's target moved back to A (a rollback).
fn rolled_back_paused(spec: &Parsed, nodes: &[Node], prior: &PoolProgress, now: &str) -> PoolDecision {
    let input = PoolInput {
        pool: "worker",
        target: A,
        previous: A,
        paused: true,
        nodes: nodes.iter().collect(),
    };
    decide("p", spec, &input, &Keys::default(), Some(prior), &[], t(now))
}

fn set(names: &[&str]) -> Option<BTreeSet<String>> {
    Some(names.iter().map(|s| s.to_string()).collect())
}

#[test]
fn canary_count_rounds_percentages_up() {
    let pct = |s: &str| IntOrString::String(s.into());
    // ceil(value * total / 100), Kubernetes' GetScaledValueFromIntOrPercent(roundUp=true).
    assert_eq!(canary_count(&pct("10%"), 3), Ok(1));
    assert_eq!(canary_count(&pct("34%"), 3), Ok(2));
    assert_eq!(canary_count(&pct("33%"), 3), Ok(1));
    assert_eq!(canary_count(&pct("50%"), 5), Ok(3));
    assert_eq!(canary_count(&pct("0%"), 5), Ok(0));
    assert_eq!(canary_count(&pct("100%"), 5), Ok(5));
    assert_eq!(canary_count(&IntOrString::Int(2), 5), Ok(2));
    assert_eq!(
        canary_count(&pct("10"), 3),
        Err("invalid type: string is not a percentage".into())
    );
    assert!(canary_count(&pct("x%"), 3).is_err());
}

#[test]
fn admission_names_each_bad_field() {
    let p = RolloutPolicy {
        metadata: crate::model::ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        spec: RolloutPolicySpec {
            maintenance_windows: vec![MaintenanceWindow {
                schedule: "0 2 * * 6".into(),
                duration: "0s".into(),
                time_zone: Some("Europe/Berlin".into()),
            }],
            canary: Some(Canary {
                size: Some(IntOrString::String("ten".into())),
                bake_time: Some("-1m".into()),
            }),
            self_healing: Some(SelfHealing {
                enabled: true,
                max_heals_per_node: Some(0),
                period: Some("1x".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let fields: Vec<String> = validate(&p).into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        [
            "spec.maintenanceWindows[0].duration",
            "spec.canary.size",
            "spec.canary.bakeTime",
            "spec.selfHealing.maxHealsPerNode",
            "spec.selfHealing.period"
        ]
    );
}

#[test]
fn outside_a_window_nothing_is_targeted_and_the_next_start_is_said() {
    let spec = policy(RolloutPolicySpec {
        maintenance_windows: vec![MaintenanceWindow {
            schedule: "0 2 * * 6".into(),
            duration: "4h".into(),
            time_zone: Some("Europe/Berlin".into()),
        }],
        ..Default::default()
    });
    let nodes = [done("w0", A), done("w1", A)];
    // Friday.
    let d = decide_at(&spec, &nodes, false, None, "2026-12-04T15:00:00Z");
    assert_eq!(d.allowed, set(&[]));
    assert!(d.condition.0);
    assert_eq!(d.condition.1, "OutsideMaintenanceWindow");
    assert!(
        d.condition
            .2
            .contains("next opens at 2026-12-05T02:00:00+01:00[Europe/Berlin]"),
        "{}",
        d.condition.2
    );
    assert_eq!(d.wake, Some(t("2026-12-05T01:00:00Z")));
    // Saturday, inside: not restricted.
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-12-05T01:00:00Z");
    assert_eq!(d.allowed, None);
    assert!(!d.condition.0);
    assert_eq!(d.wake, Some(t("2026-12-05T05:00:00Z")), "wakes when it closes");
}

#[test]
fn canaries_first_then_bake_then_the_rest() {
    let spec = canary(IntOrString::String("34%".into()), "10m");
    // ceil(34% of 3) = 2 canaries, in MCO's order (same zone and age: input order, w0 w1).
    let nodes = [done("w0", A), done("w1", A), done("w2", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    assert_eq!(d.progress.canaries, ["w0", "w1"]);
    assert_eq!(d.allowed, set(&["w0", "w1"]));
    assert_eq!(d.condition.1, "CanaryUpdating");
    // w0 updating (cordoned), w1 Done on B: still the canary phase, w2 held.
    let nodes = [node("w0", A, B, "Working", true, true), done("w1", B), done("w2", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:05:00Z");
    assert_eq!(d.progress.phase, phase::CANARY);
    assert_eq!(d.allowed, set(&["w0", "w1"]));
    // Both healthy at 00:10: baking until 00:20.
    let nodes = [done("w0", B), done("w1", B), done("w2", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:10:00Z");
    assert_eq!(d.progress.phase, phase::BAKING);
    assert_eq!(d.allowed, set(&[]));
    assert_eq!(d.wake, Some(t("2026-01-01T00:20:00Z")));
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:19:59Z");
    assert_eq!(d.progress.phase, phase::BAKING);
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:20:00Z");
    assert_eq!(d.progress.phase, phase::PROCEEDING);
    assert_eq!(d.allowed, None);
    assert!(!d.condition.0);
    // Proceeding stands even if a canary later goes NotReady (MCO's own rules take over).
    let nodes = [node("w0", B, B, "Done", false, false), done("w1", B), done("w2", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:30:00Z");
    assert_eq!(d.allowed, None);
}

#[test]
fn a_canary_that_degrades_pauses_the_pool_once() {
    let spec = canary(IntOrString::Int(1), "10m");
    let nodes = [done("w0", A), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    let nodes = [node("w0", A, B, "Degraded", true, true), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:01:00Z");
    let why = d.pause.clone().expect("paused");
    assert!(
        why.contains("canary w0 is Degraded on rendered-worker-b: \"boom\""),
        "{why}"
    );
    assert!(
        why.contains("to roll back: mco rollback mcp worker --to rendered-worker-a"),
        "{why}"
    );
    assert_eq!(d.allowed, set(&[]), "nothing else is targeted");
    assert_eq!(d.condition.1, "CanaryFailed");
    // The pool is paused now: no second pause, still nothing targeted.
    let d2 = decide_at(&spec, &nodes, true, Some(&d.progress), "2026-01-01T00:02:00Z");
    assert_eq!(d2.pause, None);
    assert_eq!(d2.allowed, set(&[]));
    // A user resumes it: theirs is the last word.
    let d3 = decide_at(&spec, &nodes, false, Some(&d2.progress), "2026-01-01T00:03:00Z");
    assert_eq!(d3.pause, None);
    assert_eq!(d3.allowed, None);
    // A rollback moves the target: the policy resumes the pool it paused.
    let d4 = rolled_back_paused(&spec, &nodes, &d2.progress, "2026-01-01T00:04:00Z");
    assert!(d4.resume.is_some());
}

#[test]
fn a_canary_not_ready_after_its_update_fails_it() {
    let spec = canary(IntOrString::Int(1), "0s");
    let nodes = [done("w0", A), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    // Rebooting (NotReady, Working) is not a failure.
    let nodes = [node("w0", A, B, "Working", false, true), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:01:00Z");
    assert_eq!(d.pause, None);
    let nodes = [node("w0", B, B, "Done", false, false), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:02:00Z");
    assert!(d
        .pause
        .unwrap()
        .contains("canary w0 is NotReady after updating to rendered-worker-b"));
}

#[test]
fn heals_are_capped_per_node() {
    let spec = policy(RolloutPolicySpec {
        self_healing: Some(SelfHealing {
            enabled: true,
            max_heals_per_node: Some(2),
            period: Some("1h".into()),
        }),
        ..Default::default()
    });
    let bad = "rendered-worker-bad";
    let nodes = [node("w0", B, bad, "Degraded", true, true), done("w1", B)];
    let input = PoolInput {
        pool: "worker",
        target: B,
        previous: B,
        paused: false,
        nodes: nodes.iter().collect(),
    };
    let k = Keys::default();
    let d = decide("p", &spec, &input, &k, None, &[], t("2026-01-01T01:00:00Z"));
    assert_eq!(d.heals.len(), 1);
    assert!(d.heals[0].1.contains("node w0 is Degraded on rendered-worker-bad, which is no longer pool worker's target; returning it to rendered-worker-b (heal 1 of at most 2 per 1h)"), "{}", d.heals[0].1);
    let heals = |times: &[&str]| {
        vec![NodeHeals {
            node: "w0".into(),
            times: times.iter().map(|s| s.to_string()).collect(),
        }]
    };
    let two = heals(&["2026-01-01T00:10:00Z", "2026-01-01T00:40:00Z"]);
    let d = decide("p", &spec, &input, &k, None, &two, t("2026-01-01T01:00:00Z"));
    assert!(d.heals.is_empty(), "capped");
    assert!(
        d.condition.2.ends_with("; node w0 stays Degraded on rendered-worker-bad: its self-healing is at its cap (2 of at most 2 per 1h), the next heal at 2026-01-01T01:10:00Z"),
        "the cap is said: {}",
        d.condition.2
    );
    assert_eq!(
        d.wake,
        Some(t("2026-01-01T01:10:00Z")),
        "wakes when the oldest heal leaves the hour"
    );
    let d = decide("p", &spec, &input, &k, None, &two, t("2026-01-01T01:10:00Z"));
    assert_eq!(d.heals.len(), 1, "one heal left the period");
    // Paused pools are not healed.
    let paused = PoolInput { paused: true, ..input };
    assert!(decide("p", &spec, &paused, &k, None, &[], t("2026-01-01T01:00:00Z"))
        .heals
        .is_empty());
}

#[test]
fn canaries_are_nodes_the_change_still_has_to_reach() {
    let spec = canary(IntOrString::Int(2), "10m");
    // w0 is already Done on the target (it proves nothing), w1 is cordoned (MCO would not take
    // it as a candidate), w3 already targets B: w3 first, then the Ready w2.
    let nodes = [
        done("w0", B),
        node("w1", A, A, "Done", true, true),
        done("w2", A),
        node("w3", A, B, "Working", true, true),
    ];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    assert_eq!(d.progress.canaries, ["w3", "w2"]);
    // With only unready nodes left besides them, those follow in candidate order.
    let spec = canary(IntOrString::Int(3), "10m");
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    assert_eq!(d.progress.canaries, ["w3", "w2", "w1"]);
    // A node Degraded before the rollout is no canary: its state is another change's failure.
    let nodes = [
        node("w0", A, "rendered-worker-bad", "Degraded", true, true),
        done("w1", B),
    ];
    let d = decide_at(
        &canary(IntOrString::Int(1), "10m"),
        &nodes,
        false,
        None,
        "2026-01-01T00:00:00Z",
    );
    assert!(d.progress.canaries.is_empty(), "{:?}", d.progress.canaries);
    assert_eq!(d.pause, None);
}

#[test]
fn canary_sizes_are_one_node_to_the_whole_pool() {
    let refused = |size: IntOrString| {
        let p = RolloutPolicy {
            metadata: crate::model::ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: RolloutPolicySpec {
                canary: Some(Canary {
                    size: Some(size),
                    bake_time: None,
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        validate(&p)
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
    };
    let pct = |s: &str| IntOrString::String(s.into());
    assert_eq!(
        refused(IntOrString::Int(0)),
        [r#"spec.canary.size: Invalid value: "0": must be greater than or equal to 1"#]
    );
    assert_eq!(
        refused(IntOrString::Int(-1)),
        [r#"spec.canary.size: Invalid value: "-1": must be greater than or equal to 1"#]
    );
    assert_eq!(
        refused(pct("0%")),
        [r#"spec.canary.size: Invalid value: "0%": must be greater than or equal to 1%"#]
    );
    assert_eq!(
        refused(pct("101%")),
        [r#"spec.canary.size: Invalid value: "101%": must not be greater than 100%"#]
    );
    assert!(refused(IntOrString::Int(1)).is_empty());
    assert!(refused(pct("1%")).is_empty());
    assert!(refused(pct("100%")).is_empty());
}

#[test]
fn a_pause_by_hand_after_a_resume_is_never_lifted_by_the_policy() {
    let spec = canary(IntOrString::Int(1), "10m");
    let nodes = [done("w0", A), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    let nodes = [node("w0", A, B, "Degraded", true, true), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:01:00Z");
    assert!(d.pause.is_some());
    // The user resumes, then pauses the pool by hand.
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-01-01T00:02:00Z");
    let d = decide_at(&spec, &nodes, true, Some(&d.progress), "2026-01-01T00:03:00Z");
    assert_eq!((d.pause.as_ref(), d.resume.as_ref()), (None, None));
    // The target moves on: the pause is the user's, so it stays.
    let d = rolled_back_paused(&spec, &nodes, &d.progress, "2026-01-01T00:04:00Z");
    assert_eq!(d.resume, None);
}

#[test]
fn a_canary_wave_outside_its_window_is_waiting() {
    let spec = policy(RolloutPolicySpec {
        maintenance_windows: vec![MaintenanceWindow {
            schedule: "0 2 * * 6".into(),
            duration: "4h".into(),
            time_zone: Some("Europe/Berlin".into()),
        }],
        canary: Some(Canary {
            size: Some(IntOrString::Int(1)),
            bake_time: Some("10m".into()),
        }),
        ..Default::default()
    });
    let nodes = [done("w0", A), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-12-04T15:00:00Z");
    assert_eq!(d.progress.phase, phase::WAITING);
    assert_eq!(d.progress.canaries, ["w0"], "chosen already, targeted in the window");
    assert_eq!(d.allowed, set(&[]));
    let d = decide_at(&spec, &nodes, false, Some(&d.progress), "2026-12-05T01:00:00Z");
    assert_eq!(d.progress.phase, phase::CANARY);
    assert_eq!(d.allowed, set(&["w0"]));
}

#[test]
fn a_pool_still_paused_after_its_canary_recovered_says_how_to_go_on() {
    let spec = canary(IntOrString::Int(1), "10m");
    let nodes = [done("w0", A), done("w1", A)];
    let d = decide_at(&spec, &nodes, false, None, "2026-01-01T00:00:00Z");
    let failed = [node("w0", A, B, "Degraded", true, true), done("w1", A)];
    let d = decide_at(&spec, &failed, false, Some(&d.progress), "2026-01-01T00:01:00Z");
    // The canary recovers (its drift fixed by hand); the pool stays paused.
    let recovered = [done("w0", B), done("w1", A)];
    let d = decide_at(&spec, &recovered, true, Some(&d.progress), "2026-01-01T00:02:00Z");
    assert_eq!(d.condition.1, "CanaryFailed");
    assert!(
        d.condition.2.starts_with(
            "a canary failed on rendered-worker-b (the reason is in the history: mco history --actor rolloutpolicy/p); the pool stays paused until it is resumed (mco rollout resume mcp worker)"
        ),
        "{}",
        d.condition.2
    );
}

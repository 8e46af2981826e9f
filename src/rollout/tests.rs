//! Rollout tests mirroring MCO `pkg/controller/node/node_controller_test.go` (TestMaxUnavailable,
//! TestSortNodeList, TestGetCandidateMachines) and `status_test.go`.

use super::*;
use crate::model::Keys;
use serde_json::{json, Value};

const A: &str = "rendered-worker-a";
const B: &str = "rendered-worker-b";

/// A node builder: annotations, readiness, labels, creation time.
struct N {
    name: &'static str,
    current: &'static str,
    desired: &'static str,
    state: &'static str,
    reason: &'static str,
    ready: bool,
    cordoned: bool,
    labels: Value,
    created: &'static str,
}

impl N {
    fn new(name: &'static str) -> N {
        N {
            name,
            current: A,
            desired: A,
            state: "Done",
            reason: "",
            ready: true,
            cordoned: false,
            labels: json!({}),
            created: "2024-01-01T00:00:00Z",
        }
    }
    fn on(mut self, current: &'static str, desired: &'static str, state: &'static str) -> N {
        (self.current, self.desired, self.state) = (current, desired, state);
        self
    }
    fn reason(mut self, reason: &'static str) -> N {
        self.reason = reason;
        self
    }
    fn not_ready(mut self) -> N {
        self.ready = false;
        self
    }
    fn cordoned(mut self) -> N {
        self.cordoned = true;
        self
    }
    fn labels(mut self, labels: Value) -> N {
        self.labels = labels;
        self
    }
    fn zone(mut self, zone: &str, created: &'static str) -> N {
        self.labels[ZONE_LABEL] = json!(zone);
        self.created = created;
        self
    }
    fn created(mut self, created: &'static str) -> N {
        self.created = created;
        self
    }
    fn build(self) -> Node {
        let k = Keys::default();
        serde_json::from_value(json!({
            "metadata": {
                "name": self.name,
                "creationTimestamp": self.created,
                "labels": self.labels,
                "annotations": {
                    k.current_config(): self.current, k.desired_config(): self.desired,
                    k.state(): self.state, k.reason(): self.reason,
                },
            },
            "spec": {"unschedulable": self.cordoned},
            "status": {"conditions": [{"type": "Ready", "status": if self.ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }
}

fn build(nodes: Vec<N>) -> Vec<Node> {
    nodes.into_iter().map(N::build).collect()
}

fn refs(nodes: &[Node]) -> Vec<&Node> {
    nodes.iter().collect()
}

#[test]
fn max_unavailable_values() {
    let int = IntOrString::Int;
    let s = |v: &str| IntOrString::String(v.to_string());
    let cases: Vec<(Option<IntOrString>, usize, Result<usize, ()>)> = vec![
        (None, 4, Ok(1)),
        (Some(int(2)), 4, Ok(2)),
        (Some(int(0)), 4, Ok(1)),
        (Some(s("50%")), 4, Ok(2)),
        (Some(s("60%")), 4, Ok(2)),
        (Some(s("10%")), 4, Ok(1)),
        (Some(s("100%")), 0, Ok(1)),
        (Some(s("50 percent")), 4, Err(())),
        (Some(s("60")), 4, Err(())),
        (Some(s("40 %")), 4, Err(())),
        (Some(int(-1)), 4, Err(())),
    ];
    for (value, count, want) in cases {
        let got = max_unavailable(value.as_ref(), count);
        assert_eq!(got.clone().map_err(|_| ()), want, "{value:?} of {count}: {got:?}");
    }
}

fn pool(name: &str, node_selector: Value) -> MachineConfigPool {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeSelector": node_selector}})).unwrap()
}

fn role(r: &str) -> Value {
    json!({"matchLabels": {format!("node-role.kubernetes.io/{r}"): ""}})
}

#[test]
fn pools_for_nodes_resolution() {
    let pools = [
        pool("master", role("master")),
        pool("worker", role("worker")),
        pool("infra", role("infra")),
        pool("gpu", role("gpu")),
        pool("all", json!({})),
    ];
    let r = |roles: &[&str]| {
        let mut labels = serde_json::Map::new();
        for role in roles {
            labels.insert(format!("node-role.kubernetes.io/{role}"), json!(""));
        }
        Value::Object(labels)
    };
    let mut windows = r(&["worker"]);
    windows[OS_LABEL] = json!("windows");
    let nodes = build(vec![
        N::new("w1").labels(r(&["worker"])),
        N::new("m1").labels(r(&["master", "worker"])),
        N::new("i1").labels(r(&["worker", "infra"])),
        N::new("mi").labels(r(&["master", "infra"])),
        N::new("two").labels(r(&["worker", "infra", "gpu"])),
        N::new("win").labels(windows),
        N::new("none").labels(r(&["edge"])),
    ]);
    let m = pools_for_nodes(&pools.iter().collect::<Vec<_>>(), &refs(&nodes));
    assert_eq!(m.nodes_of("worker"), ["w1"]);
    assert_eq!(m.nodes_of("master"), ["m1", "mi"]);
    assert_eq!(m.nodes_of("infra"), ["i1"]);
    assert!(m.nodes_of("gpu").is_empty());
    assert!(m.nodes_of("all").is_empty(), "an empty nodeSelector matches nothing");
    assert_eq!(m.primary.get("i1").map(String::as_str), Some("infra"));
    assert!(!m.primary.contains_key("win") && !m.primary.contains_key("none") && !m.primary.contains_key("two"));
    assert_eq!(
        m.errors,
        ["node two belongs to 2 custom roles, cannot proceed with this Node"]
    );
}

#[test]
fn node_predicates() {
    let k = Keys::default();
    // (node, done, updated to B, unavailable, mcd failing)
    let cases = vec![
        ("done on A", N::new("n").build(), true, false, false, false),
        (
            "done on B",
            N::new("n").on(B, B, "Done").build(),
            true,
            true,
            false,
            false,
        ),
        (
            "working to B",
            N::new("n").on(A, B, "Working").build(),
            false,
            false,
            true,
            false,
        ),
        (
            "degraded to B",
            N::new("n").on(A, B, "Degraded").build(),
            false,
            false,
            false,
            true,
        ),
        (
            "unreconcilable to B",
            N::new("n").on(A, B, "Unreconcilable").build(),
            false,
            false,
            false,
            true,
        ),
        (
            "degraded on A (drift)",
            N::new("n").on(A, A, "Degraded").build(),
            false,
            false,
            true,
            false,
        ),
        ("not ready", N::new("n").not_ready().build(), true, false, true, false),
        ("cordoned", N::new("n").cordoned().build(), true, false, true, false),
        (
            "no annotations",
            N::new("n").on("", "", "").build(),
            false,
            false,
            true,
            false,
        ),
    ];
    for (name, node, done, updated, unavailable, failing) in cases {
        assert_eq!(is_node_done(&node, &k), done, "{name}: done");
        assert_eq!(is_node_updated(&node, &k, B), updated, "{name}: updated");
        assert_eq!(is_node_unavailable(&node, &k), unavailable, "{name}: unavailable");
        assert_eq!(is_node_mcd_failing(&node, &k), failing, "{name}: mcd failing");
    }
}

/// One candidate case: nodes, maxUnavailable, expected candidate names (target is `B`).
fn check_candidates(name: &str, nodes: Vec<N>, max: usize, expected: &[&str]) {
    let nodes = build(nodes);
    assert_eq!(
        select_candidates(B, &refs(&nodes), &Keys::default(), max),
        expected,
        "{name}"
    );
}

#[test]
fn candidates_capacity() {
    check_candidates("one at a time", vec![N::new("a"), N::new("b"), N::new("c")], 1, &["a"]);
    check_candidates("all fit, input order", vec![N::new("c"), N::new("a")], 3, &["c", "a"]);
    check_candidates(
        "one working uses the capacity",
        vec![N::new("a").on(A, B, "Working"), N::new("b")],
        1,
        &[],
    );
    check_candidates(
        "two slots, one working",
        vec![N::new("a").on(A, B, "Working"), N::new("b"), N::new("c")],
        2,
        &["b"],
    );
    check_candidates(
        "not ready nodes are unavailable and not candidates",
        vec![N::new("a").not_ready(), N::new("b"), N::new("c")],
        2,
        &["b"],
    );
    check_candidates(
        "cordoned node uses capacity",
        vec![N::new("a").cordoned(), N::new("b")],
        1,
        &[],
    );
    check_candidates(
        "failing on target uses capacity",
        vec![N::new("a").on(A, B, "Degraded"), N::new("b")],
        1,
        &[],
    );
    check_candidates(
        "failing on target, room left",
        vec![N::new("a").on(A, B, "Degraded"), N::new("b"), N::new("c")],
        2,
        &["b"],
    );
    check_candidates(
        "already updated nodes are not candidates",
        vec![N::new("a").on(B, B, "Done"), N::new("b")],
        2,
        &["b"],
    );
    check_candidates("nothing to do", vec![N::new("a").on(B, B, "Done")], 1, &[]);
}

#[test]
fn candidates_sorted_by_zone_then_age() {
    // TestSortNodeList: zones QQQ < RRR < ZZZ, oldest first within a zone, zone-less last.
    let nodes = vec![
        N::new("z-new").zone("ZZZ", "2024-01-05T00:00:00Z"),
        N::new("nozone-new").created("2024-01-04T00:00:00Z"),
        N::new("q-new").zone("QQQ", "2024-01-03T00:00:00Z"),
        N::new("r-old").zone("RRR", "2024-01-01T00:00:00Z"),
        N::new("q-old").zone("QQQ", "2024-01-02T00:00:00Z"),
        N::new("nozone-old").created("2023-01-01T00:00:00Z"),
    ];
    check_candidates(
        "sorted when over capacity",
        nodes,
        5,
        &["q-old", "q-new", "r-old", "z-new", "nozone-old"],
    );
}

fn status_pool(paused: bool, status: Value) -> MachineConfigPool {
    serde_json::from_value(json!({
        "metadata": {"name": "worker", "generation": 3},
        "spec": {"paused": paused, "configuration": {"name": B, "source": [{"name": "00-worker"}]}},
        "status": status,
    }))
    .unwrap()
}

fn time(s: &str) -> Time {
    Time(s.parse().unwrap())
}

fn cond<'a>(s: &'a MachineConfigPoolStatus, t: &str) -> &'a PoolCondition {
    s.conditions
        .iter()
        .find(|c| c.type_ == t)
        .unwrap_or_else(|| panic!("no {t} condition"))
}

#[test]
fn status_counts_and_conditions() {
    let k = Keys::default();
    let nodes = build(vec![
        N::new("done").on(B, B, "Done"),
        N::new("done-not-ready").on(B, B, "Done").not_ready(),
        N::new("working").on(A, B, "Working"),
        N::new("degraded")
            .on(A, B, "Degraded")
            .reason("content mismatch for file \"/etc/a\"\n\tC:\\x"),
        N::new("old").on(A, A, "Unreconcilable").reason("can't reconcile"),
    ]);
    let pool = status_pool(false, json!({"configuration": {"name": A}}));
    let s = pool_status(&pool, &refs(&nodes), &k, time("2024-02-01T00:00:00Z"));
    assert_eq!(
        (
            s.machine_count,
            s.updated_machine_count,
            s.ready_machine_count,
            s.unavailable_machine_count,
            s.degraded_machine_count
        ),
        (5, 2, 1, 3, 2)
    );
    assert_eq!(s.observed_generation, 3);
    assert_eq!(s.configuration.name, A, "kept until all nodes are updated");
    assert_eq!(cond(&s, "Updated").status, "False");
    let updating = cond(&s, "Updating");
    assert_eq!(
        (updating.status.as_str(), updating.message.as_str()),
        ("True", "All nodes are updating to MachineConfig rendered-worker-b")
    );
    let nd = cond(&s, "NodeDegraded");
    assert_eq!(nd.status, "True");
    assert_eq!(nd.reason, "2 nodes are reporting degraded status on sync");
    assert_eq!(
        nd.message,
        // Go's %q (MCO `pkg/controller/node/status.go`): inner quotes, backslashes and control
        // characters escaped.
        r#"Node degraded is reporting: "content mismatch for file \"/etc/a\"\n\tC:\\x", Node old is reporting: "can't reconcile""#
    );
    assert_eq!(
        (
            cond(&s, "Degraded").status.as_str(),
            cond(&s, "Degraded").message.as_str()
        ),
        ("True", nd.message.as_str())
    );

    let paused = status_pool(true, json!({}));
    let s = pool_status(&paused, &refs(&nodes), &k, time("2024-02-01T00:00:00Z"));
    let updating = cond(&s, "Updating");
    assert_eq!(
        (updating.status.as_str(), updating.message.as_str()),
        (
            "False",
            "Pool is paused; will not update to MachineConfig rendered-worker-b"
        )
    );
}

#[test]
fn status_all_updated_and_empty_pool() {
    let k = Keys::default();
    let nodes = build(vec![N::new("a").on(B, B, "Done"), N::new("b").on(B, B, "Done")]);
    let pool = status_pool(false, json!({"configuration": {"name": A}}));
    for nodes in [refs(&nodes), vec![]] {
        let s = pool_status(&pool, &nodes, &k, time("2024-02-01T00:00:00Z"));
        assert_eq!(cond(&s, "Updated").status, "True");
        assert_eq!(
            cond(&s, "Updated").message,
            "All nodes are updated with MachineConfig rendered-worker-b"
        );
        assert_eq!(cond(&s, "Updating").status, "False");
        assert_eq!(cond(&s, "NodeDegraded").status, "False");
        assert_eq!(cond(&s, "Degraded").status, "False");
        assert_eq!(s.configuration, pool.spec.configuration);
    }
}

#[test]
fn status_keeps_render_degraded_and_is_idempotent() {
    let k = Keys::default();
    let nodes = build(vec![N::new("a").on(B, B, "Done"), N::new("b").on(A, B, "Working")]);
    let render = json!({"type": "RenderDegraded", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z",
        "reason": "", "message": "Failed to render configuration for pool worker: boom"});
    let pool = status_pool(false, json!({"conditions": [render]}));
    let first = pool_status(&pool, &refs(&nodes), &k, time("2024-02-01T00:00:00Z"));
    assert_eq!(
        cond(&first, "RenderDegraded").message,
        "Failed to render configuration for pool worker: boom"
    );
    let degraded = cond(&first, "Degraded");
    assert_eq!((degraded.status.as_str(), degraded.message.as_str()), ("True", ""));

    // Running again later on the result changes nothing.
    let mut again = pool.clone();
    again.status = first.clone();
    let second = pool_status(&again, &refs(&nodes), &k, time("2024-03-01T00:00:00Z"));
    assert_eq!(second, first);

    // A status change moves only that condition's transition time.
    let done = build(vec![N::new("a").on(B, B, "Done"), N::new("b").on(B, B, "Done")]);
    let third = pool_status(&again, &refs(&done), &k, time("2024-04-01T00:00:00Z"));
    assert_eq!(
        cond(&third, "Updated").last_transition_time,
        Some(time("2024-04-01T00:00:00Z"))
    );
    assert_eq!(
        cond(&third, "NodeDegraded").last_transition_time,
        Some(time("2024-02-01T00:00:00Z"))
    );
}

#[test]
fn set_condition_rules() {
    let (t1, t2) = (time("2024-01-01T00:00:00Z"), time("2024-01-02T00:00:00Z"));
    let mut conds = Vec::new();
    set_condition(&mut conds, "RenderDegraded", ConditionStatus::True, "", "boom", &t1);
    set_condition(&mut conds, "RenderDegraded", ConditionStatus::True, "", "bang", &t2);
    assert_eq!(conds.len(), 1);
    assert_eq!(
        (conds[0].message.as_str(), conds[0].last_transition_time.clone()),
        ("bang", Some(t1.clone()))
    );
    set_condition(&mut conds, "RenderDegraded", ConditionStatus::False, "", "", &t2);
    assert_eq!(
        (conds[0].status.as_str(), conds[0].last_transition_time.clone()),
        ("False", Some(t2))
    );
}

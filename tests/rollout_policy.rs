//! RolloutPolicy end to end on a real server and real sandbox daemons, on a manual clock the
//! test moves (never a sleep): a change applied on a Friday waits for Saturday's window and
//! rolls out when it opens; a canary that passes bakes, then the rest follows; a canary that
//! degrades pauses the pool with nothing else targeted, the reason in the history, and once
//! the bad MachineConfig is deleted the policy resumes the pool and heals the canary.

mod common;

use common::*;
use mco::controller::Clock;
use mco::model::{Kind, NodeAnnotations, POLICY_CONDITION};
use mco::state::State;
use serde_json::json;
use std::time::Duration;

const ROLLOUT: Duration = Duration::from_secs(90);

fn t(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn policy(spec: serde_json::Value) -> serde_json::Value {
    let mut spec = spec;
    spec["poolSelector"] = json!({"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}});
    json!({"apiVersion": "policy.mco.dev/v1", "kind": "RolloutPolicy", "metadata": {"name": "workers"}, "spec": spec})
}

fn file_mc(name: &str, path: &str) -> serde_json::Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": path, "mode": 420, "contents": {"source": "data:,policy"}}]}}}})
}

/// Creates an object through the REST API as the admin.
async fn create(c: &Cluster, kind: Kind, obj: &serde_json::Value) {
    c.client.create(kind, obj, None).await.expect("created");
}

/// Waits until the worker pool targets a render other than `old`; returns it.
async fn new_target(c: &Cluster, old: &str) -> String {
    c.wait_for("the worker pool targets a new render", Duration::from_secs(30), |s| {
        s.pools["worker"].spec.configuration.name != old
    })
    .await;
    c.pool("worker").spec.configuration.name
}

/// The first log seq at which `node`'s desiredConfig was `config` (replaying the log).
fn first_targeted(c: &Cluster, node: &str, config: &str) -> Option<u64> {
    let keys = c.keys();
    let mut state = State::default();
    for ev in c.server.hub.store().read_after(0) {
        let ev = ev.unwrap();
        state.apply(&ev);
        if state
            .nodes
            .get(node)
            .is_some_and(|n| NodeAnnotations::read(n, &keys).desired_config == config)
        {
            return Some(ev.seq);
        }
    }
    None
}

fn held(s: &State) -> Option<(String, String, String)> {
    s.pools["worker"]
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == POLICY_CONDITION)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_outside_the_window_waits_for_it_and_rolls_out_when_it_opens() {
    // Friday 2026-12-04 16:00 in Berlin.
    let clock = Clock::manual(t("2026-12-04T15:00:00Z"));
    let c = Cluster::start_with_clock(0, 2, clock.clone()).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let window =
        json!({"maintenanceWindows": [{"schedule": "0 2 * * 6", "duration": "4h", "timeZone": "Europe/Berlin"}]});
    create(&c, Kind::RolloutPolicy, &policy(window)).await;
    create(
        &c,
        Kind::MachineConfig,
        &file_mc("99-worker-friday", "/etc/friday.conf"),
    )
    .await;
    let t1 = new_target(&c, &t0).await;
    c.wait_for("the pool held outside the window", Duration::from_secs(30), |s| {
        held(s).is_some_and(|(st, reason, msg)| {
            st == "True"
                && reason == "OutsideMaintenanceWindow"
                && msg.contains("the next opens at 2026-12-05T02:00:00+01:00[Europe/Berlin]")
        })
    })
    .await;
    let line = match mco::cli::rollout::evaluate(&c.pool("worker"), None) {
        mco::cli::rollout::Step::Waiting { line, .. } => line,
        s => panic!("{s:?}"),
    };
    println!("rollout status: {line}");
    assert!(
        line.contains("held by its rollout policy (OutsideMaintenanceWindow): outside every maintenance window; the next opens at 2026-12-05T02:00:00+01:00[Europe/Berlin]"),
        "{line}"
    );
    for n in workers(&c) {
        assert_eq!(
            c.annotations(&n).desired_config,
            t0,
            "{n} not targeted outside the window"
        );
    }
    // Saturday 02:00 in Berlin: the window opens.
    let opened_after = c.server.hub.store().last_seq();
    clock.set(t("2026-12-05T01:00:00Z"));
    c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    for n in workers(&c) {
        let first = first_targeted(&c, &n, &t1).expect("targeted");
        assert!(
            first > opened_after,
            "{n} targeted at {first}, before the window opened ({opened_after})"
        );
        assert!(c.root(&n).join("etc/friday.conf").exists());
    }
    c.wait_for("the condition no longer holds", Duration::from_secs(10), |s| {
        held(s).is_some_and(|(st, _, msg)| st == "False" && msg.contains("inside a maintenance window until"))
    })
    .await;
    c.stop().await;
}

/// The server's impact preview of `body` (`{"apply": [...], "delete": [...]}`).
async fn preview(c: &Cluster, body: serde_json::Value) -> mco::preview::Impact {
    let answer = json_of(
        c.http()
            .post(format!("{}/apis/history.mco.dev/v1/previews", c.server.url()))
            .json(&body),
    )
    .await;
    serde_json::from_value(answer).expect("an Impact")
}

/// The preview of the fix: deleting the bad MachineConfig.
async fn preview_fix(c: &Cluster) -> mco::preview::Impact {
    preview(
        c,
        json!({"delete": [{"kind": "MachineConfig", "name": "99-worker-owned"}]}),
    )
    .await
}

/// The worker pool's part of an impact.
fn worker_impact(impact: &mco::preview::Impact) -> &mco::preview::PoolImpact {
    impact
        .pools
        .iter()
        .find(|p| p.pool == "worker")
        .expect("the worker pool")
}

/// The server's impact preview of applying a new worker MachineConfig.
async fn preview_of(c: &Cluster) -> mco::preview::Impact {
    preview(c, json!({"apply": [file_mc("99-worker-preview", "/etc/preview.conf")]})).await
}

/// The impact preview (`POST …/previews`, what `mco apply --dry-run` prints) shows the pool's
/// RolloutPolicy: outside its window the rollout waits for the next start, the canary wave
/// comes first and its bake time before the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_shows_the_window_and_the_canary_wave() {
    // Friday 2026-12-04 16:00 in Berlin.
    let clock = Clock::manual(t("2026-12-04T15:00:00Z"));
    let c = Cluster::start_with_clock(0, 3, clock.clone()).await;
    let spec = json!({"maintenanceWindows": [{"schedule": "0 2 * * 6", "duration": "4h", "timeZone": "Europe/Berlin"}],
        "canary": {"size": 1, "bakeTime": "30m"}});
    create(&c, Kind::RolloutPolicy, &policy(spec)).await;
    let impact = preview_of(&c).await;
    let pool = impact
        .pools
        .iter()
        .find(|p| p.pool == "worker")
        .expect("the worker pool changes");
    let policy = pool.policy.as_ref().expect("the governing policy");
    assert_eq!(policy.name, "workers");
    assert!(policy.waits_for_window);
    assert_eq!(
        policy.window,
        "outside every maintenance window; the next opens at 2026-12-05T02:00:00+01:00[Europe/Berlin]"
    );
    assert_eq!(policy.canary_waves, 1);
    assert_eq!(policy.bake_time, "30m");
    // maxUnavailable 1: the canary alone, then the other two one by one, in MCO's order.
    let waves: Vec<Vec<&str>> = pool
        .waves
        .iter()
        .map(|w| w.iter().map(String::as_str).collect())
        .collect();
    assert_eq!(waves, [vec!["worker-0"], vec!["worker-1"], vec!["worker-2"]]);
    let text = mco::preview::render_text(&impact);
    println!("{text}");
    for line in [
        "  rolloutpolicy/workers: outside every maintenance window; the next opens at 2026-12-05T02:00:00+01:00[Europe/Berlin]; nothing rolls out until then\n",
        "  wave 1 (canary, maxUnavailable 1): worker-0\n  then the canaries bake 30m (Done, Ready, not Degraded) before the rest (rolloutpolicy/workers)\n  wave 2 (maxUnavailable 1): worker-1\n",
    ] {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    // Inside the window the preview no longer waits.
    clock.set(t("2026-12-05T01:30:00Z"));
    let impact = preview_of(&c).await;
    let policy = impact.pools[0].policy.clone().expect("the governing policy");
    assert!(!policy.waits_for_window);
    assert!(
        policy
            .window
            .starts_with("inside a maintenance window until 2026-12-05T05:00:00"),
        "{}",
        policy.window
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_passes_bakes_then_the_rest_follow() {
    let clock = Clock::manual(t("2026-06-01T12:00:00Z"));
    let c = Cluster::start_with_clock(0, 3, clock.clone()).await;
    let t0 = c.pool("worker").spec.configuration.name;
    create(
        &c,
        Kind::RolloutPolicy,
        &policy(json!({"canary": {"size": "10%", "bakeTime": "10m"}})),
    )
    .await;
    create(
        &c,
        Kind::MachineConfig,
        &file_mc("99-worker-canary", "/etc/canary.conf"),
    )
    .await;
    let t1 = new_target(&c, &t0).await;
    let keys = c.keys();
    // 10% of 3 nodes, rounded up: one canary; it updates and bakes, the others wait.
    c.wait_for("one canary Done on the new render, baking", ROLLOUT, |s| {
        let on_t1 = s
            .nodes
            .values()
            .filter(|n| NodeAnnotations::read(n, &keys).desired_config == t1)
            .count();
        let canary_done = s.nodes.values().any(|n| mco::rollout::is_node_updated(n, &keys, &t1));
        on_t1 == 1 && canary_done && held(s).is_some_and(|(st, reason, _)| st == "True" && reason == "CanaryBaking")
    })
    .await;
    let (_, _, msg) = held(&c.server.hub.state()).unwrap();
    println!("baking: {msg}");
    // Healthy since the clock's 12:00, the bake time of 10 minutes ends at 12:10.
    assert!(
        msg.ends_with("since 2026-06-01T12:00:00Z; the rest of the pool follows at 2026-06-01T12:10:00Z"),
        "{msg}"
    );
    let canary = workers(&c)
        .into_iter()
        .find(|n| c.annotations(n).desired_config == t1)
        .unwrap();
    let baked_after = c.server.hub.store().last_seq();
    clock.advance(jiff::SignedDuration::from_mins(10));
    c.wait_rolled_out("worker", &t0, ROLLOUT).await;
    for n in workers(&c).into_iter().filter(|n| *n != canary) {
        let first = first_targeted(&c, &n, &t1).expect("targeted");
        assert!(
            first > baked_after,
            "{n} targeted at {first}, before the bake time ended"
        );
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_that_degrades_pauses_the_pool_and_is_healed_after_the_fix() {
    let clock = Clock::manual(t("2026-06-01T12:00:00Z"));
    let c = Cluster::start_with_clock(0, 3, clock.clone()).await;
    let t0 = c.pool("worker").spec.configuration.name;
    let spec = json!({"canary": {"size": 1, "bakeTime": "5m"}, "selfHealing": {"enabled": true, "maxHealsPerNode": 1, "period": "1h"}});
    create(&c, Kind::RolloutPolicy, &policy(spec)).await;
    // A file owned by a user the node does not have: the daemon cannot write it.
    let bad = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-worker-owned", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": {"files": [
            {"path": "/etc/owned.conf", "mode": 420, "user": {"name": "alice"}, "contents": {"source": "data:,x"}}]}}}});
    create(&c, Kind::MachineConfig, &bad).await;
    let t_bad = new_target(&c, &t0).await;
    let keys = c.keys();
    c.wait_for("the canary Degraded, the pool paused by the policy", ROLLOUT, |s| {
        s.pools["worker"].spec.paused
            && held(s).is_some_and(|(st, reason, msg)| {
                st == "True"
                    && reason == "CanaryFailed"
                    && msg.contains(&format!("to roll back: mco rollback mcp worker --to {t0}"))
            })
    })
    .await;
    let s = c.server.hub.state();
    let targeted: Vec<&String> = s
        .nodes
        .keys()
        .filter(|n| NodeAnnotations::read(&s.nodes[*n], &keys).desired_config == t_bad)
        .collect();
    assert_eq!(targeted.len(), 1, "only the canary was targeted");
    let canary = targeted[0].clone();
    assert_eq!(NodeAnnotations::read(&s.nodes[&canary], &keys).state, "Degraded");
    let pause = c
        .server
        .hub
        .store()
        .read_after(0)
        .map(Result::unwrap)
        .find(|e| e.object_kind == "MachineConfigPool" && e.actor == "rolloutpolicy/workers")
        .expect("the pause is in the history");
    println!("history: {} {} {}", pause.event_type, pause.actor, pause.reason);
    assert!(
        pause
            .reason
            .contains(&format!("canary {canary} is Degraded on {t_bad}"))
            && pause.reason.contains("failed to retrieve UserID for username: alice")
            && pause.reason.contains("nothing else is targeted"),
        "{}",
        pause.reason
    );
    match mco::cli::rollout::evaluate(&c.pool("worker"), None) {
        mco::cli::rollout::Step::Degraded(text) => {
            println!("rollout status: {text}");
            assert!(
                text.contains("held by its rollout policy (CanaryFailed)")
                    && text.contains(&format!("mco rollback mcp worker --to {t0}")),
                "{text}"
            );
        }
        s => panic!("{s:?}"),
    }
    for n in workers(&c).into_iter().filter(|n| *n != canary) {
        assert_eq!(c.annotations(&n).desired_config, t0, "{n} never targeted");
    }
    // Previewed first: the policy resumes the pool it paused and heals the canary.
    let impact = preview_fix(&c).await;
    let pool = worker_impact(&impact);
    let policy = pool.policy.as_ref().expect("the governing policy");
    assert_eq!(
        (pool.rendered.as_str(), pool.paused),
        (t0.as_str(), false),
        "{impact:?}"
    );
    assert!(policy.resumes_pool, "{impact:?}");
    assert_eq!(policy.paused_for, t_bad);
    assert_eq!(policy.heals, std::slice::from_ref(&canary));
    let text = mco::preview::render_text(&impact);
    assert!(
        text.contains(&format!("  rolloutpolicy/workers resumes the pool it paused for {t_bad}'s failed canary\n"))
            && text.contains(&format!("  node {canary} (Degraded on another render): returned to {t0} by the self-healing of rolloutpolicy/workers\n")),
        "{text}"
    );
    // The fix: the bad MachineConfig deleted. The pool targets t0 again; the policy resumes the
    // pool it paused, and heals the canary back to t0 (an event names why).
    c.client.delete(Kind::MachineConfig, "99-worker-owned").await.unwrap();
    c.wait_for("every node Done on t0, the pool resumed and Updated", ROLLOUT, |s| {
        let p = &s.pools["worker"];
        !p.spec.paused
            && p.spec.configuration.name == t0
            && p.condition_status("Updated") == "True"
            && s.nodes.values().all(|n| {
                let a = NodeAnnotations::read(n, &keys);
                a.state == "Done" && a.current_config == t0 && a.desired_config == t0
            })
    })
    .await;
    let events: Vec<_> = c
        .server
        .hub
        .store()
        .read_after(0)
        .map(Result::unwrap)
        .filter(|e| e.actor == "rolloutpolicy/workers")
        .collect();
    let heal = events
        .iter()
        .find(|e| e.object_kind == "Node" && e.name == canary)
        .expect("the heal is in the history");
    println!("history: {} {} {}", heal.event_type, heal.actor, heal.reason);
    assert!(
        heal.reason.contains(&format!(
            "node {canary} is Degraded on {t_bad}, which is no longer pool worker's target; returning it to {t0} (heal 1 of at most 1 per 1h)"
        )),
        "{}",
        heal.reason
    );
    assert!(
        events
            .iter()
            .any(|e| e.object_kind == "MachineConfigPool" && e.reason.contains("resuming it")),
        "the resume is in the history"
    );
    let policy = c.server.hub.state().get_json(Kind::RolloutPolicy, "workers").unwrap();
    assert_eq!(policy["status"]["heals"][0]["node"], json!(canary));

    // The same failure again within the hour: the canary is at its heal cap, so the preview of
    // the fix heals nobody, and after the fix the pool's condition names the node left Degraded.
    create(&c, Kind::MachineConfig, &bad).await;
    c.wait_for("the canary Degraded again, the pool paused", ROLLOUT, |s| {
        s.pools["worker"].spec.paused && held(s).is_some_and(|(st, reason, _)| st == "True" && reason == "CanaryFailed")
    })
    .await;
    let again = c
        .server
        .hub
        .state()
        .nodes
        .values()
        .find(|n| NodeAnnotations::read(n, &keys).state == "Degraded")
        .and_then(|n| n.metadata.name.clone())
        .expect("a Degraded canary");
    let impact = preview_fix(&c).await;
    let pool = worker_impact(&impact);
    let policy = pool.policy.as_ref().expect("the governing policy");
    assert!(policy.resumes_pool, "{impact:?}");
    // MCO's candidate order picks the same canary (same zone and age: the same node first).
    assert_eq!(again, canary);
    assert_eq!(policy.heals, Vec::<String>::new(), "at its cap: {impact:?}");
    c.client.delete(Kind::MachineConfig, "99-worker-owned").await.unwrap();
    c.wait_for("the node at its cap named in the condition", ROLLOUT, |s| {
        held(s).is_some_and(|(_, _, msg)| {
            msg.contains(&format!(
                "node {canary} stays Degraded on {t_bad}: its self-healing is at its cap (1 of at most 1 per 1h), the next heal at "
            ))
        })
    })
    .await;
    // `mco rollout status` says it too, beside the Degraded node.
    match mco::cli::rollout::evaluate(&c.pool("worker"), None) {
        mco::cli::rollout::Step::Degraded(text) => {
            assert!(
                text.contains("its rollout policy: ") && text.contains("at its cap"),
                "{text}"
            )
        }
        s => panic!("{s:?}"),
    }
    c.stop().await;
}

/// Served like every kind: refused with the field named, discovered, printed by kubectl with
/// its columns, and its status kept by the controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kind_is_served_validated_and_printed() {
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    wait_settled(&s).await;
    let client = s.admin_client("test");
    let bad = policy(
        json!({"maintenanceWindows": [{"schedule": "0 2 * * 6", "duration": "4h", "timeZone": "Mars/Olympus"}]}),
    );
    assert_invalid(
        "unknown zone",
        client.create(Kind::RolloutPolicy, &bad, None).await,
        "spec.maintenanceWindows[0].timeZone",
        "unknown time zone Mars/Olympus",
    );
    let bad = policy(json!({"canary": {"size": "ten"}}));
    assert_invalid(
        "bad size",
        client.create(Kind::RolloutPolicy, &bad, None).await,
        "spec.canary.size",
        "string is not a percentage",
    );
    let good = policy(
        json!({"maintenanceWindows": [{"schedule": "0 2 * * 6", "duration": "4h", "timeZone": "Europe/Berlin"}],
        "canary": {"size": "10%", "bakeTime": "30m"}}),
    );
    client.create(Kind::RolloutPolicy, &good, None).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.hub.state().get_json(Kind::RolloutPolicy, "workers").unwrap()["status"]["pools"][0]["pool"]
        != json!("worker")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the policy's status names the worker pool"
        );
        let mut changes = s.hub.changes();
        let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
    }
    if !have_kubectl("the_kind_is_served_validated_and_printed") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let admin = s.admin_token().unwrap();
    let (ok, out, err) = kubectl_as(&s, home.path(), &admin, &["get", "rolloutpolicies"]).await;
    assert!(ok, "{err}");
    println!("{out}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "POOLS", "WINDOWS", "CANARY", "AGE"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["workers", "worker:Done", "1", "10%"]);
    let (ok, out, err) = kubectl_as(
        &s,
        home.path(),
        &admin,
        &["get", "rp", "workers", "-o", "jsonpath={.apiVersion}"],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out, "policy.mco.dev/v1");
    s.stop().await;
}

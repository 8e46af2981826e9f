//! Real clients against a real server on 127.0.0.1:0, as their users drive them (issue 28):
//! kubectl's hand-over between client-side and server-side apply, the Node's reported status (posted
//! again after a rebootless change of its kubelet configuration),
//! `kubectl explain` of every served kind and a `kubectl get -o yaml` List applied back with
//! kubectl's validation. Each test says that it skipped, and why, when kubectl is not on PATH.

mod common;

use common::*;
use serde_json::{json, Value};

/// kubectl as the server's admin, with its own HOME and discovery cache.
struct Kubectl<'a> {
    server: &'a mco::server::RunningServer,
    home: tempfile::TempDir,
    token: String,
}

impl<'a> Kubectl<'a> {
    fn new(server: &'a mco::server::RunningServer) -> Kubectl<'a> {
        Kubectl {
            server,
            home: tempfile::tempdir().unwrap(),
            token: server.admin_token().expect("the admin token"),
        }
    }

    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        kubectl_as(self.server, self.home.path(), &self.token, args).await
    }

    /// Runs and expects success; returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }

    /// Writes `manifest` as JSON into the kubectl home and returns its path.
    fn file(&self, name: &str, manifest: &Value) -> String {
        let path = self.home.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(manifest).unwrap()).unwrap();
        path.display().to_string()
    }

    /// `kubectl diff ARGS` finds nothing: exit 0 and no output (kubectl diff exits 1 on a
    /// difference and prints it).
    async fn no_diff(&self, args: &[&str]) {
        let mut all = vec!["diff"];
        all.extend_from_slice(args);
        let (ok, out, err) = self.run(&all).await;
        assert!(
            ok && out.is_empty(),
            "kubectl {all:?} shows a difference:\n{out}\n{err}"
        );
    }
}

fn mc(kernel_args: &[&str], tier: Option<&str>) -> Value {
    let mut labels = json!({"machineconfiguration.openshift.io/role": "worker"});
    if let Some(t) = tier {
        labels["example.com/tier"] = json!(t);
    }
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": "99-handover", "labels": labels},
        "spec": {"kernelArguments": kernel_args, "config": {"ignition": {"version": "3.4.0"}}}})
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_string(),
                e["operation"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Client-side and server-side apply hand over as kube-apiserver's field manager does for the
/// `kubectl` manager (`lastappliedmanager.go`, `lastappliedupdater.go` in
/// `staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/`): after `kubectl apply`,
/// `kubectl apply --server-side` with a changed value takes the field over from
/// `kubectl-client-side-apply` without a conflict and rewrites the last-applied annotation to
/// what it applied; going back to `kubectl apply` then prunes a field the manifest dropped;
/// `kubectl diff` finds nothing after each step. Another field manager still conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_and_server_side_apply_hand_over() {
    if !have_kubectl("client_side_and_server_side_apply_hand_over") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let k = Kubectl::new(&s);
    let url = format!(
        "{}/apis/machineconfiguration.openshift.io/v1/machineconfigs/99-handover",
        s.url()
    );
    let stored = || json_of(s.admin_http().get(&url));

    let v1 = k.file("v1.json", &mc(&["a=1"], Some("blue")));
    k.ok(&["apply", "-f", &v1]).await;
    k.no_diff(&["-f", &v1]).await;
    assert!(
        managers(&stored().await).contains(&("kubectl-client-side-apply".into(), "Update".into())),
        "{}",
        stored().await
    );

    // Upgrade: a changed value, applied server-side by kubectl.
    let upgraded = mc(&["a=2"], Some("blue"));
    let v2 = k.file("v2.json", &upgraded);
    let (ok, out, err) = k
        .run(&["apply", "--server-side", "--field-manager=other", "-f", &v2])
        .await;
    assert!(
        !ok && err.contains("conflict with \"kubectl-client-side-apply\"") && err.contains(".spec.kernelArguments"),
        "another manager conflicts with the client-side applier:\n{out}\n{err}"
    );
    let out = k.ok(&["apply", "--server-side", "-f", &v2]).await;
    assert!(out.contains("serverside-applied"), "{out}");
    let obj = stored().await;
    assert_eq!(obj["spec"]["kernelArguments"], json!(["a=2"]), "{obj}");
    assert!(managers(&obj).contains(&("kubectl".into(), "Apply".into())), "{obj}");
    let annotation: Value = serde_json::from_str(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the annotation is kept"),
    )
    .unwrap();
    assert_eq!(annotation, upgraded, "the annotation is the applied configuration");
    k.no_diff(&["--server-side", "-f", &v2]).await;
    k.no_diff(&["-f", &v2]).await;

    // Downgrade: back to client-side apply, the label dropped from the manifest is pruned.
    let v3 = k.file("v3.json", &mc(&["a=2"], None));
    k.ok(&["apply", "-f", &v3]).await;
    let obj = stored().await;
    assert!(
        obj["metadata"]["labels"].get("example.com/tier").is_none(),
        "client-side apply prunes the label the last server-side apply set: {obj}"
    );
    assert_eq!(obj["spec"]["kernelArguments"], json!(["a=2"]), "{obj}");
    k.no_diff(&["-f", &v3]).await;
    s.stop().await;
}

/// `kubectl explain` works for every kind discovery lists (kubectl reads each group-version's
/// OpenAPI v3 document), and discovery lists each kind once: the configured MachineConfig
/// group, not its alias (whose paths still answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_every_served_kind() {
    if !have_kubectl("kubectl_explains_every_served_kind") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let k = Kubectl::new(&s);
    let wide = k.ok(&["api-resources", "--no-headers"]).await;
    let kinds: Vec<&str> = wide.lines().filter_map(|l| l.split_whitespace().last()).collect();
    let machine_configs = kinds.iter().filter(|k| **k == "MachineConfig").count();
    assert_eq!(machine_configs, 1, "one MachineConfig resource in discovery:\n{wide}");
    let names = k.ok(&["api-resources", "--no-headers", "-o", "name"]).await;
    let names: Vec<&str> = names.lines().collect();
    // NAME SHORTNAMES APIVERSION NAMESPACED KIND (short names may be empty).
    let resources: Vec<(&str, &str)> = wide
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((*f.first()?, *f.get(f.len().checked_sub(3)?)?))
        })
        .collect();
    for must in [
        "events",
        "nodes",
        "pods",
        "events.history.mco.dev",
        "tokens.auth.mco.dev",
        "selfsubjectreviews.authentication.k8s.io",
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
        "machineconfigs.machineconfiguration.openshift.io",
    ] {
        assert!(names.contains(&must), "{must} is not in discovery: {names:?}");
    }
    assert_eq!(resources.len(), names.len(), "{wide}");
    for (name, api_version) in &resources {
        let out = k.ok(&["explain", name, "--api-version", api_version]).await;
        assert!(
            out.contains("KIND:") && out.contains("FIELDS:"),
            "kubectl explain {name}:\n{out}"
        );
    }
    let out = k.ok(&["explain", "machineconfigs.spec.kernelArguments"]).await;
    assert!(
        out.contains("KernelArguments contains a list of kernel arguments"),
        "{out}"
    );
    // The alias group is not discovered, yet served at its paths.
    let raw = k
        .ok(&["get", "--raw", "/apis/machineconfiguration.alauda.io/v1/machineconfigs"])
        .await;
    let list: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["items"][0]["apiVersion"], "machineconfiguration.alauda.io/v1");
    s.stop().await;
}

/// `kubectl get -o yaml` of several objects (a `List`) applies back with kubectl's default
/// validation: kubectl validates a List on the client against `/openapi/v2` (protobuf).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_from_kubectl_get_applies_back_with_validation() {
    if !have_kubectl("a_list_from_kubectl_get_applies_back_with_validation") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let k = Kubectl::new(&s);
    for (i, args) in [["a=1"], ["b=2"]].iter().enumerate() {
        let mut m = mc(args, None);
        m["metadata"]["name"] = json!(format!("99-list-{i}"));
        // Selected by no pool: nothing re-renders, so no controller writes a pool between the
        // get and the apply (a stale resourceVersion in the file is a conflict).
        m["metadata"]["labels"] = json!({"machineconfiguration.openshift.io/role": "nobody"});
        let f = k.file(&format!("mc-{i}.json"), &m);
        k.ok(&["apply", "-f", &f]).await;
    }
    let path = k.home.path().join("list.yaml");
    let f = path.display().to_string();
    let mut yaml = String::new();
    // Each round reads the objects again: the file carries their resourceVersions, and an
    // apply over an object changed since is a conflict, as on Kubernetes.
    for validate in ["--validate=true", "--validate=strict"] {
        yaml = k.ok(&["get", "mc,mcp", "-o", "yaml"]).await;
        assert!(yaml.starts_with("apiVersion: v1\nitems:"), "{yaml}");
        std::fs::write(&path, &yaml).unwrap();
        let out = k.ok(&["apply", validate, "-f", &f]).await;
        assert!(
            out.contains("machineconfig.machineconfiguration.openshift.io/99-list-0"),
            "{out}"
        );
    }
    // The v2 document kubectl validates with: every kind's definition, by its GVK.
    let raw = k.ok(&["get", "--raw", "/openapi/v2"]).await;
    let doc: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let gvks: Vec<&Value> = doc["definitions"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|d| d["x-kubernetes-group-version-kind"].get(0))
        .collect();
    for kind in ["MachineConfig", "MachineConfigPool", "Node", "Event", "Lease"] {
        assert!(gvks.iter().any(|g| g["kind"] == kind), "no {kind} in /openapi/v2");
    }
    // A field the schema does not know is refused by the client-side validation.
    let bad = yaml.replacen("  spec:\n", "  spec:\n    bogusField: 1\n", 1);
    std::fs::write(&path, &bad).unwrap();
    let (ok, out, err) = k.run(&["apply", "-f", &f]).await;
    assert!(!ok && err.contains("bogusField"), "{out}\n{err}");
    s.stop().await;
}

/// The machine's figures as the kubelet's cadvisor reads them, read here with the system's own
/// tools: online CPUs, `MemTotal` (bytes), the size of the file system holding `root` (bytes).
struct Machine {
    cpus: i128,
    memory: i128,
    storage: i128,
}

impl Machine {
    fn of(root: &std::path::Path) -> Machine {
        let sh = |cmd: &str| {
            let o = std::process::Command::new("sh").args(["-c", cmd]).output().unwrap();
            String::from_utf8(o.stdout).unwrap().trim().to_string()
        };
        let fs: Vec<i128> = sh(&format!("stat -f -c '%b %S' {}", root.display()))
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        Machine {
            cpus: sh("getconf _NPROCESSORS_ONLN").parse().unwrap(),
            memory: sh("awk '/^MemTotal:/ {print $2}' /proc/meminfo")
                .parse::<i128>()
                .unwrap()
                * 1024,
            storage: fs[0] * fs[1],
        }
    }
}

/// A byte count in BinarySI as apimachinery prints it: the largest power of 1024 that divides
/// the value.
fn binary(mut n: i128) -> String {
    let mut suffix = 0;
    while n % 1024 == 0 && n != 0 && suffix < 6 {
        n /= 1024;
        suffix += 1;
    }
    format!("{n}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][suffix])
}

/// A Node carries `status.capacity`, `status.allocatable` and `status.addresses` as the kubelet
/// reports them (`pkg/kubelet/nodestatus/setters.go`): the machine's online CPUs, `MemTotal`
/// and root file system size (cadvisor), `maxPods` of the node's kubelet configuration;
/// allocatable less the kubelet's default hard eviction thresholds (MCO's kubelet template
/// sets no reservations nor thresholds); the address the node reaches the server from and its
/// hostname. Read through kubectl (`-o json`, `describe`, `-o wide`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reports_capacity_allocatable_and_addresses() {
    if !have_kubectl("a_node_reports_capacity_allocatable_and_addresses") {
        return;
    }
    let c = Cluster::start_tls(0, 1).await;
    let k = Kubectl::new(&c.server);
    let node = workers(&c).remove(0);
    let Machine { cpus, memory, storage } = Machine::of(&c.root(&node));
    let (cpus, mem_kib) = (cpus.to_string(), memory / 1024);
    // The node reports its status at each start, as a kubelet reads its configuration at its
    // start: after the reboot of an update the rendered kubelet configuration is on the node,
    // and its maxPods (MCO's template: 250) is the pods capacity.
    let t0 = c.pool("worker").status.configuration.name.clone();
    k.ok(&["apply", "-f", &examples().join("chrony.yaml").display().to_string()])
        .await;
    c.wait_rolled_out("worker", &t0, std::time::Duration::from_secs(90))
        .await;
    let conf = c.root(&node).join("etc/kubernetes/kubelet.conf");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    let status = loop {
        let out = k.ok(&["get", "node", &node, "-o", "json"]).await;
        let n: Value = serde_json::from_str(&out).unwrap();
        let written = std::fs::read_to_string(&conf).ok();
        let max_pods = written
            .as_deref()
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("maxPods: ")).map(str::to_string))
            .unwrap_or_else(|| "110".into());
        if n["status"]["capacity"]["pods"] == json!(max_pods) {
            break n["status"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods capacity is not maxPods {max_pods}: {}",
            n["status"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(status["capacity"]["pods"], "250", "MCO's kubelet template: {status}");
    assert_eq!(status["capacity"]["cpu"], json!(cpus), "{status}");
    assert_eq!(status["capacity"]["memory"], json!(binary(mem_kib * 1024)), "{status}");
    assert_eq!(
        status["capacity"]["ephemeral-storage"],
        json!(binary(storage)),
        "{status}"
    );
    assert_eq!(status["allocatable"]["cpu"], json!(cpus));
    assert_eq!(
        status["allocatable"]["memory"],
        json!(binary(mem_kib * 1024 - 100 * 1024 * 1024)),
        "memory.available<100Mi"
    );
    let nodefs = storage - (storage as f64 * 0.1) as i128;
    assert_eq!(
        status["allocatable"]["ephemeral-storage"],
        json!(binary(nodefs)),
        "nodefs.available<10%"
    );
    assert_eq!(
        status["addresses"],
        json!([{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node}])
    );
    let described = k.ok(&["describe", "node", &node]).await;
    for want in [
        "InternalIP:  127.0.0.1",
        &format!("Hostname:    {node}"),
        "Capacity:",
        "Allocatable:",
    ] {
        assert!(
            described.contains(want),
            "{want:?} not in kubectl describe node:\n{described}"
        );
    }
    let wide = k.ok(&["get", "node", &node, "-o", "wide"]).await;
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    let at = header
        .iter()
        .position(|h| *h == "INTERNAL-IP")
        .expect("INTERNAL-IP column");
    assert_eq!(row[at], "127.0.0.1", "{wide}");
    c.stop().await;
}

/// The JSON type a schema gives, following a field's `$ref` (v2) or `allOf` of one `$ref`
/// (v3) to the named schema in `schemas`: (`type`, `format`, the schema itself).
fn resolved<'a>(schemas: &'a Value, field: &'a Value) -> (String, String, &'a Value) {
    let reference = field["$ref"].as_str().or_else(|| field["allOf"][0]["$ref"].as_str());
    let s = match reference {
        Some(r) => &schemas[r.rsplit('/').next().unwrap()],
        None => field,
    };
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    (text(&s["type"]), text(&s["format"]), s)
}

/// The JSON type of a serialized value, as an OpenAPI `type` names it.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Checks `name` in `schemas` against `full`, a value of the Kubernetes type with every field
/// set (serialized by k8s-openapi, the crate generated from Kubernetes' own OpenAPI
/// document): the same fields, each of the same JSON type (an array's items and a map's
/// values too), with `formats` (field, format) and `required`.
fn check_schema(doc: &str, schemas: &Value, name: &str, full: &Value, formats: &[(&str, &str)], required: &[&str]) {
    let schema = &schemas[name];
    let props = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{doc}: no {name}"));
    let mut have: Vec<&String> = props.keys().collect();
    let mut want: Vec<&String> = full.as_object().unwrap().keys().collect();
    have.sort();
    want.sort();
    assert_eq!(have, want, "{doc}: the fields of {name}");
    for (field, value) in full.as_object().unwrap() {
        let (ty, format, s) = resolved(schemas, &props[field]);
        assert_eq!(ty, json_type(value), "{doc}: {name}.{field} is {value}");
        let expected = formats.iter().find(|(f, _)| f == field).map_or("", |(_, f)| f);
        assert_eq!(format, expected, "{doc}: the format of {name}.{field}");
        let inner = match value {
            Value::Array(a) => Some((&a[0], &s["items"])),
            Value::Object(m) if ty == "object" && props[field].get("additionalProperties").is_some() => {
                m.values().next().map(|v| (v, &s["additionalProperties"]))
            }
            _ => None,
        };
        if let Some((v, item)) = inner {
            let (ity, _, _) = resolved(schemas, item);
            assert_eq!(ity, json_type(v), "{doc}: the items of {name}.{field}");
        }
    }
    let mut req: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    req.sort();
    assert_eq!(req, required, "{doc}: the required fields of {name}");
}

/// ObjectMeta is Kubernetes' in `/openapi/v3` and `/openapi/v2`
/// (`io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`, `k8s.io/apimachinery/pkg/apis/meta/v1/
/// types.go`): exactly the fields of k8s-openapi's ObjectMeta, OwnerReference and
/// ManagedFieldsEntry, each of the JSON type their serialization has, with Kubernetes'
/// formats (`int64`, `date-time` through `Time`), required fields and list semantics
/// (finalizers a set, ownerReferences a map keyed by uid, merged on patch); and
/// `kubectl explain` follows them down to `metadata.finalizers` and `metadata.ownerReferences`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_meta_has_every_kubernetes_field_with_its_type() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        FieldsV1, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
    };
    let dir = tempfile::tempdir().unwrap();
    let s = start_server(dir.path()).await;
    let time = Time(jiff::Timestamp::now());
    let owner = OwnerReference {
        api_version: "v1".into(),
        block_owner_deletion: Some(true),
        controller: Some(true),
        kind: "MachineConfigPool".into(),
        name: "worker".into(),
        uid: "u".into(),
    };
    let managed = ManagedFieldsEntry {
        api_version: Some("v1".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(json!({"f:metadata": {}}))),
        manager: Some("m".into()),
        operation: Some("Update".into()),
        subresource: Some("status".into()),
        time: Some(time.clone()),
    };
    let one = |k: &str| std::collections::BTreeMap::from([(k.to_string(), "v".to_string())]);
    let meta = ObjectMeta {
        annotations: Some(one("a")),
        creation_timestamp: Some(time.clone()),
        deletion_grace_period_seconds: Some(30),
        deletion_timestamp: Some(time.clone()),
        finalizers: Some(vec!["example.com/f".into()]),
        generate_name: Some("g-".into()),
        generation: Some(1),
        labels: Some(one("l")),
        managed_fields: Some(vec![managed.clone()]),
        name: Some("n".into()),
        namespace: Some("ns".into()),
        owner_references: Some(vec![owner.clone()]),
        resource_version: Some("1".into()),
        self_link: Some("/x".into()),
        uid: Some("u".into()),
    };
    let meta_formats = [
        ("creationTimestamp", "date-time"),
        ("deletionTimestamp", "date-time"),
        ("deletionGracePeriodSeconds", "int64"),
        ("generation", "int64"),
    ];
    let (meta, owner, managed) = (
        serde_json::to_value(&meta).unwrap(),
        serde_json::to_value(&owner).unwrap(),
        serde_json::to_value(&managed).unwrap(),
    );
    let m = "io.k8s.apimachinery.pkg.apis.meta.v1";
    let http = s.admin_http();
    let v3 = format!("{}/openapi/v3/apis/machineconfiguration.openshift.io/v1", s.url());
    let core = format!("{}/openapi/v3/api/v1", s.url());
    let v2 = format!("{}/openapi/v2", s.url());
    for (doc, url, at) in [
        (&v3, &v3, "/components/schemas"),
        (&core, &core, "/components/schemas"),
        (&v2, &v2, "/definitions"),
    ] {
        let body = json_of(http.get(url.as_str()).header("Accept", "application/json")).await;
        let schemas = body.pointer(at).unwrap_or_else(|| panic!("{doc}: {body}"));
        check_schema(doc, schemas, &format!("{m}.ObjectMeta"), &meta, &meta_formats, &[]);
        check_schema(
            doc,
            schemas,
            &format!("{m}.OwnerReference"),
            &owner,
            &[],
            &["apiVersion", "kind", "name", "uid"],
        );
        check_schema(
            doc,
            schemas,
            &format!("{m}.ManagedFieldsEntry"),
            &managed,
            &[("time", "date-time")],
            &[],
        );
        let props = &schemas[format!("{m}.ObjectMeta")]["properties"];
        assert_eq!(props["finalizers"]["x-kubernetes-list-type"], "set", "{doc}");
        assert_eq!(props["finalizers"]["x-kubernetes-patch-strategy"], "merge", "{doc}");
        let refs = &props["ownerReferences"];
        assert_eq!(
            (
                &refs["x-kubernetes-list-type"],
                &refs["x-kubernetes-list-map-keys"],
                &refs["x-kubernetes-patch-merge-key"]
            ),
            (&json!("map"), &json!(["uid"]), &json!("uid")),
            "{doc}"
        );
        assert_eq!(
            schemas[format!("{m}.OwnerReference")]["x-kubernetes-map-type"],
            "atomic",
            "{doc}"
        );
        // Each field says what it is, in Kubernetes' words.
        for (field, schema) in props.as_object().unwrap() {
            assert!(
                !schema["description"].as_str().unwrap_or("").is_empty(),
                "{doc}: {field} has no description"
            );
        }
        assert!(props["finalizers"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Must be empty before the object is deleted from the registry."));
    }

    if !have_kubectl("object_meta_has_every_kubernetes_field_with_its_type (kubectl explain)") {
        s.stop().await;
        return;
    }
    let k = Kubectl::new(&s);
    let out = k.ok(&["explain", "machineconfigs.metadata.finalizers"]).await;
    assert!(
        out.contains("FIELD: finalizers <[]string>") && out.contains("Must be empty before the object is deleted"),
        "{out}"
    );
    let out = k.ok(&["explain", "machineconfigs.metadata.ownerReferences"]).await;
    for line in [
        "FIELD: ownerReferences <[]OwnerReference>",
        "blockOwnerDeletion\t<boolean>",
        "uid\t<string> -required-",
    ] {
        assert!(out.contains(line), "no {line:?} in:\n{out}");
    }
    let out = k.ok(&["explain", "nodes.metadata.deletionTimestamp"]).await;
    assert!(
        out.contains("FIELD: deletionTimestamp <string>")
            && out.contains("DeletionTimestamp is RFC 3339 date and time"),
        "{out}"
    );
    let out = k
        .ok(&["explain", "machineconfigpools.metadata.deletionGracePeriodSeconds"])
        .await;
    assert!(out.contains("FIELD: deletionGracePeriodSeconds <integer>"), "{out}");
    let out = k.ok(&["explain", "machineconfigs.metadata.managedFields.time"]).await;
    assert!(out.contains("FIELD: time <string>"), "{out}");
    s.stop().await;
}

/// A rebootless change of the node's kubelet configuration shows in the Node's status, as a
/// restarted kubelet posts it: a KubeletConfig (kubeReserved, evictionHard, maxPods) under a
/// node disruption policy that restarts `kubelet.service` for `/etc/kubernetes/kubelet.conf`
/// rolls out without a reboot (same boot id), and `kubectl get node -o yaml` then shows
/// `status.allocatable` as the kubelet computes it (`GetNodeAllocatableReservation`: capacity
/// less kube-reserved, system-reserved and the hard eviction thresholds, a percentage taken of
/// the capacity) and `status.capacity.pods` the new `maxPods`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebootless_kubelet_configuration_change_is_posted_in_the_node_status() {
    if !have_kubectl("a_rebootless_kubelet_configuration_change_is_posted_in_the_node_status") {
        return;
    }
    let c = Cluster::start_tls(0, 1).await;
    let k = Kubectl::new(&c.server);
    let node = workers(&c).remove(0);
    let boot_id = |c: &Cluster| {
        c.server.hub.state().nodes[node.as_str()]
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.boot_id.clone())
            .unwrap()
    };
    let booted = boot_id(&c);
    let policy = json!({
        "apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"nodeDisruptionPolicy": {"files": [{
            "path": "/etc/kubernetes/kubelet.conf",
            "actions": [{"type": "Restart", "restart": {"serviceName": "kubelet.service"}}]
        }]}}
    });
    k.ok(&["apply", "-f", &k.file("policy.json", &policy)]).await;
    let kubelet_config = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig",
        "metadata": {"name": "reserve"},
        "spec": {
            "machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
            "kubeletConfig": {
                "maxPods": 200,
                "kubeReserved": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
                "evictionHard": {"memory.available": "300Mi", "nodefs.available": "5%"}
            }
        }
    });
    let t0 = c.pool("worker").status.configuration.name.clone();
    k.ok(&["apply", "-f", &k.file("kubelet.json", &kubelet_config)]).await;
    c.wait_rolled_out("worker", &t0, std::time::Duration::from_secs(90))
        .await;
    assert_eq!(boot_id(&c), booted, "the update reboots: the policy did not apply");
    let conf = std::fs::read_to_string(c.root(&node).join("etc/kubernetes/kubelet.conf")).unwrap();
    assert!(conf.contains("maxPods: 200"), "{conf}");
    let journal = std::fs::read_to_string(c.root(&node).join("var/log/mco-host-journal")).unwrap_or_default();
    assert!(journal.contains("systemctl restart kubelet.service"), "{journal}");
    let Machine {
        cpus,
        memory: mem,
        storage,
    } = Machine::of(&c.root(&node));
    let (mi, gi) = (1024 * 1024, 1024 * 1024 * 1024);
    let want_alloc = json!({
        "cpu": format!("{}m", cpus * 1000 - 250),
        "memory": binary(mem - 512 * mi - 300 * mi),
        "ephemeral-storage": binary(storage - gi - (storage as f64 * 0.05) as i128),
        "pods": "200",
    });
    // The daemon posts the status once the kubelet restart is done: read it as kubectl does.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = k.ok(&["get", "node", &node, "-o", "yaml"]).await;
        let n: Value = serde_saphyr::from_str(&out).unwrap();
        if n["status"]["allocatable"] == want_alloc {
            assert_eq!(n["status"]["capacity"]["pods"], "200");
            assert_eq!(n["status"]["capacity"]["cpu"], json!(cpus.to_string()));
            assert_eq!(n["status"]["capacity"]["memory"], json!(binary(mem)));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "allocatable is not {want_alloc}: {}",
            n["status"]
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    c.stop().await;
}

/// One core Event read by the name a list gives it, as kube-apiserver serves
/// `GET /api/v1/namespaces/default/events/NAME`: `kubectl get event/NAME` answers the list's
/// item, `kubectl describe events` describes each, and a name that is not one is kubectl's
/// `Error from server (NotFound): events "NAME" not found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_one_event_by_name() {
    if !have_kubectl("kubectl_reads_one_event_by_name") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    k.ok(&["create", "-f", &k.file("one.json", &mc(&["a=1"], None))]).await;
    let list: Value = serde_json::from_str(&k.ok(&["get", "events", "-o", "json"]).await).unwrap();
    let items = list["items"].as_array().unwrap();
    assert!(!items.is_empty(), "{list}");
    for item in items {
        // metav1.Time in whole seconds; an ObjectReference's empty fields left out (omitempty),
        // as for the admin token's Event (a Token has no uid, nor a served apiVersion).
        let created = item["metadata"]["creationTimestamp"].as_str().unwrap();
        assert!(created.ends_with('Z') && !created.contains('.'), "{item}");
        for t in ["firstTimestamp", "lastTimestamp"] {
            assert_eq!(item[t], item["metadata"]["creationTimestamp"], "{item}");
        }
        assert!(
            item["involvedObject"]
                .as_object()
                .unwrap()
                .values()
                .all(|v| v.as_str().is_some_and(|s| !s.is_empty())),
            "{item}"
        );
        let name = item["metadata"]["name"].as_str().unwrap();
        let one: Value = serde_json::from_str(&k.ok(&["get", &format!("event/{name}"), "-o", "json"]).await).unwrap();
        assert_eq!(&one, item, "event/{name}");
    }
    // Each listed Event described (the controllers may have added more meanwhile).
    let described = k.ok(&["describe", "events"]).await;
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap();
        assert!(
            described
                .lines()
                .any(|l| l.starts_with("Name:") && l.ends_with(&format!(" {name}"))),
            "{name} in\n{described}"
        );
    }
    let last = items.last().unwrap()["metadata"]["name"].as_str().unwrap().to_string();
    let (object, _) = last.rsplit_once('.').unwrap();
    for bad in [
        format!("{object}.ffffffffffffffff"),
        format!("{object}.1"),
        "nope".to_string(),
    ] {
        let (ok, _, err) = k.run(&["get", "event", &bad]).await;
        assert!(!ok);
        assert_eq!(
            err.trim(),
            format!("Error from server (NotFound): events \"{bad}\" not found")
        );
    }
    // Every Event lives in `default` (kubectl would go on to ask for the namespace itself,
    // which mco does not serve, so this is asked directly).
    let other = c
        .http()
        .get(format!(
            "{}/api/v1/namespaces/kube-system/events/{last}",
            c.server.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404);
    let status: Value = other.json().await.unwrap();
    assert_eq!(status["message"], format!("events \"{last}\" not found"), "{status}");
    assert_eq!(status["details"], json!({"name": last, "kind": "events"}), "{status}");
    c.stop().await;
}

/// kube-apiserver's answers as kubectl shows them (issue 28, items 4 and 6), each of which a
/// wrong answer would change: `kubectl replace` of a MachineConfig that does not exist is
/// `Error from server (NotFound)` (a custom resource is not created on update: 404, not 422);
/// a JSON patch whose `test` fails is kubectl's `The request is invalid: …` (422 Invalid, where
/// a 400 prints `Error from server (BadRequest)`); `kubectl events -w`, which watches core
/// Events without listing them first, starts with the Events that already exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_kube_apiservers_status_codes_and_old_events() {
    use tokio::io::AsyncBufReadExt;
    if !have_kubectl("kubectl_shows_kube_apiservers_status_codes_and_old_events") {
        return;
    }
    let c = Cluster::start_tls(0, 0).await;
    let k = Kubectl::new(&c.server);
    let missing = k.file("missing.json", &mc(&["a=1"], None));
    let (ok, out, err) = k.run(&["replace", "-f", &missing]).await;
    assert!(!ok && out.is_empty(), "{out}{err}");
    assert!(
        err.starts_with("Error from server (NotFound): error when replacing") && err.contains("not found"),
        "{err}"
    );
    let name = mc(&["a=1"], None)["metadata"]["name"].as_str().unwrap().to_string();
    assert!(
        !c.server.hub.state().machine_configs.contains_key(&name),
        "created on update"
    );
    k.ok(&["create", "-f", &missing]).await;
    let (ok, out, err) = k
        .run(&[
            "patch",
            "mc",
            &name,
            "--type",
            "json",
            "-p",
            r#"[{"op":"test","path":"/spec/kernelArguments/0","value":"no"}]"#,
        ])
        .await;
    assert!(!ok && out.is_empty(), "{out}{err}");
    assert!(err.starts_with("The request is invalid"), "422 Invalid: {err}");
    let (ok, _, err) = k
        .run(&[
            "patch",
            "mc",
            &name,
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/spec/nope"}]"#,
        ])
        .await;
    assert!(!ok && err.starts_with("The request is invalid"), "422 Invalid: {err}");

    // The create above is an Event already; `kubectl events -w` must show it first.
    let stock = common::kubectl::Kubectl::new(&c.server);
    let mut watch = stock
        .command(&["events", "-w"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains(&format!("machineconfig/{name}")))
    {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("kubectl events -w showed no old event: {seen:?}"))
            .unwrap()
            .expect("kubectl events -w keeps running");
        seen.push(line);
    }
    let _ = watch.kill().await;
    c.stop().await;
}

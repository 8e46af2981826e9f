//! Real clients against a real server on 127.0.0.1:0, as their users drive them (issue 28):
//! kubectl's hand-over between client-side and server-side apply, the Node's reported status,
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
    let sh = |cmd: &str| {
        let o = std::process::Command::new("sh").args(["-c", cmd]).output().unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let cpus = sh("getconf _NPROCESSORS_ONLN");
    let mem_kib: i128 = sh("awk '/^MemTotal:/ {print $2}' /proc/meminfo").parse().unwrap();
    let root = c.root(&node).display().to_string();
    let fs: Vec<i128> = sh(&format!("stat -f -c '%b %S' {root}"))
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let storage = fs[0] * fs[1];
    // BinarySI as apimachinery prints it: the largest power of 1024 that divides the value.
    let binary = |mut n: i128| {
        let mut suffix = 0;
        while n % 1024 == 0 && n != 0 && suffix < 6 {
            n /= 1024;
            suffix += 1;
        }
        format!("{n}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][suffix])
    };
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

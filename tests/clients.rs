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

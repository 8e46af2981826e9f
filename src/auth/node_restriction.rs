//! The NodeRestriction admission rules: which labels and annotations a node may set on its own
//! Node, at registration and after, which Lease it may write (its own node lease) and which
//! MachineConfigNode (its own).

use super::User;

/// MCO's `mcn-guards` ValidatingAdmissionPolicy (`manifests/machineconfigdaemon/
/// mcn-guards-validatingadmissionpolicy.yaml`, bound by `mcn-guards-binding`) on a node
/// identity's creates and updates of a MachineConfigNode or its status: only the one named after
/// its node. Returns the admission error text (after `machineconfignodes.<group> "<name>" is
/// forbidden: `) as kube-apiserver words a policy's denial; a user that is no node is not
/// restricted.
pub fn node_mcn_restriction(user: &User, name: &str) -> Result<(), String> {
    match user.node.as_deref() {
        Some(own) if own != name => Err(format!(
            "ValidatingAdmissionPolicy 'mcn-guards' with binding 'mcn-guards-binding' denied request: updates to MCN {name} can only be done from the MCN's owner node"
        )),
        _ => Ok(()),
    }
}

/// NodeRestriction's rule for a node identity's writes of a Lease (`admitLease`,
/// `plugin/pkg/admission/noderestriction/admission.go`): only in `kube-node-lease`, and only
/// the lease named after its own node. `key` is the lease's store key
/// (`<namespace>/<name>`). Returns the admission error text (after `leases.coordination.k8s.io
/// "<name>" is forbidden: `) when refused; a user that is no node is not restricted.
pub fn node_lease_restriction(user: &User, key: &str) -> Result<(), String> {
    let Some(own) = user.node.as_deref() else {
        return Ok(());
    };
    if crate::model::key_namespace(key) != Some(crate::model::NODE_LEASE_NAMESPACE) {
        return Err(format!(
            "can only access leases in the {:?} system namespace",
            crate::model::NODE_LEASE_NAMESPACE
        ));
    }
    if crate::model::key_name(key) != own {
        return Err("can only access node lease with the same name as the requesting node".into());
    }
    Ok(())
}

/// Labels a node may not add, change or remove on its own Node once it exists
/// (NodeRestriction's `getForbiddenLabels`): those under `node-restriction.kubernetes.io/`,
/// and those in the `kubernetes.io` / `k8s.io` namespaces that are not kubelet labels
/// (`k8s.io/kubelet/pkg/apis/well_known_labels.go` `IsKubeletLabel`). `node-role.kubernetes.io/*`,
/// the labels MachineConfigPools select on, are among them, so a node cannot move itself into
/// another pool.
pub fn is_forbidden_node_label(key: &str) -> bool {
    let (prefix, _) = key.split_once('/').unwrap_or(("", key));
    if prefix == "node-restriction.kubernetes.io" || prefix.ends_with(".node-restriction.kubernetes.io") {
        return true;
    }
    let k8s_namespace = prefix == "kubernetes.io"
        || prefix.ends_with(".kubernetes.io")
        || prefix == "k8s.io"
        || prefix.ends_with(".k8s.io");
    k8s_namespace && !is_kubelet_label(key, prefix)
}

/// Kubernetes' `IsKubeletLabel`: the labels a kubelet may set on its Node.
pub(super) fn is_kubelet_label(key: &str, prefix: &str) -> bool {
    const LABELS: [&str; 11] = [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "kubernetes.io/os",
        "kubernetes.io/arch",
    ];
    const NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];
    LABELS.contains(&key)
        || NAMESPACES
            .iter()
            .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")))
}

/// The forbidden labels that differ between two label maps, sorted; empty when the change is
/// allowed. Forbidden: [`is_forbidden_node_label`]'s, and every key in `pool_keys` (the label
/// keys some MachineConfigPool's `nodeSelector` reads, [`pool_selector_keys`]), so that a node
/// cannot move itself into or out of a pool whatever labels the pools select on.
pub fn node_restriction_labels(
    old: &serde_json::Map<String, serde_json::Value>,
    new: &serde_json::Map<String, serde_json::Value>,
    pool_keys: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let mut out: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| old.get(*k) != new.get(*k) && (is_forbidden_node_label(k) || pool_keys.contains(*k)))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// NodeRestriction's rules on what node identity `user` writes to its own Node `new`
/// (`plugin/pkg/admission/noderestriction/admission.go`, `admitNode`), with `old` the stored
/// Node (`None`: a create), and mco's additions so that a node can change nothing that decides
/// what it is given:
/// - labels: on create, none of the restricted labels (Kubernetes' reserved ones,
///   [`is_forbidden_node_label`], and every key a pool selects on, `pool_keys`) unless its
///   token records that very value ([`TokenRecord::labels`]: the admin's decision); on update,
///   none of them changed ([`node_restriction_labels`]);
/// - taints: never changed (as NodeRestriction), and none registered (stricter: a kubelet may
///   register with taints; mco's daemons never do, and taints are the admin's);
/// - `ownerReferences` and `finalizers`: none set on create, never changed (mco's addition:
///   an owner reference a node sets must not let the garbage collector delete its Node, nor a
///   finalizer keep it);
/// - `spec.configSource`: as NodeRestriction (none on create; never changed to another one).
///
/// Returns the admission message after `nodes "<name>" is forbidden: `, Kubernetes' texts
/// where it has one (`node "worker-0" is not allowed to set the following labels: ...`, `is
/// not allowed to modify labels: ...`, `node "worker-0" is not allowed to modify taints`).
pub fn node_restriction(
    user: &User,
    old: Option<&serde_json::Value>,
    new: &serde_json::Value,
    pool_keys: &std::collections::BTreeSet<String>,
) -> Result<(), String> {
    use serde_json::Value;
    let own = user.node.as_deref().unwrap_or("");
    let empty = serde_json::Map::new();
    let labels = |o: &Value| {
        o["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    // Absent, null and empty are the same list.
    let list = |v: &Value| v.as_array().filter(|a| !a.is_empty()).cloned();
    let restricted = |k: &str| is_forbidden_node_label(k) || pool_keys.contains(k);
    let lists = [
        ("taints", &["spec", "taints"]),
        ("ownerReferences", &["metadata", "ownerReferences"]),
        ("finalizers", &["metadata", "finalizers"]),
    ];
    let at = |o: &Value, path: &[&str; 2]| o[path[0]][path[1]].clone();
    let config_source = |o: &Value| o["spec"]["configSource"].clone();
    let Some(old) = old else {
        if !config_source(new).is_null() {
            return Err(format!(
                "node {own:?} is not allowed to create pods with a non-nil configSource"
            ));
        }
        let mut refused: Vec<String> = labels(new)
            .iter()
            .filter(|(k, v)| {
                restricted(k) && user.labels.get(*k).map(|t| Value::String(t.clone())).as_ref() != Some(*v)
            })
            .map(|(k, _)| k.clone())
            .collect();
        refused.sort();
        if !refused.is_empty() {
            return Err(format!(
                "node {own:?} is not allowed to set the following labels: {}",
                refused.join(", ")
            ));
        }
        for (field, path) in lists {
            if list(&at(new, path)).is_some() {
                return Err(format!("node {own:?} is not allowed to set {field}"));
            }
        }
        return check_registration_annotations(own, new);
    };
    if !config_source(new).is_null() && config_source(new) != config_source(old) {
        return Err(format!(
            "node {own:?} is not allowed to update configSource to a new non-nil configSource"
        ));
    }
    for (field, path) in lists {
        if list(&at(new, path)) != list(&at(old, path)) {
            return Err(format!("node {own:?} is not allowed to modify {field}"));
        }
    }
    let changed = node_restriction_labels(&labels(old), &labels(new), pool_keys);
    if !changed.is_empty() {
        return Err(format!("is not allowed to modify labels: {}", changed.join(", ")));
    }
    let annotation = |o: &Value, k: &str| o["metadata"]["annotations"][k].clone();
    let moved: Vec<String> = controller_annotations()
        .into_iter()
        .filter(|k| annotation(old, k) != annotation(new, k))
        .collect();
    if !moved.is_empty() {
        return Err(format!(
            "node {own:?} is not allowed to modify annotations: {}",
            moved.join(", ")
        ));
    }
    Ok(())
}

/// The Node annotations only controllers write, under every accepted group: `desiredConfig`
/// (the node controller's choice of what the node is given) and `lastAppliedDrain` (the drain
/// controller's answer to the daemon's `desiredDrain`). MCO's daemon may write its whole Node;
/// mco keeps these two from a node identity so that it cannot point itself at another pool's
/// rendered config (its daemon would apply it) nor fake a completed drain.
pub(super) fn controller_annotations() -> Vec<String> {
    crate::model::ACCEPTED_GROUPS
        .iter()
        .flat_map(|g| [format!("{g}/desiredConfig"), format!("{g}/lastAppliedDrain")])
        .collect()
}

/// On a node's create: no `lastAppliedDrain`, and a `desiredConfig` only equal to the
/// `currentConfig` it registers with (the config it booted, as MCO's first boot records both),
/// so that registering does not choose what the node is given either.
pub(super) fn check_registration_annotations(own: &str, new: &serde_json::Value) -> Result<(), String> {
    let annotation = |k: &str| new["metadata"]["annotations"][k].as_str().map(str::to_string);
    for g in crate::model::ACCEPTED_GROUPS {
        let desired = annotation(&format!("{g}/desiredConfig"));
        let current = annotation(&format!("{g}/currentConfig"));
        let drain = format!("{g}/lastAppliedDrain");
        if annotation(&drain).is_some() {
            return Err(format!("node {own:?} is not allowed to set annotations: {drain}"));
        }
        if desired.is_some() && desired != current {
            return Err(format!(
                "node {own:?} is not allowed to set annotations: {g}/desiredConfig (other than its currentConfig)"
            ));
        }
    }
    Ok(())
}

/// The labels a node's Node is registered with: those of `obj` (a Node a node identity
/// creates, admitted by [`node_restriction`]) with its token's labels
/// ([`TokenRecord::labels`]) set over them. Anything but a node identity's create is left as
/// it is.
pub fn registration_labels(user: &User, obj: &mut serde_json::Value) {
    if user.node.is_none() || user.labels.is_empty() {
        return;
    }
    let Some(meta) = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| serde_json::json!({})))
    else {
        return;
    };
    if meta.is_null() {
        *meta = serde_json::json!({});
    }
    let Some(meta) = meta.as_object_mut() else { return };
    let labels = meta.entry("labels").or_insert_with(|| serde_json::json!({}));
    if labels.is_null() {
        *labels = serde_json::json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        for (k, v) in &user.labels {
            labels.insert(k.clone(), serde_json::Value::String(v.clone()));
        }
    }
}

/// The label keys the pools' `nodeSelector`s read (`matchLabels` keys and `matchExpressions`
/// keys): a node's labels under these keys decide its pool, so a node identity may not change
/// them ([`node_restriction_labels`]).
pub fn pool_selector_keys<'a>(
    pools: impl IntoIterator<Item = &'a crate::model::MachineConfigPool>,
) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::new();
    for sel in pools.into_iter().filter_map(|p| p.spec.node_selector.as_ref()) {
        keys.extend(sel.match_labels.iter().flatten().map(|(k, _)| k.clone()));
        keys.extend(sel.match_expressions.iter().flatten().map(|r| r.key.clone()));
    }
    keys
}

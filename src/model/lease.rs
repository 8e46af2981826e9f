//! The `coordination.k8s.io/v1` Lease, the one namespaced kind mco serves, and the node leases
//! of node liveness (README "Node liveness").
//!
//! Owns the kind's names (group, the `kube-node-lease` namespace, the store key
//! `<namespace>/<name>` of a namespaced object), the node lease's settings as the kubelet has
//! them, and Kubernetes' admission rules of a Lease (`pkg/apis/coordination/validation/
//! validation.go` `ValidateLease`) with its messages. Pure: no clock but the one
//! [`renewed_at`] reads from the object.

use super::ObjectMeta;
use crate::validation::FieldError;
pub use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// The API group of Lease.
pub const COORDINATION_GROUP: &str = "coordination.k8s.io";

/// The namespace of node leases (`corev1.NamespaceNodeLease`): one Lease per node, named
/// after it.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// `spec.leaseDurationSeconds` of a node lease: the kubelet's `--node-lease-duration-seconds`
/// default (40).
pub const NODE_LEASE_DURATION_SECONDS: i32 = 40;

/// How often a node renews its lease: the kubelet renews every quarter of the lease duration
/// (`nodeLeaseRenewIntervalFraction` 0.25 of 40 s, `pkg/kubelet/kubelet.go`).
pub const NODE_LEASE_RENEW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The key a namespaced object is stored and addressed under (`<namespace>/<name>`, as
/// Kubernetes' storage keys it): the name of its events in the log and of its entries in the
/// projection. `/` is in no object name, so no key of a cluster-scoped object looks like one.
pub fn namespaced_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The store key of the node lease of `node` (`kube-node-lease/<node>`).
pub fn node_lease_key(node: &str) -> String {
    namespaced_key(NODE_LEASE_NAMESPACE, node)
}

/// The name part of a store key: `worker-0` from `kube-node-lease/worker-0`, a cluster-scoped
/// name as it is. What Kubernetes' messages name (`leases.coordination.k8s.io "worker-0" not
/// found`).
pub fn key_name(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, name)| name)
}

/// The namespace part of a store key, `None` for a cluster-scoped one.
pub fn key_namespace(key: &str) -> Option<&str> {
    key.rsplit_once('/').map(|(ns, _)| ns)
}

/// When the lease was last renewed (`spec.renewTime`), `None` when it never was.
pub fn renewed_at(lease: &Lease) -> Option<jiff::Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// The node lease a daemon writes on each renewal: holder the node, duration
/// [`NODE_LEASE_DURATION_SECONDS`], renewed `now` (acquired `now` too when `acquired` is
/// `None`: a new lease).
pub fn node_lease(node: &str, now: jiff::Timestamp, acquired: Option<jiff::Timestamp>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(NODE_LEASE_NAMESPACE.to_string()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(NODE_LEASE_DURATION_SECONDS),
            acquire_time: Some(MicroTime(acquired.unwrap_or(now))),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// The kinds' `metadata.namespace` rule for a namespaced object (`ValidateObjectMeta` with
/// `ValidateNamespaceName`): required, a DNS-1123 label.
pub fn validate_namespace(meta: &ObjectMeta) -> Vec<FieldError> {
    match meta.namespace.as_deref().unwrap_or("") {
        "" => vec![FieldError::new("metadata.namespace", "Required value")],
        ns => super::dns1123_label_errors(ns)
            .iter()
            .map(|m| super::invalid("metadata.namespace", ns, m))
            .collect(),
    }
}

/// Kubernetes' admission of a Lease (`ValidateLease`): the object metadata (name, namespace,
/// labels, annotations, ...), `spec.leaseDurationSeconds` greater than 0, `spec.leaseTransitions`
/// not negative, `spec.strategy` one of the coordinated-lease strategies
/// (`OldestEmulationVersion`) and `spec.preferredHolder` only with a strategy.
///
/// Errors: one [`FieldError`] per bad field, e.g. `spec.leaseDurationSeconds: Invalid value: 0:
/// must be greater than 0`.
pub fn validate_lease(lease: &Lease) -> Vec<FieldError> {
    let mut errors = super::validate_object_meta(&lease.metadata);
    errors.extend(validate_namespace(&lease.metadata));
    let Some(spec) = &lease.spec else {
        return errors;
    };
    if let Some(d) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
        errors.push(FieldError::new(
            "spec.leaseDurationSeconds",
            format!("Invalid value: {d}: must be greater than 0"),
        ));
    }
    if let Some(t) = spec.lease_transitions.filter(|t| *t < 0) {
        errors.push(FieldError::new(
            "spec.leaseTransitions",
            format!("Invalid value: {t}: must be greater than or equal to 0"),
        ));
    }
    let strategy = spec.strategy.as_deref().unwrap_or("");
    if spec.strategy.is_some() && strategy != "OldestEmulationVersion" {
        errors.push(FieldError::new(
            "spec.strategy",
            format!(
                "Unsupported value: {}: supported values: \"OldestEmulationVersion\"",
                super::go_quote(strategy)
            ),
        ));
    }
    if spec.preferred_holder.as_deref().is_some_and(|h| !h.is_empty()) && strategy.is_empty() {
        errors.push(FieldError::new(
            "spec.preferredHolder",
            "Forbidden: may only be specified if `strategy` is defined",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_namespace_and_name() {
        assert_eq!(node_lease_key("worker-0"), "kube-node-lease/worker-0");
        assert_eq!(key_name("kube-node-lease/worker-0"), "worker-0");
        assert_eq!(key_namespace("kube-node-lease/worker-0"), Some("kube-node-lease"));
        assert_eq!((key_name("worker-0"), key_namespace("worker-0")), ("worker-0", None));
    }

    /// `ValidateLease`'s rules with the API server's messages.
    #[test]
    fn lease_admission() {
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        assert_eq!(validate_lease(&node_lease("worker-0", now, None)), vec![]);
        let mut bad = node_lease("worker-0", now, None);
        bad.metadata.namespace = Some("Kube_Node".into());
        let spec = bad.spec.as_mut().unwrap();
        spec.lease_duration_seconds = Some(0);
        spec.lease_transitions = Some(-1);
        spec.preferred_holder = Some("x".into());
        let fields: Vec<String> = validate_lease(&bad).into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            fields,
            [
                "metadata.namespace: Invalid value: \"Kube_Node\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
            ]
        );
        bad.metadata.namespace = None;
        assert!(validate_lease(&bad)
            .iter()
            .any(|e| e.to_string() == "metadata.namespace: Required value"));
    }

    /// MicroTime is written with microseconds, as `metav1.MicroTime` (RFC 3339,
    /// `2006-01-02T15:04:05.000000Z07:00`).
    #[test]
    fn renew_time_has_microseconds() {
        let now: jiff::Timestamp = "2026-12-03T12:00:00.123456789Z".parse().unwrap();
        let v = serde_json::to_value(node_lease("w", now, None)).unwrap();
        assert_eq!(v["spec"]["renewTime"], "2026-12-03T12:00:00.123456Z");
        assert_eq!(v["spec"]["holderIdentity"], "w");
        assert_eq!(v["spec"]["leaseDurationSeconds"], 40);
    }
}

//! The cluster policies (mco-facts 6.2): MCO's defaults, the user's merged over them, the
//! status that records the merge, and the policies in force for a node's update.

use super::{
    Action, ActionType, FilePolicy, MachineConfiguration, MachineConfigurationStatus, NodeDisruptionPolicyConfig,
    NodeDisruptionPolicyStatus, SshKeyPolicy, UnitPolicy, REGISTRIES_CONF,
};

/// MCO's default cluster policies, in MCO's order (`pkg/apihelpers/apihelpers.go`
/// `defaultClusterPolicies`, mco-facts 6.2).
pub fn default_cluster_policies() -> NodeDisruptionPolicyConfig {
    use ActionType as T;
    let file = |path: &str, actions: Vec<Action>| FilePolicy {
        path: path.into(),
        actions,
    };
    let crio_reload = || vec![Action::reload("crio.service")];
    NodeDisruptionPolicyConfig {
        files: vec![
            file("/var/lib/kubelet/config.json", vec![Action::of(T::None)]),
            file("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", crio_reload()),
            file("/etc/containers/policy.json", crio_reload()),
            file(REGISTRIES_CONF, vec![Action::of(T::Special)]),
            file("/etc/containers/registries.d", crio_reload()),
            file("/etc/crio/policies", crio_reload()),
            file("/etc/nmstate/openshift", vec![Action::of(T::None)]),
            file(
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                vec![
                    Action::restart("coreos-update-ca-trust.service"),
                    Action::restart("crio.service"),
                ],
            ),
            file(
                "/etc/kubernetes/credential-providers",
                vec![Action::restart("kubelet.service")],
            ),
            file(
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                vec![Action::of(T::DaemonReload), Action::restart("kubelet.service")],
            ),
            file("/etc/iri-registry", vec![Action::restart("iri-registry.service")]),
            file(
                "/usr/local/bin/load-registry-image.sh",
                vec![Action::restart("iri-registry.service")],
            ),
            file(
                "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                vec![Action::restart("coreos-update-ca-trust.service")],
            ),
        ],
        units: vec![UnitPolicy {
            name: "iri-registry.service".into(),
            actions: vec![Action::of(T::DaemonReload), Action::restart("iri-registry.service")],
        }],
        sshkey: SshKeyPolicy {
            actions: vec![Action::of(T::None)],
        },
    }
}

/// MCO's `MergeClusterPolicies` (mco-facts 6.2): the defaults, with a user file policy of the
/// same path replacing the default in place (else appended), the same for units by name, and
/// user sshkey actions replacing the default when non-empty.
pub fn merge_cluster_policies(user: Option<&NodeDisruptionPolicyConfig>) -> NodeDisruptionPolicyConfig {
    let mut out = default_cluster_policies();
    let Some(user) = user else { return out };
    for f in &user.files {
        match out.files.iter_mut().find(|d| d.path == f.path) {
            Some(d) => *d = f.clone(),
            None => out.files.push(f.clone()),
        }
    }
    for u in &user.units {
        match out.units.iter_mut().find(|d| d.name == u.name) {
            Some(d) => *d = u.clone(),
            None => out.units.push(u.clone()),
        }
    }
    if !user.sshkey.actions.is_empty() {
        out.sshkey = user.sshkey.clone();
    }
    out
}

/// The status a MachineConfiguration should have for its spec and generation: `clusterPolicies`
/// merged, `observedGeneration` = `metadata.generation`; other status fields kept.
pub fn desired_status(mc: &MachineConfiguration) -> MachineConfigurationStatus {
    MachineConfigurationStatus {
        observed_generation: mc.metadata.generation,
        node_disruption_policy_status: Some(NodeDisruptionPolicyStatus {
            cluster_policies: merge_cluster_policies(mc.spec.node_disruption_policy.as_ref()),
        }),
        other: mc.status.other.clone(),
    }
}

/// The cluster policies in force for a MachineConfiguration `cluster` (`None`: absent): its
/// status when the operator has caught up with its generation, else the same merge computed
/// here from its spec (mco does not make the daemon wait for the status, as MCO's 2 minute
/// poll does).
pub fn policies_for(cluster: Option<&MachineConfiguration>) -> NodeDisruptionPolicyConfig {
    match cluster {
        None => default_cluster_policies(),
        Some(m) => match (&m.status.node_disruption_policy_status, m.status.observed_generation) {
            (Some(s), g) if g == m.metadata.generation => s.cluster_policies.clone(),
            _ => merge_cluster_policies(m.spec.node_disruption_policy.as_ref()),
        },
    }
}

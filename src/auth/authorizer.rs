//! The authorizer: which request attributes each identity may act on ([`authorize`]), the
//! rules a SelfSubjectRulesReview lists, and kube-apiserver's Forbidden message.

use super::{TokenKind, User, GROUP};

/// What a request asks to do, in Kubernetes' authorizer terms (`authorizer.Attributes`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection` for
    /// resources; the lower-case HTTP method for other paths.
    pub verb: String,
    /// True for a resource request (`/api/v1/...`, `/apis/<group>/<version>/...`).
    pub resource_request: bool,
    /// API group (`""` for the core group).
    pub group: String,
    /// Plural resource (`nodes`).
    pub resource: String,
    /// `status`, or empty.
    pub subresource: String,
    /// Object name, or empty for a collection.
    pub name: String,
    /// The request's namespace (`namespaces/<ns>/...`), empty for a cluster-scoped request.
    pub namespace: String,
    /// The URL path of a non-resource request.
    pub path: String,
}

impl Attributes {
    /// A resource request.
    pub fn resource(verb: &str, group: &str, resource: &str, subresource: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            namespace: String::new(),
            path: String::new(),
        }
    }

    /// A non-resource request.
    pub fn path(verb: &str, path: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }
}

pub(super) const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// What a node may do with leases (Kubernetes' `system:node` ClusterRole,
/// `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`); NodeRestriction then allows
/// only its own node lease ([`super::node_lease_restriction`]).
const NODE_LEASE_VERBS: [&str; 5] = ["get", "create", "update", "patch", "delete"];

/// What a node may do with MachineConfigNodes and their status (MCO's machine-config-daemon
/// ClusterRole, `manifests/machineconfigdaemon/clusterrole.yaml`); MCO's `mcn-guards`
/// ValidatingAdmissionPolicy then allows only its own ([`crate::api`]'s NodeRestriction).
const NODE_MCN_VERBS: [&str; 4] = ["create", "update", "patch", "get"];

/// Whether `user` may do `a` (RBAC's answer; admission rules come later). Rules:
/// - admin (`system:masters`): everything.
/// - everyone authenticated: `create` of `selfsubjectaccessreviews`, `selfsubjectrulesreviews`
///   and `selfsubjectreviews`
///   (Kubernetes' `system:basic-user`), GET of discovery and OpenAPI (`system:discovery`).
/// - reader: get, list and watch of every resource except `tokens.auth.mco.dev`; GET of every
///   other path (history, diffs, metrics, Ignition configs).
/// - node: get, list, watch of nodes, machineconfigs, machineconfigpools,
///   machineconfigurations and driftpolicies (what its daemon reads); create of nodes (the name is checked by
///   admission, [`node_may_write`]); update and patch of its own Node and its status; get,
///   create, update, patch and delete of leases (its own node lease, by admission); get,
///   create, update and patch of machineconfignodes and their status (its own, by admission); create of
///   daemon reports (`reports.metrics.mco.dev`, its own, checked by the handler); GET of
///   `/config/...`.
/// - bootstrap: GET of `/config/...` only.
pub fn authorize(user: &User, a: &Attributes) -> bool {
    allowed_by(user, a).is_some()
}

/// What grants `user` the request `a` ([`authorize`]'s rules): the role (`admin`, `reader`,
/// `node`, `bootstrap`), or `authenticated` for what every authenticated user may do; `None`
/// when nothing does.
pub fn allowed_by(user: &User, a: &Attributes) -> Option<&'static str> {
    let roles = user.roles();
    if roles.contains(&TokenKind::Admin) {
        return Some(TokenKind::Admin.as_str());
    }
    let self_review = a.resource_request
        && a.verb == "create"
        && ((a.group == "authorization.k8s.io"
            && matches!(
                a.resource.as_str(),
                "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
            ))
            || (a.group == "authentication.k8s.io" && a.resource == "selfsubjectreviews"));
    let discovery = !a.resource_request && a.verb == "get" && is_discovery(&a.path);
    if user.has_basic_rules() && (self_review || discovery) {
        return Some("authenticated");
    }
    roles
        .into_iter()
        .find(|k| role_allows(*k, user, a))
        .map(TokenKind::as_str)
}

/// Whether role `kind` allows `a` to `user` (whose node, for [`TokenKind::Node`]).
pub(super) fn role_allows(kind: TokenKind, user: &User, a: &Attributes) -> bool {
    let config_path = !a.resource_request && a.verb == "get" && (a.path.starts_with("/config/") || a.path == "/config");
    match kind {
        TokenKind::Admin => true,
        TokenKind::Reader => {
            if a.resource_request {
                READ_VERBS.contains(&a.verb.as_str()) && a.group != GROUP
            } else {
                a.verb == "get"
            }
        }
        TokenKind::Bootstrap => config_path,
        TokenKind::Node => {
            if !a.resource_request {
                return config_path;
            }
            let mco_kind = crate::model::ACCEPTED_GROUPS.contains(&a.group.as_str())
                && matches!(a.resource.as_str(), "machineconfigs" | "machineconfigpools");
            let policy = a.group == crate::disruption::GROUP && a.resource == "machineconfigurations";
            let nodes = a.group.is_empty() && a.resource == "nodes";
            // mco's DriftPolicy: the daemon decides its drift response itself.
            let drift = a.group == crate::model::POLICY_GROUP && a.resource == "driftpolicies";
            // Kubernetes' `system:node` role: its lease, whose name NodeRestriction checks.
            let leases = a.group == crate::model::COORDINATION_GROUP && a.resource == "leases";
            if leases && a.subresource.is_empty() {
                return NODE_LEASE_VERBS.contains(&a.verb.as_str());
            }
            let mcn = crate::model::ACCEPTED_GROUPS.contains(&a.group.as_str()) && a.resource == "machineconfignodes";
            if mcn && matches!(a.subresource.as_str(), "" | "status") {
                return NODE_MCN_VERBS.contains(&a.verb.as_str());
            }
            if READ_VERBS.contains(&a.verb.as_str()) {
                return mco_kind || policy || nodes || drift;
            }
            if nodes && a.verb == "create" && a.subresource.is_empty() {
                return true;
            }
            if nodes && matches!(a.verb.as_str(), "update" | "patch") {
                return user.node.as_deref() == Some(a.name.as_str()) && !a.name.is_empty();
            }
            a.group == "metrics.mco.dev" && a.resource == "reports" && a.verb == "create"
        }
    }
}

/// The rules [`authorize`] grants `user`, as Kubernetes' `SelfSubjectRulesReview` reports them
/// (`kubectl auth can-i --list`): `(resourceRules, nonResourceRules)`, JSON arrays of
/// `{verbs, apiGroups, resources[, resourceNames]}` and `{verbs, nonResourceURLs}`. `groups` are
/// the API groups the server serves: a reader's rule names each of them but [`GROUP`] (tokens),
/// since RBAC rules cannot exclude.
pub fn rules(user: &User, groups: &[String]) -> (serde_json::Value, serde_json::Value) {
    use serde_json::json;
    let rule = |verbs: &[&str], groups: &[&str], resources: &[&str]| json!({"verbs": verbs, "apiGroups": groups, "resources": resources});
    let urls = |verbs: &[&str], urls: &[&str]| json!({"verbs": verbs, "nonResourceURLs": urls});
    let public = urls(&["get"], &["/healthz", "/livez", "/readyz", "/version"]);
    let config = urls(&["get"], &["/config", "/config/*"]);
    let (mut resources, mut non_resources) = (Vec::new(), Vec::new());
    for role in user.roles() {
        match role {
            TokenKind::Admin => {
                resources.push(rule(&["*"], &["*"], &["*"]));
                non_resources.push(urls(&["*"], &["*"]));
            }
            TokenKind::Reader => {
                let mut readable: Vec<&str> = vec![""];
                readable.extend(groups.iter().map(String::as_str).filter(|g| *g != GROUP));
                resources.push(rule(&READ_VERBS, &readable, &["*"]));
                non_resources.push(urls(&["get"], &["*"]));
            }
            TokenKind::Node => {
                let own = user.node.clone().unwrap_or_default();
                resources.extend([
                    rule(&READ_VERBS, &[""], &["nodes"]),
                    rule(
                        &READ_VERBS,
                        &crate::model::ACCEPTED_GROUPS,
                        &["machineconfigs", "machineconfigpools"],
                    ),
                    rule(&READ_VERBS, &[crate::disruption::GROUP], &["machineconfigurations"]),
                    rule(&READ_VERBS, &[crate::model::POLICY_GROUP], &["driftpolicies"]),
                    rule(&["create"], &[""], &["nodes"]),
                    json!({"verbs": ["update", "patch"], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                           "resourceNames": [own]}),
                    rule(&["create"], &["metrics.mco.dev"], &["reports"]),
                    rule(&NODE_LEASE_VERBS, &[crate::model::COORDINATION_GROUP], &["leases"]),
                    rule(
                        &NODE_MCN_VERBS,
                        &crate::model::ACCEPTED_GROUPS,
                        &["machineconfignodes", "machineconfignodes/status"],
                    ),
                ]);
                non_resources.push(config.clone());
            }
            TokenKind::Bootstrap => non_resources.push(config.clone()),
        }
    }
    if user.has_basic_rules() {
        resources.extend([
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            ),
            rule(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
        ]);
        non_resources.push(urls(
            &["get"],
            &["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*"],
        ));
    }
    non_resources.push(public);
    (json!(resources), json!(non_resources))
}

/// Discovery and OpenAPI paths every authenticated user may read (Kubernetes'
/// `system:discovery` role) besides the public health and version paths.
pub(super) fn is_discovery(path: &str) -> bool {
    path == "/api" || path == "/apis" || path.starts_with("/openapi/") || path == "/openapi" || {
        // `/apis/<group>` and `/apis/<group>/<version>`, `/api/v1` (no resource).
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        (segs.first() == Some(&"apis") && (2..=3).contains(&segs.len())) || path == "/api/v1"
    }
}

/// kube-apiserver's message for a request its authorizer denied
/// (`k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`, `forbiddenMessage`):
/// `nodes "worker-1" is forbidden: User "system:node:worker-0" cannot patch resource "nodes" in
/// API group "" at the cluster scope`; `User "reader" cannot list resource "machineconfigs" in
/// API group "machineconfiguration.openshift.io" at the cluster scope` after `<resource> is
/// forbidden: ` for a collection (`in the namespace "kube-node-lease"` for a namespaced one); `forbidden: User "x" cannot get path "/metrics"` for a
/// non-resource path. A subresource is named `nodes/status`.
pub fn forbidden_message(user: &User, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("forbidden: User {:?} cannot {} path {:?}", user.name, a.verb, a.path);
    }
    let resource = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let qualified = if a.group.is_empty() {
        a.resource.clone()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let object = if a.name.is_empty() {
        format!("{qualified} is forbidden")
    } else {
        format!("{qualified} {:?} is forbidden", a.name)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", a.namespace)
    };
    format!(
        "{object}: User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        user.name, a.verb, resource, a.group
    )
}

/// NodeRestriction (`plugin/pkg/admission/noderestriction/admission.go`): whether node
/// identity `user` may write Node `name` at all. Returns the admission error text (after
/// `nodes "<name>" is forbidden: `) when not: `node "worker-0" is not allowed to modify node
/// "worker-1"`.
pub fn node_may_write(user: &User, name: &str) -> Result<(), String> {
    match user.node.as_deref() {
        Some(own) if own != name => Err(format!("node {own:?} is not allowed to modify node {name:?}")),
        _ => Ok(()),
    }
}

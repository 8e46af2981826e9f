//! Authentication and authorization rules: bearer tokens, the identities they carry, and what
//! each identity may do.
//!
//! Owns the token record kept in the event log's state ([`TokenRecord`], folded from the
//! `TokenIssued` / `TokenRevoked` events by [`crate::state::State::apply`]), secret generation
//! and hashing, the identity of each token kind (Kubernetes' names: `system:node:<name>` in
//! group `system:nodes`, `system:bootstrap:<id>` in `system:bootstrappers`), the authorizer
//! ([`authorize`]: reader, admin, node and bootstrap rules), kube-apiserver's Forbidden message
//! ([`forbidden_message`]) and the NodeRestriction admission rule on node labels
//! ([`node_restriction_labels`]). Pure except [`new_secret`] (the OS random source); the HTTP
//! side is `api/auth.rs`.
//!
//! This file owns the token kinds, [`TokenRecord`], [`User`] and its roles and
//! [`Impersonation`]; `tokens.rs` identities, secrets and hashes; `authorizer.rs` the
//! authorizer and the Forbidden message; `node_restriction.rs` the NodeRestriction rules.
//!
//! Why SHA-256 and not argon2: a token is 256 bits from the OS random source, so it cannot be
//! guessed and a stolen hash cannot be brute-forced whatever the hash's speed; key stretching
//! (argon2, bcrypt) exists for low-entropy passwords and would only slow every request down.
//! Kubernetes' bootstrap tokens and GitHub's tokens are stored the same way. Tokens are looked
//! up by their hash (a map from hash to record), so no comparison of secrets happens at all,
//! and hence none needs to be constant-time.

mod authorizer;
mod node_restriction;
mod tokens;

pub use authorizer::{allowed_by, authorize, forbidden_message, node_may_write, rules, Attributes};
pub use node_restriction::{
    is_forbidden_node_label, node_lease_restriction, node_mcn_restriction, node_restriction, node_restriction_labels,
    pool_selector_keys, registration_labels,
};
pub use tokens::{check_token_labels, hash, identity, new_id, new_secret, TokenError};

use serde::{Deserialize, Serialize};

/// The API group of the token objects (`mco token`): `tokens.auth.mco.dev`.
pub const GROUP: &str = "auth.mco.dev";
/// `auth.mco.dev/v1`.
pub const API_VERSION: &str = "auth.mco.dev/v1";
/// The `object_kind` of token events in the log (not a [`crate::model::Kind`]: tokens are not
/// served through the generic resource routes).
pub const EVENT_KIND: &str = "Token";

/// Group every authenticated identity is in (Kubernetes' `system:authenticated`).
pub const AUTHENTICATED: &str = "system:authenticated";
/// Group of admin identities (Kubernetes' `system:masters`, which RBAC always allows).
pub const MASTERS: &str = "system:masters";
/// Group of reader identities.
pub const READERS: &str = "mco:readers";
/// Group of node identities (Kubernetes' `system:nodes`).
pub const NODES: &str = "system:nodes";
/// Prefix of a node identity's user name (Kubernetes' `system:node:<nodeName>`).
pub const NODE_PREFIX: &str = "system:node:";
/// Group of bootstrap identities (Kubernetes' `system:bootstrappers`).
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";
/// Prefix of a bootstrap identity's user name (Kubernetes' `system:bootstrap:<token-id>`).
pub const BOOTSTRAP_PREFIX: &str = "system:bootstrap:";

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    /// Everything.
    Admin,
    /// get, list and watch of everything but tokens.
    Reader,
    /// One node's daemon: reads what it needs, writes only its own Node (NodeRestriction).
    Node,
    /// Fetches Ignition configs (`/config/...`) only, as a machine's first boot does.
    Bootstrap,
}

impl TokenKind {
    pub const ALL: [TokenKind; 4] = [
        TokenKind::Admin,
        TokenKind::Reader,
        TokenKind::Node,
        TokenKind::Bootstrap,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Admin => "admin",
            TokenKind::Reader => "reader",
            TokenKind::Node => "node",
            TokenKind::Bootstrap => "bootstrap",
        }
    }

    pub fn parse(s: &str) -> Option<TokenKind> {
        TokenKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for TokenKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One issued token as the log keeps it: never the secret, only its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// Short random id (12 hex digits): what `mco token list` shows and `revoke` takes.
    pub id: String,
    pub kind: TokenKind,
    /// The user name requests made with it are recorded under (the event actor).
    pub identity: String,
    /// Its groups (Kubernetes' user info groups), `system:authenticated` included.
    pub groups: Vec<String>,
    /// The node of a node token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The labels an admin decided for the node of a node token (`mco token create --label`,
    /// its role among them: `node-role.kubernetes.io/worker=`): set on its Node when the node
    /// registers it ([`registration_labels`]), and the only values of NodeRestriction's labels
    /// the node may register with.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Lower-case hex SHA-256 of the secret.
    pub hash: String,
    /// RFC 3339 time it was issued.
    pub created: String,
}

/// What a request runs as: the identity its token grants, or the one an admin impersonates
/// with it ([`User::impersonating`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// User name (`admin`, `system:node:worker-0`).
    pub name: String,
    /// Its groups: what [`authorize`] grants by ([`User::roles`]).
    pub groups: Vec<String>,
    /// The kind of the token that authenticated the request (the impersonator's, when
    /// impersonating).
    pub kind: TokenKind,
    /// The node of a node identity (Kubernetes' `nodeidentifier`: a `system:node:<name>` user
    /// in group `system:nodes`).
    pub node: Option<String>,
    /// The id of the token that authenticated the request.
    pub token_id: String,
    /// The labels its node token records ([`TokenRecord::labels`]).
    pub labels: std::collections::BTreeMap<String, String>,
    /// The impersonated user's uid (`Impersonate-Uid`), empty otherwise.
    pub uid: String,
    /// The impersonated user's extra attributes (`Impersonate-Extra-<key>`).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
    /// The token's own user name when this user is impersonated.
    pub impersonator: Option<String>,
}

impl User {
    /// The identity a token record grants.
    pub fn of(t: &TokenRecord) -> User {
        User {
            name: t.identity.clone(),
            groups: t.groups.clone(),
            kind: t.kind,
            node: t.node.clone(),
            token_id: t.id.clone(),
            labels: t.labels.clone(),
            uid: String::new(),
            extra: Default::default(),
            impersonator: None,
        }
    }

    /// The roles its groups give it, in this order: admin (`system:masters`), reader
    /// (`mco:readers`), node (a node identity, [`User::node`]), bootstrap
    /// (`system:bootstrappers`). A token's identity has its kind's; an impersonated user has
    /// those of the groups the request names, and none for a user in no such group (as
    /// Kubernetes' RBAC grants by group).
    pub fn roles(&self) -> Vec<TokenKind> {
        let has = |g: &str| self.groups.iter().any(|x| x == g);
        let mut roles = Vec::new();
        if has(MASTERS) {
            roles.push(TokenKind::Admin);
        }
        if has(READERS) {
            roles.push(TokenKind::Reader);
        }
        if self.node.is_some() {
            roles.push(TokenKind::Node);
        }
        if has(BOOTSTRAPPERS) {
            roles.push(TokenKind::Bootstrap);
        }
        roles
    }

    /// Whether it has what every authenticated user may do (Kubernetes' `system:basic-user`
    /// and `system:discovery`: the self reviews, discovery and OpenAPI): in
    /// `system:authenticated` and not a bootstrap identity (which only fetches Ignition).
    pub fn has_basic_rules(&self) -> bool {
        let has = |g: &str| self.groups.iter().any(|x| x == g);
        has(AUTHENTICATED) && !has(BOOTSTRAPPERS)
    }

    /// The actor its writes are recorded under: its name, or `<impersonator> as <name>` when
    /// impersonated (both identities: the history's `actor=` selector matches either).
    pub fn actor_name(&self) -> String {
        match &self.impersonator {
            Some(by) => format!("{by} as {}", self.name),
            None => self.name.clone(),
        }
    }

    /// The user `imp` describes, run as by this (already authorized to impersonate it,
    /// [`Impersonation::checks`]), as kube-apiserver's impersonation filter builds it
    /// (`k8s.io/apiserver/pkg/endpoints/filters/impersonation.go`): the named user, uid and
    /// extra; the named groups, with `system:authenticated` added unless they hold it or
    /// `system:unauthenticated` (for `system:anonymous`: `system:unauthenticated`). A node
    /// identity by Kubernetes' rule (`system:node:<name>` in `system:nodes`) is that node's,
    /// for NodeRestriction too, with no token labels. The token's id and kind stay the
    /// impersonator's (revoking its token ends its watches).
    pub fn impersonating(&self, imp: &Impersonation) -> User {
        let mut groups = imp.groups.clone();
        let has = |g: &str| groups.iter().any(|x| x == g);
        if imp.user == ANONYMOUS {
            if !has(UNAUTHENTICATED) {
                groups.push(UNAUTHENTICATED.to_string());
            }
        } else if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        let node = imp
            .user
            .strip_prefix(NODE_PREFIX)
            .filter(|_| groups.iter().any(|g| g == NODES))
            .map(str::to_string);
        User {
            name: imp.user.clone(),
            groups,
            kind: self.kind,
            node,
            token_id: self.token_id.clone(),
            labels: Default::default(),
            uid: imp.uid.clone(),
            extra: imp.extra.clone(),
            impersonator: Some(self.name.clone()),
        }
    }
}

/// Kubernetes' anonymous user name.
pub const ANONYMOUS: &str = "system:anonymous";
/// Kubernetes' group of unauthenticated requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";

/// What a request asks to be run as (`kubectl --as`, `--as-group`, `--as-uid`): the
/// `Impersonate-User`, `Impersonate-Group` (repeated), `Impersonate-Uid` and
/// `Impersonate-Extra-<key>` headers (the key lower-cased and percent-decoded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonation {
    pub user: String,
    pub groups: Vec<String>,
    pub uid: String,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl Impersonation {
    /// The impersonation `headers` (`(lower-case name, value)` pairs) ask for; `None` without
    /// any impersonation header.
    ///
    /// Errors: groups, extra or a uid without a user, with kube-apiserver's message (a 400:
    /// `requested [{Group  system:masters    }] without impersonating a user`).
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Option<Impersonation>, String> {
        let mut imp = Impersonation::default();
        let mut any = false;
        for (name, value) in headers {
            match name {
                // The first value, as Go's `Header.Get`; an empty one asks for nothing.
                "impersonate-user" | "impersonate-uid" if value.is_empty() => continue,
                "impersonate-user" if imp.user.is_empty() => imp.user = value.to_string(),
                "impersonate-uid" if imp.uid.is_empty() => imp.uid = value.to_string(),
                "impersonate-user" | "impersonate-uid" => continue,
                "impersonate-group" => imp.groups.push(value.to_string()),
                n => match n.strip_prefix("impersonate-extra-") {
                    Some(key) => {
                        let key = percent_encoding::percent_decode_str(key)
                            .decode_utf8()
                            .map(|k| k.into_owned())
                            .unwrap_or_else(|_| key.to_string());
                        imp.extra.entry(key).or_default().push(value.to_string());
                    }
                    None => continue,
                },
            }
            any = true;
        }
        if !any {
            return Ok(None);
        }
        if imp.user.is_empty() {
            // Go's `%v` of the []ObjectReference it built: {Kind Namespace Name UID APIVersion
            // ResourceVersion FieldPath}.
            let refs: Vec<String> = imp
                .checks()
                .iter()
                .map(|(kind, a)| {
                    let (api_version, field_path) = if a.group.is_empty() {
                        ("", "")
                    } else {
                        ("authentication.k8s.io/v1", a.subresource.as_str())
                    };
                    format!("{{{kind}  {}  {api_version}  {field_path}}}", a.name)
                })
                .collect();
            return Err(format!("requested [{}] without impersonating a user", refs.join(" ")));
        }
        Ok(Some(imp))
    }

    /// The `impersonate` requests the impersonator must be authorized for, in
    /// kube-apiserver's order, each with its object kind: the user (`users`), each group
    /// (`groups`), each extra value (`userextras/<key>` in `authentication.k8s.io`), the uid
    /// (`uids` in `authentication.k8s.io`).
    pub fn checks(&self) -> Vec<(&'static str, Attributes)> {
        let mut out = Vec::new();
        if !self.user.is_empty() {
            out.push(("User", Attributes::resource("impersonate", "", "users", "", &self.user)));
        }
        for g in &self.groups {
            out.push(("Group", Attributes::resource("impersonate", "", "groups", "", g)));
        }
        for (k, values) in &self.extra {
            for v in values {
                out.push((
                    "UserExtra",
                    Attributes::resource("impersonate", "authentication.k8s.io", "userextras", k, v),
                ));
            }
        }
        if !self.uid.is_empty() {
            out.push((
                "UID",
                Attributes::resource("impersonate", "authentication.k8s.io", "uids", "", &self.uid),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::authorizer::READ_VERBS;
    use super::*;
    use serde_json::json;

    fn user(kind: TokenKind, node: Option<&str>) -> User {
        let (name, groups) = identity(kind, "abc", node, None).unwrap();
        User {
            name,
            groups,
            kind,
            node: node.map(str::to_string),
            token_id: "abc".into(),
            labels: Default::default(),
            uid: String::new(),
            extra: Default::default(),
            impersonator: None,
        }
    }

    #[test]
    fn identities_use_kubernetes_names() {
        assert_eq!(
            identity(TokenKind::Node, "i", Some("worker-0"), None).unwrap(),
            (
                "system:node:worker-0".into(),
                vec!["system:nodes".into(), "system:authenticated".into()]
            )
        );
        assert_eq!(
            identity(TokenKind::Bootstrap, "a1b2", None, None).unwrap().0,
            "system:bootstrap:a1b2"
        );
        assert_eq!(identity(TokenKind::Admin, "i", None, Some("alice")).unwrap().0, "alice");
        assert_eq!(identity(TokenKind::Reader, "i", None, None).unwrap().0, "reader");
        assert_eq!(identity(TokenKind::Node, "i", None, None), Err(TokenError::NodeMissing));
        assert_eq!(
            identity(TokenKind::Admin, "i", Some("w"), None),
            Err(TokenError::NodeNotAllowed)
        );
        assert_eq!(
            identity(TokenKind::Node, "i", Some("w"), Some("x")),
            Err(TokenError::NameNotAllowed)
        );
        assert!(identity(TokenKind::Admin, "i", None, Some("system:masters")).is_err());
        assert!(identity(TokenKind::Admin, "i", None, Some("controller:render")).is_err());
        assert!(identity(TokenKind::Admin, "i", None, Some("mco-server")).is_err());
        assert!(identity(TokenKind::Reader, "i", None, Some("a,actor=b")).is_err());
        assert_eq!(
            identity(TokenKind::Reader, "i", None, Some("ops@example.com"))
                .unwrap()
                .0,
            "ops@example.com"
        );
        assert!(identity(TokenKind::Node, "i", Some("Bad_Name"), None).is_err());
    }

    #[test]
    fn secrets_are_256_random_bits_and_stored_as_sha256() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        // SHA-256 of "abc" (FIPS 180-2 test vector).
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(new_id().len(), 12);
    }

    #[test]
    fn forbidden_messages_are_kube_apiservers() {
        let u = user(TokenKind::Node, Some("worker-0"));
        assert_eq!(
            forbidden_message(&u, &Attributes::resource("patch", "", "nodes", "", "worker-1")),
            r#"nodes "worker-1" is forbidden: User "system:node:worker-0" cannot patch resource "nodes" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden_message(&u, &Attributes::resource("update", "", "nodes", "status", "worker-1")),
            r#"nodes "worker-1" is forbidden: User "system:node:worker-0" cannot update resource "nodes/status" in API group "" at the cluster scope"#
        );
        let r = user(TokenKind::Reader, None);
        assert_eq!(
            forbidden_message(
                &r,
                &Attributes::resource("create", "machineconfiguration.openshift.io", "machineconfigs", "", "")
            ),
            r#"machineconfigs.machineconfiguration.openshift.io is forbidden: User "reader" cannot create resource "machineconfigs" in API group "machineconfiguration.openshift.io" at the cluster scope"#
        );
        assert_eq!(
            forbidden_message(&user(TokenKind::Bootstrap, None), &Attributes::path("get", "/metrics")),
            r#"forbidden: User "system:bootstrap:abc" cannot get path "/metrics""#
        );
    }

    #[test]
    fn each_identity_gets_its_rules() {
        let mc = |verb: &str| Attributes::resource(verb, "machineconfiguration.openshift.io", "machineconfigs", "", "");
        let admin = user(TokenKind::Admin, None);
        let reader = user(TokenKind::Reader, None);
        let node = user(TokenKind::Node, Some("worker-0"));
        let boot = user(TokenKind::Bootstrap, None);
        for v in ["create", "update", "patch", "delete", "deletecollection"] {
            assert!(authorize(&admin, &mc(v)));
            assert!(!authorize(&reader, &mc(v)), "reader {v}");
            assert!(!authorize(&node, &mc(v)), "node {v}");
        }
        for v in READ_VERBS {
            assert!(authorize(&reader, &mc(v)));
            assert!(authorize(&node, &mc(v)));
            assert!(!authorize(&boot, &mc(v)));
        }
        let tokens = Attributes::resource("list", GROUP, "tokens", "", "");
        assert!(!authorize(&reader, &tokens) && !authorize(&node, &tokens) && authorize(&admin, &tokens));
        let patch = |name: &str, sub: &str| Attributes::resource("patch", "", "nodes", sub, name);
        assert!(authorize(&node, &patch("worker-0", "")) && authorize(&node, &patch("worker-0", "status")));
        assert!(!authorize(&node, &patch("worker-1", "")) && !authorize(&node, &patch("worker-1", "status")));
        assert!(!authorize(
            &node,
            &Attributes::resource("delete", "", "nodes", "", "worker-0")
        ));
        assert!(authorize(
            &node,
            &Attributes::resource("create", "metrics.mco.dev", "reports", "", "")
        ));
        assert!(!authorize(
            &reader,
            &Attributes::resource("create", "metrics.mco.dev", "reports", "", "")
        ));
        // Ignition configs: every identity but a reader's writes; bootstrap nothing else.
        let config = Attributes::path("get", "/config/worker");
        assert!([&admin, &reader, &node, &boot].iter().all(|u| authorize(u, &config)));
        assert!(!authorize(&boot, &Attributes::path("get", "/metrics")));
        assert!(!authorize(&boot, &Attributes::path("get", "/apis")));
        assert!(!authorize(&node, &Attributes::path("get", "/metrics")));
        assert!(authorize(&node, &Attributes::path("get", "/apis")));
        assert!(authorize(&reader, &Attributes::path("get", "/metrics")));
        assert!(!authorize(
            &reader,
            &Attributes::path("post", "/apis/history.mco.dev/v1/rollbacks")
        ));
        let ssar = Attributes::resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "");
        assert!(authorize(&reader, &ssar) && authorize(&node, &ssar) && !authorize(&boot, &ssar));
    }

    #[test]
    fn a_node_changes_nothing_that_decides_what_it_is_given() {
        let mut node = user(TokenKind::Node, Some("w"));
        node.labels = [("node-role.kubernetes.io/worker".to_string(), String::new())].into();
        let pool_keys: std::collections::BTreeSet<String> = ["example.com/pool".to_string()].into();
        let admit =
            |old: Option<&serde_json::Value>, new: serde_json::Value| node_restriction(&node, old, &new, &pool_keys);
        let with = |meta: serde_json::Value, spec: serde_json::Value| json!({"metadata": meta, "spec": spec});
        // Create: the token's labels, kubelet labels and others; nothing else restricted.
        assert_eq!(
            admit(
                None,
                with(
                    json!({"name": "w", "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "w", "team": "a"}}),
                    json!({})
                )
            ),
            Ok(())
        );
        for (meta, spec, err) in [
            (
                json!({"labels": {"node-role.kubernetes.io/master": ""}}),
                json!({}),
                "node \"w\" is not allowed to set the following labels: node-role.kubernetes.io/master",
            ),
            (
                json!({"labels": {"node-role.kubernetes.io/worker": "x", "example.com/pool": "a"}}),
                json!({}),
                "node \"w\" is not allowed to set the following labels: example.com/pool, node-role.kubernetes.io/worker",
            ),
            (
                json!({"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "u"}]}),
                json!({}),
                "node \"w\" is not allowed to set ownerReferences",
            ),
            (
                json!({"finalizers": ["x"]}),
                json!({}),
                "node \"w\" is not allowed to set finalizers",
            ),
            (
                json!({}),
                json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
                "node \"w\" is not allowed to set taints",
            ),
            (
                json!({}),
                json!({"configSource": {}}),
                "node \"w\" is not allowed to create pods with a non-nil configSource",
            ),
        ] {
            assert_eq!(admit(None, with(meta, spec)), Err(err.to_string()));
        }
        // Update: none of them changed; empty lists are absent ones.
        let cur = with(
            json!({"labels": {"node-role.kubernetes.io/worker": "", "example.com/pool": "a"}, "finalizers": []}),
            json!({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
        );
        assert_eq!(admit(Some(&cur), cur.clone()), Ok(()));
        let mut same = cur.clone();
        same["metadata"]["finalizers"] = serde_json::Value::Null;
        same["metadata"]["labels"]["team"] = json!("b");
        assert_eq!(admit(Some(&cur), same), Ok(()));
        for (path, value, err) in [
            ("/spec/taints", json!([]), "node \"w\" is not allowed to modify taints"),
            (
                "/metadata/ownerReferences",
                json!([{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "u"}]),
                "node \"w\" is not allowed to modify ownerReferences",
            ),
            (
                "/metadata/finalizers",
                json!(["x"]),
                "node \"w\" is not allowed to modify finalizers",
            ),
            (
                "/metadata/labels/example.com~1pool",
                json!("b"),
                "is not allowed to modify labels: example.com/pool",
            ),
            (
                "/spec/configSource",
                json!({"configMap": {}}),
                "node \"w\" is not allowed to update configSource to a new non-nil configSource",
            ),
        ] {
            let mut new = cur.clone();
            match new.pointer_mut(path) {
                Some(v) => *v = value,
                None => {
                    let (parent, key) = path.rsplit_once('/').unwrap();
                    new.pointer_mut(parent).unwrap()[key] = value;
                }
            }
            assert_eq!(admit(Some(&cur), new), Err(err.to_string()), "{path}");
        }
        // The token's labels are set over what the node registers with; others are kept.
        let mut obj = json!({"metadata": {"name": "w", "labels": {"node-role.kubernetes.io/worker": "x", "a": "b"}}});
        registration_labels(&node, &mut obj);
        assert_eq!(
            obj["metadata"]["labels"],
            json!({"node-role.kubernetes.io/worker": "", "a": "b"})
        );
        let mut bare = json!({"metadata": {"name": "w"}});
        registration_labels(&node, &mut bare);
        assert_eq!(
            bare["metadata"]["labels"],
            json!({"node-role.kubernetes.io/worker": ""})
        );
        let mut admin_obj = json!({"metadata": {"name": "w"}});
        registration_labels(&user(TokenKind::Admin, None), &mut admin_obj);
        assert_eq!(admin_obj, json!({"metadata": {"name": "w"}}));
        // Token labels: node tokens only, valid labels only.
        let l = |k: &str, v: &str| [(k.to_string(), v.to_string())].into();
        assert_eq!(
            check_token_labels(TokenKind::Reader, &l("a", "b")),
            Err(TokenError::LabelsNotAllowed)
        );
        assert!(check_token_labels(TokenKind::Node, &l("node-role.kubernetes.io/worker", "")).is_ok());
        assert!(matches!(
            check_token_labels(TokenKind::Node, &l("bad key!", "")),
            Err(TokenError::Invalid { what: "--label", .. })
        ));
        assert!(check_token_labels(TokenKind::Node, &l("a", "bad value!")).is_err());
    }

    #[test]
    fn impersonation_is_kube_apiservers() {
        let h = |pairs: &[(&'static str, &'static str)]| Impersonation::from_headers(pairs.iter().copied());
        assert_eq!(h(&[("user-agent", "kubectl")]), Ok(None));
        assert_eq!(h(&[("impersonate-user", "")]), Ok(None));
        // Groups, extra or a uid without a user: kube-apiserver's 400 text.
        assert_eq!(
            h(&[("impersonate-group", "system:masters")]),
            Err("requested [{Group  system:masters    }] without impersonating a user".into())
        );
        assert_eq!(
            h(&[("impersonate-extra-scopes", "a"), ("impersonate-uid", "u-1")]),
            Err("requested [{UserExtra  a  authentication.k8s.io/v1  scopes} {UID  u-1  authentication.k8s.io/v1  }] without impersonating a user".into())
        );
        let imp = h(&[
            ("impersonate-user", "alice"),
            ("impersonate-group", "mco:readers"),
            ("impersonate-extra-acme.com%2fproject", "p1"),
            ("impersonate-extra-acme.com%2fproject", "p2"),
            ("impersonate-uid", "u-1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(imp.extra["acme.com/project"], vec!["p1", "p2"]);
        let checks: Vec<(&str, String, String, String)> = imp
            .checks()
            .into_iter()
            .map(|(k, a)| (k, a.resource, a.subresource, a.name))
            .collect();
        assert_eq!(
            checks,
            [
                ("User", "users", "", "alice"),
                ("Group", "groups", "", "mco:readers"),
                ("UserExtra", "userextras", "acme.com/project", "p1"),
                ("UserExtra", "userextras", "acme.com/project", "p2"),
                ("UID", "uids", "", "u-1"),
            ]
            .map(|(k, r, s, n)| (k, r.to_string(), s.to_string(), n.to_string()))
        );
        // Only admins may impersonate, with kube-apiserver's 403 text.
        let admin = user(TokenKind::Admin, None);
        let reader = user(TokenKind::Reader, None);
        assert!(imp.checks().iter().all(|(_, a)| authorize(&admin, a)));
        let (_, first) = &imp.checks()[0];
        assert!(!authorize(&reader, first) && !authorize(&user(TokenKind::Node, Some("w")), first));
        assert_eq!(
            forbidden_message(&reader, first),
            r#"users "alice" is forbidden: User "reader" cannot impersonate resource "users" in API group "" at the cluster scope"#
        );
        // The impersonated user: its groups (system:authenticated added), its roles only.
        let alice = admin.impersonating(&imp);
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["mco:readers", "system:authenticated"]);
        assert_eq!(alice.roles(), [TokenKind::Reader]);
        assert_eq!(alice.actor_name(), "admin as alice");
        assert_eq!((alice.uid.as_str(), alice.token_id.as_str()), ("u-1", "abc"));
        let mc = |verb: &str| Attributes::resource(verb, "machineconfiguration.openshift.io", "machineconfigs", "", "");
        assert!(authorize(&alice, &mc("list")) && !authorize(&alice, &mc("delete")));
        let prom = admin.impersonating(&Impersonation {
            user: "prom".into(),
            ..Default::default()
        });
        assert_eq!(prom.groups, ["system:authenticated"]);
        assert!(prom.roles().is_empty() && !authorize(&prom, &mc("list")));
        assert_eq!(
            allowed_by(
                &prom,
                &Attributes::resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "")
            ),
            Some("authenticated")
        );
        assert_eq!(rules(&prom, &[]).0.as_array().unwrap().len(), 2);
        let anonymous = admin.impersonating(&Impersonation {
            user: ANONYMOUS.into(),
            ..Default::default()
        });
        assert_eq!(anonymous.groups, [UNAUTHENTICATED]);
        assert!(!authorize(&anonymous, &Attributes::path("get", "/apis")));
        // A node identity by Kubernetes' rule: the name and the group, both.
        let node = |groups: &[&str]| {
            admin.impersonating(&Impersonation {
                user: "system:node:w0".into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                ..Default::default()
            })
        };
        let w0 = node(&["system:nodes"]);
        assert_eq!(w0.node.as_deref(), Some("w0"));
        assert_eq!(w0.roles(), [TokenKind::Node]);
        assert!(w0.labels.is_empty());
        let patch = |n: &str| Attributes::resource("patch", "", "nodes", "", n);
        assert!(authorize(&w0, &patch("w0")) && !authorize(&w0, &patch("w1")));
        assert_eq!(
            node_may_write(&w0, "w1").unwrap_err(),
            r#"node "w0" is not allowed to modify node "w1""#
        );
        let not_a_node = node(&[]);
        assert_eq!(not_a_node.node, None);
        assert!(!authorize(&not_a_node, &patch("w0")));
    }

    #[test]
    fn node_restriction_forbids_pool_labels_not_kubelet_labels() {
        assert!(is_forbidden_node_label("node-role.kubernetes.io/worker"));
        assert!(is_forbidden_node_label("node-role.kubernetes.io/infra"));
        assert!(is_forbidden_node_label("node-restriction.kubernetes.io/x"));
        assert!(is_forbidden_node_label("example.k8s.io/x"));
        assert!(!is_forbidden_node_label("kubernetes.io/hostname"));
        assert!(!is_forbidden_node_label("topology.kubernetes.io/zone"));
        assert!(!is_forbidden_node_label("node.kubernetes.io/instance-type"));
        assert!(!is_forbidden_node_label("kubelet.kubernetes.io/anything"));
        assert!(!is_forbidden_node_label("example.com/team"));
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        let old = m(json!({"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "a"}));
        let new = m(json!({"node-role.kubernetes.io/infra": "", "kubernetes.io/hostname": "b", "team": "x"}));
        assert_eq!(
            node_restriction_labels(&old, &new, &Default::default()),
            vec!["node-role.kubernetes.io/infra", "node-role.kubernetes.io/worker"]
        );
        assert!(node_restriction_labels(&old, &old, &Default::default()).is_empty());
        let node = user(TokenKind::Node, Some("worker-0"));
        assert_eq!(
            node_may_write(&node, "worker-1").unwrap_err(),
            r#"node "worker-0" is not allowed to modify node "worker-1""#
        );
        assert!(node_may_write(&node, "worker-0").is_ok());
    }
}

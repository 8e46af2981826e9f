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
//! Why SHA-256 and not argon2: a token is 256 bits from the OS random source, so it cannot be
//! guessed and a stolen hash cannot be brute-forced whatever the hash's speed; key stretching
//! (argon2, bcrypt) exists for low-entropy passwords and would only slow every request down.
//! Kubernetes' bootstrap tokens and GitHub's tokens are stored the same way. Tokens are looked
//! up by their hash (a map from hash to record), so no comparison of secrets happens at all,
//! and hence none needs to be constant-time.

use serde::{Deserialize, Serialize};
use sha2::Digest;

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

/// Errors of [`identity`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("a node token needs --node NAME")]
    NodeMissing,
    #[error("--node is only for node tokens")]
    NodeNotAllowed,
    #[error("--name is not for node or bootstrap tokens: their identity is fixed (system:node:<node>, system:bootstrap:<id>)")]
    NameNotAllowed,
    #[error("--label is only for node tokens (the labels its node registers with)")]
    LabelsNotAllowed,
    #[error("invalid {what} {value:?}: {message}")]
    Invalid {
        what: &'static str,
        value: String,
        message: String,
    },
}

/// The identity (user name, groups) of a new token of `kind` with id `id`: admin `name` (or
/// `admin`) in `system:masters`; reader `name` (or `reader`) in `mco:readers`;
/// `system:node:<node>` in `system:nodes`; `system:bootstrap:<id>` in `system:bootstrappers`.
/// Every identity is also in `system:authenticated`.
///
/// Errors: a node token without a node; a node for another kind; a name for node or bootstrap
/// tokens; a node that is not a valid object name; a name with other characters than letters,
/// digits and `._@:-` (a comma or `=` would break history's `actor=` selector), or naming a
/// system user, a controller or the server itself (whose actor names the history shows:
/// a token must not be able to pass for them).
pub fn identity(
    kind: TokenKind,
    id: &str,
    node: Option<&str>,
    name: Option<&str>,
) -> Result<(String, Vec<String>), TokenError> {
    let name = name.filter(|n| !n.is_empty());
    if let Some(n) = name {
        if matches!(kind, TokenKind::Node | TokenKind::Bootstrap) {
            return Err(TokenError::NameNotAllowed);
        }
        let charset_ok = n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '-'));
        // The default names belong to their kinds: a reader called "admin" would read as the
        // admin in the history and in 403 messages.
        let other_default = (n == "admin" && kind != TokenKind::Admin) || (n == "reader" && kind != TokenKind::Reader);
        let reserved = n.starts_with("system:") || n.starts_with("controller:") || n == "mco-server" || other_default;
        if !charset_ok || reserved || n.len() > 253 {
            return Err(TokenError::Invalid {
                what: "--name",
                value: n.to_string(),
                message: "must be at most 253 characters of letters, digits, '.', '_', '@', ':' and '-', and not \
                          name a system user (\"system:...\"), a controller (\"controller:...\"), \"mco-server\", or the \
                          default name of another kind (\"admin\", \"reader\")"
                    .into(),
            });
        }
    }
    if node.is_some() && kind != TokenKind::Node {
        return Err(TokenError::NodeNotAllowed);
    }
    let (user, group) = match kind {
        TokenKind::Admin => (name.unwrap_or("admin").to_string(), MASTERS),
        TokenKind::Reader => (name.unwrap_or("reader").to_string(), READERS),
        TokenKind::Node => {
            let n = node.filter(|n| !n.is_empty()).ok_or(TokenError::NodeMissing)?;
            let errs = crate::model::dns1123_subdomain_errors(n);
            if let Some(msg) = errs.first() {
                return Err(TokenError::Invalid {
                    what: "--node",
                    value: n.to_string(),
                    message: msg.clone(),
                });
            }
            (format!("{NODE_PREFIX}{n}"), NODES)
        }
        TokenKind::Bootstrap => (format!("{BOOTSTRAP_PREFIX}{id}"), BOOTSTRAPPERS),
    };
    Ok((user, vec![group.to_string(), AUTHENTICATED.to_string()]))
}

/// Checks the labels of a new token of `kind` ([`TokenRecord::labels`]): only node tokens
/// have them, and each is a valid Kubernetes label (a qualified key, a label value).
///
/// Errors: [`TokenError::LabelsNotAllowed`]; [`TokenError::Invalid`] naming the label and
/// apimachinery's message.
pub fn check_token_labels(
    kind: TokenKind,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<(), TokenError> {
    if labels.is_empty() {
        return Ok(());
    }
    if kind != TokenKind::Node {
        return Err(TokenError::LabelsNotAllowed);
    }
    for (k, v) in labels {
        let errs = crate::model::qualified_name_errors(k);
        let (value, errs) = if errs.is_empty() {
            (v, crate::model::label_value_errors(v))
        } else {
            (k, errs)
        };
        if let Some(msg) = errs.first() {
            return Err(TokenError::Invalid {
                what: "--label",
                value: value.clone(),
                message: msg.clone(),
            });
        }
    }
    Ok(())
}

/// A new secret: 256 bits from the OS random source, as 64 lower-case hex digits, with the
/// `mco_` prefix secret scanners can match.
///
/// Panics if the OS has no random source (no safe fallback exists).
pub fn new_secret() -> String {
    format!("mco_{}", hex::encode(random_bytes::<32>()))
}

/// A new token id: 48 random bits as 12 hex digits.
pub fn new_id() -> String {
    hex::encode(random_bytes::<6>())
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the OS random source works");
    b
}

/// Lower-case hex SHA-256 of a secret: what the log stores and requests are looked up by.
pub fn hash(secret: &str) -> String {
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}

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

const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// Whether `user` may do `a` (RBAC's answer; admission rules come later). Rules:
/// - admin (`system:masters`): everything.
/// - everyone authenticated: `create` of `selfsubjectaccessreviews`, `selfsubjectrulesreviews`
///   and `selfsubjectreviews`
///   (Kubernetes' `system:basic-user`), GET of discovery and OpenAPI (`system:discovery`).
/// - reader: get, list and watch of every resource except `tokens.auth.mco.dev`; GET of every
///   other path (history, diffs, metrics, Ignition configs).
/// - node: get, list, watch of nodes, machineconfigs, machineconfigpools and
///   machineconfigurations (what its daemon reads); create of nodes (the name is checked by
///   admission, [`node_may_write`]); update and patch of its own Node and its status; create of
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
fn role_allows(kind: TokenKind, user: &User, a: &Attributes) -> bool {
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
            if READ_VERBS.contains(&a.verb.as_str()) {
                return mco_kind || policy || nodes;
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
                    rule(&["create"], &[""], &["nodes"]),
                    json!({"verbs": ["update", "patch"], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                           "resourceNames": [own]}),
                    rule(&["create"], &["metrics.mco.dev"], &["reports"]),
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
fn is_discovery(path: &str) -> bool {
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
/// forbidden: ` for a collection; `forbidden: User "x" cannot get path "/metrics"` for a
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
    format!(
        "{object}: User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
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
fn is_kubelet_label(key: &str, prefix: &str) -> bool {
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
fn controller_annotations() -> Vec<String> {
    crate::model::ACCEPTED_GROUPS
        .iter()
        .flat_map(|g| [format!("{g}/desiredConfig"), format!("{g}/lastAppliedDrain")])
        .collect()
}

/// On a node's create: no `lastAppliedDrain`, and a `desiredConfig` only equal to the
/// `currentConfig` it registers with (the config it booted, as MCO's first boot records both),
/// so that registering does not choose what the node is given either.
fn check_registration_annotations(own: &str, new: &serde_json::Value) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
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

//! Where the client commands and the daemon find their server, its CA and their token: one
//! resolution order for both (README "Client commands").
//!
//! Each layer is taken whole, first match wins, piece by piece:
//! 1. flags: `--server`, `--certificate-authority`, `--token` (the daemon's `--token-file`);
//! 2. environment: `MCO_SERVER`, `MCO_CA_FILE`, `MCO_TOKEN`, else the file `MCO_TOKEN_FILE` names;
//! 3. the kubeconfig's current context (the first file of `KUBECONFIG`, else `~/.kube/config`)
//!    as a whole: its cluster's server, its CA and its user's token go together, so the
//!    context's CA and token are used only when the server in use *is* that context's server
//!    (same scheme, host and port), whichever layer chose it;
//! 4. `./mco-data/`: the address `127.0.0.1:7443`, `./mco-data/pki/ca.crt`, and
//!    `./mco-data/admin.token`, the token of the local server `mco up` runs, sent to a loopback
//!    server only.
//!
//! This is kubectl's rule that a kubeconfig's credentials belong to its context's cluster
//! (client-go `clientcmd.DirectClientConfig`): with `KUBECONFIG` set for another cluster and
//! `MCO_SERVER` pointing at mco, that cluster's token is never sent to mco.
//!
//! A comma-separated list of servers (the client fails over from one to the next) is judged
//! element by element: the context is taken only when *every* server of the list is its
//! server (a client may send any request to any of them), and `./mco-data/admin.token` only
//! when every one is a loopback address; give a list's token with `--token`, `MCO_TOKEN` or
//! `MCO_TOKEN_FILE`.

use crate::tls::Trust;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `--token` (or the daemon's `--token-file`) given on the command line, with the words that
/// name it in messages (`"--token"`); set once by `main`.
pub static TOKEN_FLAG: std::sync::OnceLock<Option<(String, String)>> = std::sync::OnceLock::new();

/// The current context of a kubeconfig, read as a whole.
#[derive(Clone, Debug)]
pub struct KubeContext {
    /// How messages name the file: `$KUBECONFIG (path)` or `~/.kube/config (path)`.
    pub file: String,
    /// `current-context`.
    pub context: String,
    /// The context's `user`.
    pub user: String,
    /// The context's cluster's `server` URL, if any.
    pub server: Option<String>,
    /// The cluster's `certificate-authority-data` (base64 PEM) or `certificate-authority` (a
    /// file, relative to the kubeconfig's directory), if any.
    pub trust: Option<Trust>,
    /// The user's `token`, or the contents of its `tokenFile`, if any.
    pub token: Option<String>,
}

/// The kubeconfig clients read: the first file of `KUBECONFIG`, else `~/.kube/config`; with
/// how messages name it.
fn kubeconfig_path() -> Option<(PathBuf, String)> {
    match std::env::var_os("KUBECONFIG").filter(|k| !k.is_empty()) {
        Some(k) => std::env::split_paths(&k).next().map(|p| {
            let name = format!("$KUBECONFIG ({})", p.display());
            (p, name)
        }),
        None => std::env::var_os("HOME").map(|h| {
            let p = PathBuf::from(h).join(".kube").join("config");
            let name = format!("~/.kube/config ({})", p.display());
            (p, name)
        }),
    }
}

/// The current context of the kubeconfig clients read ([`read_context`] of it); `None` when
/// there is no file, no current context, or it does not parse.
pub fn current_context() -> Option<KubeContext> {
    let (path, name) = kubeconfig_path()?;
    read_context(&path, &name)
}

/// The current context of the kubeconfig at `path` (`name`: how messages name the file).
/// `None` when the file is missing or does not parse as YAML, or names no existing context.
pub fn read_context(path: &Path, name: &str) -> Option<KubeContext> {
    use base64::Engine;
    let text = std::fs::read_to_string(path).ok()?;
    let cfg: Value = serde_saphyr::from_str(&text).ok()?;
    let context = cfg["current-context"].as_str()?.to_string();
    let find = |list: &str, item: &str| -> Option<Value> {
        cfg[list]
            .as_array()?
            .iter()
            .find(|e| e["name"].as_str() == Some(item))
            .cloned()
    };
    let ctx = find("contexts", &context)?;
    let user = ctx["context"]["user"].as_str().unwrap_or("").to_string();
    let cluster = ctx["context"]["cluster"]
        .as_str()
        .and_then(|c| find("clusters", c))
        .unwrap_or(Value::Null);
    let server = cluster["cluster"]["server"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let dir = path.parent().unwrap_or(Path::new("."));
    let trust = if let Some(data) = cluster["cluster"]["certificate-authority-data"].as_str() {
        base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()
            .map(|pem| Trust {
                pem,
                source: format!("the certificate-authority-data of {name} context '{context}'"),
            })
    } else {
        cluster["cluster"]["certificate-authority"]
            .as_str()
            .and_then(|f| Trust::from_file(&dir.join(f)).ok())
    };
    let u = find("users", &user).unwrap_or(Value::Null);
    let token = match u["user"]["token"].as_str().filter(|t| !t.is_empty()) {
        Some(t) => Some(t.to_string()),
        None => u["user"]["tokenFile"]
            .as_str()
            .and_then(|f| crate::credentials::read_secret_file(&dir.join(f))),
    };
    Some(KubeContext {
        file: name.to_string(),
        context,
        user,
        server,
        trust,
        token,
    })
}

/// Whether two server addresses are the same server: scheme, host (case-insensitive) and port
/// (the scheme's default when absent) equal; paths are not compared.
pub fn same_server(a: &str, b: &str) -> bool {
    let parse = |s: &str| {
        let s = if s.contains("://") {
            s.to_string()
        } else {
            format!("http://{s}")
        };
        reqwest::Url::parse(&s).ok().map(|u| {
            (
                u.scheme().to_ascii_lowercase(),
                u.host_str().unwrap_or("").to_ascii_lowercase(),
                u.port_or_known_default(),
            )
        })
    };
    matches!((parse(a), parse(b)), (Some(x), Some(y)) if x == y)
}

/// A server's credentials, resolved by [`for_server`].
#[derive(Clone)]
pub struct Credentials {
    /// The bearer token to send, if any.
    pub token: Option<String>,
    /// Where the token came from, as messages say it: `--token`, `$MCO_TOKEN`, `the token from
    /// $KUBECONFIG (path) context 'x' (user 'y')`, `./mco-data/admin.token`, or `no token`.
    pub token_source: String,
    /// The CA an `https://` server must be signed by, if any.
    pub trust: Option<Trust>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_source", &self.token_source)
            .field("trust", &self.trust.as_ref().map(|t| &t.source))
            .finish()
    }
}

/// The default server address when no flag, `MCO_SERVER` or kubeconfig context names one:
/// the current context's server, else `None` (the caller's default, `127.0.0.1:7443`).
pub fn kubeconfig_server() -> Option<String> {
    current_context()?.server
}

/// The token and CA for `server` (a URL or a comma-separated list of them, as
/// [`crate::cli::server_url`] makes it), in the module's order. `explicit_trust` is the CA of
/// the flag or `MCO_CA_FILE`, if given.
pub fn for_server(server: &str, explicit_trust: Option<Trust>) -> Credentials {
    let nonempty = |s: String| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    let list = crate::client::server_list(server);
    let ctx = current_context().filter(|c| {
        c.server
            .as_deref()
            .is_some_and(|s| !list.is_empty() && list.iter().all(|each| same_server(s, each)))
    });
    let trust = explicit_trust
        .or_else(|| ctx.as_ref().and_then(|c| c.trust.clone()))
        .or_else(default_trust);
    let found = |token: Option<String>, source: String| Credentials {
        token,
        token_source: source,
        trust: trust.clone(),
    };
    if let Some((t, source)) = TOKEN_FLAG.get().cloned().flatten() {
        if let Some(t) = nonempty(t) {
            return found(Some(t), source);
        }
    }
    if let Some(t) = std::env::var("MCO_TOKEN").ok().and_then(nonempty) {
        return found(Some(t), "the token in $MCO_TOKEN".into());
    }
    if let Some(f) = std::env::var_os("MCO_TOKEN_FILE").filter(|f| !f.is_empty()) {
        let source = format!("the token in $MCO_TOKEN_FILE ({})", Path::new(&f).display());
        return found(crate::credentials::read_secret_file(Path::new(&f)), source);
    }
    if let Some(c) = &ctx {
        if let Some(t) = c.token.clone() {
            let source = format!("the token from {} context '{}' (user '{}')", c.file, c.context, c.user);
            return found(Some(t), source);
        }
    }
    let data = Path::new("mco-data").join(crate::credentials::ADMIN_TOKEN_FILE);
    if !list.is_empty() && list.iter().all(|each| is_loopback(each)) {
        if let Some(t) = crate::credentials::read_secret_file(&data) {
            return found(Some(t), format!("the token in ./{}", data.display()));
        }
    }
    found(
        None,
        "no token (none of --token, $MCO_TOKEN, $MCO_TOKEN_FILE, a kubeconfig context for this server \
         (for a list: for every server of it), ./mco-data/admin.token)"
            .into(),
    )
}

/// `./mco-data/pki/ca.crt` when it exists and parses.
fn default_trust() -> Option<Trust> {
    let p = Path::new(crate::cli::DEFAULT_CA_FILE);
    p.is_file().then(|| Trust::from_file(p).ok()).flatten()
}

/// Whether `server`'s host is a loopback address (or `localhost`).
fn is_loopback(server: &str) -> bool {
    let plain = match server.split_once("://") {
        Some((_, rest)) => format!("http://{rest}"),
        None => format!("http://{server}"),
    };
    crate::client::credentials_allowed(&plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_server_compares_scheme_host_and_port() {
        assert!(same_server("https://127.0.0.1:7443", "https://127.0.0.1:7443/"));
        assert!(same_server("https://Example.COM", "https://example.com:443"));
        assert!(!same_server("https://127.0.0.1:7443", "http://127.0.0.1:7443"));
        assert!(!same_server("https://127.0.0.1:7443", "https://127.0.0.1:7444"));
        assert!(!same_server("https://10.0.0.1:6443", "https://127.0.0.1:6443"));
    }

    #[test]
    fn a_context_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "filetoken\n").unwrap();
        let text =
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.1.2.3:6443\n\
                    contexts:\n- name: ops\n  context:\n    cluster: c\n    user: alice\ncurrent-context: ops\n\
                    users:\n- name: alice\n  user:\n    tokenFile: tok\n";
        let path = dir.path().join("config");
        std::fs::write(&path, text).unwrap();
        let c = read_context(&path, "K").unwrap();
        assert_eq!(c.context, "ops");
        assert_eq!(c.user, "alice");
        assert_eq!(c.server.as_deref(), Some("https://10.1.2.3:6443"));
        assert_eq!(c.token.as_deref(), Some("filetoken"));
        assert!(c.trust.is_none());
    }
}

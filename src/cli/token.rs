//! `mco token create|list|revoke`, and where the client commands find their bearer token.
//!
//! The three token verbs over the token API (`/apis/auth.mco.dev/v1/tokens`, admin only); where
//! clients find their token is `credentials.rs`.

use crate::client::Client;
use serde_json::{json, Value};
use std::path::Path;

/// The token of the current context's user in the kubeconfig at `path` (`users[].user.token`,
/// or the file `users[].user.tokenFile` names), whatever its server
/// ([`super::credentials::read_context`]; clients use it only for that context's server).
pub fn kubeconfig_token(path: &Path) -> Option<String> {
    super::credentials::read_context(path, &path.display().to_string())?.token
}

const TOKENS: &str = "/apis/auth.mco.dev/v1/tokens";

/// The `--label KEY=VALUE` arguments of `mco token create` (`KEY=` is the empty value, as
/// `node-role.kubernetes.io/worker=`).
///
/// Errors: an argument without `=`, or a key given twice.
pub fn parse_labels(args: &[String]) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--label {a:?}: expected KEY=VALUE (KEY= for an empty value)"))?;
        if out.insert(k.to_string(), v.to_string()).is_some() {
            anyhow::bail!("--label {k:?} is given twice");
        }
    }
    Ok(out)
}

/// `mco token create`: issues a token and prints its secret (once: the server keeps only its
/// hash), followed by its id and identity on stderr. `labels` are a node token's
/// (`spec.labels`: what its node registers with).
///
/// Errors: the server's (Forbidden for a non-admin, BadRequest for a bad kind/node/name/label).
pub async fn create(
    client: &Client,
    kind: &str,
    node: Option<&str>,
    name: Option<&str>,
    labels: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<(String, String)> {
    let mut spec = json!({"kind": kind});
    if let Some(n) = node {
        spec["node"] = json!(n);
    }
    if !labels.is_empty() {
        spec["labels"] = json!(labels);
    }
    if let Some(n) = name {
        spec["identity"] = json!(n);
    }
    let t: Value = client
        .post_path(
            TOKENS,
            &json!({"apiVersion": crate::auth::API_VERSION, "kind": "Token", "spec": spec}),
        )
        .await?;
    let secret = t["status"]["token"].as_str().unwrap_or("").to_string();
    let about = format!(
        "token {} issued for {} ({}); the secret is shown only now",
        t["metadata"]["name"].as_str().unwrap_or(""),
        t["spec"]["identity"].as_str().unwrap_or(""),
        t["spec"]["kind"].as_str().unwrap_or("")
    );
    Ok((format!("{secret}\n"), about))
}

/// `mco token list`: ID, KIND, IDENTITY, NODE, LABELS (a node token's, `k=v,...`), AGE of
/// every token in force (never a secret or a hash).
pub async fn list(client: &Client) -> anyhow::Result<String> {
    let l: Value = client.get_path(TOKENS).await?;
    let now = jiff::Timestamp::now();
    let mut rows = Vec::new();
    for t in l["items"].as_array().into_iter().flatten() {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        let age = t["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|c| c.parse::<jiff::Timestamp>().ok())
            .map(|c| crate::gofmt::human_duration((now - c).get_seconds()))
            .unwrap_or_else(|| "<unknown>".into());
        let labels: Vec<String> = t["spec"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect();
        rows.push(vec![
            s(&t["metadata"]["name"]),
            s(&t["spec"]["kind"]),
            s(&t["spec"]["identity"]),
            t["spec"]["node"].as_str().unwrap_or("<none>").to_string(),
            if labels.is_empty() {
                "<none>".to_string()
            } else {
                labels.join(",")
            },
            age,
        ]);
    }
    Ok(super::output::table(
        &["ID", "KIND", "IDENTITY", "NODE", "LABELS", "AGE"],
        rows,
    ))
}

/// `mco token revoke ID`: the token stops working from the server's next request on.
pub async fn revoke(client: &Client, id: &str) -> anyhow::Result<String> {
    let path = format!(
        "{TOKENS}/{}",
        percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC)
    );
    let t: Value = client.delete_path(&path).await?;
    Ok(format!(
        "token {} revoked ({})\n",
        t["metadata"]["name"].as_str().unwrap_or(id),
        t["spec"]["identity"].as_str().unwrap_or("")
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kubeconfig_token_is_the_current_contexts_users() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config");
        let file = dir.path().join("t");
        std::fs::write(&file, "from-file\n").unwrap();
        std::fs::write(
            &p,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: b\ncontexts:\n- name: a\n  context: {{cluster: c, user: ua}}\n- name: b\n  context: {{cluster: c, user: ub}}\nusers:\n- name: ua\n  user: {{token: secret-a}}\n- name: ub\n  user: {{tokenFile: {}}}\n",
                file.display()
            ),
        )
        .unwrap();
        assert_eq!(super::kubeconfig_token(&p).as_deref(), Some("from-file"));
        std::fs::write(
            &p,
            crate::up::kubeconfig_with_token(&crate::up::kubeconfig("http://x"), "mco_abc"),
        )
        .unwrap();
        assert_eq!(super::kubeconfig_token(&p).as_deref(), Some("mco_abc"));
        std::fs::write(&p, crate::up::kubeconfig("http://x")).unwrap();
        assert_eq!(super::kubeconfig_token(&p), None);
    }
}

//! The kubectl-like client of the REST API: one module per verb (`get`, `describe`, `delete`,
//! `label`/`annotate`, `rollout status`, `history`, `diff`, `rollback`, `store`), `apply` here.
//!
//! Owns argument shapes of the client verbs, reading manifests from files, directories and
//! stdin, sending kubectl's apply as [`crate::apply`] computes it (three-way merge, the
//! last-applied annotation written as kubectl writes it), and printing tables/YAML/JSON. Talks to the server only through [`crate::client`].

pub mod apply;
pub mod args;
pub mod conn;
pub mod credentials;
pub mod delete;
pub mod describe;
pub mod diff;
pub mod edit;
pub mod explain;
pub mod get;
pub mod history;
pub mod jsonpath;
pub mod label;
pub mod output;
pub mod rollback;
pub mod rollout;
pub mod run;
mod serve;
pub mod sort;
pub mod store;
pub mod token;
pub mod validate;
pub mod verbs;

pub use crate::apply::{last_applied, three_way_patch, LAST_APPLIED};
use crate::client::{Client, ClientError};
use crate::manifest::parse_with_source;
use crate::model::Kind;
use anyhow::{anyhow, Context};
pub use apply::{
    apply, apply_dry_run, apply_dry_run_printed, apply_dry_run_validated, apply_kubectl_dry_run, apply_printed,
    apply_validated, Applied, Printed,
};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use crate::server::{DEFAULT_CA_FILE, DEFAULT_LISTEN};

/// `-o` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
    Wide,
    Name,
}

impl OutputFormat {
    /// The flag value (`yaml`, `json`, `wide`, `name`).
    pub fn as_str(self) -> &'static str {
        match self {
            OutputFormat::Yaml => "yaml",
            OutputFormat::Json => "json",
            OutputFormat::Wide => "wide",
            OutputFormat::Name => "name",
        }
    }
}

/// `kind.group` as kubectl prints resources (`machineconfigpool.machineconfiguration.openshift.io`).
fn resource_name(kind: Kind, group: &str) -> String {
    match kind {
        Kind::Node => "node".into(),
        k => format!("{}.{}", k.as_str().to_ascii_lowercase(), k.group(group)),
    }
}

/// Parses a kind as kubectl resolves a resource argument: a bare kind, plural or short name,
/// or one qualified by its group (`kubeletconfig.machineconfiguration.openshift.io`,
/// `image.config.openshift.io`) or by version and group (`images.v1.config.openshift.io`).
/// The MachineConfig group is configurable, so its kinds accept any group.
fn parse_kind(s: &str) -> anyhow::Result<Kind> {
    parse_qualified_kind(s).ok_or_else(|| {
        anyhow!("the server doesn't have a resource type {s:?} (known: machineconfigpool|mcp, machineconfig|mc, node|nodes, kubeletconfig|kc, containerruntimeconfig|ctrcfg, imagedigestmirrorset|idms, imagetagmirrorset|itms, imagecontentsourcepolicy|icsp, image, machineconfiguration)")
    })
}

fn parse_qualified_kind(s: &str) -> Option<Kind> {
    if let Some(k) = Kind::parse(s) {
        return Some(k);
    }
    let (head, group) = s.split_once('.')?;
    let k = Kind::parse(head)?;
    let group_ok = |g: &str| match k.info().group {
        None => !g.is_empty(),
        Some(fixed) => g.eq_ignore_ascii_case(fixed),
    };
    if group_ok(group) {
        return Some(k);
    }
    // `resource.version.group`
    let (version, group) = group.split_once('.')?;
    (version.eq_ignore_ascii_case(k.info().version) && group_ok(group)).then_some(k)
}

/// kubectl's message when `KIND/NAME` and `KIND NAME` arguments are mixed
/// (k8s.io/cli-runtime pkg/resource/builder.go `hasCombinedTypeArgs`).
pub const MIXED_RESOURCE_ARGS: &str = "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'mco get resource/<resource_name>' instead of 'mco get resource resource/<resource_name>'";

/// Splits one `KIND/NAME` argument as kubectl's `splitResourceTypeName` does (its errors too).
pub fn split_resource_name(s: &str) -> anyhow::Result<(String, String)> {
    let seg: Vec<&str> = s.split('/').collect();
    if seg.len() != 2 {
        anyhow::bail!("arguments in resource/name form may not have more than one slash");
    }
    if seg[0].is_empty() || seg[1].is_empty() || seg[0].contains(',') {
        anyhow::bail!("arguments in resource/name form must have a single resource and name");
    }
    Ok((seg[0].to_string(), seg[1].to_string()))
}

/// Resource arguments as kubectl's builder reads them: `KIND NAME...` or `KIND/NAME...` (never
/// mixed). A `KIND` alone gives `(kind, None)`: every object the selectors pick.
pub fn resource_args(args: &[String]) -> anyhow::Result<Vec<(Kind, Option<String>)>> {
    let slashed = args.iter().filter(|a| a.contains('/')).count();
    if slashed > 0 && slashed != args.len() {
        anyhow::bail!("{MIXED_RESOURCE_ARGS}");
    }
    if slashed > 0 {
        return args
            .iter()
            .map(|a| {
                let (k, n) = split_resource_name(a)?;
                Ok((parse_kind(&k)?, Some(n)))
            })
            .collect();
    }
    match args {
        [] => anyhow::bail!("one or more resources must be specified as <resource> <name> or <resource>/<name>"),
        [kind] => Ok(vec![(parse_kind(kind)?, None)]),
        [kind, names @ ..] => {
            let kind = parse_kind(kind)?;
            Ok(names.iter().map(|n| (kind, Some(n.clone()))).collect())
        }
    }
}

/// Explains a client error the way kubectl does (`Error from server (NotFound): ...`).
pub fn describe_error(e: &ClientError) -> String {
    match e {
        ClientError::Status(s) if s.reason == "Invalid" => invalid_message(s),
        ClientError::Status(s) => {
            let mut m = format!(
                "Error from server ({}): {}",
                if s.reason.is_empty() { "Unknown" } else { &s.reason },
                s.message
            );
            if let Some(d) = &s.details {
                if d.causes.len() > 1 {
                    for c in &d.causes {
                        m.push_str(&format!("\n  * {}: {}", c.field, c.message));
                    }
                }
            }
            m
        }
        other => format!("error: {other}"),
    }
}

/// kubectl's text for an Invalid status (k8s.io/kubectl pkg/cmd/util/helpers.go
/// `StandardErrorMessage`): `The KIND "NAME" is invalid: field: message` when the details name
/// the object, `The request is invalid` otherwise (with the message when there are no
/// causes), then the causes, one as is, several as `[a, b]`.
fn invalid_message(s: &crate::client::StatusError) -> String {
    let Some(d) = &s.details else {
        return match s.message.is_empty() {
            true => "The request is invalid".to_string(),
            false => format!("The request is invalid: {}", s.message),
        };
    };
    let mut m = if !d.kind.is_empty() || !d.name.is_empty() {
        format!("The {} {:?} is invalid", d.kind, d.name)
    } else if !s.message.is_empty() && d.causes.is_empty() {
        format!("The request is invalid: {}", s.message)
    } else {
        "The request is invalid".to_string()
    };
    let causes: Vec<String> = d.causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
    match causes.as_slice() {
        [] => {}
        [one] => m.push_str(&format!(": {one}")),
        many => m.push_str(&format!(": [{}]", many.join(", "))),
    }
    m
}

/// `mco get KIND [NAME] [-o ...] [--at TIME|rv:N]` into a string (see [`get::run`] for the
/// whole verb: several names, selectors, jsonpath, watch).
pub async fn get(
    client: &Client,
    kind: &str,
    name: Option<&str>,
    output: Option<OutputFormat>,
    at: Option<&str>,
) -> anyhow::Result<String> {
    let mut targets = vec![kind.to_string()];
    targets.extend(name.map(str::to_string));
    let args = get::GetArgs {
        targets,
        output: output.map(|o| o.as_str().to_string()),
        at: at.map(str::to_string),
        ..Default::default()
    };
    let mut buf: Vec<u8> = Vec::new();
    let ok = get::run(client, &args, &mut buf).await?;
    let out = String::from_utf8(buf)?;
    if !ok {
        return Err(anyhow!("{out}"));
    }
    Ok(out)
}

/// `mco describe KIND NAME [--at TIME|rv:N]` (see [`describe::describe`]).
pub async fn describe(client: &Client, kind: &str, name: &str, at: Option<&str>) -> anyhow::Result<String> {
    describe::describe(client, kind, name, at).await
}

/// Asks the server what `body` (`{"apply": [...], "delete": [...]}`) would do and prints it.
pub(crate) async fn preview(client: &Client, body: Value) -> anyhow::Result<(String, bool)> {
    let answer: Value = match client
        .post_path(&format!("/apis/{}/previews", crate::history::API_VERSION), &body)
        .await
    {
        Ok(a) => a,
        Err(e) => return Ok((format!("{}\n", describe_error(&e)), false)),
    };
    let mut out = String::new();
    for w in client.take_warnings() {
        out.push_str(&format!("Warning: {w}\n"));
    }
    let impact: crate::preview::Impact = serde_json::from_value(answer)?;
    out.push_str(&crate::preview::render_text(&impact));
    out.push_str("dry run: nothing was changed\n");
    Ok((out, true))
}

/// `mco delete KIND NAME [--dry-run]`: with [`Run::DryRun`], previews the impact instead.
/// What deleting pool `name` does to the nodes: each node it holds and the pool MCO's
/// `GetPoolsForNode` gives it afterwards (a custom pool's nodes fall back to `worker`; with no
/// pool selecting it a node keeps its files but gets no more updates).
async fn pool_deletion_impact(client: &Client, name: &str) -> anyhow::Result<String> {
    use crate::model::{MachineConfigPool, Node};
    let pools = client
        .list(Kind::MachineConfigPool)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let nodes = client.list(Kind::Node).await.map_err(|e| anyhow!(describe_error(&e)))?;
    let pools: Vec<MachineConfigPool> = serde_json::from_value(pools["items"].clone()).unwrap_or_default();
    let nodes: Vec<Node> = serde_json::from_value(nodes["items"].clone()).unwrap_or_default();
    let node_refs: Vec<&Node> = nodes.iter().collect();
    let before = crate::rollout::pools_for_nodes(&pools.iter().collect::<Vec<_>>(), &node_refs);
    let remaining: Vec<&MachineConfigPool> = pools
        .iter()
        .filter(|p| p.metadata.name.as_deref() != Some(name))
        .collect();
    let after = crate::rollout::pools_for_nodes(&remaining, &node_refs);
    let mut out = String::new();
    for n in &nodes {
        let node = n.metadata.name.as_deref().unwrap_or("");
        if before.primary.get(node).map(String::as_str) != Some(name) {
            continue;
        }
        match after.primary.get(node) {
            Some(p) => out.push_str(&format!(
                "  node {node}: leaves pool {name:?}, falls back to pool {p:?}\n"
            )),
            None => out.push_str(&format!(
                "  node {node}: leaves pool {name:?} and is in no pool: it keeps its files and gets no more updates\n"
            )),
        }
    }
    if out.is_empty() {
        out.push_str(&format!("  pool {name:?} holds no nodes\n"));
    }
    Ok(out)
}

pub async fn delete(client: &Client, kind: &str, name: &str, run: Run) -> anyhow::Result<String> {
    let kind = parse_kind(kind)?;
    if run == Run::DryRun {
        let (out, ok) = preview(
            client,
            serde_json::json!({"delete": [{"kind": kind.as_str(), "name": name}]}),
        )
        .await?;
        if !ok {
            return Err(anyhow!(out.trim_end().to_string()));
        }
        let mut head = format!("{}/{name} deleted (dry run)\n", resource_name(kind, client.group()));
        if kind == Kind::MachineConfigPool {
            head.push_str(&pool_deletion_impact(client, name).await?);
        }
        return Ok(format!("{head}{out}"));
    }
    client
        .delete(kind, name)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    Ok(format!("{} {name:?} deleted\n", resource_name(kind, client.group())))
}

/// Reads every manifest file named by `-f` (a file, a directory's `.yaml`/`.yml`/`.json` files,
/// or `-` for stdin), returning `(source, text)` pairs in order.
pub fn read_sources(paths: &[PathBuf]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            // Read once per process: `apply --wait` reads the sources twice.
            static STDIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
            let s = match STDIN.get() {
                Some(s) => s.clone(),
                None => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
                    STDIN.get_or_init(|| s).clone()
                }
            };
            out.push(("<stdin>".to_string(), s));
        } else if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && is_manifest_file(f))
                .collect();
            files.sort();
            for f in files {
                out.push((
                    f.display().to_string(),
                    std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?,
                ));
            }
        } else {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(p).with_context(|| {
                    format!(
                        "the path {:?} does not exist or cannot be read",
                        p.display().to_string()
                    )
                })?,
            ));
        }
    }
    Ok(out)
}

/// Every document of the `-f` sources as written (unparseable ones left out: `apply` reports
/// them); what `mco apply --wait` asks the preview about.
pub fn raw_documents(paths: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (_, text) in read_sources(paths)? {
        out.extend(parse_with_source(&text).into_iter().flatten().map(|d| d.raw));
    }
    Ok(out)
}

fn is_manifest_file(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Whether a client verb writes or only previews.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    Write,
    DryRun,
}

/// Resolves the server URL: `flag` (`--server`/`MCO_SERVER`), else the kubeconfig's current
/// context's server ([`credentials::kubeconfig_server`]), else the default `mco up` address.
/// A comma-separated list (several servers on one etcd, [`crate::client::Client`]'s failover)
/// is resolved element by element and given back as a list.
pub fn server_url(flag: Option<&str>) -> String {
    let s = flag
        .map(str::to_string)
        .or_else(credentials::kubeconfig_server)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let list = crate::client::server_list(&s);
    if list.is_empty() {
        return s;
    }
    let tls = list.iter().any(|s| !s.contains("://")) && trust().is_some();
    list.into_iter()
        .map(|s| {
            if s.contains("://") {
                // Any scheme is kept so that `check_address` can refuse the ones mco does not speak.
                s
            } else if tls {
                // client-go's rule (`rest.DefaultServerURL`): no scheme means https when TLS is set up.
                format!("https://{s}")
            } else {
                format!("http://{s}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CA the client commands and the daemon verify an `https://` server against; set once
/// by the binary ([`set_trust`]).
static TRUST: std::sync::OnceLock<Option<crate::tls::Trust>> = std::sync::OnceLock::new();

/// Sets the CA of this process's clients (the first call wins).
pub fn set_trust(trust: Option<crate::tls::Trust>) {
    let _ = TRUST.set(trust);
}

/// The CA of `--certificate-authority`/`MCO_CA_FILE` set by [`set_trust`], else
/// [`DEFAULT_CA_FILE`] when it exists (a server's own kubeconfig CA is
/// [`credentials::for_server`]'s).
pub fn trust() -> Option<crate::tls::Trust> {
    explicit_trust().or_else(|| {
        let default = std::path::Path::new(DEFAULT_CA_FILE);
        default
            .is_file()
            .then(|| crate::tls::Trust::from_file(default).ok())
            .flatten()
    })
}

/// The CA set by [`set_trust`] (a flag or `MCO_CA_FILE`), if any.
pub fn explicit_trust() -> Option<crate::tls::Trust> {
    TRUST.get().cloned().flatten()
}

/// The CA of `flag` (`--certificate-authority`, `--ca-file` or MCO_CA_FILE) when given (an
/// unreadable or non-PEM file is an error), else none ([`trust`] adds the default).
pub fn resolve_trust(flag: Option<&std::path::Path>) -> anyhow::Result<Option<crate::tls::Trust>> {
    flag.map(crate::tls::Trust::from_file).transpose()
}

/// Fails with a readable message when no server answers.
///
/// An `https://` address is refused with an explanation (mco serves plain HTTP on loopback
/// until TLS lands), and an endpoint that answers but is not an mco server says so.
/// A failure as kubectl prints it: `error: ...`, except the server's own
/// `Error from server (Reason): ...` lines, which already say where they come from.
pub fn error_line(msg: &str) -> String {
    if msg.starts_with("error:") || msg.starts_with("Error from server") {
        msg.to_string()
    } else {
        format!("error: {msg}")
    }
}

/// The address checks every client makes before talking, on each server of a list:
/// `http://` or `https://` only.
pub fn check_address(server: &str) -> anyhow::Result<()> {
    let list = crate::client::server_list(server);
    if list.is_empty() {
        anyhow::bail!("{server:?}: no server address (give host:port, https://host:port or a comma-separated list)");
    }
    for server in &list {
        if let Some((scheme, _)) = server.split_once("://") {
            if scheme != "http" && scheme != "https" {
                anyhow::bail!(
                    "{server}: unsupported scheme {scheme:?}: mco servers speak https and http (give host:port, \
                     https://host:port or http://host:port)"
                );
            }
        }
    }
    Ok(())
}

/// `mco daemon`'s start-up check: the same address checks as the clients, and an endpoint that
/// answers but is not an mco server is refused at once. An unreachable one is fine (the daemon
/// waits for its server to come up), so the check goes round a list of servers once
/// ([`crate::client::FAILOVER_BOUND`] is for commands).
pub async fn check_daemon_server(server: &str) -> anyhow::Result<()> {
    check_address(server)?;
    match connect_within(server, std::time::Duration::ZERO).await {
        Ok(_) => Ok(()),
        Err(e)
            if e.to_string().contains(" is not an mco server")
                || e.to_string().contains("401 Unauthorized from")
                || e.to_string().contains("refusing to send a token")
                || e.to_string().contains("refused this token") =>
        {
            Err(e)
        }
        Err(_) => Ok(()),
    }
}

/// Whether a transport error is the server's certificate failing verification.
fn is_certificate_error(e: &ClientError) -> bool {
    let m = e.to_string();
    m.contains("invalid peer certificate") || m.contains("UnknownIssuer") || m.contains("certificate")
}

/// A client of the server at `server` (or of a comma-separated list of servers, failing over
/// from one to the next, [`Client`]), after [`check_address`]; errors say what to do.
pub async fn connect(server: &str) -> anyhow::Result<Client> {
    connect_within(server, crate::client::FAILOVER_BOUND).await
}

/// [`connect`], going round a list of servers for at most `bound`.
async fn connect_within(server: &str, bound: std::time::Duration) -> anyhow::Result<Client> {
    check_address(server)?;
    let creds = credentials::for_server(server, explicit_trust());
    let token = creds.token.clone();
    let plain = crate::client::server_list(server)
        .into_iter()
        .find(|s| !crate::client::credentials_allowed(s));
    if let (Some(_), Some(plain)) = (&token, plain) {
        anyhow::bail!(
            "{plain}: refusing to send a token over plain HTTP to an address other than loopback (anyone \
             on the network could read it): give the server's https:// address and its CA \
             (--certificate-authority or MCO_CA_FILE; `mco server init` makes them)"
        );
    }
    let trust = creds.trust.clone();
    Client::connect_within(server, "cli", token, trust.as_ref(), bound)
        .await
        .map_err(|e| match e {
            ClientError::Transport { .. } if is_certificate_error(&e) => anyhow!(
                "{e}\nThe server's certificate is not signed by {}: give the CA of that server with \
             --certificate-authority or MCO_CA_FILE (`mco up` writes it to <data-dir>/pki/ca.crt).",
                trust
                    .as_ref()
                    .map_or("a trusted CA (none is set)".to_string(), |t| format!(
                        "the CA in {}",
                        t.source
                    ))
            ),
            ClientError::Transport { server: ref at, .. }
                if at.starts_with("http://") && e.to_string().contains("invalid HTTP version") =>
            {
                anyhow!(
                    "{e}\n{at} answers in TLS: give its https:// address (and its CA with \
                     --certificate-authority or MCO_CA_FILE)."
                )
            }
            ClientError::Transport { .. } => {
                anyhow!("{e}\nIs `mco up` (or `mco server`) running? Set --server or MCO_SERVER to its address.")
            }
            ClientError::Status(s) if s.code == 401 && creds.token.is_some() => anyhow!(
                "401 Unauthorized from {server}: {} was refused; give an mco token of this server with \
                 --token, MCO_TOKEN, MCO_TOKEN_FILE or a kubeconfig context whose server is {server} \
                 (`mco up` and `mco server` write <data-dir>/kubeconfig and <data-dir>/admin.token)",
                creds.token_source
            ),
            ClientError::Status(s) if s.code == 401 => anyhow!(
                "401 Unauthorized from {server}: {} was found to send; give an mco token of this server \
                 with --token, MCO_TOKEN, MCO_TOKEN_FILE or a kubeconfig context whose server is {server} \
                 (`mco up` and `mco server` write <data-dir>/kubeconfig and <data-dir>/admin.token)",
                creds.token_source
            ),
            ClientError::Status(s) if s.code == 403 => anyhow!(
                "{server} refused this token the API's discovery (403 Forbidden: {}): a bootstrap token only \
             fetches Ignition configs (/config/<pool>); give a reader, admin or node token",
                crate::client::first_line(s.message.as_bytes())
            ),
            ClientError::Status(s) => anyhow!(
                "{server} is not an mco server: GET /apis answered {} {}",
                s.code,
                crate::client::first_line(s.message.as_bytes())
            ),
            other => anyhow!("{server} is not an mco server: {other}"),
        })
}

#[cfg(test)]
mod kind_name_tests {
    use super::*;

    /// Each server of a list gets the scheme rule and the scheme check of a single address.
    #[test]
    fn server_lists_resolve_and_check_each_element() {
        assert_eq!(
            server_url(Some("https://10.0.0.11:7443, 10.0.0.12:7443/")),
            if trust().is_some() {
                "https://10.0.0.11:7443,https://10.0.0.12:7443"
            } else {
                "https://10.0.0.11:7443,http://10.0.0.12:7443"
            }
        );
        assert!(check_address("http://127.0.0.1:1,https://127.0.0.1:2").is_ok());
        let e = check_address("http://127.0.0.1:1,ftp://127.0.0.1:2").unwrap_err();
        assert!(
            e.to_string().starts_with("ftp://127.0.0.1:2: unsupported scheme"),
            "{e}"
        );
        assert!(check_address(" , ").is_err());
    }

    /// kubectl resolves `kind.group` and `resource.version.group`; a wrong group is refused.
    #[test]
    fn qualified_kind_names() {
        for (arg, kind) in [
            ("kubeletconfig.machineconfiguration.openshift.io", Kind::KubeletConfig),
            ("kubeletconfigs.machineconfiguration.openshift.io", Kind::KubeletConfig),
            (
                "containerruntimeconfig.machineconfiguration.openshift.io",
                Kind::ContainerRuntimeConfig,
            ),
            ("image.config.openshift.io", Kind::Image),
            ("images.v1.config.openshift.io", Kind::Image),
            ("imagedigestmirrorset.config.openshift.io", Kind::ImageDigestMirrorSet),
            ("imagetagmirrorsets.config.openshift.io", Kind::ImageTagMirrorSet),
            (
                "imagecontentsourcepolicy.operator.openshift.io",
                Kind::ImageContentSourcePolicy,
            ),
            (
                "machineconfigpool.machineconfiguration.openshift.io",
                Kind::MachineConfigPool,
            ),
            ("kc", Kind::KubeletConfig),
        ] {
            assert_eq!(parse_kind(arg).unwrap(), kind, "{arg}");
        }
        assert!(parse_kind("image.machineconfiguration.openshift.io").is_err());
        assert!(parse_kind("idms.operator.openshift.io").is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::{last_applied, three_way_patch};
    use serde_json::json;

    /// kubectl GetModifiedConfiguration: sorted keys, `annotations: {}`, HTML escapes, newline
    /// (tests/cli.rs checks it against a real `kubectl apply`).
    #[test]
    fn last_applied_is_written_as_kubectl_writes_it() {
        let m = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "x", "labels": {"b": "1", "a": "2"}},
            "spec": {"config": {"ignition": {"version": "3.4.0"}}, "kernelArguments": ["a&b<c>"]}});
        assert_eq!(
            last_applied(&m),
            "{\"apiVersion\":\"machineconfiguration.openshift.io/v1\",\"kind\":\"MachineConfig\",\
             \"metadata\":{\"annotations\":{},\"labels\":{\"a\":\"2\",\"b\":\"1\"},\"name\":\"x\"},\
             \"spec\":{\"config\":{\"ignition\":{\"version\":\"3.4.0\"}},\"kernelArguments\":[\"a\\u0026b\\u003cc\\u003e\"]}}\n"
        );
    }

    #[test]
    fn three_way_patch_keeps_what_the_manifest_never_named() {
        let current = json!({"spec": {"paused": true, "configuration": {"name": "rendered-x"}, "maxUnavailable": 2}});
        let original = json!({"spec": {"paused": true, "maxUnavailable": 2}});
        let modified = json!({"spec": {"paused": true}});
        // maxUnavailable was applied before and is gone from the manifest: removed;
        // configuration was never applied: kept; paused unchanged: not in the patch.
        assert_eq!(
            three_way_patch(Some(&original), &modified, &current),
            json!({"spec": {"maxUnavailable": null}})
        );
        assert_eq!(three_way_patch(Some(&original), &original, &current), json!({}));
        assert_eq!(
            three_way_patch(None, &json!({"spec": {"paused": false}}), &current),
            json!({"spec": {"paused": false}})
        );
    }
}

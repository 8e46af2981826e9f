//! The command line of `mco`: the clap argument tree, every verb with its flags and their help
//! (the one file allowed over 600 code lines), and the small parsers its flags use.

use crate::cli::{self, OutputFormat, DEFAULT_LISTEN};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "mco",
    version,
    about = "A Machine Config Operator: declarative OS configuration for fleets of Linux nodes",
    after_help = "Client commands talk to the server at --server (or MCO_SERVER), default 127.0.0.1:7443."
)]
pub struct Args {
    /// Address of the mco server for the client commands (`host:port` or `http://host:port`,
    /// or a comma-separated list of the servers on one etcd: a connection refused by one goes
    /// to the next), as kubectl's global `--server`: also accepted after the command.
    #[arg(long, value_name = "ADDRESS")]
    pub server: Option<String>,
    /// Bearer token of the client commands (else MCO_TOKEN, MCO_TOKEN_FILE, the token of the
    /// kubeconfig's current context when the server is that context's, ./mco-data/admin.token
    /// for a loopback server), as kubectl's global `--token`.
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// CA certificate (PEM) an `https://` server must be signed by, as kubectl's flag (also
    /// `--ca-file`, or MCO_CA_FILE). Default: `./mco-data/pki/ca.crt` when it exists.
    #[arg(
        long,
        global = true,
        visible_alias = "ca-file",
        env = "MCO_CA_FILE",
        value_name = "FILE"
    )]
    pub certificate_authority: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

pub use super::conn::{Conn, GLOBAL_SERVER};

/// `mco apply --dry-run[=MODE]`: mco's impact preview (the flag alone), or kubectl's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyDryRun {
    /// The flag alone: the impact preview.
    Preview,
    /// `none`, `client` or `server`, as kubectl.
    Kubectl(cli::verbs::DryRun),
}

impl ApplyDryRun {
    /// `preview` (what the flag alone means), else kubectl's values and message.
    pub fn parse(s: &str) -> Result<ApplyDryRun, String> {
        match s {
            "preview" => Ok(ApplyDryRun::Preview),
            other => cli::verbs::DryRun::parse(other).map(ApplyDryRun::Kubectl),
        }
    }
}

/// `--log-format` of the long-running commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's json layer), span fields included.
    Json,
}

/// Where `mco server` keeps its event log (sled under --data-dir unless --store names etcd).
#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// Keep the event log in etcd instead of `<data-dir>/store`: `etcd://HOST:PORT[,HOST:PORT…]`
    /// (etcd v3 members; several servers may share it: one writes, the others wait as standbys).
    #[arg(long, value_name = "etcd://HOST:PORT[,…]")]
    pub store: Option<String>,
    /// Key prefix of mco's keys in etcd.
    #[arg(long, default_value = crate::store::etcd::DEFAULT_PREFIX, value_name = "PREFIX", requires = "store")]
    pub etcd_prefix: String,
    /// CA of the etcd members' serving certificates (PEM): connect with TLS.
    #[arg(long, value_name = "FILE", requires = "store")]
    pub etcd_cacert: Option<PathBuf>,
    /// Client certificate for etcd (PEM), with --etcd-key.
    #[arg(long, value_name = "FILE", requires_all = ["etcd_key", "etcd_cacert"])]
    pub etcd_cert: Option<PathBuf>,
    /// Private key of --etcd-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// Time to live of the writer lease in etcd, in seconds: a standby takes over at most this
    /// long after the writing server is lost.
    #[arg(long, default_value_t = crate::store::etcd::DEFAULT_LEASE_TTL_SECS, value_name = "SECONDS", requires = "store")]
    pub etcd_lease_ttl: i64,
    /// This server's name in etcd (the holder of the writer lease). Default: the host name and
    /// the listen address.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

impl StoreArgs {
    /// The etcd backend's settings, when --store names one; `listen` goes into the default
    /// name. Errors: a malformed --store URL.
    pub fn etcd(&self, listen: SocketAddr) -> anyhow::Result<Option<crate::store::etcd::EtcdConfig>> {
        let Some(url) = &self.store else {
            return Ok(None);
        };
        let name = self.name.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            format!("{}/{listen}", host.trim())
        });
        let mut cfg = crate::store::etcd::EtcdConfig::parse(url, &name).map_err(anyhow::Error::msg)?;
        cfg.prefix = self.etcd_prefix.clone();
        cfg.ca_file = self.etcd_cacert.clone();
        cfg.client_cert = self.etcd_cert.clone().zip(self.etcd_key.clone());
        cfg.lease_ttl_secs = self.etcd_lease_ttl.max(2);
        Ok(Some(cfg))
    }
}

/// What `mco up` and `mco server` share.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Directory of the event log (and, for `mco up`, the node roots and logs).
    #[arg(long, default_value = "./mco-data", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Address the API listens on (port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDRESS")]
    pub listen: SocketAddr,
    /// API group served and used for node annotations.
    #[arg(long, env = "MCO_GROUP", default_value = crate::model::DEFAULT_GROUP)]
    pub group: String,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Another name or IP address the generated serving certificate is valid for (repeatable;
    /// 127.0.0.1, ::1, localhost and the host name always are).
    #[arg(long = "tls-san", value_name = "NAME|IP")]
    pub tls_sans: Vec<String>,
    /// Listen on a non-loopback address without TLS anyway, with a
    /// warning: anyone who can reach it can read and change every machine config.
    #[arg(long)]
    pub allow_insecure_listen: bool,
    /// Time a client has to finish its TLS handshake and send a request header, in seconds.
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_name = "SECONDS")]
    pub header_read_timeout: u64,
    /// Established connections (first request received) at most per listener; the first
    /// request of one more waits until one closes.
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,
    /// Connections that have not finished their TLS handshake and first request header, at
    /// most per listener (a separate budget; one more closes the oldest of them).
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_MAX_PENDING, value_name = "N")]
    pub max_pending_connections: usize,
    /// Such pending connections from one IP address at most (one more closes that address's
    /// oldest pending one).
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_MAX_PENDING_PER_PEER, value_name = "N")]
    pub max_pending_per_peer: usize,
    /// Time a client has to finish its TLS handshake, in seconds.
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_HANDSHAKE_TIMEOUT.as_secs(), value_name = "SECONDS")]
    pub handshake_timeout: u64,
    /// Close a connection with no request in flight after this many seconds.
    #[arg(long, default_value_t = crate::api::listen::DEFAULT_IDLE_TIMEOUT.as_secs(), value_name = "SECONDS")]
    pub idle_timeout: u64,
    /// How long a node's lease may go unrenewed before the node is NotReady (its Ready
    /// condition Unknown, as kube-controller-manager's flag of that name): `40s`, `2m`.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", default_value = "40s")]
    pub node_monitor_grace_period: Duration,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The input limits of a server (README "Bounded inputs").
#[derive(clap::Args, Clone)]
pub struct LimitArgs {
    /// Deepest nesting of arrays and objects in a JSON request body (deeper: 400 BadRequest).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_JSON_DEPTH, value_name = "N")]
    pub max_json_depth: usize,
    /// Objects in one preview request (`mco apply --dry-run`; more: 413).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_DOCUMENTS, value_name = "N")]
    pub max_documents: usize,
    /// Bytes of one file's contents once decoded and decompressed (more: 422 Invalid).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    pub max_file_bytes: u64,
    /// Bytes of a rendered MachineConfig's JSON (more: the pool goes RenderDegraded).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_RENDERED_BYTES, value_name = "BYTES")]
    pub max_rendered_bytes: usize,
    /// Bytes of all the files' contents of one MachineConfig together, decoded and
    /// decompressed (more: 422 Invalid naming this limit).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_OBJECT_CONTENTS_BYTES, value_name = "BYTES")]
    pub max_object_contents_bytes: u64,
    /// Bytes of all the files' contents of one rendered config together, decoded and
    /// decompressed (more: the pool goes RenderDegraded naming this limit).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_RENDERED_CONTENTS_BYTES, value_name = "BYTES")]
    pub max_rendered_contents_bytes: u64,
    /// YAML nodes replayed through aliases in one request body (more: 400 BadRequest).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_YAML_ALIAS_EVENTS, value_name = "N")]
    pub max_yaml_alias_events: usize,
    /// Watches one client may hold open at once (more: 429 TooManyRequests).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_WATCHES_PER_CLIENT, value_name = "N")]
    pub max_watches_per_client: usize,
    /// Bytes of a request's line (URL included) and headers (more: 431 with a Status; at most
    /// 16 MiB).
    #[arg(long, default_value_t = crate::limits::DEFAULT_MAX_HEADER_BYTES as u64, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1024..=crate::limits::MAX_HEADER_BYTES_CEILING as u64))]
    pub max_header_bytes: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> crate::limits::Limits {
        crate::limits::Limits {
            max_json_depth: self.max_json_depth,
            max_documents: self.max_documents,
            max_file_bytes: self.max_file_bytes,
            max_rendered_bytes: self.max_rendered_bytes,
            max_object_contents_bytes: self.max_object_contents_bytes,
            max_rendered_contents_bytes: self.max_rendered_contents_bytes,
            max_yaml_alias_events: self.max_yaml_alias_events,
            max_watches_per_client: self.max_watches_per_client,
            max_header_bytes: self.max_header_bytes as usize,
        }
    }
}

impl ServeArgs {
    pub fn connections(&self) -> crate::api::listen::ConnLimits {
        crate::api::listen::ConnLimits {
            max_connections: self.max_connections,
            max_pending: self.max_pending_connections,
            max_pending_per_peer: self.max_pending_per_peer,
            handshake_timeout: Duration::from_secs(self.handshake_timeout),
            header_read_timeout: Duration::from_secs(self.header_read_timeout),
            idle_timeout: Duration::from_secs(self.idle_timeout),
            // sized from --max-header-bytes by the server
            ..Default::default()
        }
    }
}

/// `mco server init`.
#[derive(Subcommand)]
pub enum ServerAction {
    /// Generate the CA and the serving certificate under `<data-dir>/pki/` (kept when already
    /// there; the serving certificate is issued again for new --tls-san values), for a
    /// standalone `mco server` to serve TLS with.
    Init {
        /// Data directory of the server.
        #[arg(long, default_value = "./mco-data", value_name = "DIR")]
        data_dir: PathBuf,
        /// Another name or IP address the serving certificate is valid for (repeatable).
        #[arg(long = "tls-san", value_name = "NAME|IP")]
        tls_sans: Vec<String>,
        /// Another replica's CA certificate (its `<data-dir>/pki/ca.crt`): this replica's
        /// serving certificate is issued from that CA, so clients and nodes trust one `ca.crt`
        /// for every replica (`mco server --store etcd://…` on several machines). With --ca-key.
        #[arg(long, value_name = "FILE", requires = "ca_key")]
        ca_cert: Option<PathBuf>,
        /// That CA's private key (its `<data-dir>/pki/ca.key`; copied 0600). With --ca-cert.
        #[arg(long, value_name = "FILE", requires = "ca_cert")]
        ca_key: Option<PathBuf>,
    },
}

/// `-l` and `--field-selector` as kubectl.
#[derive(clap::Args, Clone, Default)]
pub struct SelectorArgs {
    /// Label selector: `key=value`, `key!=value`, `key in (a,b)`, `key`, `!key`, comma-separated.
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Field selector: `metadata.name=NAME` or `metadata.name!=NAME`, comma-separated.
    #[arg(long = "field-selector", value_name = "SELECTOR")]
    pub field_selector: Option<String>,
}

impl SelectorArgs {
    pub fn selectors(&self) -> crate::client::Selectors {
        crate::client::Selectors {
            label: self.selector.clone(),
            field: self.field_selector.clone(),
        }
    }
}

// One `Command` is parsed per process and moved once: boxing the server's settings to even the
// variants out would only obscure the clap tree.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Run a server and local sandboxed nodes on this machine.
    Up {
        #[command(flatten)]
        serve: ServeArgs,
        /// Number of master nodes.
        #[arg(long, default_value_t = 1)]
        masters: usize,
        /// Number of worker nodes.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// How long a sandbox node's reboot takes, in seconds (0: instant).
        #[arg(long, default_value_t = crate::up::DEFAULT_REBOOT_SECONDS, value_name = "N")]
        reboot_seconds: u64,
        /// Serve plain HTTP instead of TLS (loopback only, unless --allow-insecure-listen).
        #[arg(long)]
        no_tls: bool,
        /// High availability: three servers (on --listen's port and the two after it) on a
        /// local three-member etcd cluster (the `etcd` binary from PATH), the nodes pointed at
        /// all three; a killed server is started again as a standby.
        #[arg(long)]
        ha: bool,
    },
    /// Run the control plane: event log, controllers, REST API. TLS with --tls-cert/--tls-key,
    /// else with `<data-dir>/pki/` when `mco server init` made it, else plain HTTP.
    #[command(args_conflicts_with_subcommands = true)]
    Server {
        #[command(subcommand)]
        action: Option<ServerAction>,
        #[command(flatten)]
        serve: Box<ServeArgs>,
        /// Serving certificate chain (PEM), reloaded when the file changes.
        #[arg(long, requires = "tls_key", value_name = "FILE")]
        tls_cert: Option<PathBuf>,
        /// Private key of --tls-cert (PEM).
        #[arg(long, requires = "tls_cert", value_name = "FILE")]
        tls_key: Option<PathBuf>,
        /// Program run with the node name to evict workloads during a drain.
        #[arg(long, value_name = "PROGRAM")]
        drain_hook: Option<String>,
        /// Largest request body accepted, in bytes (larger ones get 413 RequestEntityTooLarge).
        #[arg(long, default_value_t = crate::api::DEFAULT_MAX_REQUEST_BODY_BYTES, value_name = "BYTES")]
        max_request_body_bytes: usize,
        /// Snapshot the state every N events: bounds start-up and time-travel reads.
        #[arg(long, default_value_t = crate::store::SNAPSHOT_EVERY, value_name = "N")]
        snapshot_interval: u64,
        /// Also serve the Machine Config Server alone on this address (MCO: 22623/22624).
        #[arg(long)]
        mcs_listen: Option<SocketAddr>,
        /// Free bytes the event log's filesystem must keep: below it writes are refused (500)
        /// and /readyz is not ready until space is freed (0: no check).
        #[arg(long, default_value_t = crate::server::DEFAULT_STORE_RESERVE_BYTES, value_name = "BYTES")]
        store_reserve_bytes: u64,
        /// Cluster DNS service IP written to each role's kubelet.conf (`clusterDNS`).
        #[arg(long, default_value = "172.30.0.10")]
        cluster_dns: String,
        /// Cluster domain written to each role's kubelet.conf (`clusterDomain`).
        #[arg(long, default_value = "cluster.local")]
        cluster_domain: String,
        #[command(flatten)]
        store: StoreArgs,
        /// The platform the nodes run: `openshift` (the kubelet and CRI-O template configs,
        /// `01-<role>-kubelet` and `01-<role>-container-runtime`, as MCO) or `none` (plain
        /// hosts: `00-<role>` only, no `kubelet.service`).
        #[arg(long, default_value = "openshift", value_name = "openshift|none")]
        platform: crate::generate::templates::Platform,
    },
    /// Run the node agent for one node.
    Daemon {
        #[command(flatten)]
        conn: Conn,
        /// Node name.
        #[arg(long)]
        node: String,
        /// Root of the node's filesystem: `/` for a real host, any directory for a sandbox.
        #[arg(long, default_value = "/", value_name = "DIR")]
        root: PathBuf,
        /// Node label `key=value` (repeatable).
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// How long a sandbox reboot takes, in seconds, before the process exits for its
        /// supervisor (0: instant).
        #[arg(long, default_value_t = crate::up::DEFAULT_REBOOT_SECONDS, value_name = "N")]
        reboot_seconds: u64,
        /// On a real host (`--root /`), how long the daemon waits after asking for a reboot
        /// for the shutdown to stop it (`10m`, `90s`). Past it the daemon exits 75, and the
        /// next start on the same boot asks for the reboot again (MCO's daemon waits 24 h and
        /// then reports the reboot failed).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION", default_value = "10m")]
        reboot_timeout: Duration,
        /// Run the agent as a child and start it again after each sandbox reboot (emptying
        /// `<root>/run`) or crash, as `mco up` does; for standalone sandbox nodes.
        #[arg(long)]
        supervise: bool,
        /// Log line format.
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
        /// File holding the node's bearer token (a node token: `mco token create --kind node
        /// --node NAME`; `mco up` writes `<data-dir>/tokens/<node>.token`).
        #[arg(long, env = "MCO_TOKEN_FILE", value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// How often the node lease (`kube-node-lease/<node>`) is renewed, as the kubelet's
        /// heartbeat (`10s`, `500ms`); the server marks the node NotReady when it stops.
        #[arg(long, env = "MCO_LEASE_RENEW_INTERVAL", value_parser = parse_duration, value_name = "DURATION",
              default_value = "10s")]
        lease_renew_interval: Duration,
        /// The kubelet's healthz URL to poll (MCO's `--kubelet-healthz-endpoint`, there on by
        /// default at `http://localhost:10248/healthz`): the consecutive failed checks are the
        /// node's `mcd_kubelet_state`. Off unless given (an mco node need not run a kubelet).
        #[arg(long, value_name = "URL")]
        kubelet_healthz_endpoint: Option<String>,
        /// Time between two kubelet health checks (MCO's 30 s).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION", default_value = "30s")]
        kubelet_healthz_interval: Duration,
    },
    /// Create or update objects from manifests (files, directories, `-` for stdin).
    Apply {
        #[command(flatten)]
        conn: Conn,
        /// A manifest file, a directory of them, or `-` for stdin (repeatable).
        #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Why: recorded in the event log with every change this makes.
        #[arg(long)]
        reason: Option<String>,
        /// Change nothing. `--dry-run` alone: show what it would do (rendered configs, node
        /// changes, drains, reboots, rollout waves). kubectl's `--dry-run=server` (every write
        /// sent with `dryRun=All`), `=client` (nothing sent), `=none`. `--validate` applies to
        /// each: an unknown field is an error in a dry run too.
        #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
              default_missing_value = "preview")]
        dry_run: Option<String>,
        /// Then follow every pool the change re-renders until its nodes are updated.
        #[arg(long, conflicts_with = "dry_run")]
        wait: bool,
        /// With --wait: give up after this long (`90s`, `5m`, `1h`).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION", requires = "wait")]
        timeout: Option<Duration>,
        /// Unknown fields, as kubectl's flag: `strict` (or `true`; the default: an error, and
        /// nothing is written), `warn` (a warning; the field is dropped), `ignore` (or `false`).
        #[arg(long, value_name = "MODE", default_value = "strict", num_args = 0..=1, require_equals = true,
              default_missing_value = "strict", value_parser = crate::cli::validate::Validate::parse)]
        validate: crate::cli::validate::Validate,
    },
    /// List objects or show some: `KIND [NAME...]`, `KIND/NAME...`, `KIND,KIND`.
    Get {
        #[command(flatten)]
        conn: Conn,
        /// A kind then names, `KIND,KIND`, or KIND/NAME (kinds listed below).
        #[arg(required = true, value_name = "KIND[/NAME]", long_help = kinds_help())]
        targets: Vec<String>,
        #[command(flatten)]
        selectors: SelectorArgs,
        /// Output format: wide, yaml, json, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,...
        #[arg(short = 'o', long = "output", value_name = "FORMAT", value_parser = GetOutputValues)]
        output: Option<String>,
        /// After listing, print each change as it happens (rows, objects or names).
        #[arg(short = 'w', long)]
        watch: bool,
        /// Print only the changes, not the current objects.
        #[arg(long)]
        watch_only: bool,
        /// Read the objects as they were at an RFC 3339 time or `rv:N` (time travel).
        #[arg(long, value_name = "TIME|rv:N")]
        at: Option<String>,
        /// Table output without the header line (kubectl --no-headers).
        #[arg(long)]
        no_headers: bool,
        /// Table output with a LABELS column (kubectl --show-labels).
        #[arg(long)]
        show_labels: bool,
        /// A column per label key, headed by its last `/` segment upper-cased (kubectl -L).
        #[arg(short = 'L', long = "label-columns", value_name = "KEY", value_delimiter = ',')]
        label_columns: Vec<String>,
        /// Sort each kind's objects by this field, a kubectl JSONPath (`.metadata.name`,
        /// `{.status.machineCount}`).
        #[arg(long, value_name = "JSONPATH")]
        sort_by: Option<String>,
    },
    /// Show one object in detail.
    Describe {
        #[command(flatten)]
        conn: Conn,
        /// `KIND [NAME...]` or `KIND/NAME...`; a KIND alone describes every object of it.
        #[arg(required = true, num_args = 1.., value_name = "KIND[/NAME]")]
        targets: Vec<String>,
        /// Show the object as it was at an RFC 3339 time or `rv:N` (time travel).
        #[arg(long, value_name = "TIME|rv:N")]
        at: Option<String>,
    },
    /// Delete objects: `KIND NAME...`, `KIND/NAME...`, `-f FILE|DIR`, or `KIND -l SELECTOR`.
    Delete {
        #[command(flatten)]
        conn: Conn,
        /// machineconfigpool|mcp, machineconfig|mc, node|no, then names; or KIND/NAME.
        #[arg(value_name = "KIND[/NAME]")]
        targets: Vec<String>,
        /// Delete the objects these manifests name (a file, a directory, `-`; repeatable).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        selectors: SelectorArgs,
        /// Every object of the kind.
        #[arg(long)]
        all: bool,
        /// Treat a missing object as deleted.
        #[arg(long)]
        ignore_not_found: bool,
        /// Why: recorded in the event log.
        #[arg(long)]
        reason: Option<String>,
        /// Change nothing: show what deleting would do.
        #[arg(long)]
        dry_run: bool,
    },
    /// Set (`key=value`) or remove (`key-`) labels of nodes, pools or MachineConfigs; moving a
    /// node to another pool is a label change.
    Label {
        #[command(flatten)]
        conn: Conn,
        /// `KIND NAME... key=value... key-...` or `KIND/NAME... key=value...`.
        #[arg(required = true, value_name = "KIND NAME... KEY=VALUE|KEY-")]
        args: Vec<String>,
        /// Allow replacing a label that already has a value.
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        selectors: SelectorArgs,
        /// Every object of the kind.
        #[arg(long)]
        all: bool,
    },
    /// Set (`key=value`) or remove (`key-`) annotations of nodes, pools or MachineConfigs.
    Annotate {
        #[command(flatten)]
        conn: Conn,
        /// `KIND NAME... key=value... key-...` or `KIND/NAME... key=value...`.
        #[arg(required = true, value_name = "KIND NAME... KEY=VALUE|KEY-")]
        args: Vec<String>,
        /// Allow replacing an annotation that already has a value.
        #[arg(long)]
        overwrite: bool,
        #[command(flatten)]
        selectors: SelectorArgs,
        /// Every object of the kind.
        #[arg(long)]
        all: bool,
    },
    /// Mark a node unschedulable (kubectl cordon).
    Cordon(cli::verbs::NodeArgs),
    /// Mark a node schedulable again (kubectl uncordon).
    Uncordon(cli::verbs::NodeArgs),
    /// Cordon a node, then evict its pods (kubectl drain; mco nodes run no pods).
    Drain(cli::verbs::DrainArgs),
    /// Update fields of an object with a patch (kubectl patch).
    Patch(cli::verbs::PatchArgs),
    /// Edit an object in $KUBE_EDITOR, $EDITOR or vi and save it back (kubectl edit).
    Edit(cli::edit::EditArgs),
    /// Document a kind or one of its fields, from the server's OpenAPI (kubectl explain).
    Explain(cli::explain::ExplainArgs),
    /// Print a shell completion script: `source <(mco completion bash)`.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Restore a pool's source MachineConfigs to what they were when a prior render was
    /// produced; the pool then renders that exact config again and rolls it out.
    Rollback {
        #[command(flatten)]
        conn: Conn,
        /// `mcp` (machineconfigpool).
        kind: String,
        /// The pool.
        pool: String,
        /// The rendered config to return to.
        #[arg(long, conflicts_with = "at", required_unless_present = "at")]
        to: Option<String>,
        /// Return to the render the pool targeted at this RFC 3339 time or `rv:N`.
        #[arg(long, value_name = "TIME|rv:N")]
        at: Option<String>,
        #[command(flatten)]
        flags: RollbackFlags,
    },
    /// Rollout operations: status, pause, resume, undo.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// The event log's size and retention.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Bearer tokens: create (the secret is printed once), list, revoke. Admin only.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Fleet simulator: N protocol-level simulated daemons drive a real server (a child `mco
    /// server`, or the one given by --server with an admin --token) through one rollout of a
    /// worker MachineConfig, and report its cost.
    Sim {
        /// An mco server to drive instead of a child one (`host:port` or `http://host:port`;
        /// also accepted before the command). MCO_SERVER is not read: without this flag the
        /// simulator starts its own server.
        #[arg(long, value_name = "ADDRESS")]
        server: Option<String>,
        /// Simulated worker nodes.
        #[arg(long, default_value_t = 100)]
        nodes: usize,
        /// The worker pool's maxUnavailable during the rollout (`10%` or a count).
        #[arg(long, default_value = "10%")]
        max_unavailable: String,
        /// Simulated apply time per node, in milliseconds.
        #[arg(long, default_value_t = 200)]
        apply_ms: u64,
        /// Simulated reboot time per node, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        reboot_ms: u64,
        /// Each delay varies uniformly by this fraction (0..1).
        #[arg(long, default_value_t = 0.0)]
        jitter: f64,
        /// Probability that one apply fails (Degraded, retried after 1 s).
        #[arg(long, default_value_t = 0.0)]
        failure_rate: f64,
        /// Data dir of the child server (default: a temporary one, removed at the end).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Concurrent token issues and registrations.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Give up after this long (the whole run: tokens, registration, the rollout), e.g.
        /// `30m`; the run then prints the report of what it did and exits 1.
        #[arg(long, default_value = "30m", value_parser = parse_duration)]
        timeout: Duration,
        /// Nodes register without a config and get their first one from the controller
        /// (default: they register running the worker pool's current render).
        #[arg(long)]
        new_nodes: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// What changed between two rendered configs, each item attributed: `mco diff RENDERED_A
    /// RENDERED_B`, `mco diff mcp POOL --from P [--to P]`, `mco diff node NODE --from P [--to P]`.
    Diff {
        #[command(flatten)]
        conn: Conn,
        /// A rendered config, or `mcp` / `node`.
        a: String,
        /// A rendered config, or the pool's / node's name.
        b: String,
        /// With mcp/node: the earlier point, an RFC 3339 time or `rv:N`.
        #[arg(long, value_name = "TIME|rv:N")]
        from: Option<String>,
        /// With mcp/node: the later point (default: now).
        #[arg(long, value_name = "TIME|rv:N")]
        to: Option<String>,
        /// Output format: json or yaml give the structured diff (default: a unified diff).
        #[arg(
            short = 'o',
            long = "output",
            value_parser = clap::builder::TypedValueParser::map(
                clap::builder::PossibleValuesParser::new(["json", "yaml"]),
                |s: String| if s == "json" { OutputFormat::Json } else { OutputFormat::Yaml }
            )
        )]
        output: Option<OutputFormat>,
    },
    /// The audit history from the event log: `RV TIME ACTOR EVENT OBJECT SUMMARY`.
    History {
        #[command(flatten)]
        conn: Conn,
        /// Only events about this kind (machineconfigpool|mcp, machineconfig|mc, node).
        kind: Option<String>,
        /// Only events about the object of this name.
        name: Option<String>,
        /// Only events at or after this point: an RFC 3339 time or `rv:N`.
        #[arg(long, value_name = "TIME|rv:N")]
        since: Option<String>,
        /// Only events at or before this point: an RFC 3339 time or `rv:N`.
        #[arg(long, value_name = "TIME|rv:N")]
        until: Option<String>,
        /// Only events caused by this actor (a token's identity such as `admin` or `system:node:worker-0`, or `controller:render`).
        #[arg(long)]
        actor: Option<String>,
        /// Only events of this type (`MachineConfigUpdated`, `NodeStateChanged`, ...).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// Show at most the newest N events.
        #[arg(long)]
        limit: Option<usize>,
        /// Output format: wide adds the client's reason.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
}

/// `get -o`: any text (templates follow `jsonpath=`), with the format names offered to shell
/// completion as possible values.
#[derive(Clone)]
pub struct GetOutputValues;

impl clap::builder::TypedValueParser for GetOutputValues {
    type Value = String;
    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        Ok(value.to_string_lossy().into_owned())
    }
    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let names = ["wide", "yaml", "json", "name", "jsonpath=", "custom-columns="];
        Some(Box::new(names.into_iter().map(clap::builder::PossibleValue::new)))
    }
}

/// The kinds `get` reads, from the model's kind table: `plural (short, ...)` per line.
pub fn kinds_help() -> String {
    let mut out = String::from("A kind then names, `KIND,KIND`, or KIND/NAME. Kinds:");
    for k in crate::model::Kind::ALL {
        let i = k.info();
        out.push_str(&format!("\n  {}", i.plural));
        if !i.short.is_empty() {
            out.push_str(&format!(" ({})", i.short.join(", ")));
        }
    }
    out
}

/// `90s`, `5m`, `1h30m`, `2h`, or plain seconds, as kubectl's `--timeout`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let span: jiff::Span = s
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: use e.g. 90s, 5m, 1h30m"))?;
    let d = jiff::SignedDuration::try_from(span).map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    d.try_into()
        .map_err(|_| format!("invalid duration {s:?}: must not be negative"))
}

#[derive(Subcommand)]
pub enum RolloutCommand {
    /// Follow a pool until its nodes are on its target config; exits non-zero when the pool
    /// degrades (naming the nodes and their reasons) or the timeout passes.
    Status {
        #[command(flatten)]
        conn: Conn,
        /// `mcp` (machineconfigpool), or `mcp/POOL`.
        kind: String,
        /// The pool.
        pool: Option<String>,
        /// Give up after this long (`90s`, `5m`, `1h`; `0s` or absent: wait forever, as kubectl).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
        timeout: Option<Duration>,
        /// Follow the rollout (the default; `-w`/`--watch` alone is true); `--watch=false`:
        /// print the current status and return.
        #[arg(
            short = 'w',
            long = "watch",
            default_value_t = true,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            action = clap::ArgAction::Set,
            value_name = "BOOL"
        )]
        watch: bool,
    },
    /// Pause a pool's rollout (`spec.paused: true`): no node of it updates meanwhile.
    Pause(cli::verbs::PoolArgs),
    /// Resume a paused pool's rollout (`spec.paused: false`).
    Resume(cli::verbs::PoolArgs),
    /// Back to the render the pool targeted before its current one (`mco rollback --to` it).
    Undo {
        #[command(flatten)]
        conn: Conn,
        /// `mcp` (machineconfigpool).
        kind: String,
        /// The pool.
        pool: String,
        #[command(flatten)]
        flags: RollbackFlags,
    },
}

/// What `rollback` and `rollout undo` share.
#[derive(clap::Args)]
pub struct RollbackFlags {
    /// Show the plan and its impact; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Why: recorded in the event log (default: "rollback of pool P to R").
    #[arg(long)]
    pub reason: Option<String>,
    /// Proceed even when other pools' rendered configs change too.
    #[arg(long)]
    pub force: bool,
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Issue a token and print its secret (once: the server keeps only its SHA-256).
    Create {
        #[command(flatten)]
        conn: Conn,
        /// admin (everything), reader (get/list/watch), node (one node's daemon: `--node`),
        /// bootstrap (Ignition configs at /config/... only).
        #[arg(long, value_parser = ["admin", "reader", "node", "bootstrap"])]
        kind: String,
        /// The node of a node token (identity `system:node:<NODE>`).
        #[arg(long)]
        node: Option<String>,
        /// The user name of an admin or reader token (default `admin` / `reader`).
        #[arg(long)]
        name: Option<String>,
        /// A label the node of a node token registers its Node with, `KEY=VALUE` (repeatable;
        /// `node-role.kubernetes.io/worker=` for its pool): the only values of the labels the
        /// pools select on, and of Kubernetes' reserved ones, that the node may set.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
    },
    /// The tokens in force: id, kind, identity, node, age (never a secret).
    List {
        #[command(flatten)]
        conn: Conn,
    },
    /// Revoke a token by id: requests carrying it are refused from the next one on.
    Revoke {
        #[command(flatten)]
        conn: Conn,
        /// The token's id (`mco token list`).
        id: String,
    },
}

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Events, snapshots, bytes on disk, oldest readable resourceVersion, events per kind.
    Stats {
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove the history before a point; reads before it then answer 410 Expired.
    Compact {
        #[command(flatten)]
        conn: Conn,
        /// `rv:N` or an RFC 3339 time.
        #[arg(long)]
        before: String,
    },
    /// Check a stopped server's event log offline: every checksum, seq continuity, snapshots,
    /// the index. Exits non-zero on corruption, naming the first bad resourceVersion.
    Verify {
        /// The server's data directory (the log is in DIR/store).
        #[arg(long, default_value = "./mco-data", value_name = "DIR")]
        data_dir: PathBuf,
        /// First remove the snapshot at this resourceVersion (snapshots are derived from the
        /// events; the repair for a damaged snapshot).
        #[arg(long, value_name = "N")]
        drop_snapshot: Option<u64>,
        /// Output format: json gives the report as JSON.
        #[arg(short = 'o', long = "output", value_parser = ["json"])]
        output: Option<String>,
    },
    /// Write every retained record of an event log (a stopped server's --data-dir, or etcd
    /// with --store) to a file, byte for byte with its checksum, for `mco store import`.
    Export {
        /// The server's data directory (the log is in DIR/store), when --store is not given.
        #[arg(long, default_value = "./mco-data", value_name = "DIR")]
        data_dir: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        /// The file to write (`-`: standard output).
        #[arg(long, short = 'f', value_name = "FILE")]
        file: PathBuf,
    },
    /// Write an export into an empty event log: a new --data-dir, or an etcd prefix no server
    /// writes yet (--store). Every seq, time, actor and snapshot is kept.
    Import {
        /// The new data directory (the log goes to DIR/store), when --store is not given.
        #[arg(long, default_value = "./mco-data", value_name = "DIR")]
        data_dir: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
        /// The export file (`-`: standard input).
        #[arg(long, short = 'f', value_name = "FILE")]
        file: PathBuf,
    },
    /// Remove every event after a resourceVersion from a stopped server's event log (the repair
    /// for a log damaged after it; the writes after it are lost).
    Truncate {
        /// The server's data directory (the log is in DIR/store).
        #[arg(long, default_value = "./mco-data", value_name = "DIR")]
        data_dir: PathBuf,
        /// The last resourceVersion to keep.
        #[arg(long, value_name = "N")]
        after: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, Args};
    use clap::CommandFactory;
    use std::time::Duration;

    #[test]
    fn durations_as_kubectl_takes_them() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("soon").unwrap_err().contains("invalid duration"));
        assert!(parse_duration("-5s").is_err());
    }

    /// Every flag and argument of every command says what it is for, and `--server` appears only
    /// on commands that talk to a server.
    #[test]
    fn every_argument_has_help_and_server_flags_only_where_they_apply() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>, server_on: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
                if id == "server" {
                    server_on.push(path.to_string());
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), missing, server_on);
            }
        }
        let cmd = Args::command();
        cmd.clone().debug_assert();
        let (mut missing, mut server_on) = (Vec::new(), Vec::new());
        walk(&cmd, "mco", &mut missing, &mut server_on);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
        // `-o` of diff offers only what it implements (defect: name/wide were listed, ignored).
        let diff = cmd.find_subcommand("diff").unwrap();
        let o = diff.get_arguments().find(|a| a.get_id() == "output").unwrap();
        let values: Vec<String> = o
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        assert_eq!(values, ["json", "yaml"]);
        // kubectl-style flags: global --server, `-w` alone, `--watch=false`.
        for argv in [
            &["mco", "--server", "h:1", "get", "mcp"][..],
            &["mco", "get", "mcp", "--server", "h:1"],
            &["mco", "rollout", "status", "-w", "mcp", "worker"],
            &[
                "mco",
                "rollout",
                "status",
                "mcp",
                "worker",
                "--watch=false",
                "--timeout",
                "0s",
            ],
        ] {
            <Args as clap::Parser>::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        }
        assert!(<Args as clap::Parser>::try_parse_from(["mco", "diff", "a", "b", "-o", "wide"]).is_err());
        // `--platform` takes openshift (the default) or none.
        <Args as clap::Parser>::try_parse_from(["mco", "server", "--platform", "none"]).unwrap();
        let e = <Args as clap::Parser>::try_parse_from(["mco", "server", "--platform", "aws"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("expected openshift or none"), "{e}");
        // `get -o` offers its formats to completion and still takes templates.
        let get = cmd.find_subcommand("get").unwrap();
        let o = get.get_arguments().find(|a| a.get_id() == "output").unwrap();
        let values: Vec<String> = o
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        assert!(values.contains(&"jsonpath=".to_string()) && values.contains(&"wide".to_string()));
        <Args as clap::Parser>::try_parse_from(["mco", "get", "mcp", "-o", "jsonpath={.kind}"]).unwrap();
        // `get --help` names every kind of the model's table.
        let help = super::kinds_help();
        for k in crate::model::Kind::ALL {
            assert!(help.contains(k.plural()), "{help}");
        }
        for local in ["mco up", "mco server", "mco completion", "mco store", "mco rollout"] {
            assert!(!server_on.iter().any(|p| p == local), "{local} offers --server");
        }
        assert!(server_on.iter().any(|p| p == "mco get"));
        assert!(server_on.iter().any(|p| p == "mco daemon"));
    }
}

//! The `mco` binary: parses arguments, initialises logging, dispatches to the library.

use clap::{Parser, Subcommand};
use mco::cli::{self, OutputFormat, DEFAULT_LISTEN};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "mco",
    version,
    about = "A Machine Config Operator: declarative OS configuration for fleets of Linux nodes",
    after_help = "Client commands talk to the server at --server (or MCO_SERVER), default 127.0.0.1:7443."
)]
struct Args {
    /// Address of the mco server for the client commands (`host:port` or `http://host:port`),
    /// as kubectl's global `--server`: also accepted after the command.
    #[arg(long, value_name = "ADDRESS")]
    server: Option<String>,
    /// Bearer token of the client commands (else MCO_TOKEN, MCO_TOKEN_FILE, the token of the
    /// kubeconfig's current context when the server is that context's, ./mco-data/admin.token
    /// for a loopback server), as kubectl's global `--token`.
    #[arg(long, global = true, value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// CA certificate (PEM) an `https://` server must be signed by, as kubectl's flag (also
    /// `--ca-file`, or MCO_CA_FILE). Default: `./mco-data/pki/ca.crt` when it exists.
    #[arg(
        long,
        global = true,
        visible_alias = "ca-file",
        env = "MCO_CA_FILE",
        value_name = "FILE"
    )]
    certificate_authority: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// `--server` given before the command (kubectl's global flag); set once in `main`.
static GLOBAL_SERVER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Where the server is: every client command takes it.
#[derive(clap::Args, Clone)]
struct Conn {
    /// Address of the mco server (`host:port` or `http://host:port`; default from MCO_SERVER,
    /// else the kubeconfig's current context, else 127.0.0.1:7443). Also accepted before the
    /// command.
    #[arg(long, value_name = "ADDRESS")]
    server: Option<String>,
}

impl Conn {
    /// The flag after the command, else the one before it, else `MCO_SERVER`, else the
    /// kubeconfig's current context's server, else the default (`cli::credentials`).
    fn url(&self) -> String {
        let env = std::env::var("MCO_SERVER").ok().filter(|s| !s.is_empty());
        let global = GLOBAL_SERVER.get().cloned().flatten();
        cli::server_url(self.server.clone().or(global).or(env).as_deref())
    }
}

/// `--log-format` of the long-running commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line (tracing-subscriber's json layer), span fields included.
    Json,
}

/// What `mco up` and `mco server` share.
#[derive(clap::Args)]
struct ServeArgs {
    /// Directory of the event log (and, for `mco up`, the node roots and logs).
    #[arg(long, default_value = "./mco-data", value_name = "DIR")]
    data_dir: PathBuf,
    /// Address the API listens on (port 0 picks a free one).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDRESS")]
    listen: SocketAddr,
    /// API group served and used for node annotations.
    #[arg(long, env = "MCO_GROUP", default_value = mco::model::DEFAULT_GROUP)]
    group: String,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Another name or IP address the generated serving certificate is valid for (repeatable;
    /// 127.0.0.1, ::1, localhost and the host name always are).
    #[arg(long = "tls-san", value_name = "NAME|IP")]
    tls_sans: Vec<String>,
    /// Listen on a non-loopback address without TLS (or without authentication) anyway, with a
    /// warning: anyone who can reach it can read and change every machine config.
    #[arg(long)]
    allow_insecure_listen: bool,
    /// Time a client has to finish its TLS handshake and send a request header, in seconds.
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), value_name = "SECONDS")]
    header_read_timeout: u64,
    /// Established connections (first request received) at most per listener; the first
    /// request of one more waits until one closes.
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: usize,
    /// Connections that have not finished their TLS handshake and first request header, at
    /// most per listener (a separate budget; one more closes the oldest of them).
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_MAX_PENDING, value_name = "N")]
    max_pending_connections: usize,
    /// Such pending connections from one IP address at most (one more closes that address's
    /// oldest pending one).
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_MAX_PENDING_PER_PEER, value_name = "N")]
    max_pending_per_peer: usize,
    /// Time a client has to finish its TLS handshake, in seconds.
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_HANDSHAKE_TIMEOUT.as_secs(), value_name = "SECONDS")]
    handshake_timeout: u64,
    /// Close a connection with no request in flight after this many seconds.
    #[arg(long, default_value_t = mco::api::listen::DEFAULT_IDLE_TIMEOUT.as_secs(), value_name = "SECONDS")]
    idle_timeout: u64,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The input limits of a server (README "Bounded inputs").
#[derive(clap::Args, Clone)]
struct LimitArgs {
    /// Deepest nesting of arrays and objects in a JSON request body (deeper: 400 BadRequest).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_JSON_DEPTH, value_name = "N")]
    max_json_depth: usize,
    /// Objects in one preview request (`mco apply --dry-run`; more: 413).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_DOCUMENTS, value_name = "N")]
    max_documents: usize,
    /// Bytes of one file's contents once decoded and decompressed (more: 422 Invalid).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_FILE_BYTES, value_name = "BYTES")]
    max_file_bytes: u64,
    /// Bytes of a rendered MachineConfig's JSON (more: the pool goes RenderDegraded).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_RENDERED_BYTES, value_name = "BYTES")]
    max_rendered_bytes: usize,
    /// Bytes of all the files' contents of one MachineConfig together, decoded and
    /// decompressed (more: 422 Invalid naming this limit).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_OBJECT_CONTENTS_BYTES, value_name = "BYTES")]
    max_object_contents_bytes: u64,
    /// Bytes of all the files' contents of one rendered config together, decoded and
    /// decompressed (more: the pool goes RenderDegraded naming this limit).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_RENDERED_CONTENTS_BYTES, value_name = "BYTES")]
    max_rendered_contents_bytes: u64,
    /// YAML nodes replayed through aliases in one request body (more: 400 BadRequest).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_YAML_ALIAS_EVENTS, value_name = "N")]
    max_yaml_alias_events: usize,
    /// Watches one client may hold open at once (more: 429 TooManyRequests).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_WATCHES_PER_CLIENT, value_name = "N")]
    max_watches_per_client: usize,
    /// Bytes of a request's line (URL included) and headers (more: 431 with a Status; at most
    /// 16 MiB).
    #[arg(long, default_value_t = mco::limits::DEFAULT_MAX_HEADER_BYTES as u64, value_name = "BYTES",
          value_parser = clap::value_parser!(u64).range(1024..=mco::limits::MAX_HEADER_BYTES_CEILING as u64))]
    max_header_bytes: u64,
}

impl LimitArgs {
    fn limits(&self) -> mco::limits::Limits {
        mco::limits::Limits {
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
    fn connections(&self) -> mco::api::listen::ConnLimits {
        mco::api::listen::ConnLimits {
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
enum ServerAction {
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
    },
}

/// `-l` and `--field-selector` as kubectl.
#[derive(clap::Args, Clone, Default)]
struct SelectorArgs {
    /// Label selector: `key=value`, `key!=value`, `key in (a,b)`, `key`, `!key`, comma-separated.
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    selector: Option<String>,
    /// Field selector: `metadata.name=NAME` or `metadata.name!=NAME`, comma-separated.
    #[arg(long = "field-selector", value_name = "SELECTOR")]
    field_selector: Option<String>,
}

impl SelectorArgs {
    fn selectors(&self) -> mco::client::Selectors {
        mco::client::Selectors {
            label: self.selector.clone(),
            field: self.field_selector.clone(),
        }
    }
}

#[derive(Subcommand)]
enum Command {
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
        #[arg(long, default_value_t = mco::up::DEFAULT_REBOOT_SECONDS, value_name = "N")]
        reboot_seconds: u64,
        /// Serve plain HTTP instead of TLS (loopback only, unless --allow-insecure-listen).
        #[arg(long)]
        no_tls: bool,
    },
    /// Run the control plane: event log, controllers, REST API. TLS with --tls-cert/--tls-key,
    /// else with `<data-dir>/pki/` when `mco server init` made it, else plain HTTP.
    #[command(args_conflicts_with_subcommands = true)]
    Server {
        #[command(subcommand)]
        action: Option<ServerAction>,
        #[command(flatten)]
        serve: ServeArgs,
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
        #[arg(long, default_value_t = mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES, value_name = "BYTES")]
        max_request_body_bytes: usize,
        /// Snapshot the state every N events: bounds start-up and time-travel reads.
        #[arg(long, default_value_t = mco::store::SNAPSHOT_EVERY, value_name = "N")]
        snapshot_interval: u64,
        /// Also serve the Machine Config Server alone on this address (MCO: 22623/22624).
        #[arg(long)]
        mcs_listen: Option<SocketAddr>,
        /// Free bytes the event log's filesystem must keep: below it writes are refused (500)
        /// and /readyz is not ready until space is freed (0: no check).
        #[arg(long, default_value_t = mco::server::DEFAULT_STORE_RESERVE_BYTES, value_name = "BYTES")]
        store_reserve_bytes: u64,
        /// Cluster DNS service IP written to each role's kubelet.conf (`clusterDNS`).
        #[arg(long, default_value = "172.30.0.10")]
        cluster_dns: String,
        /// Cluster domain written to each role's kubelet.conf (`clusterDomain`).
        #[arg(long, default_value = "cluster.local")]
        cluster_domain: String,
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
        #[arg(long, default_value_t = mco::up::DEFAULT_REBOOT_SECONDS, value_name = "N")]
        reboot_seconds: u64,
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
        /// Change nothing: show what it would do (rendered configs, node changes, drains,
        /// reboots, rollout waves).
        #[arg(long)]
        dry_run: bool,
        /// Then follow every pool the change re-renders until its nodes are updated.
        #[arg(long, conflicts_with = "dry_run")]
        wait: bool,
        /// With --wait: give up after this long (`90s`, `5m`, `1h`).
        #[arg(long, value_parser = parse_duration, value_name = "DURATION", requires = "wait")]
        timeout: Option<Duration>,
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
    /// Rollout operations: status, undo.
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
struct GetOutputValues;

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
fn kinds_help() -> String {
    let mut out = String::from("A kind then names, `KIND,KIND`, or KIND/NAME. Kinds:");
    for k in mco::model::Kind::ALL {
        let i = k.info();
        out.push_str(&format!("\n  {}", i.plural));
        if !i.short.is_empty() {
            out.push_str(&format!(" ({})", i.short.join(", ")));
        }
    }
    out
}

/// `90s`, `5m`, `1h30m`, `2h`, or plain seconds, as kubectl's `--timeout`.
fn parse_duration(s: &str) -> Result<Duration, String> {
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
enum RolloutCommand {
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
struct RollbackFlags {
    /// Show the plan and its impact; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Why: recorded in the event log (default: "rollback of pool P to R").
    #[arg(long)]
    reason: Option<String>,
    /// Proceed even when other pools' rendered configs change too.
    #[arg(long)]
    force: bool,
}

#[derive(Subcommand)]
enum TokenCommand {
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
enum StoreCommand {
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

/// `mco rollback` and `mco rollout undo`.
async fn rollback(
    server: &str,
    kind: &str,
    pool: &str,
    target: cli::rollback::Target,
    flags: RollbackFlags,
) -> anyhow::Result<String> {
    let client = cli::connect(server).await?.with_reason(flags.reason);
    let options = cli::rollback::Options {
        dry_run: flags.dry_run,
        force: flags.force,
    };
    cli::rollback::rollback(&client, kind, pool, target, options).await
}

/// `mco label` and `mco annotate`.
async fn label(
    conn: &Conn,
    field: cli::label::Field,
    args: Vec<String>,
    overwrite: bool,
    selectors: SelectorArgs,
    all: bool,
) -> anyhow::Result<ExitCode> {
    let client = cli::connect(&conn.url()).await?;
    let args = cli::label::LabelArgs {
        args,
        overwrite,
        selectors: selectors.selectors(),
        all,
    };
    let (out, errs, ok) = cli::label::run(&client, field, &args).await?;
    print!("{out}");
    eprint!("{errs}");
    Ok(exit(ok))
}

/// Logs to stderr: `RUST_LOG` or `default` decides what; `format` how (JSON lines carry the
/// current spans' fields: node, pool, rendered config).
fn init_tracing(default: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(true).init(),
        // Colours only on a terminal: `mco up` sends daemon logs to files.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// Writes one line to stdout, ignoring a closed stdout, for the commands that keep SIGPIPE
/// ignored: a supervisor that read what it needed of the server's start-up lines (the listening
/// line) and closed the pipe, or `mco sim | head`, must not end in `println!`'s panic on EPIPE.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn main() -> ExitCode {
    let args = Args::parse();
    #[cfg(feature = "failpoints")]
    let _failpoints = failpoints();
    if !matches!(
        args.command,
        Command::Up { .. } | Command::Server { .. } | Command::Daemon { .. } | Command::Sim { .. }
    ) {
        // As kubectl (a Go program dies of SIGPIPE on a closed stdout): `mco get mc -o json |
        // head -1` ends quietly instead of reporting EPIPE. Rust starts with SIGPIPE ignored;
        // the long-running commands keep it ignored (their sockets and pipes report errors; the
        // simulator must live to remove its child server's data dir).
        // SAFETY: called before any thread starts; SIG_DFL is a valid disposition.
        unsafe {
            let _ = nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl);
        }
    }
    if matches!(args.command, Command::Daemon { .. }) {
        mco::daemon::limit_allocator();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    match rt.block_on(dispatch(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", cli::error_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `KIND NAME` or `KIND/NAME` → (kind, name).
fn kind_and_name(kind: String, name: Option<String>, what: &str) -> anyhow::Result<(String, String)> {
    match (kind.split_once('/'), name) {
        (Some((k, n)), None) => Ok((k.to_string(), n.to_string())),
        (None, Some(n)) => Ok((kind, n)),
        (Some(_), Some(_)) => anyhow::bail!("give either KIND NAME or KIND/NAME, not both"),
        (None, None) => anyhow::bail!("give the {what}'s name: KIND NAME or KIND/NAME"),
    }
}

/// With the `failpoints` feature and `FAILPOINTS=name=action;...` in the environment, the `fail`
/// crate's failpoints are configured from it (tests/crash_server.rs, tests/crash_daemon.rs),
/// once per process (a `FailScenario` holds a global lock while it lives), and a panic, which is what
/// a failpoint's `panic` action does, aborts the process at once, as a crash at that step would.
#[cfg(feature = "failpoints")]
fn failpoints() -> Option<fail::FailScenario<'static>> {
    std::env::var_os("FAILPOINTS")?;
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    Some(fail::FailScenario::setup())
}

/// SIGTERM and SIGINT handlers. Installed before the work starts, so that a signal arriving
/// while the server is still starting (after its first log line) stops it cleanly instead of
/// killing the process with the default action.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        StopSignals {
            term: signal(SignalKind::terminate()).expect("SIGTERM handler installs"),
            int: signal(SignalKind::interrupt()).expect("SIGINT handler installs"),
        }
    }

    /// Waits for the first SIGTERM or SIGINT.
    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

async fn dispatch(args: Args) -> anyhow::Result<ExitCode> {
    if args.server.is_some()
        && matches!(
            args.command,
            Command::Up { .. } | Command::Server { .. } | Command::Completion { .. }
        )
    {
        anyhow::bail!("--server is an option of the client commands: `mco up` and `mco server` listen with --listen");
    }
    let _ = GLOBAL_SERVER.set(args.server.clone());
    let global_token = args.token.clone();
    if !matches!(args.command, Command::Daemon { .. }) {
        let _ = cli::credentials::TOKEN_FLAG.set(global_token.clone().map(|t| (t, "the token of --token".to_string())));
    }
    // `mco up` and `mco server` are no clients: the CA they use is the one of their own data dir,
    // so a client's `MCO_CA_FILE` (perhaps a leftover naming another data dir's CA, not written
    // yet) is not read for them, and `mco up` hands its daemons every credential by flag with
    // the client variables removed from their environment ([`mco::up::CLIENT_ENV`]).
    if !matches!(args.command, Command::Up { .. } | Command::Server { .. }) {
        cli::set_trust(cli::resolve_trust(args.certificate_authority.as_deref())?);
    }
    if !matches!(
        args.command,
        Command::Up { .. } | Command::Server { .. } | Command::Daemon { .. }
    ) {
        init_tracing("warn", LogFormat::Text);
    }
    match args.command {
        Command::Up {
            serve,
            masters,
            workers,
            reboot_seconds,
            no_tls,
        } => {
            init_tracing("info,tower_http=warn", serve.log_format);
            mco::up::run(mco::up::UpConfig {
                data_dir: serve.data_dir.clone(),
                listen: serve.listen,
                masters,
                workers,
                group: serve.group.clone(),
                reboot_seconds,
                log_json: serve.log_format == LogFormat::Json,
                tls: !no_tls,
                tls_sans: serve.tls_sans.clone(),
                allow_insecure_listen: serve.allow_insecure_listen,
                connections: serve.connections(),
                limits: serve.limits.limits(),
            })
            .await?;
        }
        Command::Server {
            action: Some(ServerAction::Init { data_dir, tls_sans }),
            ..
        } => {
            let pki = mco::tls::Pki::in_data_dir(&data_dir);
            let r = mco::tls::ensure_pki(&pki, &tls_sans)?;
            let said = |new: bool| if new { "generated" } else { "kept" };
            println!("CA {}: {}", said(r.new_ca), pki.ca_cert().display());
            println!(
                "serving certificate {}: {} (for {})",
                said(r.new_serving),
                pki.server_cert().display(),
                r.sans.join(", ")
            );
            println!(
                "`mco server --data-dir {}` now serves TLS; clients trust {} (--certificate-authority or MCO_CA_FILE)",
                data_dir.display(),
                pki.ca_cert().display()
            );
        }
        Command::Server {
            action: None,
            serve,
            tls_cert,
            tls_key,
            drain_hook,
            max_request_body_bytes,
            snapshot_interval,
            mcs_listen,
            store_reserve_bytes,
            cluster_dns,
            cluster_domain,
        } => {
            init_tracing("info,tower_http=warn", serve.log_format);
            let signals = StopSignals::install();
            let serve_json = serve.log_format == LogFormat::Json;
            let pki = mco::tls::Pki::in_data_dir(&serve.data_dir);
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(mco::tls::TlsFiles { cert, key }),
                _ => pki.has_serving().then(|| pki.serving()),
            };
            let connections = serve.connections();
            let running = mco::up::start_server(mco::server::ServerConfig {
                data_dir: serve.data_dir,
                listen: serve.listen,
                tls,
                connections,
                store_reserve_bytes,
                allow_insecure_listen: serve.allow_insecure_listen,
                group: serve.group,
                drain_hook,
                max_request_body_bytes,
                limits: serve.limits.limits(),
                snapshot_every: snapshot_interval,
                mcs_listen,
                templates: mco::generate::templates::TemplateSettings {
                    cluster_dns_ip: cluster_dns,
                    cluster_domain,
                },
                ..Default::default()
            })
            .await?;
            if serve_json {
                // The json layer's line shape (timestamp, level, fields.message, target), on
                // stdout where the text line goes, so a supervisor parsing JSON sees JSON only.
                announce(format_args!(
                    "{}",
                    serde_json::json!({
                        "timestamp": jiff::Timestamp::now().to_string(),
                        "level": "INFO",
                        "fields": {"message": "mco server listening", "url": running.url()},
                        "target": "mco",
                    })
                ));
            } else {
                announce(format_args!("mco server listening on {}", running.url()));
            }
            if let Some(u) = running.mcs_url() {
                announce(format_args!("Machine Config Server listening on {u}"));
            }
            if running.admin_token().is_some() {
                // The kubeconfig trusts the generated CA when the server serves the generated PKI.
                let ca_file = (running.url().starts_with("https://") && pki.has_serving()).then(|| pki.ca_cert());
                let kubeconfig = mco::up::write_kubeconfig(&running, &running.data_dir, ca_file.as_deref())?;
                announce(format_args!(
                    "admin token in {}, kubeconfig in {} (both 0600)",
                    running.data_dir.join(mco::credentials::ADMIN_TOKEN_FILE).display(),
                    kubeconfig.display()
                ));
            }
            signals.wait().await;
            running.stop().await;
        }
        Command::Daemon {
            conn,
            node,
            root,
            labels,
            reboot_seconds,
            supervise,
            log_format,
            token_file,
        } => {
            init_tracing("info", log_format);
            // The daemon's write-path failpoints (tests/crash_daemon.rs) are configured from
            // FAILPOINTS once, for every command, by `failpoints()` in `main`: a second
            // `FailScenario` would wait forever for the first one's lock.
            let token = match &token_file {
                Some(f) => Some((
                    mco::credentials::read_secret_file(f).ok_or_else(|| {
                        anyhow::anyhow!(
                            "--token-file {}: no token in it (missing, unreadable or empty)",
                            f.display()
                        )
                    })?,
                    format!("the token in --token-file/$MCO_TOKEN_FILE ({})", f.display()),
                )),
                None => None,
            };
            let _ = cli::credentials::TOKEN_FLAG
                .set(token.or(global_token.map(|t| (t, "the token of --token".to_string()))));
            // --token-file, else what every client command reads (MCO_TOKEN, kubeconfig, ...),
            // in the one order of `cli::credentials`.
            let creds = cli::credentials::for_server(&conn.url(), cli::explicit_trust());
            let token = creds.token.clone();
            cli::check_daemon_server(&conn.url()).await?;
            let labels: BTreeMap<String, String> = labels
                .iter()
                .map(|l| {
                    l.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .unwrap_or((l.clone(), String::new()))
                })
                .collect();
            let shutdown = tokio_util::sync::CancellationToken::new();
            let s2 = shutdown.clone();
            let signals = StopSignals::install();
            tokio::spawn(async move {
                signals.wait().await;
                s2.cancel();
            });
            if supervise {
                anyhow::ensure!(
                    root != std::path::Path::new("/"),
                    "--supervise is for sandbox roots; on a real host run the daemon under systemd (config/systemd/mco-daemon.service)"
                );
                let process = mco::up::DaemonProcess {
                    exe: std::env::current_exe()?,
                    url: conn.url(),
                    node: mco::up::LocalNode { name: node, labels },
                    root,
                    log_dir: None,
                    reboot_seconds,
                    log_json: log_format == LogFormat::Json,
                    token_file,
                    ca_file: cli::trust().map(|t| PathBuf::from(t.source)),
                };
                mco::up::supervise(process, shutdown).await;
                return Ok(ExitCode::SUCCESS);
            }
            let host: std::sync::Arc<dyn mco::host::Host> = if root == std::path::Path::new("/") {
                std::sync::Arc::new(mco::host::RealHost::new())
            } else {
                std::sync::Arc::new(mco::host::SandboxHost::open(&root)?)
            };
            let config = mco::daemon::DaemonConfig {
                server: conn.url(),
                node,
                labels,
                token,
                trust: creds.trust.clone(),
            };
            let exit = mco::daemon::run(config, host, shutdown.clone()).await?;
            if exit == mco::daemon::Exit::Reboot {
                // The machine is down while it reboots: nothing runs for the reboot's length.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(reboot_seconds)) => {}
                    _ = shutdown.cancelled() => {}
                }
                return Ok(ExitCode::from(mco::daemon::REBOOT_EXIT_CODE as u8));
            }
        }
        Command::Apply {
            conn,
            files,
            reason,
            dry_run,
            wait,
            timeout,
        } => {
            let client = cli::connect(&conn.url()).await?.with_reason(reason);
            if dry_run {
                let (out, ok) = cli::apply_dry_run(&client, &files).await?;
                print!("{out}");
                return Ok(exit(ok));
            }
            let (mut expected, before) = if wait {
                (
                    cli::rollout::expected_targets(&client, cli::raw_documents(&files)?).await?,
                    Some(cli::rollout::snapshot(&client).await?),
                )
            } else {
                (Vec::new(), None)
            };
            let (out, ok) = cli::apply(&client, &files).await?;
            print!("{out}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
            let given = cli::rollout::Deadline::from_flag(timeout);
            let deadline = given.map(|t| (tokio::time::Instant::now() + t.given, t.given));
            if let Some(before) = before {
                // Generated kinds re-render pools only once their controllers ran: wait for them.
                let left = deadline.map(|(d, _)| d.saturating_duration_since(tokio::time::Instant::now()));
                let raws = cli::raw_documents(&files)?;
                for (pool, rendered) in cli::rollout::generated_targets(&client, &before, &raws, left).await? {
                    expected.retain(|(p, _)| *p != pool);
                    expected.push((pool, rendered));
                }
            }
            for (pool, rendered) in expected {
                let left = deadline.map(|(d, given)| cli::rollout::Deadline {
                    left: d.saturating_duration_since(tokio::time::Instant::now()),
                    given,
                });
                let display = cli::rollout::Display::detect();
                println!(
                    "{}",
                    cli::rollout::status(&client, &pool, Some(&rendered), left, true, display).await?
                );
            }
        }
        Command::Get {
            conn,
            targets,
            selectors,
            output,
            watch,
            watch_only,
            at,
            no_headers,
            show_labels,
            label_columns,
        } => {
            let client = cli::connect(&conn.url()).await?;
            let args = cli::get::GetArgs {
                targets,
                selectors: selectors.selectors(),
                output,
                at,
                watch,
                watch_only,
                no_headers,
                show_labels,
                label_columns,
            };
            let mut stdout = std::io::stdout();
            return Ok(exit(cli::get::run(&client, &args, &mut stdout).await?));
        }
        Command::Describe { conn, targets, at } => {
            // kubectl describe: every named object, or every object of a KIND given alone,
            // separated by a blank line. The kind string goes to `cli::describe` as given.
            let client = cli::connect(&conn.url()).await?;
            let mut objects: Vec<(String, String)> = Vec::new();
            if targets.iter().any(|t| t.contains('/')) {
                if !targets.iter().all(|t| t.contains('/')) {
                    anyhow::bail!("{}", cli::MIXED_RESOURCE_ARGS);
                }
                for t in &targets {
                    objects.push(cli::split_resource_name(t)?);
                }
            } else if targets.len() > 1 {
                objects.extend(targets[1..].iter().map(|n| (targets[0].clone(), n.clone())));
            } else {
                let kind = mco::model::Kind::parse(&targets[0])
                    .ok_or_else(|| anyhow::anyhow!("the server doesn't have a resource type {:?}", targets[0]))?;
                let list = client
                    .list(kind)
                    .await
                    .map_err(|e| anyhow::anyhow!(cli::describe_error(&e)))?;
                for o in list["items"].as_array().into_iter().flatten() {
                    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                    objects.push((targets[0].clone(), name));
                }
                if objects.is_empty() {
                    eprintln!("No resources found");
                }
            }
            let mut first = true;
            for (kind, name) in objects {
                let text = cli::describe(&client, &kind, &name, at.as_deref()).await?;
                if first {
                    print!("{text}");
                    first = false;
                } else {
                    print!("\n\n{text}");
                }
            }
        }
        Command::Delete {
            conn,
            targets,
            files,
            selectors,
            all,
            ignore_not_found,
            reason,
            dry_run,
        } => {
            let client = cli::connect(&conn.url()).await?.with_reason(reason);
            let args = cli::delete::DeleteArgs {
                targets,
                files,
                selectors: selectors.selectors(),
                all,
                ignore_not_found,
                run: Some(if dry_run { cli::Run::DryRun } else { cli::Run::Write }),
            };
            let (out, ok) = cli::delete::run(&client, &args).await?;
            print!("{out}");
            return Ok(exit(ok));
        }
        Command::Label {
            conn,
            args,
            overwrite,
            selectors,
            all,
        } => return label(&conn, cli::label::Field::Labels, args, overwrite, selectors, all).await,
        Command::Annotate {
            conn,
            args,
            overwrite,
            selectors,
            all,
        } => return label(&conn, cli::label::Field::Annotations, args, overwrite, selectors, all).await,
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Args::command(), "mco", &mut std::io::stdout());
        }
        Command::Rollback {
            conn,
            kind,
            pool,
            to,
            at,
            flags,
        } => {
            let target = match (to, at) {
                (Some(r), _) => cli::rollback::Target::Render(r),
                (None, Some(at)) => cli::rollback::Target::At(at),
                (None, None) => anyhow::bail!("give --to RENDERED or --at TIME|rv:N"),
            };
            print!("{}", rollback(&conn.url(), &kind, &pool, target, flags).await?);
        }
        Command::Rollout(RolloutCommand::Status {
            conn,
            kind,
            pool,
            timeout,
            watch,
        }) => {
            let (kind, pool) = kind_and_name(kind, pool, "pool")?;
            anyhow::ensure!(
                mco::model::Kind::parse(&kind) == Some(mco::model::Kind::MachineConfigPool),
                "rollout status follows pools: mco rollout status mcp POOL"
            );
            let client = cli::connect(&conn.url()).await?;
            let display = cli::rollout::Display::detect();
            println!(
                "{}",
                cli::rollout::status(
                    &client,
                    &pool,
                    None,
                    cli::rollout::Deadline::from_flag(timeout),
                    watch,
                    display
                )
                .await?
            );
        }
        Command::Rollout(RolloutCommand::Undo {
            conn,
            kind,
            pool,
            flags,
        }) => {
            let target = cli::rollback::Target::Previous;
            print!("{}", rollback(&conn.url(), &kind, &pool, target, flags).await?);
        }
        Command::Token(TokenCommand::Create {
            conn,
            kind,
            node,
            name,
            labels,
        }) => {
            let client = cli::connect(&conn.url()).await?;
            let labels = cli::token::parse_labels(&labels)?;
            let (secret, about) = cli::token::create(&client, &kind, node.as_deref(), name.as_deref(), &labels).await?;
            print!("{secret}");
            eprintln!("{about}");
        }
        Command::Sim {
            server,
            nodes,
            max_unavailable,
            apply_ms,
            reboot_ms,
            jitter,
            failure_rate,
            data_dir,
            concurrency,
            timeout,
            new_nodes,
            json,
        } => {
            // The client commands' rule for a scheme-less address: https when a CA is set up.
            let server = server
                .or_else(|| args.server.clone())
                .map(|s| cli::server_url(Some(&s)));
            if let Some(s) = &server {
                cli::check_address(s)?;
            }
            let creds = server
                .as_ref()
                .map(|s| cli::credentials::for_server(s, cli::explicit_trust()));
            let token = creds.as_ref().and_then(|c| c.token.clone());
            let trust = creds.and_then(|c| c.trust);
            let given = server.is_some();
            let run = mco::sim::run(mco::sim::SimConfig {
                nodes,
                max_unavailable,
                apply: Duration::from_millis(apply_ms),
                reboot: Duration::from_millis(reboot_ms),
                jitter,
                failure_rate,
                server,
                token,
                trust,
                data_dir,
                server_bin: None,
                timeout,
                concurrency,
                new_nodes,
            });
            // Ctrl-C, SIGTERM or SIGHUP drops the run: its child server is killed and the data
            // dir it made removed.
            use tokio::signal::unix::{signal, SignalKind};
            let (mut term, mut hup) = (signal(SignalKind::terminate())?, signal(SignalKind::hangup())?);
            let stopped = if given {
                "the simulated fleet was stopped (the server given by --server runs on)"
            } else {
                "the simulated fleet and its server were stopped"
            };
            let show = |report: &mco::sim::Report| -> anyhow::Result<()> {
                if json {
                    announce(format_args!("{}", serde_json::to_string_pretty(report)?));
                } else {
                    announce(format_args!("{}", mco::sim::render(report).trim_end()));
                }
                Ok(())
            };
            let report = tokio::select! {
                r = run => match r {
                    Ok(r) => r,
                    // --timeout: the report of what was done, then the error (exit 1).
                    Err(e) => {
                        if let Some(t) = e.downcast_ref::<mco::sim::TimedOut>() {
                            show(&t.report)?;
                        }
                        return Err(e);
                    }
                },
                _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted: {stopped}"),
                _ = term.recv() => anyhow::bail!("terminated: {stopped}"),
                _ = hup.recv() => anyhow::bail!("hung up: {stopped}"),
            };
            show(&report)?;
        }
        Command::Token(TokenCommand::List { conn }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::token::list(&client).await?);
        }
        Command::Token(TokenCommand::Revoke { conn, id }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::token::revoke(&client, &id).await?);
        }
        Command::Store(StoreCommand::Stats { conn }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::store::stats(&client).await?);
        }
        Command::Store(StoreCommand::Verify {
            data_dir,
            drop_snapshot,
            output,
        }) => {
            let (report, ok) = cli::store::verify(&data_dir, drop_snapshot, output.is_some())?;
            print!("{report}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Store(StoreCommand::Truncate { data_dir, after }) => {
            print!("{}", cli::store::truncate(&data_dir, after)?);
        }
        Command::Store(StoreCommand::Compact { conn, before }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::store::compact(&client, &before).await?);
        }
        Command::Diff {
            conn,
            a,
            b,
            from,
            to,
            output,
        } => {
            let client = cli::connect(&conn.url()).await?;
            let (text, differs) = cli::diff::diff(&client, &a, &b, from.as_deref(), to.as_deref(), output).await?;
            print!("{text}");
            if differs {
                return Ok(ExitCode::from(1));
            }
        }
        Command::History {
            conn,
            kind,
            name,
            since,
            until,
            actor,
            event_type,
            limit,
            output,
        } => {
            let client = cli::connect(&conn.url()).await?;
            let args = cli::history::HistoryArgs {
                kind,
                name,
                since,
                until,
                actor,
                event_type,
                limit,
                output,
            };
            print!("{}", cli::history::history(&client, &args).await?);
        }
    }
    Ok(ExitCode::SUCCESS)
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
        for k in mco::model::Kind::ALL {
            assert!(help.contains(k.plural()), "{help}");
        }
        for local in ["mco up", "mco server", "mco completion", "mco store", "mco rollout"] {
            assert!(!server_on.iter().any(|p| p == local), "{local} offers --server");
        }
        assert!(server_on.iter().any(|p| p == "mco get"));
        assert!(server_on.iter().any(|p| p == "mco daemon"));
    }
}

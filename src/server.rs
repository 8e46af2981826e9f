//! `mco server`: the control plane in one process — store, hub, controllers and the API.
//!
//! Owns start-up order (open the store, rebuild the projection, start the controllers, bind and
//! serve) and clean shutdown (one cancellation token ends watches, controllers and the listener).

use crate::api;
use crate::command::Hub;
use crate::controller::{self, CommandEvictor, ControllerConfig};
use crate::store::Store;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The address `mco up` and `mco server` listen on by default, and the CLI's default server.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";

/// The CA file of the default data dir, which `mco up` run from the same directory creates.
pub const DEFAULT_CA_FILE: &str = "./mco-data/pki/ca.crt";

/// Settings of a server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where the event log lives (`<data-dir>/store`).
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// API group served and used for node annotations.
    pub group: String,
    /// Optional drain hook program (see [`CommandEvictor`]).
    pub drain_hook: Option<String>,
    /// Largest request body accepted, in bytes (kube-apiserver `--max-request-body-bytes`).
    pub max_request_body_bytes: usize,
    /// A snapshot of the state every this many events (bounds start-up and time-travel reads).
    pub snapshot_every: u64,
    /// A second listener serving only the Machine Config Server (`/config/{pool}`, `/healthz`),
    /// as MCO's 22623/22624 ports; `/config/{pool}` stays on the API listener too.
    pub mcs_listen: Option<SocketAddr>,
    /// Cluster values of the template configs (kubelet.conf `clusterDNS`, `clusterDomain`).
    pub templates: crate::generate::templates::TemplateSettings,
    /// Serve TLS with this certificate and key on both listeners (reloaded when the files
    /// change, [`crate::tls::ReloadingCert`]); `None`: plain HTTP.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Connection limits of both listeners (header-read timeout, connection cap, idle timeout).
    pub connections: api::listen::ConnLimits,
    /// Listen on a non-loopback address without TLS anyway, with a
    /// warning (`--allow-insecure-listen`); else such an address is refused
    /// ([`crate::tls::check_listen`]).
    pub allow_insecure_listen: bool,
    /// Free bytes the event log's filesystem must keep: below it writes are refused with a 500
    /// naming the shortage and `/readyz` is not ready, until space is freed
    /// ([`crate::command::Hub::set_space_reserve`]); 0 turns the check off.
    pub store_reserve_bytes: u64,
    /// The other input limits (JSON depth, documents per apply, file and rendered sizes, YAML
    /// aliases, watches per client), README "Bounded inputs".
    pub limits: crate::limits::Limits,
    /// Keep the event log in an etcd cluster instead of `<data-dir>/store`
    /// (`--store etcd://…`, [`crate::store::etcd`]): the server waits as a standby while
    /// another holds the log's writer lease, and stops when it loses it.
    pub etcd: Option<crate::store::etcd::EtcdConfig>,
    /// How long a node lease may go unrenewed before its node is NotReady
    /// (`--node-monitor-grace-period`, [`controller::NODE_MONITOR_GRACE_PERIOD`]).
    pub node_monitor_grace_period: std::time::Duration,
    /// The controllers' clock (RolloutPolicy windows, bake times, heal caps): the system's, or
    /// a manual one a test sets ([`controller::Clock::manual`]).
    pub clock: controller::Clock,
}

impl Default for ServerConfig {
    /// `./mco-data`, `127.0.0.1:7443`, the default API group, no drain hook, 3 MiB bodies.
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("mco-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 7443)),
            group: crate::model::DEFAULT_GROUP.to_string(),
            drain_hook: None,
            max_request_body_bytes: api::DEFAULT_MAX_REQUEST_BODY_BYTES,
            snapshot_every: crate::store::SNAPSHOT_EVERY,
            mcs_listen: None,
            templates: Default::default(),
            tls: None,
            connections: Default::default(),
            allow_insecure_listen: false,
            store_reserve_bytes: DEFAULT_STORE_RESERVE_BYTES,
            limits: Default::default(),
            etcd: None,
            node_monitor_grace_period: controller::NODE_MONITOR_GRACE_PERIOD,
            clock: controller::Clock::system(),
        }
    }
}

/// Default of [`ServerConfig::store_reserve_bytes`]: 64 MiB, room for dozens of the largest
/// batches sled may write before the check sees them.
pub const DEFAULT_STORE_RESERVE_BYTES: u64 = 64 * 1024 * 1024;

/// How long [`RunningServer::stop`] waits for closing connections to release the hub.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A started server: its bound address, its hub, and how to stop it.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// The Machine Config Server's own address, when one was asked for.
    pub mcs_addr: Option<SocketAddr>,
    /// Both listeners serve TLS.
    pub tls: bool,
    pub hub: Arc<Hub>,
    pub shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    /// Watch streams still open ([`api::ApiState::tasks`]).
    streams: tokio_util::task::TaskTracker,
    /// The data dir (where `admin.token` is).
    pub data_dir: PathBuf,
    /// The handler panics [`RunningServer::take_handler_panics`] has reported.
    panics_seen: std::sync::atomic::AtomicU64,
}

/// A debug build's server asserts, when it is dropped (after [`RunningServer::stop`] too), that
/// no API request handler panicked since it started (`mco_api_handler_panics_total`; the
/// panic layer answered each with a 500, and the log names it): every test that runs a server
/// fails on a handler's panic, whatever it asserts itself. Release builds only count.
impl Drop for RunningServer {
    fn drop(&mut self) {
        if !cfg!(debug_assertions) || std::thread::panicking() {
            return;
        }
        let n = self.take_handler_panics();
        assert_eq!(
            n, 0,
            "{n} API request handler(s) panicked (mco_api_handler_panics_total; the log has each panic): \
             a handler must answer every request with a Status"
        );
    }
}

impl RunningServer {
    /// The API request handlers that panicked since the last call (since the start, the first
    /// time); a test that makes one panic on purpose takes them, so that the server's drop
    /// does not fail it.
    pub fn take_handler_panics(&self) -> u64 {
        use std::sync::atomic::Ordering;
        let now = self.hub.metrics().handler_panic_count();
        now - self.panics_seen.swap(now, Ordering::Relaxed)
    }

    /// Resolves when this server lost the etcd writer lease of the event log (never for a
    /// log on local disk): its writes are refused from then on, and `mco server` exits so that
    /// its supervisor starts it again as a standby.
    pub async fn fenced(&self) {
        match self.hub.store().remote() {
            Some(log) => {
                let mut lost = log.lost_changes();
                let _ = lost.wait_for(|lost| *lost).await;
            }
            None => std::future::pending().await,
        }
    }

    /// `https://<addr>` when serving TLS, else `http://<addr>`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// The Machine Config Server's URL, when it has its own listener.
    pub fn mcs_url(&self) -> Option<String> {
        self.mcs_addr.map(|a| format!("{}://{a}", self.scheme()))
    }

    fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// The admin token the server wrote to `<data-dir>/admin.token` when it issued its first
    /// admin token ([`api::auth::bootstrap_admin`]); `None` when the file is gone.
    pub fn admin_token(&self) -> Option<String> {
        crate::credentials::read_secret_file(&self.data_dir.join(crate::credentials::ADMIN_TOKEN_FILE))
    }

    /// A client of this server authenticated with [`RunningServer::admin_token`], declaring
    /// itself as `component`.
    /// An `https://` server is verified against its generated CA ([`RunningServer::ca`]).
    pub fn admin_client(&self, component: &str) -> crate::client::Client {
        crate::client::Client::new_trusting(&self.url(), self.hub.group(), component, self.ca().as_ref())
            .with_token(self.admin_token())
    }

    /// The CA that signs this server's certificate when it serves TLS from its data dir's
    /// generated PKI (`<data-dir>/pki/ca.crt`); `None` for plain HTTP or an unreadable CA.
    pub fn ca(&self) -> Option<crate::tls::Trust> {
        if !self.url().starts_with("https://") {
            return None;
        }
        crate::tls::Trust::from_file(&crate::tls::Pki::in_data_dir(&self.data_dir).ca_cert()).ok()
    }

    /// A plain HTTP client sending [`RunningServer::admin_token`] as its bearer token with every
    /// request (reqwest's default headers), for raw API calls.
    pub fn admin_http(&self) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(t) = self.admin_token() {
            let mut v =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {t}")).expect("a token is a header value");
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        reqwest::Client::builder()
            .default_headers(headers)
            .pool_idle_timeout(crate::client::CLIENT_IDLE_TIMEOUT)
            .tls_backend_preconfigured(
                crate::tls::client_config(self.ca().as_ref()).expect("the CA was checked when read"),
            )
            .build()
            .expect("HTTP client builds")
    }

    /// Stops the API, the controllers and every open watch stream, and waits for them all, then
    /// for the API's connections to let go of the hub (axum's graceful shutdown returns once it
    /// has told them to close, while their tasks, each holding the router and so the hub, may
    /// still be finishing). When it returns, nothing but `self.hub` holds the store, so dropping
    /// the server releases the data dir's lock (the store is flushed on drop) and a new server
    /// can open it at once. Gives up waiting after [`STOP_GRACE`], with a warning.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
        if let Some(log) = self.hub.store().remote() {
            // Every acknowledged write is in etcd: a standby may take over at once.
            log.release().await;
        }
        self.streams.close();
        self.streams.wait().await;
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        while Arc::strong_count(&self.hub) > 1 {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    holders = Arc::strong_count(&self.hub) - 1,
                    "connections still hold the event log after the shutdown grace period"
                );
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

/// Connects to etcd, waits as a standby until this server holds the log's writer lease
/// (another server holding it is named in the log once), then opens the log
/// ([`Store::open_etcd`]).
pub async fn open_on_etcd(cfg: crate::store::etcd::EtcdConfig, snapshot_every: u64) -> anyhow::Result<Store> {
    let endpoints = cfg.endpoints.join(",");
    let log = crate::store::etcd::EtcdLog::connect(cfg)
        .await
        .with_context(|| format!("connecting to etcd at {endpoints}"))?;
    let mut waiting_for = None;
    while let Some(holder) = log
        .try_acquire()
        .await
        .context("taking the event log's writer lease in etcd")?
    {
        if waiting_for.as_ref() != Some(&holder) && holder == log.config().name {
            tracing::warn!(%holder, "the writer lease is held under this server's own --name: another server has the same name, or this server's previous process still holds it (it expires within the lease TTL)");
        }
        if waiting_for.as_ref() != Some(&holder) {
            tracing::info!(%holder, prefix = log.keys().prefix(), "standby: another server writes the event log in etcd; waiting for its lease");
            waiting_for = Some(holder);
        }
        // etcd expires the holder's lease on its own clock: ask again a few times per TTL.
        tokio::time::sleep(crate::store::etcd::STANDBY_POLL).await;
    }
    let prefix = log.keys().prefix().to_string();
    let store = Store::open_etcd(log, snapshot_every)
        .await
        .with_context(|| format!("opening the event log in etcd at {endpoints} (prefix {prefix})"))?;
    tracing::info!(%endpoints, %prefix, seq = store.last_seq(), "holding the writer lease of the event log in etcd");
    Ok(store)
}

/// Opens the store, rebuilds state, starts the controllers and serves the API.
pub async fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
    for addr in std::iter::once(cfg.listen).chain(cfg.mcs_listen) {
        crate::tls::check_listen(addr, cfg.tls.is_some(), cfg.allow_insecure_listen)?;
    }
    let cert = match &cfg.tls {
        Some(files) => Some(crate::tls::ReloadingCert::load(files.clone()).context("loading the serving certificate")?),
        None => None,
    };
    let tls = match &cert {
        Some(c) => Some(crate::tls::server_config(c.clone())?),
        None => None,
    };
    let store_dir = cfg.data_dir.join("store");
    std::fs::create_dir_all(&store_dir).with_context(|| format!("creating {}", store_dir.display()))?;
    // The event log is readable by its owner only (0700), whatever the umask.
    crate::tls::private_dir(&store_dir)?;
    let store = match &cfg.etcd {
        None => Store::open(&store_dir).with_context(|| format!("opening the event log in {}", store_dir.display()))?,
        Some(etcd) => open_on_etcd(etcd.clone(), cfg.snapshot_every).await?,
    }
    .with_snapshot_every(cfg.snapshot_every);
    let hub = Hub::open(store, &cfg.group).context("rebuilding state from the event log")?;
    if let Some(log) = hub.store().remote() {
        hub.metrics().store_writer.set(1);
        let etcd = log.config();
        controller::leader::record_leader(&hub, &etcd.name, etcd.lease_ttl_secs)
            .await
            .context("recording this server as the controllers' leader (kube-system/mco-controllers)")?;
        let (metrics, mut lost) = (hub.metrics().clone(), log.lost_changes());
        tokio::spawn(async move {
            let _ = lost.wait_for(|lost| *lost).await;
            metrics.store_writer.set(0);
        });
    }
    hub.set_space_reserve(&store_dir, cfg.store_reserve_bytes);
    hub.set_limits(cfg.limits.clone());
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let mut ccfg = ControllerConfig {
        templates: cfg.templates.clone(),
        node_monitor_grace_period: cfg.node_monitor_grace_period,
        clock: cfg.clock.clone(),
        ..Default::default()
    };
    if let Some(p) = &cfg.drain_hook {
        ccfg.evictor = Arc::new(CommandEvictor { program: p.clone() });
    }
    let streams = tokio_util::task::TaskTracker::new();
    let state = api::ApiState {
        hub: hub.clone(),
        shutdown: shutdown.clone(),
        max_request_body_bytes: cfg.max_request_body_bytes,
        tasks: streams.clone(),
        watches: Default::default(),
        clock: cfg.clock.clone(),
    };
    // Each connection reads a little more than the header limit, so that the limit's own
    // middleware answers with a Status.
    let connections = api::listen::ConnLimits {
        max_header_buffer: api::listen::header_buffer_for(cfg.limits.max_header_bytes),
        ..cfg.connections.clone()
    };
    let mut tasks = Vec::new();
    let mut mcs_addr = None;
    if let Some(listen) = cfg.mcs_listen {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen} (Machine Config Server)"))?;
        mcs_addr = Some(listener.local_addr()?);
        let (app, token) = (api::mcs::router(state.clone()), shutdown.clone());
        let (tls, limits) = (tls.clone(), connections.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = api::listen::serve(listener, app, tls, limits, token).await {
                tracing::error!(error = %e, "Machine Config Server failed");
            }
        }));
        tracing::info!(addr = %mcs_addr.expect("bound"), "Machine Config Server listening");
    }
    // After every bind: a start that fails leaves no credentials behind.
    api::auth::bootstrap_admin(&hub, &cfg.data_dir)
        .await
        .context("issuing the first admin token")?;
    let api_task = {
        let (tls, limits, token) = (tls.clone(), connections.clone(), shutdown.clone());
        let app = api::router(state);
        tokio::spawn(async move {
            if let Err(e) = api::listen::serve(listener, app, tls, limits, token).await {
                tracing::error!(error = %e, "API server failed");
            }
        })
    };
    if let Some(c) = cert {
        tasks.push(tokio::spawn(c.watch(crate::tls::RELOAD_INTERVAL, shutdown.clone())));
    }
    let ctrl_task = tokio::spawn(controller::run(hub.clone(), ccfg, shutdown.clone()));
    tracing::info!(%addr, seq = hub.store().last_seq(), group = cfg.group, "mco server started");
    tasks.extend([api_task, ctrl_task]);
    Ok(RunningServer {
        addr,
        mcs_addr,
        tls: cfg.tls.is_some(),
        hub,
        shutdown,
        tasks,
        streams,
        data_dir: cfg.data_dir.clone(),
        panics_seen: Default::default(),
    })
}

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
    /// The other input limits (JSON depth, documents per apply, file and rendered sizes, YAML
    /// aliases, watches per client), README "Bounded inputs".
    pub limits: crate::limits::Limits,
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
            limits: Default::default(),
        }
    }
}

/// How long [`RunningServer::stop`] waits for closing connections to release the hub.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A started server: its bound address, its hub, and how to stop it.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// The Machine Config Server's own address, when one was asked for.
    pub mcs_addr: Option<SocketAddr>,
    pub hub: Arc<Hub>,
    pub shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    /// Watch streams still open ([`api::ApiState::tasks`]).
    streams: tokio_util::task::TaskTracker,
}

impl RunningServer {
    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the API, the controllers and every open watch stream, and waits for them all, then
    /// for the API's connections to let go of the hub (axum's graceful shutdown returns once it
    /// has told them to close, while their tasks, each holding the router and so the hub, may
    /// still be finishing). When it returns, nothing but `self.hub` holds the store, so dropping
    /// the server releases the data dir's lock (the store is flushed on drop) and a new server
    /// can open it at once. Gives up waiting after [`STOP_GRACE`], with a warning.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
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

/// Opens the store, rebuilds state, starts the controllers and serves the API.
pub async fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
    let store_dir = cfg.data_dir.join("store");
    std::fs::create_dir_all(&store_dir).with_context(|| format!("creating {}", store_dir.display()))?;
    let store = Store::open(&store_dir)
        .with_context(|| format!("opening the event log in {}", store_dir.display()))?
        .with_snapshot_every(cfg.snapshot_every);
    let hub = Hub::open(store, &cfg.group).context("rebuilding state from the event log")?;
    hub.set_limits(cfg.limits.clone());
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let mut ccfg = ControllerConfig {
        templates: cfg.templates.clone(),
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
    };
    let mut tasks = Vec::new();
    let mut mcs_addr = None;
    if let Some(listen) = cfg.mcs_listen {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listening on {listen} (Machine Config Server)"))?;
        mcs_addr = Some(listener.local_addr()?);
        let (app, token) = (api::mcs::router(state.clone()), shutdown.clone());
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(token.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "Machine Config Server failed");
            }
        }));
        tracing::info!(addr = %mcs_addr.expect("bound"), "Machine Config Server listening");
    }
    let api_task = {
        tokio::spawn(async move {
            if let Err(e) = api::serve(listener, state).await {
                tracing::error!(error = %e, "API server failed");
            }
        })
    };
    let ctrl_task = tokio::spawn(controller::run(hub.clone(), ccfg, shutdown.clone()));
    tracing::info!(%addr, seq = hub.store().last_seq(), group = cfg.group, "mco server started");
    tasks.extend([api_task, ctrl_task]);
    Ok(RunningServer {
        addr,
        mcs_addr,
        hub,
        shutdown,
        tasks,
        streams,
    })
}

//! The servers of the API benches: a real mco API server over a fleet of nodes, and the floor
//! of its reads, bytes served from memory by a bare axum route on loopback.
//! Included by a bench with `#[path = "common/serve.rs"] mod serve;`.

/// A real API server (plain HTTP on loopback, authentication on) over `nodes` Nodes made by
/// `node(i)`, created in one batch; room for `watches` watches from one identity (a fleet's
/// daemons have one each).
pub async fn fleet_server(
    data_dir: &std::path::Path,
    nodes: usize,
    watches: usize,
    node: impl Fn(usize) -> serde_json::Value,
) -> mco::server::RunningServer {
    let server = mco::server::start(mco::server::ServerConfig {
        data_dir: data_dir.to_path_buf(),
        listen: ([127, 0, 0, 1], 0).into(),
        limits: mco::limits::Limits {
            max_watches_per_client: 2 * watches,
            ..Default::default()
        },
        connections: mco::api::listen::ConnLimits {
            max_connections: 4 * watches,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    let creates = (0..nodes)
        .map(|i| mco::command::Mutation::Create {
            kind: mco::model::Kind::Node,
            object: node(i),
        })
        .collect();
    let actor = mco::command::Actor::new("bench");
    server.hub.batch(creates, "", &actor).await.unwrap();
    server
}

/// Serves `routes` (path, body) from memory on loopback; the base URL.
pub async fn memory_server(routes: Vec<(String, bytes::Bytes)>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut app = axum::Router::new();
    for (path, body) in routes {
        app = app.route(
            &path,
            axum::routing::get(move || {
                let body = body.clone();
                async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], body) }
            }),
        );
    }
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

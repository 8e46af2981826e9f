//! The floor of the API's reads: bytes served from memory by a bare axum route on loopback.
//! Included by a bench with `#[path = "common/serve.rs"] mod serve;`.

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

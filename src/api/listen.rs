//! The accept loop of the API and of the Machine Config Server: plain HTTP or TLS (rustls),
//! HTTP/1.1 and HTTP/2, with the connection limits that keep slow or idle clients from
//! exhausting the server.
//!
//! Owns connections, not requests: the TLS handshake, hyper's connection driver, the limits of
//! [`ConnLimits`] (a connection cap taken at accept, the header-read and handshake deadline,
//! idle reaping) and graceful shutdown (no new connections, each open one finishes its request
//! in flight and closes, watches end with [`super::ApiState::shutdown`]; connections still open
//! after [`SHUTDOWN_GRACE`] are dropped). Routing and everything about requests is the router's.
//!
//! What a client sees at each limit:
//! - past [`ConnLimits::max_connections`] open connections, new ones are not accepted: they wait
//!   in the kernel's listen backlog (the client's connect succeeds, its request is answered
//!   once a connection closes) rather than being reset, so a legitimate client is delayed, not
//!   refused, while half-sent requests are being timed out;
//! - a connection that has not sent a whole request header (or finished its TLS handshake)
//!   within [`ConnLimits::header_read_timeout`] of being accepted, or of its previous answer,
//!   is closed (HTTP/1: hyper answers nothing and closes);
//! - a connection with no request in flight for [`ConnLimits::idle_timeout`] is closed
//!   gracefully (HTTP/1: closed; HTTP/2: GOAWAY). A watch is a request in flight until it ends.

use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Default of [`ConnLimits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ConnLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default of [`ConnLimits::idle_timeout`] (Go's `http.Server.IdleTimeout` as kube-apiserver
/// sets it: 90 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long shutdown waits for open connections before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Connection limits of a listener (settings of [`crate::server::ServerConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Open connections at most; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Time a client has to finish its TLS handshake and send a whole request header, from
    /// accept or from its previous answer; then the connection is closed.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Bytes of a request line and headers an HTTP/1 connection reads at most (its read
    /// buffer), and an HTTP/2 header list at most: beyond it the HTTP layer answers a bare 431.
    /// The server sets it a little above [`crate::limits::Limits::max_header_bytes`], whose
    /// middleware answers with a Status below it.
    pub max_header_buffer: usize,
}

impl Default for ConnLimits {
    /// 1024 connections, 10 s to send a header, 90 s idle, a header buffer for the default
    /// header limit.
    fn default() -> Self {
        ConnLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_header_buffer: header_buffer_for(crate::limits::DEFAULT_MAX_HEADER_BYTES),
        }
    }
}

/// The connection read buffer that lets requests of up to `max_header_bytes` of line and
/// headers reach the Status-answering middleware: the limit plus 64 KiB of room, at least
/// hyper's minimum buffer (8 KiB + 4 KiB), at most [`crate::limits::MAX_HEADER_BYTES_CEILING`].
pub fn header_buffer_for(max_header_bytes: usize) -> usize {
    (max_header_bytes.saturating_add(64 * 1024)).clamp(8192 + 4096, crate::limits::MAX_HEADER_BYTES_CEILING + 64 * 1024)
}

/// Serves `app` on `listener` (TLS when `tls` is given) until `shutdown` is cancelled, then
/// shuts down gracefully (see the module doc). Returns once every connection is closed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let (stream, _peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning; the client waits.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while conns.try_join_next().is_some() {}
        let (app, tls, limits, shutdown) = (app.clone(), tls.clone(), limits.clone(), shutdown.clone());
        conns.spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            let accepted = Instant::now();
            match tls {
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stream));
                    let stream = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        r = handshake => match r {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        },
                    };
                    connection(stream, app, &limits, shutdown, accepted).await
                }
                None => connection(stream, app, &limits, shutdown, accepted).await,
            }
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            open = conns.len(),
            "dropping connections still open after the shutdown grace period"
        );
        conns.shutdown().await;
    }
    Ok(())
}

/// Requests in flight on one connection and when the last one ended.
struct Activity {
    in_flight: AtomicUsize,
    /// Requests begun so far.
    started: AtomicUsize,
    last: Mutex<Instant>,
    /// Signalled each time a request ends: the connection's deadline starts again from then.
    ended: tokio::sync::Notify,
}

/// Held by a request until its answer's body is dropped (sent or abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.last.lock().expect("activity lock") = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        // A stored permit if the connection is not waiting yet: the end is never missed.
        self.0.ended.notify_one();
    }
}

impl Activity {
    /// When the connection is to be closed if nothing happens before: `None` while a request
    /// is in flight (a watch can stay open for hours without costing a wake-up).
    fn deadline(&self, limits: &ConnLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = *self.last.lock().expect("activity lock");
        let limit = if self.started.load(Ordering::SeqCst) == 0 {
            limits.header_read_timeout.min(limits.idle_timeout)
        } else {
            limits.idle_timeout
        };
        Some(last + limit)
    }
}

/// Drives one connection until it ends, closing it on shutdown, when it sends no request
/// header in time, or when it idles.
async fn connection<I>(io: I, app: Router, limits: &ConnLimits, shutdown: CancellationToken, accepted: Instant)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        started: AtomicUsize::new(0),
        last: Mutex::new(accepted),
        ended: tokio::sync::Notify::new(),
    });
    let tracked = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        tracked.in_flight.fetch_add(1, Ordering::SeqCst);
        tracked.started.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight(tracked.clone());
        let app = app.clone();
        async move {
            let resp = tower_service_call(app, req.map(Body::new)).await;
            Ok::<_, std::convert::Infallible>(resp.map(move |b| {
                Body::new(b.map_frame(move |f| {
                    let _ = &guard;
                    f
                }))
            }))
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_buffer)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_buffer).unwrap_or(u32::MAX));
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    // The connection sleeps until its deadline, or until a request ends and moves it; it is
    // not woken periodically: a fleet's daemons hold thousands of watch connections open, and
    // a tick per connection per second cost a 10,000-node server about a tenth of a core
    // (`mco sim --nodes 10000 --apply-ms 5000 --reboot-ms 25000`: 187 -> 154 s of CPU).
    let mut closing = false;
    loop {
        let deadline = activity.deadline(limits);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = shutdown.cancelled(), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = activity.ended.notified(), if !closing => {}
            _ = sleep_until(deadline), if !closing => {
                // A request may have begun since the deadline was taken.
                if activity.in_flight.load(Ordering::SeqCst) > 0 {
                    continue;
                }
                let quiet = activity.last.lock().expect("activity lock").elapsed();
                if activity.started.load(Ordering::SeqCst) == 0 && quiet >= limits.header_read_timeout {
                    // Not even a first request header (the HTTP version is still unknown, so
                    // hyper's own header timer has not started): drop it.
                    return;
                }
                if quiet >= limits.idle_timeout {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// Sleeps until `deadline`, forever when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Calls the router as a tower service (it is always ready).
async fn tower_service_call(app: Router, req: hyper::Request<Body>) -> axum::response::Response {
    use tower_service::Service;
    let mut app = app;
    match app.call(req).await {
        Ok(r) => r,
        Err(e) => match e {},
    }
}

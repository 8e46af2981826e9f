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
//! Two budgets, so that connections nobody has authenticated cannot take the places of those
//! that have been served:
//! - *pending* connections (accepted, TLS handshake and first request header not yet done)
//!   have their own budget, [`ConnLimits::max_pending`], and at most
//!   [`ConnLimits::max_pending_per_peer`] of them per client IP address. A new connection past
//!   either is accepted and the oldest pending one (of that peer, else of all) is closed: a
//!   flood of half-open sockets, reconnected as soon as they are closed, churns through its own
//!   pending places while a legitimate client's connection, which finishes its handshake and
//!   sends its request within milliseconds, goes through (even from the same address:
//!   `tests/connections.rs::reconnecting_half_open_sockets_do_not_starve_a_client`);
//! - *established* connections (their first request header arrived) count against
//!   [`ConnLimits::max_connections`]; pending ones never do, so they can never make an
//!   established connection wait or be refused. A first request past that cap waits until an
//!   established connection closes (its connection stays open) rather than being refused;
//! - a TLS handshake not finished within [`ConnLimits::handshake_timeout`] of the accept is
//!   closed;
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
/// Default of [`ConnLimits::handshake_timeout`]: a TLS handshake takes milliseconds on a LAN,
/// a few round trips on a WAN.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default of [`ConnLimits::max_pending`].
pub const DEFAULT_MAX_PENDING: usize = 4096;
/// Default of [`ConnLimits::max_pending_per_peer`].
pub const DEFAULT_MAX_PENDING_PER_PEER: usize = 1024;
/// Default of [`ConnLimits::idle_timeout`] (Go's `http.Server.IdleTimeout` as kube-apiserver
/// sets it: 90 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long shutdown waits for open connections before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Connection limits of a listener (settings of [`crate::server::ServerConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Established connections (first request header received) at most; the first request of
    /// one more waits until one closes.
    pub max_connections: usize,
    /// Pending connections (TLS handshake or first request header not done) at most; one more
    /// closes the oldest pending one.
    pub max_pending: usize,
    /// Pending connections from one IP address at most; one more closes that address's oldest
    /// pending one.
    pub max_pending_per_peer: usize,
    /// Time a client has to finish its TLS handshake, from accept; then the connection is
    /// closed.
    pub handshake_timeout: Duration,
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
    /// 1024 established and 4096 pending connections (1024 per peer), 5 s to finish a TLS
    /// handshake, 10 s to send a header, 90 s idle, a header buffer for the default header
    /// limit.
    fn default() -> Self {
        ConnLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_pending: DEFAULT_MAX_PENDING,
            max_pending_per_peer: DEFAULT_MAX_PENDING_PER_PEER,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
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
    let pending = Arc::new(Pending::new(limits.max_pending, limits.max_pending_per_peer));
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
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
        let entry = pending.admit(peer.ip(), std::os::fd::AsRawFd::as_raw_fd(&stream));
        let (app, tls, limits, shutdown) = (app.clone(), tls.clone(), limits.clone(), shutdown.clone());
        let slots = slots.clone();
        conns.spawn(async move {
            let _ = stream.set_nodelay(true);
            let accepted = Instant::now();
            let evicted = entry.evicted.clone();
            // A client that has sent its first bytes (a ClientHello, a request line) is moved
            // behind the silent ones in the eviction order.
            let handshake_timeout = limits.handshake_timeout.min(limits.header_read_timeout);
            let first_bytes = match &tls {
                Some(_) => handshake_timeout,
                None => limits.header_read_timeout,
            };
            let mut first = [0u8; 1];
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = evicted.cancelled() => return,
                // A peek, not `readable()`, which can wake without data.
                r = tokio::time::timeout(first_bytes, stream.peek(&mut first)) => match r {
                    Ok(Ok(n)) if n > 0 => entry.talked(),
                    _ => return,
                },
            }
            let phase = Phase {
                entry: Mutex::new(Some(entry)),
                slots,
                permit: Mutex::new(None),
                evicted,
            };
            match tls {
                Some(acceptor) => {
                    let handshake = tokio::time::timeout_at(accepted + handshake_timeout, acceptor.accept(stream));
                    let stream = tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = phase.evicted.cancelled() => return,
                        r = handshake => match r {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        },
                    };
                    connection(stream, app, &limits, shutdown, accepted, Arc::new(phase)).await
                }
                None => connection(stream, app, &limits, shutdown, accepted, Arc::new(phase)).await,
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

/// The pending connections of one listener, oldest first, with their count per peer.
struct Pending {
    max: usize,
    max_per_peer: usize,
    inner: Mutex<PendingInner>,
}

/// One pending connection as the registry sees it.
struct PendingConn {
    peer: std::net::IpAddr,
    /// What closes it.
    evicted: CancellationToken,
    /// Its socket, to peek at (never read from, never closed here).
    fd: std::os::fd::RawFd,
    /// Whether it is known to have sent a byte.
    talked: bool,
}

impl PendingConn {
    /// Whether it has sent a byte: known, or bytes are waiting in its socket (a connection's
    /// task may not have run yet on a busy server while its ClientHello has arrived).
    fn has_talked(&mut self) -> bool {
        if !self.talked {
            let mut b = 0u8;
            // SAFETY: `recv` with MSG_PEEK | MSG_DONTWAIT into a one-byte buffer on the stack:
            // it neither blocks nor consumes data. `fd` is this pending connection's socket,
            // open while its entry is registered (at worst, in the instant between its task
            // dropping the socket and the entry, a socket a later accept reused: still a
            // read-only peek).
            let n = unsafe {
                libc::recv(
                    self.fd,
                    (&mut b as *mut u8).cast::<libc::c_void>(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            self.talked = n > 0;
        }
        self.talked
    }
}

#[derive(Default)]
struct PendingInner {
    next: u64,
    /// Admission number -> its connection.
    all: std::collections::BTreeMap<u64, PendingConn>,
    by_peer: std::collections::HashMap<std::net::IpAddr, std::collections::BTreeSet<u64>>,
}

impl PendingInner {
    fn remove(&mut self, seq: u64) -> Option<CancellationToken> {
        let PendingConn {
            peer: ip,
            evicted: token,
            ..
        } = self.all.remove(&seq)?;
        if let Some(set) = self.by_peer.get_mut(&ip) {
            set.remove(&seq);
            if set.is_empty() {
                self.by_peer.remove(&ip);
            }
        }
        Some(token)
    }
}

/// A connection's place among the pending ones; leaves them when dropped.
struct PendingEntry {
    pending: Arc<Pending>,
    seq: u64,
    /// Cancelled when a newer connection takes this place.
    evicted: CancellationToken,
}

impl PendingEntry {
    /// The client has sent its first bytes: it is evicted only after every silent one.
    fn talked(&self) {
        if let Some(e) = self.pending.inner.lock().expect("pending lock").all.get_mut(&self.seq) {
            e.talked = true;
        }
    }
}

impl Drop for PendingEntry {
    fn drop(&mut self) {
        self.pending.inner.lock().expect("pending lock").remove(self.seq);
    }
}

impl Pending {
    fn new(max: usize, max_per_peer: usize) -> Pending {
        Pending {
            max: max.max(1),
            max_per_peer: max_per_peer.max(1),
            inner: Mutex::new(PendingInner::default()),
        }
    }

    /// Admits a new connection from `peer`, closing a pending one of that peer when it is at
    /// its cap, else one of all when the budget is full: the oldest that has sent nothing yet,
    /// else the oldest.
    fn admit(self: &Arc<Self>, peer: std::net::IpAddr, fd: std::os::fd::RawFd) -> PendingEntry {
        let mut g = self.inner.lock().expect("pending lock");
        let candidates: Option<Vec<u64>> = match g.by_peer.get(&peer) {
            Some(set) if set.len() >= self.max_per_peer => Some(set.iter().copied().collect()),
            _ if g.all.len() >= self.max => Some(g.all.keys().copied().collect()),
            _ => None,
        };
        let victim = candidates.and_then(|seqs| {
            let first = seqs.first().copied();
            seqs.into_iter()
                .find(|seq| g.all.get_mut(seq).is_some_and(|c| !c.has_talked()))
                .or(first)
        });
        if let Some(token) = victim.and_then(|v| g.remove(v)) {
            token.cancel();
        }
        let seq = g.next;
        g.next += 1;
        let evicted = CancellationToken::new();
        g.all.insert(
            seq,
            PendingConn {
                peer,
                evicted: evicted.clone(),
                fd,
                talked: false,
            },
        );
        g.by_peer.entry(peer).or_default().insert(seq);
        PendingEntry {
            pending: self.clone(),
            seq,
            evicted,
        }
    }
}

/// Where a connection is in its life: pending (holding a [`PendingEntry`]) until its first
/// request, then established (holding a connection slot).
struct Phase {
    entry: Mutex<Option<PendingEntry>>,
    slots: Arc<tokio::sync::Semaphore>,
    permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    evicted: CancellationToken,
}

impl Phase {
    /// At a request: the first one leaves the pending budget and waits for a connection slot.
    async fn establish(&self) {
        let entry = self.entry.lock().expect("phase lock").take();
        if entry.is_none() {
            return;
        }
        drop(entry);
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        *self.permit.lock().expect("phase lock") = Some(permit);
    }

    /// Whether the connection is still pending.
    fn is_pending(&self) -> bool {
        self.entry.lock().expect("phase lock").is_some()
    }
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
async fn connection<I>(
    io: I,
    app: Router,
    limits: &ConnLimits,
    shutdown: CancellationToken,
    accepted: Instant,
    phase: Arc<Phase>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        started: AtomicUsize::new(0),
        last: Mutex::new(accepted),
        ended: tokio::sync::Notify::new(),
    });
    let tracked = activity.clone();
    let phase_of_service = phase.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        tracked.in_flight.fetch_add(1, Ordering::SeqCst);
        tracked.started.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight(tracked.clone());
        let app = app.clone();
        let phase = phase_of_service.clone();
        async move {
            phase.establish().await;
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
            // A newer connection took this one's pending place before its first request.
            _ = phase.evicted.cancelled(), if phase.is_pending() => return,
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

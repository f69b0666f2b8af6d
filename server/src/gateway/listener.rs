//! One gateway's listener: plain HTTP (development, tests) or TLS with ALPN (HTTP/2 and
//! HTTP/1.1), each connection served on its own task: a TLS connection on one of the
//! gateway's per-core runtimes ([`super::cores`]), a plain one on the server's runtime. Stopping it stops accepting; requests
//! and streams in flight finish (up to [`DRAIN`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tower::ServiceExt;

/// How long a TLS handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long a stopped listener waits for its requests in flight.
const DRAIN: Duration = Duration::from_secs(300);

/// A gateway's listener as the reconcile loop keeps it.
pub(super) struct Listener {
    pub(super) port: u16,
    /// The certificate it presents (`None`: plain HTTP).
    pub(super) certificate_pem: Option<String>,
    /// Dropped (with the listener) to stop accepting; in-flight requests finish.
    pub(super) _stop: tokio::sync::oneshot::Sender<()>,
}

/// A raw TCP route's listener as the reconcile loop keeps it.
pub(super) struct TcpListenerHandle {
    pub(super) tls: bool,
    /// The client certificate authorities it asks for (a change restarts it).
    pub(super) client_ca: Option<String>,
    /// Dropped to stop accepting; open connections finish.
    pub(super) _stop: tokio::sync::oneshot::Sender<()>,
}

/// Serves the gateway's requests on `tcp` until `stopped` fires (or its sender is dropped):
/// HTTP/1.1 on the gateway's own path ([`super::h1`]), HTTP/2 (ALPN `h2`, or a plain
/// connection's HTTP/2 preface) and whatever that path hands over through hyper.
pub(super) fn spawn(
    tcp: TcpListener,
    ctx: Arc<super::h1::Ctx>,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stopped: oneshot::Receiver<()>,
) {
    tokio::spawn(async move {
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        // Set when the listener stops: idle connections close, busy ones after their answer.
        let (closing_tx, closing) = watch::channel(false);
        // Held by every connection: `recv` gives `None` once all have ended.
        let (alive, mut all_ended) = mpsc::channel::<()>(1);
        loop {
            let (stream, peer) = tokio::select! {
                r = tcp.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "gateway: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut stopped => break,
            };
            let _ = stream.set_nodelay(true);
            let ctx = ctx.clone();
            let closing = closing.clone();
            let alive = alive.clone();
            let Some(acceptor) = acceptor.clone() else {
                // Plain HTTP (development, tests) on the server's runtime.
                tokio::spawn(async move {
                    let _alive = alive;
                    super::h1::serve(stream, peer, ctx, closing).await;
                });
                continue;
            };
            // TLS on the next core's runtime (see `cores`): the connection leaves this
            // runtime's reactor and joins that one's.
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            super::cores::cores().spawn(async move {
                let _alive = alive;
                let Ok(stream) = tokio::net::TcpStream::from_std(stream) else {
                    return;
                };
                let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                else {
                    return;
                };
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    let app = ctx.app.clone();
                    let (request, idle) = (ctx.gateways.request_timeout, ctx.gateways.idle_timeout);
                    drop(ctx);
                    Box::pin(serve_hyper(tls, peer, app, request, idle, closing)).await;
                } else {
                    super::h1::serve(tls, peer, ctx, closing).await;
                }
            });
        }
        drop(tcp);
        let _ = closing_tx.send(true);
        drop(alive);
        let _ = tokio::time::timeout(DRAIN, all_ended.recv()).await;
    });
}

/// Serves a connection with hyper (HTTP/1.1 or HTTP/2, upgrades included) until it ends;
/// once `closing` is set, or once no request has been in flight for `idle_timeout`, it ends
/// gracefully (requests in flight are answered; HTTP/2 says so with a GOAWAY). A request
/// counts as in flight until its answer's body has ended, so a long stream is not cut. An
/// HTTP/1.1 request head that takes longer than `request_timeout` to arrive closes the
/// connection.
pub(super) async fn serve_hyper<T>(
    io: T,
    peer: SocketAddr,
    app: Router,
    request_timeout: Duration,
    idle_timeout: Duration,
    mut closing: watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let seen = activity.clone();
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let busy = Busy::new(seen.clone());
        let answer = app.clone().oneshot(req.map(Body::new));
        async move {
            let resp = answer.await?;
            Ok::<_, std::convert::Infallible>(
                resp.map(|body| Body::new(Held { body, _busy: busy })),
            )
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(request_timeout);
    // HTTP/2 WebSockets (RFC 8441 extended CONNECT).
    builder.http2().enable_connect_protocol();
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    let mut conn = std::pin::pin!(conn);
    while !*closing.borrow() {
        // Idle since the last answer ended: checked again once the timeout would have run
        // out (while busy, a timeout later).
        let check = activity.idle_until(idle_timeout);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = closing.changed() => {}
            _ = tokio::time::sleep_until(check) => {
                if activity.idle_for(idle_timeout) {
                    break;
                }
            }
        }
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// A hyper connection's requests in flight, and when the last one ended.
struct Activity {
    busy: AtomicUsize,
    last: std::sync::Mutex<tokio::time::Instant>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            busy: AtomicUsize::new(0),
            last: std::sync::Mutex::new(tokio::time::Instant::now()),
        }
    }

    fn last(&self) -> tokio::time::Instant {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the connection will have been idle for `timeout` if nothing happens meanwhile.
    fn idle_until(&self, timeout: Duration) -> tokio::time::Instant {
        if self.busy.load(Ordering::Acquire) > 0 {
            tokio::time::Instant::now() + timeout
        } else {
            self.last() + timeout
        }
    }

    /// No request in flight, and none ended within `timeout`.
    fn idle_for(&self, timeout: Duration) -> bool {
        self.busy.load(Ordering::Acquire) == 0 && self.last().elapsed() >= timeout
    }
}

/// A request in flight on a hyper connection, from its head to its answer's end.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(a: Arc<Activity>) -> Busy {
        a.busy.fetch_add(1, Ordering::AcqRel);
        Busy(a)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(|p| p.into_inner()) = tokio::time::Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body that keeps its request in flight until it is dropped (ended, or cut).
struct Held {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Held {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The peer address a request came from (set per connection by [`spawn`]).
pub(super) type Peer = ConnectInfo<SocketAddr>;

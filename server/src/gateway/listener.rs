//! One gateway's listener: plain HTTP (development, tests) or TLS with ALPN (HTTP/2 and
//! HTTP/1.1), each connection served on its own task. Stopping it stops accepting; requests
//! and streams in flight finish (up to [`DRAIN`]).

use std::net::SocketAddr;
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
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _alive = alive;
                let Some(acceptor) = acceptor else {
                    return super::h1::serve(stream, peer, ctx, closing).await;
                };
                let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                else {
                    return;
                };
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    let (app, timeout) = (ctx.app.clone(), ctx.gateways.request_timeout);
                    drop(ctx);
                    Box::pin(serve_hyper(tls, peer, app, timeout, closing)).await;
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
/// once `closing` is set it ends gracefully (requests in flight are answered). An HTTP/1.1
/// request head that takes longer than `request_timeout` to arrive closes the connection.
pub(super) async fn serve_hyper<T>(
    io: T,
    peer: SocketAddr,
    app: Router,
    request_timeout: Duration,
    mut closing: watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req.map(Body::new))
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
    if !*closing.borrow() {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = closing.changed() => {}
        }
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The peer address a request came from (set per connection by [`spawn`]).
pub(super) type Peer = ConnectInfo<SocketAddr>;

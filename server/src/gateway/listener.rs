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
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
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

/// Serves `app` on `tcp` until `stopped` fires (or its sender is dropped).
pub(super) fn spawn(
    tcp: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stopped: oneshot::Receiver<()>,
) {
    tokio::spawn(async move {
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let graceful = GracefulShutdown::new();
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
            let app = app.clone();
            let watcher = graceful.watcher();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                    req.extensions_mut().insert(ConnectInfo(peer));
                    app.clone().oneshot(req.map(Body::new))
                });
                let mut builder = Builder::new(TokioExecutor::new());
                // HTTP/2 WebSockets (RFC 8441 extended CONNECT).
                builder.http2().enable_connect_protocol();
                match acceptor {
                    Some(acceptor) => {
                        let Ok(Ok(tls)) =
                            tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
                        let _ = watcher.watch(conn.into_owned()).await;
                    }
                    None => {
                        let conn =
                            builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
                        let _ = watcher.watch(conn.into_owned()).await;
                    }
                }
            });
        }
        drop(tcp);
        let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    });
}

/// The peer address a request came from (set per connection by [`spawn`]).
pub(super) type Peer = ConnectInfo<SocketAddr>;

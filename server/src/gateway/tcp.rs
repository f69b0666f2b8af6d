//! The data path of raw TCP routes: one listener per route's port. A connection from an
//! address outside the route's networks is closed at once (counted as refused); else, after
//! TLS when the route asks for it (the gateway's certificate, no ALPN), it is joined byte for
//! byte to one of the endpoint's instances: consistent hashing with bounded load on the
//! client's address (a client returns to the same instance while it is healthy), skipping
//! instances that are down or ejected, trying another when one refuses the connection.
//!
//! The route is read from the snapshot on every connection, so switching its endpoint or
//! its networks applies to the next connection without a restart; open connections are left
//! alone, and a closed route's listener lets them finish.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::affinity::key_hash;
use super::metrics::TcpStats;
use super::shared::{Gateways, EJECT_MS};
use super::snapshot::{Snapshot, TcpRouteSnap};

/// How long a TLS handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long an instance has to accept the connection.
const CONNECT: Duration = Duration::from_secs(2);
/// Instances tried for one connection.
const ATTEMPTS: usize = 3;

/// Accepts on `tcp` for the route on `port` until `stopped` fires.
pub(super) fn spawn(
    g: Arc<Gateways>,
    tcp: TcpListener,
    port: u16,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut stopped: oneshot::Receiver<()>,
) {
    tokio::spawn(async move {
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        loop {
            let (stream, peer) = tokio::select! {
                r = tcp.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(port, error = %e, "gateway: TCP accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut stopped => break,
            };
            let g = g.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                serve(&g, port, stream, peer, acceptor).await;
            });
        }
    });
}

/// One client connection: checked, then joined to an instance.
async fn serve(
    g: &Gateways,
    port: u16,
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
) {
    let Ok(snap) = g.current().await else {
        return;
    };
    let Some(route) = snap.tcp.get(&port) else {
        return;
    };
    let stats = g.tcp.route(&route.id, port);
    if !route.admits(peer.ip()) {
        stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(port, peer = %peer.ip(), "gateway: TCP connection from a source not allowed; closed");
        return;
    }
    match acceptor {
        Some(a) => match tokio::time::timeout(HANDSHAKE, a.accept(stream)).await {
            Ok(Ok(tls)) => {
                stats.connections.fetch_add(1, Ordering::Relaxed);
                forward(g, &snap, route, &stats, tls, peer).await
            }
            _ => {
                // No TLS, or no client certificate the route's authorities issued.
                stats.refused.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(port, peer = %peer.ip(), "gateway: TCP route's TLS handshake failed; closed")
            }
        },
        None => {
            stats.connections.fetch_add(1, Ordering::Relaxed);
            forward(g, &snap, route, &stats, stream, peer).await
        }
    }
}

/// Joins an admitted client to one of the route's endpoint's instances until either closes.
async fn forward<C>(
    g: &Gateways,
    snap: &Snapshot,
    route: &TcpRouteSnap,
    stats: &TcpStats,
    client: C,
    peer: SocketAddr,
) where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let Some(ep) = snap.endpoints.get(&route.endpoint_id) else {
        stats.failed.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let Some((upstream, target)) = connect(g, ep, peer.ip()).await else {
        stats.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(port = route.port, endpoint = %ep.name, "gateway: no instance took a TCP connection");
        return;
    };
    stats.active.fetch_add(1, Ordering::Relaxed);
    target.inflight.fetch_add(1, Ordering::Relaxed);
    let (to_up, to_client) = join(client, upstream).await;
    target.inflight.fetch_sub(1, Ordering::Relaxed);
    stats.active.fetch_sub(1, Ordering::Relaxed);
    stats.bytes_in.fetch_add(to_up, Ordering::Relaxed);
    stats.bytes_out.fetch_add(to_client, Ordering::Relaxed);
}

/// Connects to an instance of the endpoint chosen for the client's address.
async fn connect(
    g: &Gateways,
    ep: &super::snapshot::EndpointSnap,
    client: IpAddr,
) -> Option<(TcpStream, Arc<super::metrics::TargetState>)> {
    let key = key_hash(client.to_string().as_bytes());
    let now = g.store.now();
    let mut tried: Vec<usize> = ep
        .targets
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.state.usable(now, t.job))
        .map(|(i, _)| i)
        .collect();
    for _ in 0..ATTEMPTS {
        let i = ep.pick(key, &tried)?;
        tried.push(i);
        let t = &ep.targets[i];
        match tokio::time::timeout(CONNECT, TcpStream::connect(&t.address)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                t.state.requests.fetch_add(1, Ordering::Relaxed);
                return Some((s, t.state.clone()));
            }
            _ => {
                t.state.failures.fetch_add(1, Ordering::Relaxed);
                t.state
                    .ejected_until
                    .store(now.saturating_add(EJECT_MS), Ordering::Relaxed);
                tracing::warn!(endpoint = %ep.name, target = %t.address, "gateway: instance refused a TCP connection; ejected");
            }
        }
    }
    None
}

/// Copies both ways until either side closes: bytes client → instance, instance → client.
async fn join<C>(mut client: C, mut upstream: TcpStream) -> (u64, u64)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    tokio::io::copy_bidirectional(&mut client, &mut upstream)
        .await
        .unwrap_or((0, 0))
}

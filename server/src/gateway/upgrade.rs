//! WebSocket (and any other HTTP/1.1 `Upgrade`) requests through the gateway. The request is
//! authorized and balanced like any other; its `Connection: upgrade` and `Upgrade` headers
//! are passed on (they are hop-by-hop otherwise), and when the instance answers
//! `101 Switching Protocols` both connections are handed over and joined byte for byte until
//! either side closes. The tunnel counts as a stream in flight on its endpoint and instance
//! (the balancer's load) while it lasts, and its bytes are metered both ways. A route switch
//! or a stopped listener leaves an open tunnel alone.
//!
//! HTTP/2 clients use extended CONNECT (RFC 8441) for WebSockets, which is not offered: over
//! TLS a WebSocket client negotiates HTTP/1.1.

use std::sync::atomic::Ordering;

use axum::http::{header, HeaderMap, HeaderValue};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::metrics::Inflight;

/// The protocol asked for (`Upgrade`'s value) when the request asks to switch protocols.
pub(super) fn requested(headers: &HeaderMap) -> Option<HeaderValue> {
    let connection_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    if !connection_upgrade {
        return None;
    }
    headers.get(header::UPGRADE).cloned()
}

/// Puts back the headers that ask the instance to switch protocols.
pub(super) fn ask(sent: &mut HeaderMap, protocol: HeaderValue) {
    sent.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    sent.insert(header::UPGRADE, protocol);
}

/// Joins the client's and the instance's upgraded connections once both are handed over;
/// `guard` holds the stream's place in flight until the tunnel closes.
pub(super) fn join(client: OnUpgrade, upstream: OnUpgrade, guard: Inflight) {
    tokio::spawn(async move {
        let (client, upstream) = match tokio::try_join!(client, upstream) {
            Ok(both) => both,
            Err(e) => {
                tracing::debug!(error = %e, "gateway: an upgrade was not completed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut upstream = TokioIo::new(upstream);
        let (to_upstream, to_client) =
            match tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
                Ok(counts) => counts,
                Err(e) => {
                    tracing::debug!(error = %e, "gateway: an upgraded connection ended");
                    (0, 0)
                }
            };
        let stats = &guard.endpoint;
        stats.bytes_out.fetch_add(to_client, Ordering::Relaxed);
        stats.bytes_in.fetch_add(to_upstream, Ordering::Relaxed);
        drop(guard);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn an_upgrade_needs_both_headers() {
        let ws = headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
        ]);
        assert_eq!(requested(&ws).unwrap(), "websocket");
        assert!(requested(&headers(&[("upgrade", "websocket")])).is_none());
        assert!(requested(&headers(&[("connection", "upgrade")])).is_none());
        assert!(requested(&headers(&[("connection", "keep-alive")])).is_none());
    }
}

//! WebSocket (and any other HTTP/1.1 `Upgrade`) requests through the gateway. The request is
//! authorized and balanced like any other; its `Connection: upgrade` and `Upgrade` headers
//! are passed on (they are hop-by-hop otherwise), and when the instance answers
//! `101 Switching Protocols` both connections are handed over and joined byte for byte until
//! either side closes. The tunnel counts as a stream in flight on its endpoint and instance
//! (the balancer's load) while it lasts, and its bytes are metered both ways. A route switch
//! or a stopped listener leaves an open tunnel alone.
//!
//! HTTP/2 clients ask by extended CONNECT (RFC 8441: `CONNECT` with a `:protocol`, offered
//! in the listener's SETTINGS): the instance is asked the HTTP/1.1 way (`GET` with `Upgrade`,
//! and for a WebSocket a `Sec-WebSocket-Key` of the gateway's own, HTTP/2 having none), and
//! its `101` becomes the client's `200`, after which the HTTP/2 stream and the instance's
//! connection are joined the same way.

use std::sync::atomic::Ordering;

use axum::extract::Request;
use axum::http::response::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use base64::Engine;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::metrics::Inflight;

/// A request to switch protocols: what it asks for and the client's side, handed over once
/// the instance agrees.
pub(super) struct Asked {
    /// The protocol (`Upgrade`'s value, or HTTP/2's `:protocol`).
    pub(super) protocol: HeaderValue,
    pub(super) client: OnUpgrade,
    /// Asked by HTTP/2's extended CONNECT (RFC 8441), not HTTP/1.1's `Upgrade`.
    pub(super) extended_connect: bool,
}

/// What `req` asks to switch to, if it does (HTTP/1.1 `Upgrade` or HTTP/2 extended CONNECT).
pub(super) fn asked(req: &mut Request) -> Option<Asked> {
    let (protocol, extended_connect) = match extended_connect(req) {
        Some(p) => (p, true),
        None => (requested(req.headers())?, false),
    };
    Some(Asked {
        protocol,
        client: hyper::upgrade::on(req),
        extended_connect,
    })
}

/// HTTP/2's extended CONNECT: the `:protocol` asked for.
fn extended_connect(req: &Request) -> Option<HeaderValue> {
    if req.method() != Method::CONNECT {
        return None;
    }
    let p = req.extensions().get::<hyper::ext::Protocol>()?;
    HeaderValue::from_str(p.as_str()).ok()
}

/// The HTTP/1.1 request line's method for what was asked (`GET` for extended CONNECT).
pub(super) fn method(asked: &Asked, method: &Method) -> Method {
    if asked.extended_connect {
        Method::GET
    } else {
        method.clone()
    }
}

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

/// Puts back the headers that ask the instance to switch protocols. For an HTTP/2 client's
/// WebSocket, the HTTP/1.1 handshake's key and version too (RFC 6455 section 4.1).
pub(super) fn ask(sent: &mut HeaderMap, asked: &Asked) {
    sent.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    sent.insert(header::UPGRADE, asked.protocol.clone());
    if asked.extended_connect && asked.protocol.as_bytes().eq_ignore_ascii_case(b"websocket") {
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 16]>());
        if let Ok(key) = HeaderValue::from_str(&key) {
            sent.insert(header::SEC_WEBSOCKET_KEY, key);
        }
        sent.entry(header::SEC_WEBSOCKET_VERSION)
            .or_insert(HeaderValue::from_static("13"));
    }
}

/// The answer to the client once the instance switched protocols: the `101` as it is, or
/// for extended CONNECT a `200` without the HTTP/1.1 handshake's headers.
pub(super) fn agreed(asked: &Asked, rp: &mut Parts) {
    if asked.extended_connect {
        rp.status = StatusCode::OK;
        for h in [
            header::CONNECTION,
            header::UPGRADE,
            header::SEC_WEBSOCKET_ACCEPT,
            header::CONTENT_LENGTH,
        ] {
            rp.headers.remove(h);
        }
    }
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

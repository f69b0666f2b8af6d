//! The data path of one gateway listener through hyper (HTTP/2, WebSocket handshakes, and the
//! requests the HTTP/1.1 path [`super::h1`] hands over), and what both paths share: route by
//! host and path prefix, authenticate the gateway token and check `use` on the endpoint (from
//! the in-memory snapshot only), pick an instance by consistent hashing with bounded load on
//! the session key, and forward. Bodies stream both ways frame by frame (an SSE response
//! reaches the client chunk by chunk as the upstream writes it); a client that goes away drops
//! the upstream request with it. Errors are [`super::problem`]'s.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::uri::PathAndQuery;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use http_body::Frame;
use http_body_util::BodyExt;

use app::model::GatewayTokenKind;

use super::affinity::{key_hash, session_key, KeySource, MAX_BODY_SCAN};
use super::metrics::Inflight;
use super::problem::{
    Problem, BAD_BODY, FORBIDDEN, NO_INSTANCE, NO_ROUTE, TOKEN_EXPIRED, TOKEN_INVALID,
    TOKEN_MISSING, UNAVAILABLE, UPSTREAM_FAILED, UPSTREAM_TIMEOUT, UPSTREAM_UNREACHABLE,
};
use super::shared::{Gateways, EJECT_MS};
use super::snapshot::{EndpointSnap, GatewaySnap, Snapshot, TargetSnap};
use super::upgrade;
use super::upstream::{exchange, Lease, UpError};
use super::usage::Meter;
use crate::identity::secret::digest_into;

/// How long an upstream has to start its answer.
pub(super) const UPSTREAM_HEADERS_TIMEOUT: Duration = Duration::from_secs(300);
/// Instances tried for one request (only while nothing was sent upstream).
pub(super) const ATTEMPTS: usize = 3;
/// The header that carries a session key (besides an OpenAI-style body's `user`).
pub const SESSION_HEADER: &str = "x-session-id";

struct Ctx {
    shared: Arc<Gateways>,
    gateway_id: String,
}

pub(super) fn router(shared: Arc<Gateways>, gateway_id: String) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(Arc::new(Ctx { shared, gateway_id }))
}

/// The request's host, lowercase, without a port.
fn host_of(req: &Request) -> String {
    let h = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().host())
        .unwrap_or("");
    normalize_host(h).into_owned()
}

/// A `Host` value as routes name hosts: lowercase, without a port or a trailing dot.
pub(super) fn normalize_host(h: &str) -> std::borrow::Cow<'_, str> {
    let h = match h.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => h,
    };
    let h = h.trim_end_matches('.');
    if h.bytes().any(|b| b.is_ascii_uppercase()) {
        h.to_ascii_lowercase().into()
    } else {
        h.into()
    }
}

/// Checks the request's gateway token (its `Authorization` value) against the endpoint:
/// `Err` is the refusal.
pub(super) fn authorize(
    snap: &Snapshot,
    gw: &GatewaySnap,
    ep: &EndpointSnap,
    authorization: Option<&str>,
    now: i64,
) -> Result<(), Problem> {
    let secret = authorization
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(TOKEN_MISSING)?;
    // A token of another gateway (namespace) is as unknown here as a made-up one.
    let mut hex = [0u8; 64];
    let t = snap
        .tokens
        .get(digest_into(secret, &mut hex))
        .filter(|t| t.gateway_id == gw.id && t.tenant_id == gw.tenant_id)
        .ok_or(TOKEN_INVALID)?;
    if t.expires_at.is_some_and(|at| at <= now) {
        return Err(TOKEN_EXPIRED);
    }
    let user_ok = snap
        .users
        .get(&t.user_id)
        .is_some_and(|u| !u.disabled && u.tenant_id == gw.tenant_id);
    if !user_ok {
        return Err(TOKEN_INVALID);
    }
    let named = t.kind == GatewayTokenKind::User || t.endpoints.contains(&ep.id);
    if !named || !snap.may_use(&t.user_id, ep) {
        return Err(FORBIDDEN);
    }
    Ok(())
}

/// Instances by index: skipped or tried (on the stack for the usual few).
pub(super) type Tried = smallvec::SmallVec<[usize; 8]>;

/// The instances not to pick now (down, not seen up yet, ejected), by index.
pub(super) fn skipped(ep: &EndpointSnap, now: i64) -> Tried {
    ep.targets
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.state.usable(now, t.job))
        .map(|(i, _)| i)
        .collect()
}

/// An instance refused the connection: counted as a failure and skipped for a while.
pub(super) fn eject(ep: &EndpointSnap, target: &TargetSnap, now: i64) {
    let state = &target.state;
    state.failures.fetch_add(1, Ordering::Relaxed);
    state
        .ejected_until
        .store(now.saturating_add(EJECT_MS), Ordering::Relaxed);
    tracing::warn!(endpoint = %ep.name, target = %target.address, "gateway: instance refused the connection; ejected");
}

/// Headers that concern one connection, not the request (RFC 9110 section 7.6.1).
pub(super) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(&name.as_str())
}

/// Whether the body is small JSON worth reading for a session key (`user`, the prompt).
fn small_json(headers: &HeaderMap) -> bool {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let len = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    json && len.is_some_and(|n| n <= MAX_BODY_SCAN)
}

/// The request body: read whole when small (then it can be sent again to another instance
/// if the first refuses the connection), streamed otherwise.
enum Payload {
    Whole(Bytes),
    Stream(Option<Body>),
}

impl Payload {
    fn take(&mut self) -> Option<Body> {
        match self {
            Payload::Whole(b) => Some(Body::from(b.clone())),
            Payload::Stream(s) => s.take(),
        }
    }
}

async fn handle(
    State(ctx): State<Arc<Ctx>>,
    ConnectInfo(peer): super::listener::Peer,
    mut req: Request,
) -> Response {
    let g = &ctx.shared;
    let t0 = std::time::Instant::now();
    let snap = match g.current().await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "gateway: reading its configuration failed");
            return UNAVAILABLE.response();
        }
    };
    let Some(gw) = snap.gateways.get(&ctx.gateway_id) else {
        return NO_ROUTE.response();
    };
    let host = host_of(&req);
    let Some(ep) = gw
        .route(&host, req.uri().path())
        .and_then(|r| snap.endpoints.get(&r.endpoint_id))
    else {
        return NO_ROUTE.response();
    };
    let now = g.store.now();
    let stats = &ep.stats;
    if !ep.public {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(refused) = authorize(&snap, gw, ep, authorization, now) {
            stats.observe(refused.status.as_u16(), t0.elapsed());
            return refused.response();
        }
    }
    stats.inflight.fetch_add(1, Ordering::Relaxed);
    let guard = Inflight {
        endpoint: stats.clone(),
        target: None,
    };
    // A WebSocket handshake: the client's connection (or HTTP/2 stream) is handed over once
    // the instance switched protocols.
    let upgrade = upgrade::asked(&mut req);
    let resp = forward(g, ep, req, peer, &host, now, guard, upgrade).await;
    stats.observe(resp.status().as_u16(), t0.elapsed());
    resp
}

#[allow(clippy::too_many_arguments)]
async fn forward(
    g: &Gateways,
    ep: &EndpointSnap,
    req: Request,
    peer: SocketAddr,
    host: &str,
    now: i64,
    mut guard: Inflight,
    mut upgrade: Option<upgrade::Asked>,
) -> Response {
    let (parts, body) = req.into_parts();
    // Extended CONNECT's stream is the tunnel's, not a body for the instance's `GET`.
    let tunnel_only = upgrade.as_ref().is_some_and(|a| a.extended_connect);
    let mut payload = if http_body::Body::is_end_stream(&body) || tunnel_only {
        Payload::Whole(Bytes::new())
    } else if small_json(&parts.headers) {
        match http_body_util::Limited::new(body, MAX_BODY_SCAN)
            .collect()
            .await
        {
            Ok(b) => Payload::Whole(b.to_bytes()),
            Err(_) => return BAD_BODY.response(),
        }
    } else {
        // Counted as it streams through to the instance.
        let stats = ep.stats.clone();
        Payload::Stream(Some(Body::new(body.map_frame(move |f| {
            if let Some(d) = f.data_ref() {
                stats.bytes_in.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
            f
        }))))
    };
    if let Payload::Whole(b) = &payload {
        ep.stats
            .bytes_in
            .fetch_add(b.len() as u64, Ordering::Relaxed);
    }
    let scanned: &[u8] = match &payload {
        Payload::Whole(b) => b,
        Payload::Stream(_) => &[],
    };
    let header = parts
        .headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok());
    let session = session_of(header, scanned);
    let key = session.unwrap_or_else(rand::random::<u64>);
    // What is sent upstream: the client's headers but the gateway token, the host and those
    // of the connection, and who asked.
    let mut sent = parts.headers;
    for name in HOP_BY_HOP {
        sent.remove(*name);
    }
    sent.remove(header::AUTHORIZATION);
    sent.remove(header::HOST);
    if let Ok(v) = HeaderValue::from_str(&peer.ip().to_string()) {
        sent.append(HeaderName::from_static("x-forwarded-for"), v);
    }
    if let Ok(v) = HeaderValue::from_str(host) {
        sent.insert(HeaderName::from_static("x-forwarded-host"), v);
    }
    if let Some(asked) = &upgrade {
        upgrade::ask(&mut sent, asked);
    }
    let method = match &upgrade {
        Some(asked) => upgrade::method(asked, &parts.method),
        None => parts.method.clone(),
    };
    let mut tried = skipped(ep, now);
    let path_and_query = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    for _ in 0..ATTEMPTS.min(ep.targets.len().max(1)) {
        let Some(i) = ep.pick(key, &tried) else {
            break;
        };
        tried.push(i);
        let Some(body) = payload.take() else {
            break;
        };
        let target = &ep.targets[i];
        let state = target.state.clone();
        let Some(authority) = target.authority.clone() else {
            continue;
        };
        let mut up = axum::http::Request::builder()
            .method(method.clone())
            .uri(Uri::from(path_and_query.clone()))
            .body(body)
            .unwrap_or_default();
        // The last instance that may be tried takes the headers; earlier ones a copy.
        *up.headers_mut() = if tried.len() < ep.targets.len() {
            sent.clone()
        } else {
            std::mem::take(&mut sent)
        };
        state.inflight.fetch_add(1, Ordering::Relaxed);
        state.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = session {
            state.sessions.add(h);
        }
        guard.target = Some(state.clone());
        let sent = exchange(&g.client, &g.upstreams, upgrade.is_some(), &authority, up);
        match tokio::time::timeout(UPSTREAM_HEADERS_TIMEOUT, sent).await {
            Ok(Ok((mut resp, lease))) => {
                if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                    if let Some(asked) = upgrade.take() {
                        let upstream = hyper::upgrade::on(&mut resp);
                        let (mut rp, _) = resp.into_parts();
                        upgrade::agreed(&asked, &mut rp);
                        upgrade::join(asked.client, upstream, guard);
                        return Response::from_parts(rp, Body::empty());
                    }
                }
                let (mut rp, incoming) = resp.into_parts();
                let hop: Vec<HeaderName> = rp
                    .headers
                    .keys()
                    .filter(|k| hop_by_hop(k))
                    .cloned()
                    .collect();
                for k in hop {
                    rp.headers.remove(k);
                }
                let meter = rp
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(Meter::for_content_type);
                let mut tracked = Tracked {
                    inner: incoming,
                    guard,
                    meter,
                    lease,
                };
                // An empty body (a 204, say) is never polled.
                tracked.settle(false);
                let body = Body::new(tracked);
                return Response::from_parts(rp, body);
            }
            Ok(Err(UpError::Connect)) => {
                if let Some(t) = guard.target.take() {
                    t.inflight.fetch_sub(1, Ordering::Relaxed);
                }
                eject(ep, target, now);
                continue;
            }
            Ok(Err(e)) => {
                state.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(endpoint = %ep.name, target = %target.address, error = %e, "gateway: upstream failed");
                return UPSTREAM_FAILED.response();
            }
            Err(_) => {
                state.failures.fetch_add(1, Ordering::Relaxed);
                return UPSTREAM_TIMEOUT.response();
            }
        }
    }
    none_answered(ep, &tried).response()
}

/// The hash of a request's session key: its `x-session-id`, else the `user` of an
/// OpenAI-style JSON body, else the start of its prompt (`body`: a small JSON body read
/// whole, else empty).
pub(super) fn session_of(header: Option<&str>, body: &[u8]) -> Option<u64> {
    // The header first, read here as `session_key` would (trimmed, not blank): nothing to
    // build for it on each request. Then the body's sources.
    if let Some(v) = header.map(str::trim).filter(|v| !v.is_empty()) {
        return Some(key_hash(v.as_bytes()));
    }
    if body.is_empty() {
        return None;
    }
    session_key(
        &[KeySource::JsonUser, KeySource::PromptPrefix(256)],
        &[],
        body,
    )
    .map(|k| key_hash(&k))
}

/// The answer when no instance answered: there was none to try, or every one was tried.
pub(super) fn none_answered(ep: &EndpointSnap, tried: &[usize]) -> Problem {
    if ep.targets.is_empty() || tried.len() >= ep.targets.len() {
        NO_INSTANCE
    } else {
        UPSTREAM_UNREACHABLE
    }
}

/// The upstream's response body, passed on frame by frame, holding its [`Inflight`],
/// counting the bytes sent and the tokens the upstream reports, and driving the connection
/// it is read from (back among the idle ones once the body has ended).
struct Tracked {
    inner: hyper::body::Incoming,
    guard: Inflight,
    meter: Option<Meter>,
    lease: Option<Lease>,
}

impl Tracked {
    /// Once the body has `ended` (its end read) or reached its known length (after which it
    /// is not polled again), its connection may serve another request.
    fn settle(&mut self, ended: bool) {
        if ended || http_body::Body::is_end_stream(&self.inner) {
            if let Some(l) = self.lease.as_mut() {
                l.finished();
            }
        }
    }

    fn count_usage(&mut self) {
        if let Some(u) = self.meter.as_mut().and_then(Meter::finish) {
            let s = &self.guard.endpoint;
            s.prompt_tokens.fetch_add(u.prompt, Ordering::Relaxed);
            s.completion_tokens
                .fetch_add(u.completion, Ordering::Relaxed);
        }
        self.meter = None;
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.count_usage();
    }
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let mut polled = Pin::new(&mut this.inner).poll_frame(cx);
        if polled.is_pending() {
            // Nothing read yet: let the connection read, then look again.
            if let Some(l) = this.lease.as_mut() {
                l.drive(cx);
                polled = Pin::new(&mut this.inner).poll_frame(cx);
            }
        }
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.guard
                        .endpoint
                        .bytes_out
                        .fetch_add(data.len() as u64, Ordering::Relaxed);
                    if let Some(m) = this.meter.as_mut() {
                        m.feed(data);
                    }
                }
                this.settle(false);
            }
            Poll::Ready(None) => {
                this.count_usage();
                this.settle(true);
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::session_of;

    #[test]
    fn a_session_comes_from_the_header_else_the_body() {
        let chat = br#"{"user":"u-7","messages":[{"role":"user","content":"hi"}]}"#;
        // The header wins over the body, trimmed, whatever the body says.
        let by_header = session_of(Some(" s-1 "), b"");
        assert!(by_header.is_some());
        assert_eq!(session_of(Some("s-1"), chat), by_header);
        assert_ne!(session_of(Some("s-2"), b""), by_header);
        // A blank header is no key: the body's `user` is.
        let by_user = session_of(None, chat);
        assert!(by_user.is_some());
        assert_eq!(session_of(Some("  "), chat), by_user);
        assert_eq!(
            session_of(None, br#"{"user":"u-7","prompt":"other"}"#),
            by_user,
            "the same user, another prompt: the same instance"
        );
        // Without a user, the prompt's start; without anything, none.
        assert!(session_of(None, br#"{"prompt":"Once upon a time"}"#).is_some());
        assert_eq!(session_of(None, b""), None);
        assert_eq!(session_of(Some(""), b""), None);
    }
}

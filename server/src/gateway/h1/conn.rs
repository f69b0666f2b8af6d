//! One client connection on the HTTP/1.1 path: requests one after another, each answered by
//! an instance (or by the gateway's problem+json) before the next is read. While it waits
//! for an instance, and while the answer streams, it keeps reading the client: a client that
//! goes away drops the instance's connection at once (the instance sees the disconnect);
//! what a client sends ahead is kept for the next request.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::chunked::Chunked;
use super::head::{parse_request, parse_response, Framing, Parsed, RequestHead, ResponseHead};
use super::pool::connect;
use super::{Ctx, Rewind};
use crate::gateway::affinity::MAX_BODY_SCAN;
use crate::gateway::metrics::{EndpointStats, TargetState};
use crate::gateway::problem::{Problem, NO_ROUTE, UNAVAILABLE, UPSTREAM_FAILED, UPSTREAM_TIMEOUT};
use crate::gateway::proxy::{
    authorize, eject, none_answered, normalize_host, session_of, skipped, ATTEMPTS,
    UPSTREAM_HEADERS_TIMEOUT,
};
use crate::gateway::usage::Meter;

/// A request head longer than this goes to hyper (which allows larger ones).
const MAX_HEAD: usize = 16 * 1024;
/// An instance's response head longer than this is a failure.
const MAX_RESPONSE_HEAD: usize = 64 * 1024;
/// Bytes a client may send ahead while its request is answered (beyond, it is not read
/// until the answer is through).
const MAX_AHEAD: usize = 64 * 1024;
/// What is read at once.
const READ: usize = 8 * 1024;

/// A client connection: plain TCP or TLS.
pub(in crate::gateway) trait Io:
    AsyncRead + AsyncWrite + Unpin + Send + 'static
{
    /// Waits until a read would find bytes (or the end) without holding a buffer; returns
    /// at once where that cannot be known.
    fn readable(&self) -> impl Future<Output = ()> + Send;
}

impl Io for TcpStream {
    async fn readable(&self) {
        let _ = TcpStream::readable(self).await;
    }
}

impl Io for tokio_rustls::server::TlsStream<TcpStream> {
    // rustls may hold decrypted bytes already: the socket's readiness would not say so.
    async fn readable(&self) {}
}

// Returned once per request and taken apart at once: boxing the head would only add an
// allocation on the hot path.
#[allow(clippy::large_enum_variant)]
enum Next {
    Request(RequestHead, Bytes),
    /// Not for this path: the connection goes to hyper.
    Other,
    Closed,
}

/// Why an instance gave no answer's head.
enum Ask {
    /// No connection could be made: another instance may be tried.
    Connect,
    /// Closed before a byte of the answer (a reused connection: sent again on a new one).
    Closed,
    Failed,
    ClientGone,
}

struct Conn<T> {
    io: T,
    /// What the client sent that is not handled yet (empty, without capacity, when idle).
    buf: BytesMut,
    client_ip: String,
    ctx: Arc<Ctx>,
}

/// Requests in flight to an endpoint and an instance, counted down when dropped.
struct Counted<'a> {
    endpoint: &'a EndpointStats,
    target: Option<&'a TargetState>,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.endpoint.inflight.fetch_sub(1, Ordering::Relaxed);
        if let Some(t) = self.target {
            t.inflight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Serves a client connection until it closes, or until `closing` is set (once the request
/// in flight, if any, is answered).
pub(in crate::gateway) async fn serve<T: Io>(
    io: T,
    peer: SocketAddr,
    ctx: Arc<Ctx>,
    mut closing: watch::Receiver<bool>,
) {
    let mut c = Conn {
        io,
        buf: BytesMut::new(),
        client_ip: peer.ip().to_string(),
        ctx,
    };
    loop {
        match c.next_request(&mut closing).await {
            Next::Request(head, body) => {
                // Boxed: an idle connection's task stays small.
                let keep = Box::pin(c.exchange(head, body)).await;
                if !keep || *closing.borrow() {
                    let _ = c.io.shutdown().await;
                    return;
                }
            }
            Next::Other => {
                let Conn { io, buf, ctx, .. } = c;
                let io = Rewind {
                    read: buf.freeze(),
                    io,
                };
                let app = ctx.app.clone();
                let (request, idle) = (ctx.gateways.request_timeout, ctx.gateways.idle_timeout);
                drop(ctx);
                Box::pin(crate::gateway::listener::serve_hyper(
                    io, peer, app, request, idle, closing,
                ))
                .await;
                return;
            }
            Next::Closed => return,
        }
    }
}

impl<T: Io> Conn<T> {
    /// The next request whole (head and body), or why there is none: the client closed,
    /// the listener is closing, the connection sat idle for the gateway's idle timeout, or
    /// a begun request did not arrive within its request timeout (nothing is answered then,
    /// as nginx does).
    async fn next_request(&mut self, closing: &mut watch::Receiver<bool>) -> Next {
        // Set when a read finds the request incomplete: the rest must come by then.
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            if !self.buf.is_empty() {
                match parse_request(&self.buf) {
                    Parsed::Head { len, meta } => {
                        let need = len + meta.content_length;
                        if self.buf.len() >= need {
                            let bytes = self.buf.split_to(len).freeze();
                            let body = self.buf.split_to(meta.content_length).freeze();
                            if self.buf.is_empty() {
                                self.buf = BytesMut::new();
                            }
                            return Next::Request(RequestHead::new(bytes, meta), body);
                        }
                        self.buf.reserve(need - self.buf.len());
                    }
                    Parsed::Partial if self.buf.len() > MAX_HEAD => return Next::Other,
                    Parsed::Partial => {}
                    Parsed::Other => return Next::Other,
                }
            } else {
                // Idle: wait for the next request without a buffer, or stop.
                if *closing.borrow() {
                    return Next::Closed;
                }
                // Registered with the timer only if the first poll finds nothing to read.
                let mut idle = std::pin::pin!(tokio::time::sleep(self.ctx.gateways.idle_timeout));
                tokio::select! {
                    biased;
                    _ = self.io.readable() => {}
                    _ = closing.changed() => return Next::Closed,
                    _ = &mut idle => return Next::Closed,
                }
                self.buf.reserve(READ);
                // TLS says readable at once: its read is where the wait is.
                let read = tokio::select! {
                    biased;
                    r = self.io.read_buf(&mut self.buf) => r,
                    _ = closing.changed() => return Next::Closed,
                    _ = &mut idle => return Next::Closed,
                };
                match read {
                    Ok(0) | Err(_) => return Next::Closed,
                    Ok(_) => continue,
                }
            }
            let until = *deadline.get_or_insert_with(|| {
                tokio::time::Instant::now() + self.ctx.gateways.request_timeout
            });
            match tokio::time::timeout_at(until, self.io.read_buf(&mut self.buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return Next::Closed,
                Ok(Ok(_)) => {}
            }
        }
    }

    /// Answers one request; whether the connection may serve another.
    async fn exchange(&mut self, head: RequestHead, body: Bytes) -> bool {
        let t0 = Instant::now();
        let snap = match self.ctx.gateways.current().await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "gateway: reading its configuration failed");
                return self.answer(&UNAVAILABLE, &head).await;
            }
        };
        let Some(gw) = snap.gateways.get(&self.ctx.gateway_id) else {
            return self.answer(&NO_ROUTE, &head).await;
        };
        let host = normalize_host(head.host());
        let Some(ep) = gw
            .route(&host, head.path())
            .and_then(|r| snap.endpoints.get(&r.endpoint_id))
        else {
            return self.answer(&NO_ROUTE, &head).await;
        };
        let now = self.ctx.gateways.store.now();
        let stats = &ep.stats;
        if !ep.public {
            if let Err(p) = authorize(&snap, gw, ep, head.authorization(), now) {
                stats.observe(p.status.as_u16(), t0.elapsed());
                return self.answer(&p, &head).await;
            }
        }
        stats.inflight.fetch_add(1, Ordering::Relaxed);
        let mut guard = Counted {
            endpoint: stats,
            target: None,
        };
        if !body.is_empty() {
            stats
                .bytes_in
                .fetch_add(body.len() as u64, Ordering::Relaxed);
        }
        let json = head.content_type().is_some_and(|v| v.contains("json"));
        let scanned: &[u8] = if json && body.len() <= MAX_BODY_SCAN {
            &body
        } else {
            &[]
        };
        let session = session_of(head.session(), scanned);
        let key = session.unwrap_or_else(rand::random::<u64>);
        // The head for the instance, to which each attempt adds its `Host` and the body.
        let mut request = head.upstream(&self.client_ip, &host, 64 + body.len());
        let prefix = request.len();
        let mut tried = skipped(ep, now);
        let mut failed = None;
        for _ in 0..ATTEMPTS.min(ep.targets.len().max(1)) {
            let Some(i) = ep.pick(key, &tried) else {
                break;
            };
            tried.push(i);
            let target = &ep.targets[i];
            let Some(authority) = target.authority.as_ref() else {
                continue;
            };
            let state = &target.state;
            state.inflight.fetch_add(1, Ordering::Relaxed);
            state.requests.fetch_add(1, Ordering::Relaxed);
            if let Some(h) = session {
                state.sessions.add(h);
            }
            guard.target = Some(state);
            request.truncate(prefix);
            request.extend_from_slice(b"host: ");
            request.extend_from_slice(authority.as_str().as_bytes());
            request.extend_from_slice(b"\r\n\r\n");
            request.extend_from_slice(&body);
            let asked = self.ask(authority.as_str(), &request, &head);
            match tokio::time::timeout(UPSTREAM_HEADERS_TIMEOUT, asked).await {
                Ok(Ok((up, resp, ubuf))) => {
                    stats.observe(resp.status, t0.elapsed());
                    return self
                        .relay(up, resp, ubuf, authority.as_str(), guard, head.close())
                        .await;
                }
                Ok(Err(Ask::Connect)) => {
                    if let Some(t) = guard.target.take() {
                        t.inflight.fetch_sub(1, Ordering::Relaxed);
                    }
                    eject(ep, target, now);
                }
                Ok(Err(Ask::ClientGone)) => return false,
                Ok(Err(Ask::Failed | Ask::Closed)) => {
                    state.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(endpoint = %ep.name, target = %target.address, "gateway: upstream failed");
                    failed = Some(UPSTREAM_FAILED);
                    break;
                }
                Err(_) => {
                    state.failures.fetch_add(1, Ordering::Relaxed);
                    failed = Some(UPSTREAM_TIMEOUT);
                    break;
                }
            }
        }
        let p = failed.unwrap_or_else(|| none_answered(ep, &tried));
        stats.observe(p.status.as_u16(), t0.elapsed());
        drop(guard);
        self.answer(&p, &head).await
    }

    /// Sends `request` to the instance at `authority` (an idle connection first, then a
    /// new one) and reads the head of its answer.
    async fn ask(
        &mut self,
        authority: &str,
        request: &[u8],
        head: &RequestHead,
    ) -> Result<(TcpStream, ResponseHead, BytesMut), Ask> {
        let mut reused = self.ctx.gateways.h1_upstreams.checkout(authority);
        loop {
            let fresh = reused.is_none();
            let mut up = match reused.take() {
                Some(s) => s,
                None => connect(authority).await.ok_or(Ask::Connect)?,
            };
            if up.write_all(request).await.is_err() {
                // Nothing of it was taken by a closed connection: a new one may take it.
                if fresh {
                    return Err(Ask::Failed);
                }
                continue;
            }
            let mut ubuf = BytesMut::with_capacity(READ);
            match self
                .response_head(&mut up, &mut ubuf, head.method() == b"HEAD")
                .await
            {
                Ok(resp) => return Ok((up, resp, ubuf)),
                // A reused connection the instance closed as the request went out.
                Err(Ask::Closed) if !fresh && head.idempotent() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the instance's answer's head (informational answers skipped), watching the
    /// client meanwhile.
    async fn response_head(
        &mut self,
        up: &mut TcpStream,
        ubuf: &mut BytesMut,
        head_request: bool,
    ) -> Result<ResponseHead, Ask> {
        // Whether the instance sent anything (an informational answer counts: it has the
        // request, which is then never sent again).
        let mut heard = false;
        loop {
            if !ubuf.is_empty() {
                match parse_response(ubuf, head_request) {
                    Ok(Some(r)) if r.status == 101 => return Err(Ask::Failed),
                    Ok(Some(r)) if (100..200).contains(&r.status) => {
                        ubuf.advance(r.len);
                        continue;
                    }
                    Ok(Some(r)) => return Ok(r),
                    Ok(None) if ubuf.len() > MAX_RESPONSE_HEAD => return Err(Ask::Failed),
                    Ok(None) => {}
                    Err(_) => return Err(Ask::Failed),
                }
            }
            let watch = self.buf.len() < MAX_AHEAD;
            tokio::select! {
                biased;
                r = up.read_buf(ubuf) => match r {
                    Ok(0) | Err(_) if !heard => return Err(Ask::Closed),
                    Ok(0) | Err(_) => return Err(Ask::Failed),
                    Ok(_) => heard = true,
                },
                r = self.io.read_buf(&mut self.buf), if watch => match r {
                    Ok(0) | Err(_) => return Err(Ask::ClientGone),
                    Ok(_) => {}
                },
            }
        }
    }

    /// Passes the answer on: its head, then its body as it arrives. Whether the client's
    /// connection may serve another request.
    async fn relay(
        &mut self,
        mut up: TcpStream,
        resp: ResponseHead,
        mut ubuf: BytesMut,
        authority: &str,
        guard: Counted<'_>,
        client_close: bool,
    ) -> bool {
        let stats = guard.endpoint;
        // Released before the body's last bytes go out: a client that sends its next request
        // as soon as it has read this answer must find the instance no longer counted busy (or
        // the bounded load may move its session at low load).
        let mut guard = Some(guard);
        let mut meter = resp.meter;
        ubuf.advance(resp.len);
        let close = client_close || resp.framing == Framing::Close;
        let mut out = resp.client;
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        let mut left = match resp.framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        let mut chunked = Chunked::default();
        let mut body_bytes = 0u64;
        // `Some(clean)`: the body ended where its framing says (`clean`: nothing after it, so
        // the instance's connection may serve again); `None`: cut short.
        let ended: Option<bool> = loop {
            let mut sent = 0u64;
            let (take, done) = match resp.framing {
                Framing::Empty => (0, true),
                Framing::Length(_) => {
                    let n = left.min(ubuf.len() as u64);
                    left -= n;
                    let n = n as usize;
                    sent = n as u64;
                    if let Some(m) = meter.as_mut() {
                        m.feed(&ubuf[..n]);
                    }
                    (n, left == 0)
                }
                Framing::Chunked => {
                    let fed = chunked.feed(&ubuf, |d| {
                        sent += d.len() as u64;
                        if let Some(m) = meter.as_mut() {
                            m.feed(d);
                        }
                    });
                    match fed {
                        Ok(Some(n)) => (n, true),
                        Ok(None) => (ubuf.len(), false),
                        Err(_) => break None,
                    }
                }
                Framing::Close => {
                    sent = ubuf.len() as u64;
                    if let Some(m) = meter.as_mut() {
                        m.feed(&ubuf);
                    }
                    (ubuf.len(), false)
                }
            };
            body_bytes += sent;
            out.extend_from_slice(&ubuf[..take]);
            let extra = ubuf.len() > take;
            if done {
                guard = None;
            }
            if !out.is_empty() {
                let written =
                    self.io.write_all(&out).await.is_ok() && self.io.flush().await.is_ok();
                if !written {
                    break None;
                }
                out.clear();
            }
            ubuf.clear();
            if done {
                break Some(!extra);
            }
            let watch = self.buf.len() < MAX_AHEAD;
            tokio::select! {
                biased;
                r = up.read_buf(&mut ubuf) => match r {
                    Ok(0) | Err(_) if resp.framing == Framing::Close => break Some(false),
                    Ok(0) | Err(_) => break None,
                    Ok(_) => {}
                },
                r = self.io.read_buf(&mut self.buf), if watch => match r {
                    Ok(0) | Err(_) => break None,
                    Ok(_) => {}
                },
            }
        };
        if body_bytes > 0 {
            stats.bytes_out.fetch_add(body_bytes, Ordering::Relaxed);
        }
        if let Some(u) = meter.as_mut().and_then(Meter::finish) {
            stats.prompt_tokens.fetch_add(u.prompt, Ordering::Relaxed);
            stats
                .completion_tokens
                .fetch_add(u.completion, Ordering::Relaxed);
        }
        drop(guard);
        match ended {
            Some(clean) => {
                if clean && resp.keep_alive {
                    self.ctx.gateways.h1_upstreams.checkin(authority, up);
                }
                !close
            }
            // Cut short (the instance failed, or the client went away): both connections
            // close, so each side sees it.
            None => false,
        }
    }

    /// The gateway's own answer; whether the connection may serve another request.
    async fn answer(&mut self, p: &Problem, head: &RequestHead) -> bool {
        let body = p.body();
        let mut out = Vec::with_capacity(192 + body.len());
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(p.status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(p.status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\ncontent-type: application/problem+json\r\ncontent-length: ");
        out.extend_from_slice(body.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        if p.status == axum::http::StatusCode::UNAUTHORIZED {
            out.extend_from_slice(b"www-authenticate: Bearer\r\n");
        }
        if head.close() {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if head.method() != b"HEAD" {
            out.extend_from_slice(body.as_bytes());
        }
        self.io.write_all(&out).await.is_ok() && self.io.flush().await.is_ok() && !head.close()
    }
}

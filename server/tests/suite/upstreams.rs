//! Small real upstream servers for the gateway's tests, each on its own loopback port: an
//! echo that says which instance answered and what it was sent, an OpenAI-style chat
//! completion that streams its tokens as server-sent events with a pause between them (and
//! notices a client that goes away), and a failing one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use serde_json::{json, Value};

/// The pause between two streamed tokens.
pub const TOKEN_GAP: Duration = Duration::from_millis(200);
/// Tokens in a streamed completion.
pub const TOKENS: usize = 5;
/// How long `/v1/slow` takes.
pub const SLOW: Duration = Duration::from_millis(400);

#[derive(Default)]
pub struct Seen {
    pub requests: AtomicU64,
    /// Connections accepted (the gateway's health probes' too).
    pub connections: AtomicU64,
    /// A streamed completion ended early: its client went away.
    pub cancelled: AtomicBool,
    /// Slow requests being answered now, and the most at once.
    pub inflight: AtomicU64,
    pub max_inflight: AtomicU64,
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Stops it: its port refuses connections from then on.
    pub fn kill(&self) {
        self.task.abort();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Ctx {
    name: String,
    seen: Arc<Seen>,
}

async fn echo(State(c): State<Ctx>, req: Request) -> Response {
    c.seen.requests.fetch_add(1, Ordering::Relaxed);
    let h = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body = json!({
        "instance": c.name,
        "method": req.method().as_str(),
        "path": req.uri().to_string(),
        "authorization": h("authorization"),
        "session": h("x-session-id"),
        "forwarded_for": h("x-forwarded-for"),
    });
    axum::Json(body).into_response()
}

/// Sets `cancelled` when dropped before the last token was sent.
struct Watch {
    seen: Arc<Seen>,
    done: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.done {
            self.seen.cancelled.store(true, Ordering::SeqCst);
        }
    }
}

async fn chat(State(c): State<Ctx>, body: Bytes) -> Response {
    c.seen.requests.fetch_add(1, Ordering::Relaxed);
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    if req["stream"] != true {
        return axum::Json(json!({
            "id": "cmpl-1", "object": "chat.completion", "model": req["model"],
            "instance": c.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }))
        .into_response();
    }
    let watch = Watch {
        seen: c.seen.clone(),
        done: false,
    };
    let name = c.name.clone();
    let with_usage = req["stream_options"]["include_usage"] == true;
    let events = futures::stream::unfold((0usize, watch), move |(i, mut watch)| {
        let name = name.clone();
        async move {
            if i > TOKENS {
                return None;
            }
            if i > 0 {
                tokio::time::sleep(TOKEN_GAP).await;
            }
            let data = if i == TOKENS {
                watch.done = true;
                // The usage chunk vLLM sends last when asked, then the end.
                let usage = json!({"object": "chat.completion.chunk", "choices": [],
                    "usage": {"prompt_tokens": 7, "completion_tokens": TOKENS, "total_tokens": 7 + TOKENS}});
                if with_usage {
                    format!("data: {usage}\n\ndata: [DONE]\n\n")
                } else {
                    "data: [DONE]\n\n".to_string()
                }
            } else {
                let chunk = json!({"object": "chat.completion.chunk", "instance": name,
                    "choices": [{"index": 0, "delta": {"content": format!("tok{i} ")}}]});
                format!("data: {chunk}\n\n")
            };
            Some((
                Ok::<_, std::convert::Infallible>(Bytes::from(data)),
                (i + 1, watch),
            ))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap()
}

/// Answers after [`SLOW`], counting how many it answers at once.
async fn slow(State(c): State<Ctx>) -> Response {
    c.seen.requests.fetch_add(1, Ordering::Relaxed);
    let now = c.seen.inflight.fetch_add(1, Ordering::SeqCst) + 1;
    c.seen.max_inflight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(SLOW).await;
    c.seen.inflight.fetch_sub(1, Ordering::SeqCst);
    axum::Json(json!({"instance": c.name})).into_response()
}

/// Reads the whole upload, then says how many bytes it got.
async fn files(State(c): State<Ctx>, body: Bytes) -> Response {
    c.seen.requests.fetch_add(1, Ordering::Relaxed);
    axum::Json(json!({"instance": c.name, "received": body.len()})).into_response()
}

async fn fail(State(c): State<Ctx>) -> Response {
    c.seen.requests.fetch_add(1, Ordering::Relaxed);
    (StatusCode::INTERNAL_SERVER_ERROR, "model crashed").into_response()
}

/// Starts an upstream instance named `name` on a free loopback port.
pub async fn start(name: &str) -> Upstream {
    start_with(name, true).await
}

/// [`start`], but each connection is closed after its first answer (`Connection: close`).
pub async fn start_closing(name: &str) -> Upstream {
    start_with(name, false).await
}

async fn start_with(name: &str, keep_alive: bool) -> Upstream {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/fail", any(fail))
        .route("/v1/slow", any(slow))
        .route("/v1/files", post(files))
        .fallback(echo)
        .with_state(Ctx {
            name: name.to_string(),
            seen: seen.clone(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Each connection is a task of this one's set, so killing the instance ends its open
    // (kept-alive) connections too, as a crashed process would.
    let counted = seen.clone();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            counted.connections.fetch_add(1, Ordering::Relaxed);
            let svc = hyper_util::service::TowerToHyperService::new(app.clone());
            conns.spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(keep_alive)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
            while conns.try_join_next().is_some() {}
        }
    });
    Upstream { addr, seen, task }
}

/// Starts a WebSocket instance named `name`: it answers each text message with
/// `"{name}: {message}"` and records the `Authorization` header of each handshake (the
/// gateway's token must not reach it) in `seen.requests` (handshakes) and the returned list.
pub async fn start_ws(name: &str) -> (Upstream, Arc<std::sync::Mutex<Vec<Option<String>>>>) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::handshake::server::{
        Request as WsRequest, Response as WsResponse,
    };
    use tokio_tungstenite::tungstenite::Message;
    let seen = Arc::new(Seen::default());
    let auth = Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (name, s, a) = (name.to_string(), seen.clone(), auth.clone());
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (name, s, a) = (name.clone(), s.clone(), a.clone());
            conns.spawn(async move {
                // tungstenite's callback type: its error is an HTTP response.
                #[allow(clippy::result_large_err)]
                let record = |req: &WsRequest, resp: WsResponse| {
                    let h = req.headers().get("authorization");
                    a.lock()
                        .unwrap()
                        .push(h.and_then(|v| v.to_str().ok()).map(str::to_string));
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, record).await else {
                    return;
                };
                s.requests.fetch_add(1, Ordering::Relaxed);
                while let Some(Ok(msg)) = ws.next().await {
                    match msg {
                        Message::Text(t) => {
                            let answer = format!("{name}: {}", t.as_str());
                            if ws.send(Message::text(answer)).await.is_err() {
                                return;
                            }
                        }
                        Message::Close(_) => return,
                        _ => {}
                    }
                }
            });
            while conns.try_join_next().is_some() {}
        }
    });
    (Upstream { addr, seen, task }, auth)
}

/// Starts a raw TCP instance named `name`: it greets each connection with `"{name}\n"`, then
/// echoes what it reads.
pub async fn start_tcp(name: &str) -> Upstream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let seen = Arc::new(Seen::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (greeting, s) = (format!("{name}\n"), seen.clone());
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            s.requests.fetch_add(1, Ordering::Relaxed);
            let greeting = greeting.clone();
            conns.spawn(async move {
                if stream.write_all(greeting.as_bytes()).await.is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
            while conns.try_join_next().is_some() {}
        }
    });
    Upstream { addr, seen, task }
}

/// Starts an instance that writes its answers byte for byte, with the framings a hand-made
/// server may use: `/v1/raw/chunked` (two chunks and a trailer), `/v1/raw/close` (no length:
/// the body ends with the connection), `/v1/raw/hints` (a 103 before the answer),
/// `/v1/raw/hint-then-close` (a 103, then the connection closes), any `HEAD` (a length and no
/// body); anything else gets `"{METHOD} {target} {body length}"`. Each
/// request head is counted in `seen.requests`.
pub async fn start_raw() -> Upstream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let seen = Arc::new(Seen::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let s = seen.clone();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            s.connections.fetch_add(1, Ordering::Relaxed);
            let s = s.clone();
            conns.spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: its head, then as many body bytes as it says.
                    let end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (n, v) = l.split_once(':')?;
                            n.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while buf.len() < end + length {
                        let mut chunk = [0u8; 4096];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + length);
                    s.requests.fetch_add(1, Ordering::Relaxed);
                    let mut first = head.lines().next().unwrap_or("").split(' ');
                    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
                    let (answer, close) = match (method, target) {
                        ("HEAD", _) => ("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n".to_string(), false),
                        (_, "/v1/raw/chunked") => ("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: t\r\n\r\n".to_string(), false),
                        (_, "/v1/raw/close") => ("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end".to_string(), true),
                        (_, "/v1/raw/hint-then-close") => ("HTTP/1.1 103 Early Hints\r\n\r\n".to_string(), true),
                        (_, "/v1/raw/hints") => ("HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_string(), false),
                        _ => {
                            let body = format!("{method} {target} {length}");
                            (format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len()), false)
                        }
                    };
                    if stream.write_all(answer.as_bytes()).await.is_err() || close {
                        return;
                    }
                }
            });
            while conns.try_join_next().is_some() {}
        }
    });
    Upstream { addr, seen, task }
}

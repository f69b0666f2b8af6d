//! The gateway's HTTP/1.1 as a client sees it on the wire, against an instance that writes
//! its answers by hand: each framing (chunked with a trailer, a length, no length, a `HEAD`'s
//! length without a body, a 103 before the answer) reaches the client intact and the
//! connection serves the next request; requests sent ahead in one write, or a byte at a time,
//! are each answered in order; a body too large to be read whole streams through to the
//! instance mid-connection; `Connection: close` is honoured; an idle connection is closed
//! when its gateway is deleted.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{ports, setup, Gw};
use crate::upstreams::{self, Upstream};

both_stores!(
    answers_keep_their_framing_and_the_connection_serves_the_next,
    requests_sent_ahead_or_in_pieces_are_each_answered,
    idle_and_slow_clients_are_let_go
);

async fn gateway(kind: Kind, up: &Upstream) -> (Gw, String) {
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[up]).await;
    let (token, _) = gw
        .token(&gw.member, &gw.prod, serde_json::json!({"name": "wire"}))
        .await;
    (gw, token)
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// A client connection written and read by hand.
struct Wire {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Wire {
    async fn open(gw: &Gw) -> Wire {
        let addr = gw.prod_url.trim_start_matches("http://").to_string();
        Wire {
            s: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    /// Reads more; false at the connection's end.
    async fn more(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), self.s.read(&mut chunk))
            .await
            .expect("the gateway answered within 10 s")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    async fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).to_string();
                self.buf.drain(..i + 2);
                return l;
            }
            assert!(self.more().await, "the connection ended within a line");
        }
    }

    async fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.more().await, "the connection ended within a body");
        }
        self.buf.drain(..n).collect()
    }

    /// One answer; `head_request`: it answers a `HEAD` (no body whatever it says).
    async fn answer(&mut self, head_request: bool) -> Answer {
        let status_line = self.line().await;
        assert!(status_line.starts_with("HTTP/1.1 "), "{status_line:?}");
        let status: u16 = status_line[9..12].parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let l = self.line().await;
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').expect("a header line");
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        let mut a = Answer {
            status,
            headers,
            body: Vec::new(),
        };
        if head_request {
            return a;
        }
        if a.header("transfer-encoding") == Some("chunked") {
            loop {
                let size = usize::from_str_radix(self.line().await.split(';').next().unwrap(), 16)
                    .expect("a chunk size");
                if size == 0 {
                    while !self.line().await.is_empty() {}
                    break;
                }
                let data = self.bytes(size).await;
                a.body.extend_from_slice(&data);
                assert_eq!(self.line().await, "", "a chunk ends with CRLF");
            }
        } else if let Some(n) = a.header("content-length") {
            a.body = self.bytes(n.parse().unwrap()).await;
        } else {
            while self.more().await {}
            a.body = std::mem::take(&mut self.buf);
        }
        a
    }

    /// Whether the gateway closes the connection within `d` (what it sends meanwhile is kept
    /// in `buf`).
    async fn ends_within(&mut self, d: Duration) -> bool {
        let until = tokio::time::Instant::now() + d;
        let mut chunk = [0u8; 4096];
        loop {
            match tokio::time::timeout_at(until, self.s.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return false,
            }
        }
    }

    /// Whether the gateway closes the connection (within 2 s, nothing more sent).
    async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 64];
        matches!(
            tokio::time::timeout(Duration::from_secs(2), self.s.read(&mut chunk)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

fn request(method: &str, target: &str, token: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {target} HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer {token}\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn answers_keep_their_framing_and_the_connection_serves_the_next(kind: Kind) {
    let up = upstreams::start_raw().await;
    let (gw, token) = gateway(kind, &up).await;
    let mut w = Wire::open(&gw).await;

    w.send(&request("GET", "/v1/raw/chunked", &token, "", ""))
        .await;
    let a = w.answer(false).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("transfer-encoding"),
        Some("chunked"),
        "{:?}",
        a.headers
    );
    assert_eq!(a.text(), "hello, world");

    w.send(&request("GET", "/v1/raw/hints", &token, "", ""))
        .await;
    let a = w.answer(false).await;
    assert_eq!(
        (a.status, a.text().as_str()),
        (200, "ok"),
        "the 103 is not passed on"
    );

    w.send(&request("HEAD", "/v1/raw/any", &token, "", ""))
        .await;
    let a = w.answer(true).await;
    assert_eq!((a.status, a.header("content-length")), (200, Some("5")));

    // Had the HEAD's answer carried a body, this answer would start with it.
    w.send(&request("POST", "/v1/echo?x=1", &token, "", "hello world"))
        .await;
    let a = w.answer(false).await;
    assert_eq!(a.text(), "POST /v1/echo?x=1 11");

    w.send(&request("GET", "/v1/raw/close", &token, "", ""))
        .await;
    let a = w.answer(false).await;
    assert_eq!(a.header("connection"), Some("close"), "{:?}", a.headers);
    assert_eq!(
        a.text(),
        "until the end",
        "the body ends with the connection"
    );
    assert_eq!(
        up.seen.requests.load(std::sync::atomic::Ordering::Relaxed),
        5
    );

    // An instance that took the request (its 103 says so) and then closed the connection:
    // a 502, and the request is not sent again, though it went out on a reused connection.
    let mut w = Wire::open(&gw).await;
    w.send(&request("GET", "/v1/raw/any", &token, "", "")).await;
    assert_eq!(w.answer(false).await.status, 200);
    w.send(&request("GET", "/v1/raw/hint-then-close", &token, "", ""))
        .await;
    let a = w.answer(false).await;
    assert_eq!(a.status, 502, "{}", a.text());
    assert!(a.text().contains("\"source\":\"upstream\""), "{}", a.text());
    assert_eq!(
        up.seen.requests.load(std::sync::atomic::Ordering::Relaxed),
        7,
        "the instance got the request once"
    );
    gw.app.finish().await;
}

async fn requests_sent_ahead_or_in_pieces_are_each_answered(kind: Kind) {
    let up = upstreams::start_raw().await;
    let (gw, token) = gateway(kind, &up).await;
    let mut w = Wire::open(&gw).await;

    // Three requests in one write, the last without a token: answered in order.
    let mut ahead = request("GET", "/v1/a", &token, "", "");
    ahead.extend(request("POST", "/v1/b", &token, "", "12345"));
    ahead.extend(b"GET /v1/c HTTP/1.1\r\nHost: gw.test\r\n\r\n");
    w.send(&ahead).await;
    assert_eq!(w.answer(false).await.text(), "GET /v1/a 0");
    assert_eq!(w.answer(false).await.text(), "POST /v1/b 5");
    let refused = w.answer(false).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer"));
    assert!(
        refused.text().contains("token-missing"),
        "{}",
        refused.text()
    );

    // A head a byte at a time, its body in two parts.
    let slow = request("POST", "/v1/pieces", &token, "", "0123456789");
    let (head, body) = slow.split_at(slow.len() - 10);
    for b in head {
        w.send(&[*b]).await;
    }
    w.send(&body[..4]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    w.send(&body[4..]).await;
    assert_eq!(w.answer(false).await.text(), "POST /v1/pieces 10");

    // A body too large to be read whole goes through hyper's path, on the same connection.
    let big = "x".repeat(70_000);
    w.send(&request("POST", "/v1/big", &token, "", &big)).await;
    assert_eq!(w.answer(false).await.text(), "POST /v1/big 70000");
    w.send(&request("GET", "/v1/after", &token, "", "")).await;
    assert_eq!(w.answer(false).await.text(), "GET /v1/after 0");

    // `Connection: close`: answered, then closed.
    let mut w = Wire::open(&gw).await;
    w.send(&request(
        "GET",
        "/v1/last",
        &token,
        "Connection: close\r\n",
        "",
    ))
    .await;
    let a = w.answer(false).await;
    assert_eq!(a.text(), "GET /v1/last 0");
    assert_eq!(a.header("connection"), Some("close"));
    assert!(w.closed().await, "the gateway closed the connection");

    let w = Wire::open(&gw).await;
    an_idle_connection_closes_with_its_gateway(&gw, &gw.prod, w.s, &token).await;
    gw.app.finish().await;
}

/// Slow and idle clients do not hold connections: a keep-alive connection with no request for
/// the idle timeout is closed, and so is one whose request head or body stops arriving for
/// the request timeout, on the gateway's own path and on hyper's (after a chunked request);
/// nothing is answered then. A client that keeps sending requests keeps its connection.
async fn idle_and_slow_clients_are_let_go(kind: Kind) {
    let up = upstreams::start_raw().await;
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| {
        c.gateway.ports = range;
        c.gateway.idle_timeout = Duration::from_millis(1500);
        c.gateway.request_timeout = Duration::from_millis(1000);
    });
    let gw = setup(app, &[&up]).await;
    let (token, _) = gw
        .token(&gw.member, &gw.prod, serde_json::json!({"name": "slow"}))
        .await;

    // A request every half second for 3 s, twice the idle timeout: one connection.
    let mut w = Wire::open(&gw).await;
    for i in 0..6 {
        w.send(&request("GET", &format!("/v1/r{i}"), &token, "", ""))
            .await;
        assert_eq!(w.answer(false).await.text(), format!("GET /v1/r{i} 0"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Then nothing: closed once idle for the idle timeout (1 s after the last sleep), not
    // sooner.
    let t = Instant::now();
    assert!(
        w.ends_within(Duration::from_secs(5)).await,
        "an idle keep-alive connection is closed"
    );
    let idle = t.elapsed();
    assert!(idle >= Duration::from_millis(700), "closed after {idle:?}");
    assert!(w.buf.is_empty(), "{:?}", String::from_utf8_lossy(&w.buf));

    // A head that stops halfway, and a body that stops halfway: closed, nothing answered.
    let stalled = [
        "GET /v1/models HTTP/1.1\r\nHost: gw.test\r\n".to_string(),
        format!("POST /v1/stalled HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer {token}\r\ncontent-length: 10\r\n\r\nhello"),
    ];
    for begun in &stalled {
        let mut w = Wire::open(&gw).await;
        w.send(begun.as_bytes()).await;
        let t = Instant::now();
        assert!(
            w.ends_within(Duration::from_secs(5)).await,
            "a stalled request's connection is closed: {begun:?}"
        );
        assert!(
            t.elapsed() >= Duration::from_millis(700),
            "{:?}",
            t.elapsed()
        );
        assert!(w.buf.is_empty(), "{:?}", String::from_utf8_lossy(&w.buf));
    }

    // On hyper's path (a chunked request is answered there), a stalled head as well.
    let mut w = Wire::open(&gw).await;
    w.send(format!("POST /v1/chunky HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n").as_bytes())
        .await;
    assert_eq!(w.answer(false).await.status, 200);
    w.send(b"GET /v1/models HTTP/1.1\r\nHost: gw.test\r\n")
        .await;
    assert!(
        w.ends_within(Duration::from_secs(5)).await,
        "hyper closes a stalled head's connection"
    );
    gw.app.finish().await;
}

/// On a client connection `s` to `gateway`: one request answered, then the gateway is
/// deleted; the connection, idle, is closed by the gateway within seconds.
pub(crate) async fn an_idle_connection_closes_with_its_gateway<S>(
    gw: &Gw,
    gateway: &str,
    mut s: S,
    token: &str,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    s.write_all(&request("GET", "/v1/models", token, "", ""))
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    // The answer's head and as much of its body as its length says.
    let complete = |got: &[u8]| {
        let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            return false;
        };
        let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        got.len() >= end + 4 + length
    };
    while !complete(&got) {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("answered")
            .unwrap();
        assert!(n > 0, "the connection ended before the answer");
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let r = gw
        .app
        .delete(&format!("/api/v1/gateways/{gateway}"), &gw.admin)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let ended = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk)).await;
    assert!(
        matches!(ended, Ok(Ok(0)) | Ok(Err(_))),
        "the idle connection was closed with its gateway: {ended:?}"
    );
}

//! HTTP/2 on a gateway's listener (h2c here; a TLS client that offers `h2` takes the same
//! path): a connection with no request in flight is closed once idle for the gateway's idle
//! timeout, as an HTTP/1.1 one is, while one whose answer is still streaming stays open
//! however long the stream takes and serves the next request.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{ports, setup};
use crate::upstreams::{self, TOKENS, TOKEN_GAP};

both_stores!(an_idle_http2_connection_is_let_go_but_not_a_streaming_one);

async fn an_idle_http2_connection_is_let_go_but_not_a_streaming_one(kind: Kind) {
    let up = upstreams::start("h2").await;
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    let idle = Duration::from_millis(600);
    app.reconfigure(|c| {
        c.gateway.ports = range;
        c.gateway.idle_timeout = idle;
    });
    let gw = setup(app, &[&up]).await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "h2"})).await;
    let port: u16 = gw.prod_url.rsplit(':').next().unwrap().parse().unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
        .await
        .unwrap();
    let ended = tokio::spawn(conn);
    let request = |method: &str, path: &str, body: String| {
        hyper::Request::builder()
            .method(method)
            .uri(format!("http://127.0.0.1:{port}{path}"))
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    };

    // A streamed completion that takes longer than the idle timeout arrives whole...
    let streaming = TOKEN_GAP * TOKENS as u32;
    assert!(streaming > idle * 3 / 2);
    let body = json!({"model": "m", "stream": true, "messages": []}).to_string();
    let resp = send
        .send_request(request("POST", "/v1/chat/completions", body))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&text);
    assert_eq!(text.matches("tok").count(), TOKENS, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // ...and the connection still takes the next request: it was not idle while it streamed.
    for i in 0..4 {
        let resp = send
            .send_request(request("GET", &format!("/v1/r{i}"), String::new()))
            .await
            .expect("the connection serves the next request");
        assert_eq!(resp.status(), 200);
        resp.into_body().collect().await.unwrap();
        tokio::time::sleep(idle / 2).await;
    }
    assert!(!ended.is_finished(), "closed while in use");

    // Then nothing: closed once idle for the idle timeout, not sooner.
    let t = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), ended).await;
    assert!(closed.is_ok(), "an idle HTTP/2 connection is closed");
    assert!(t.elapsed() >= idle / 3, "closed after {:?}", t.elapsed());
    gw.app.finish().await;
}

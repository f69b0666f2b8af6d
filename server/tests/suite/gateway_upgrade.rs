//! WebSocket through the gateway against a real WebSocket upstream: the handshake is
//! authorized like any request (no token: 401 before anything reaches the instance), the
//! connection is joined both ways once the instance switches protocols, the token stays at
//! the gateway, and the open socket counts as a stream in flight on the endpoint until it
//! closes. An HTTP/2 client opens its WebSocket by extended CONNECT (RFC 8441) and gets the same.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{metrics, ports, setup, value, Gw};
use crate::upstreams;

both_stores!(
    a_websocket_is_authorized_then_joined_both_ways,
    an_http2_websocket_is_joined_by_extended_connect
);

/// Opens a WebSocket to `url` (ws://) with the token (if any): the socket, or the refusal's
/// HTTP status.
async fn open(
    url: &str,
    token: Option<&str>,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    u16,
> {
    let mut req = url.into_client_request().unwrap();
    if let Some(t) = token {
        req.headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, resp)) => {
            assert_eq!(resp.status(), 101);
            Ok(ws)
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("the WebSocket handshake failed: {e}"),
    }
}

async fn a_websocket_is_authorized_then_joined_both_ways(kind: Kind) {
    let (up, auth) = upstreams::start_ws("ws-a").await;
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[&up]).await;
    let url = format!("{}/v1/realtime", gw.prod_url.replace("http://", "ws://"));

    assert_eq!(open(&url, None).await.err(), Some(401));
    assert_eq!(open(&url, Some("syg_made-up")).await.err(), Some(401));
    assert_eq!(
        up.seen.requests.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "a refused handshake reached the instance"
    );

    let (token, _) = gw
        .token(&gw.member, &gw.prod, json!({"name": "realtime"}))
        .await;
    let ws = open(&url, Some(&token)).await.expect("the handshake");
    talk_then_close(ws, &gw, "ws-a", &auth).await;
    gw.app.finish().await;
}

/// Echoes a few messages through the open socket (the instance `name` answers each), checks
/// the gateway token never reached the instance (`auth`: the `Authorization` each handshake
/// it saw carried) and that the socket is a stream in flight while open and not once closed.
async fn talk_then_close<S>(
    mut ws: tokio_tungstenite::WebSocketStream<S>,
    gw: &Gw,
    name: &str,
    auth: &std::sync::Mutex<Vec<Option<String>>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    for i in 0..3 {
        ws.send(Message::text(format!("hello {i}"))).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("an answer in time")
            .expect("the socket is open")
            .unwrap();
        assert_eq!(
            got.into_text().unwrap().as_str(),
            format!("{name}: hello {i}")
        );
    }
    assert_eq!(
        auth.lock().unwrap().as_slice(),
        &[None],
        "the gateway token reached the instance"
    );
    let in_flight = || async {
        let m = metrics(&gw.app).await;
        value(&m, "switchyard_gateway_in_flight", &gw.endpoint, "")
    };
    assert_eq!(in_flight().await, Some(1.0));
    ws.close(None).await.unwrap();
    drop(ws);
    let t0 = Instant::now();
    while in_flight().await != Some(0.0) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the closed socket stays in flight"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type H2Socket =
    tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// Opens a WebSocket over HTTP/2 (RFC 8441: `CONNECT` with `:protocol = websocket`, h2c on the
/// plain listener) to `path` with the token (if any): the socket, or the refusal's status.
async fn open_h2(port: u16, path: &str, token: Option<&str>) -> Result<H2Socket, u16> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake::<_, http_body_util::Empty<axum::body::Bytes>>(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    // A first plain request, answered once the listener's SETTINGS (which offer extended
    // CONNECT) are in.
    let first = hyper::Request::get(format!("http://127.0.0.1:{port}/v1/models"))
        .body(http_body_util::Empty::new())
        .unwrap();
    assert_eq!(send.send_request(first).await.unwrap().status(), 401);
    let mut req = hyper::Request::builder()
        .method("CONNECT")
        .uri(format!("http://127.0.0.1:{port}{path}"))
        .header("sec-websocket-version", "13");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let mut req = req.body(http_body_util::Empty::new()).unwrap();
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    let resp = send.send_request(req).await.unwrap();
    if resp.status() != 200 {
        return Err(resp.status().as_u16());
    }
    let upgraded = hyper::upgrade::on(resp).await.unwrap();
    Ok(tokio_tungstenite::WebSocketStream::from_raw_socket(
        TokioIo::new(upgraded),
        Role::Client,
        None,
    )
    .await)
}

async fn an_http2_websocket_is_joined_by_extended_connect(kind: Kind) {
    let (up, auth) = upstreams::start_ws("ws-h2").await;
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[&up]).await;
    let port: u16 = gw.prod_url.rsplit(':').next().unwrap().parse().unwrap();

    assert_eq!(open_h2(port, "/v1/realtime", None).await.err(), Some(401));
    assert_eq!(
        up.seen.requests.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "a refused handshake reached the instance"
    );
    let (token, _) = gw
        .token(&gw.member, &gw.prod, json!({"name": "realtime-h2"}))
        .await;
    // The instance speaks HTTP/1.1 only: it gets a WebSocket handshake of its own (its key
    // checked by the upstream's WebSocket library), the client a 200 and the stream.
    let ws = open_h2(port, "/v1/realtime", Some(&token))
        .await
        .expect("the extended CONNECT");
    talk_then_close(ws, &gw, "ws-h2", &auth).await;
    gw.app.finish().await;
}

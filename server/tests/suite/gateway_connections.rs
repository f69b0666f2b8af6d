//! The gateway's connections to an instance: kept alive and used again by the next request
//! (a client's twenty requests and three streamed completions in a row open one connection,
//! not twenty-three, besides the health probes), and never used again
//! once the instance has closed one (an instance that closes each connection after its answer
//! still answers every request).

use std::sync::atomic::Ordering;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{client, ports, setup, Gw};
use crate::upstreams::{self, Upstream};

both_stores!(
    connections_to_an_instance_are_used_again,
    connections_the_instance_closed_are_not_used_again
);

async fn gateway(kind: Kind, up: &Upstream) -> (Gw, String, String) {
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[up]).await;
    let (token, _) = gw
        .token(
            &gw.member,
            &gw.prod,
            serde_json::json!({"name": "connections"}),
        )
        .await;
    let url = format!("{}/v1/models", gw.prod_url);
    (gw, token, url)
}

/// `n` requests one after another; every one answered 200.
async fn in_a_row(url: &str, token: &str, n: usize) {
    let c = client();
    for i in 0..n {
        let r = c.get(url).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200, "request {i}");
        r.bytes().await.unwrap();
    }
}

async fn connections_to_an_instance_are_used_again(kind: Kind) {
    let up = upstreams::start("kept").await;
    let (gw, token, url) = gateway(kind, &up).await;
    let before = up.seen.connections.load(Ordering::Relaxed);
    let t0 = std::time::Instant::now();
    in_a_row(&url, &token, 20).await;
    // Streamed answers (chunked, no length): their end is read, then the connection is free.
    let c = client();
    let stream = serde_json::json!({"model": "llama", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    for i in 0..3 {
        let r = c
            .post(format!("{}/v1/chat/completions", gw.prod_url))
            .bearer_auth(&token)
            .json(&stream)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "stream {i}");
        assert!(r.text().await.unwrap().contains("[DONE]"), "stream {i}");
    }
    let opened = up.seen.connections.load(Ordering::Relaxed) - before;
    // One for the requests, besides the health probes (a bare connect every 2 s).
    let probes = t0.elapsed().as_secs() / 2 + 1;
    assert!(
        opened >= 1 && opened <= 1 + probes,
        "23 requests opened {opened} connections ({probes} probes at most)"
    );
    gw.app.finish().await;
}

async fn connections_the_instance_closed_are_not_used_again(kind: Kind) {
    let up = upstreams::start_closing("closing").await;
    let (gw, token, url) = gateway(kind, &up).await;
    let before = up.seen.connections.load(Ordering::Relaxed);
    in_a_row(&url, &token, 10).await;
    assert!(up.seen.connections.load(Ordering::Relaxed) - before >= 10);
    gw.app.finish().await;
}

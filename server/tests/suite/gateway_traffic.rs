//! An endpoint's traffic over time through a real gateway listener and upstream: what went
//! through (requests, the failing route's 5xx, bytes both ways, tokens, sessions per instance)
//! is in `GET /api/v1/endpoints/{id}/metrics` once sampled, and `/metrics` counts the bytes in;
//! the series is refused (404) to whoever may not see the endpoint, and a bad window is said.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{client, created, id, metrics, ports, setup, value};
use crate::upstreams;

both_stores!(an_endpoint_s_traffic_is_sampled_into_a_series);

/// The sum over the points of `f`.
fn sum(points: &[Value], f: impl Fn(&Value) -> u64) -> u64 {
    points.iter().map(f).sum()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

async fn an_endpoint_s_traffic_is_sampled_into_a_series(kind: Kind) {
    let up = upstreams::start("a").await;
    let mut app = TestApp::new(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[&up]).await;
    let metrics_path = format!("/api/v1/endpoints/{}/metrics", gw.endpoint);

    // Before any request: the series is there, and quiet.
    gw.app.state.gateways.sample_now().await;
    let r = gw.app.get(&metrics_path, &gw.member).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["window"], "1h");
    assert_eq!(r.body["sample_ms"], 10_000);
    let quiet = r.body["points"].as_array().unwrap();
    assert!(!quiet.is_empty(), "the sample is a point: {}", r.body);
    assert_eq!(sum(quiet, |p| n(&p["requests"])), 0);

    // A route to the upstream's failing path.
    created(
        &gw.app,
        &gw.admin,
        "/api/v1/routes",
        json!({"gateway_id": gw.prod, "path_prefix": "/fail", "endpoint_id": gw.endpoint}),
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let chat = format!("{}/v1/chat/completions", gw.prod_url);
    let body = json!({"model": "llama", "messages": [{"role": "user", "content": "hi"}]});
    let body_len = serde_json::to_vec(&body).unwrap().len() as u64;
    // Four completions in two sessions (3 prompt and 1 completion tokens each).
    for session in ["s1", "s2", "s1", "s2"] {
        let r = client()
            .post(&chat)
            .bearer_auth(&token)
            .header("x-session-id", session)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    // An upload streamed through (not JSON: not read whole), and no session key.
    let upload = vec![b'x'; 100_000];
    let r = client()
        .post(format!("{}/v1/files", gw.prod_url))
        .bearer_auth(&token)
        .header("content-type", "application/octet-stream")
        .body(upload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        got["received"],
        upload.len(),
        "the upload reached the upstream whole"
    );
    // Two answered 500 by the upstream: 5xx, yet the instance answered (no failure).
    for _ in 0..2 {
        let r = client()
            .get(format!("{}/fail", gw.prod_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 500);
        r.bytes().await.unwrap();
    }
    // One refused at the gateway: counted, 4xx.
    let r = client().get(&chat).send().await.unwrap();
    assert_eq!(r.status(), 401);
    gw.app.state.gateways.sample_now().await;

    for window in ["15m", "1h"] {
        let r = gw
            .app
            .get(&format!("{metrics_path}?window={window}"), &gw.member)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{window}: {}", r.text);
        assert_eq!(r.body["window"], window);
        assert_eq!(r.body["endpoint_id"], gw.endpoint.as_str());
        let points = r.body["points"].as_array().unwrap();
        let class = |c: usize| sum(points, |p| n(&p["by_class"][c]));
        assert_eq!(
            sum(points, |p| n(&p["requests"])),
            8,
            "{window}: {}",
            r.body
        );
        assert_eq!((class(1), class(3), class(4)), (5, 1, 2), "{}", r.body);
        let bytes_in = sum(points, |p| n(&p["bytes_in"]));
        assert!(
            bytes_in >= 4 * body_len + upload.len() as u64,
            "{window}: bytes in {bytes_in}"
        );
        assert!(sum(points, |p| n(&p["bytes_out"])) > 4 * 100);
        assert_eq!(sum(points, |p| n(&p["prompt_tokens"])), 12);
        assert_eq!(sum(points, |p| n(&p["completion_tokens"])), 4);
        let busy: Vec<&Value> = points.iter().filter(|p| n(&p["requests"]) > 0).collect();
        for p in &busy {
            assert!(p["ttfb_p50_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{p}");
            assert!(
                p["ttfb_p99_ms"].as_f64() >= p["ttfb_p50_ms"].as_f64(),
                "{p}"
            );
            let rate = p["error_rate"].as_f64().unwrap();
            let expected = n(&p["by_class"][4]) as f64 / n(&p["requests"]) as f64;
            assert!((rate - expected).abs() < 1e-9, "{p}");
        }
        // The instance: every request but the refused one, no failure, two sessions (the
        // upload and the failing calls carry no session key and do not count).
        let instance = |p: &Value| p["instances"][0].clone();
        assert!(points
            .iter()
            .all(|p| instance(p)["address"] == up.address().as_str()));
        assert_eq!(sum(points, |p| n(&instance(p)["requests"])), 7);
        assert_eq!(sum(points, |p| n(&instance(p)["failures"])), 0);
        assert!(points.iter().all(|p| instance(p)["healthy"] == true));
        let sessions: Vec<u64> = busy.iter().map(|p| n(&instance(p)["sessions"])).collect();
        if busy.len() == 1 {
            assert_eq!(sessions, [2], "{window}");
        } else {
            // The sampler's own tick fell among the requests: each part saw one or two.
            assert!(sessions.iter().all(|s| (1..=2).contains(s)), "{sessions:?}");
        }
    }

    // The bytes in are in /metrics too.
    let m = metrics(&gw.app).await;
    let ep = gw.endpoint.as_str();
    let bytes_in = value(&m, "switchyard_gateway_bytes_in_total", ep, "").unwrap_or(0.0);
    assert!(bytes_in >= (4 * body_len + 100_000) as f64, "{m}");

    // A bad window is a problem document naming the field.
    let r = gw
        .app
        .get(&format!("{metrics_path}?window=2d"), &gw.member)
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
    assert_eq!(r.headers["content-type"], "application/problem+json");
    assert!(r.text.contains("window"), "{}", r.text);

    // Whoever may not see the endpoint gets 404, as for one that does not exist: the member
    // for an endpoint of a project no rule of theirs reaches, another organization's admin.
    let other = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/projects",
        json!({"name": "private"}),
    )
    .await);
    let hidden = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/endpoints",
        json!({"project_id": other, "name": "hidden", "targets": [up.address()]}),
    )
    .await);
    let hidden_path = format!("/api/v1/endpoints/{hidden}/metrics");
    assert_eq!(
        gw.app.get(&hidden_path, &gw.admin).await.status,
        StatusCode::OK
    );
    let r = gw.app.get(&hidden_path, &gw.member).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert_eq!(r.headers["content-type"], "application/problem+json");
    gw.app.seed_tenant("globex").await;
    let stranger = gw.app.login("globex", "admin").await;
    assert_eq!(
        gw.app.get(&metrics_path, &stranger).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        gw.app
            .get("/api/v1/endpoints/no-such-endpoint/metrics", &gw.member)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    gw.app.finish().await;
}

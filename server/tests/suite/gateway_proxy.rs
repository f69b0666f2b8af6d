//! The gateway's data path against real upstream servers (`upstreams.rs`) on real listeners:
//! tokens and namespaces, group access decided on the very next request, streamed responses
//! arriving token by token, a client that goes away, session affinity across a scale-out, an
//! instance that dies, and errors that say where they come from.

use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::upstreams::{self, Upstream, TOKENS, TOKEN_GAP};

both_stores!(
    tokens_namespaces_and_groups_decide_every_request,
    streamed_tokens_arrive_one_by_one_and_a_gone_client_cancels,
    a_route_switch_under_load_fails_no_request
);

/// Each app gets its own ports for its gateways' listeners (tests run side by side).
pub(crate) fn ports() -> std::ops::RangeInclusive<u16> {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base =
        19_000 + (std::process::id() % 50) as u16 * 200 + NEXT.fetch_add(4, Ordering::SeqCst);
    base..=base + 3
}

pub(crate) fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_default().to_string()
}

pub(crate) async fn created(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let r = app.post(path, token, body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{path}: {}", r.text);
    r.body
}

pub(crate) struct Gw {
    pub(crate) app: TestApp,
    pub(crate) admin: String,
    pub(crate) member: String,
    pub(crate) member_id: String,
    pub(crate) team: String,
    pub(crate) endpoint: String,
    pub(crate) prod: String,
    pub(crate) dev: String,
    pub(crate) prod_url: String,
    pub(crate) dev_url: String,
    pub(crate) _runtime: tokio::task::JoinHandle<()>,
}

/// acme: project `llm`, group `llm-users` (the member) with `use` on the project's endpoints,
/// endpoint `llama` on `targets`, gateways `prod` and `dev` each routing `/v1` to it.
pub(crate) async fn setup(app: TestApp, targets: &[&Upstream]) -> Gw {
    app.seed_tenant("acme").await;
    let admin = app.login("acme", "admin").await;
    let member = app.login("acme", "member").await;
    let member_id = app.user_id(&admin, "member").await;
    let project = id(&created(&app, &admin, "/api/v1/projects", json!({"name": "llm"})).await);
    let team = id(&created(&app, &admin, "/api/v1/groups", json!({"name": "llm-users"})).await);
    let add = app
        .post(
            &format!("/api/v1/groups/{team}/members"),
            &admin,
            json!({ "user_id": member_id }),
        )
        .await;
    assert_eq!(add.status, StatusCode::CREATED, "{}", add.text);
    created(&app, &admin, "/api/v1/access-rules", json!({"group_id": team, "permission": "use", "resource_kind": "endpoint", "project_id": project})).await;
    let addresses: Vec<String> = targets.iter().map(|u| u.address()).collect();
    let endpoint = id(&created(
        &app,
        &admin,
        "/api/v1/endpoints",
        json!({"project_id": project, "name": "llama", "targets": addresses}),
    )
    .await);
    let mut urls = Vec::new();
    let mut ids = Vec::new();
    for name in ["prod", "dev"] {
        let g = created(&app, &admin, "/api/v1/gateways", json!({ "name": name })).await;
        created(
            &app,
            &admin,
            "/api/v1/routes",
            json!({"gateway_id": id(&g), "path_prefix": "/v1", "endpoint_id": endpoint}),
        )
        .await;
        urls.push(format!("http://127.0.0.1:{}", g["port"]));
        ids.push(id(&g));
    }
    let runtime = switchyard::gateway::start(app.state.gateways.clone());
    let t0 = Instant::now();
    while app.state.gateways.listening().await.len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the listeners did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Gw {
        app,
        admin,
        member,
        member_id,
        team,
        endpoint,
        prod: ids[0].clone(),
        dev: ids[1].clone(),
        prod_url: urls[0].clone(),
        dev_url: urls[1].clone(),
        _runtime: runtime,
    }
}

impl Gw {
    pub(crate) async fn token(&self, who: &str, gateway: &str, body: Value) -> (String, String) {
        let b = created(
            &self.app,
            who,
            &format!("/api/v1/gateways/{gateway}/tokens"),
            body,
        )
        .await;
        (b["token"].as_str().unwrap().to_string(), id(&b))
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// GET `url` with the token (if any): status and JSON body.
pub(crate) async fn call(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut r = client().get(url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let problem = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").contains("problem+json"));
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if status >= 400 {
        assert!(problem, "an error is problem+json: {body}");
    }
    (status, body)
}

async fn tokens_namespaces_and_groups_decide_every_request(kind: Kind) {
    let up = upstreams::start("a").await;
    let mut app = TestApp::with_manual_clock(kind).await;
    let range = ports();
    app.reconfigure(|c| c.gateway.ports = range);
    let gw = setup(app, &[&up]).await;
    let url = format!("{}/v1/models", gw.prod_url);

    let (s, b) = call(&url, None).await;
    assert_eq!(s, 401, "{b}");
    assert!(
        b["type"]
            .as_str()
            .unwrap()
            .ends_with("/gateway/token-missing"),
        "{b}"
    );
    assert_eq!(b["source"], "gateway");
    assert_eq!(call(&url, Some("syg_made-up")).await.0, 401);

    let (token, token_id) = gw
        .token(&gw.member, &gw.prod, json!({"name": "laptop"}))
        .await;
    let (s, b) = call(&url, Some(&token)).await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["instance"], "a");
    assert_eq!(b["path"], "/v1/models");
    assert!(
        b["authorization"].is_null(),
        "the gateway token reaches the upstream: {b}"
    );

    // A token of the dev gateway is unknown to prod, and the other way round.
    let (dev_token, _) = gw.token(&gw.member, &gw.dev, json!({"name": "dev"})).await;
    assert_eq!(call(&url, Some(&dev_token)).await.0, 401);
    assert_eq!(
        call(&format!("{}/v1/models", gw.dev_url), Some(&dev_token))
            .await
            .0,
        200
    );
    assert_eq!(
        call(&format!("{}/v1/models", gw.dev_url), Some(&token))
            .await
            .0,
        401
    );

    // Out of the group: the very next request is refused; back in: allowed again.
    let r = gw
        .app
        .delete(
            &format!("/api/v1/groups/{}/members/{}", gw.team, gw.member_id),
            &gw.admin,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let (s, b) = call(&url, Some(&token)).await;
    assert_eq!(s, 403, "{b}");
    assert_eq!(b["source"], "gateway");
    created(
        &gw.app,
        &gw.admin,
        &format!("/api/v1/groups/{}/members", gw.team),
        json!({"user_id": gw.member_id}),
    )
    .await;
    assert_eq!(call(&url, Some(&token)).await.0, 200);

    // An endpoint token names what it may call.
    let (narrow, _) = gw
        .token(
            &gw.member,
            &gw.prod,
            json!({"name": "ci", "endpoint_ids": [gw.endpoint]}),
        )
        .await;
    assert_eq!(call(&url, Some(&narrow)).await.0, 200);

    // Revoked: refused on the next request.
    let r = gw
        .app
        .delete(&format!("/api/v1/gateway-tokens/{token_id}"), &gw.member)
        .await;
    assert!(r.status.is_success(), "{}", r.text);
    assert_eq!(call(&url, Some(&token)).await.0, 401);

    // Expired: a one-day token a day later.
    let (day, _) = gw
        .token(
            &gw.member,
            &gw.prod,
            json!({"name": "day", "expires_in_days": 1}),
        )
        .await;
    assert_eq!(call(&url, Some(&day)).await.0, 200);
    gw.app.advance_clock(24 * 3_600_000 + 1);
    let (s, b) = call(&url, Some(&day)).await;
    assert_eq!(s, 401, "{b}");
    assert!(
        b["type"]
            .as_str()
            .unwrap()
            .ends_with("/gateway/token-expired"),
        "{b}"
    );

    // No route: 404 from the gateway.
    let (s, b) = call(&format!("{}/v2/x", gw.prod_url), Some(&narrow)).await;
    assert_eq!(s, 404, "{b}");
    assert_eq!(b["source"], "gateway");
    gw.app.finish().await;
}

async fn streamed_tokens_arrive_one_by_one_and_a_gone_client_cancels(kind: Kind) {
    let up = upstreams::start("a").await;
    let range = ports();
    let gw = setup(
        TestApp::with_settings(kind, |c| c.gateway.ports = range).await,
        &[&up],
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let url = format!("{}/v1/chat/completions", gw.prod_url);
    let body =
        json!({"model": "llama", "stream": true, "messages": [{"role": "user", "content": "hi"}]});

    // An OpenAI-style streamed completion: each event arrives when the upstream sends it.
    let t0 = Instant::now();
    let mut resp = client()
        .post(&url)
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut arrivals = Vec::new();
    let mut text = String::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        arrivals.push(t0.elapsed());
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(text.matches("data: ").count(), TOKENS + 1, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
    let gaps: Vec<u128> = arrivals
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    let spaced = gaps
        .iter()
        .filter(|g| **g as f64 >= TOKEN_GAP.as_millis() as f64 * 0.6)
        .count();
    assert!(
        spaced >= TOKENS - 1,
        "the events came together, not one by one: gaps {gaps:?} ms"
    );

    // A client that reads the first event and goes away ends the upstream's stream.
    let mut resp = client()
        .post(&url)
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap();
    assert!(first.is_some());
    drop(resp);
    let t0 = Instant::now();
    while !up.seen.cancelled.load(Ordering::SeqCst) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the upstream kept streaming to a client that left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // What went through is in /metrics, per endpoint: a refused call too, and nothing in
    // flight once the streams are over.
    assert_eq!(
        client()
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let m = metrics(&gw.app).await;
    let ep = gw.endpoint.as_str();
    assert_eq!(
        value(&m, "switchyard_gateway_requests_total", ep, "class=\"1xx\""),
        Some(0.0)
    );
    assert_eq!(
        value(&m, "switchyard_gateway_requests_total", ep, "class=\"2xx\""),
        Some(2.0),
        "two streamed completions: {m}"
    );
    assert_eq!(
        value(&m, "switchyard_gateway_requests_total", ep, "class=\"4xx\""),
        Some(1.0)
    );
    assert!(value(&m, "switchyard_gateway_bytes_out_total", ep, "").unwrap_or(0.0) > 500.0);
    assert!(m.contains("endpoint=\"llama\""));
    // The streams did not ask for usage: no tokens counted yet.
    assert_eq!(
        value(&m, "switchyard_gateway_tokens_total", ep, "kind=\"prompt\""),
        Some(0.0)
    );
    let t0 = Instant::now();
    while value(
        &metrics(&gw.app).await,
        "switchyard_gateway_in_flight",
        ep,
        "",
    ) != Some(0.0)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "a stream stays counted in flight"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Usage reported by the upstream is counted: a streamed one (in its last event, asked for
    // with stream_options) and a plain JSON completion (3 prompt, 1 completion tokens).
    let mut asked = body.clone();
    asked["stream_options"] = json!({"include_usage": true});
    let r = client()
        .post(&url)
        .bearer_auth(&token)
        .json(&asked)
        .send()
        .await
        .unwrap();
    assert!(r.text().await.unwrap().contains("\"usage\""));
    let plain = json!({"model": "llama", "messages": [{"role": "user", "content": "hi"}]});
    let r = client()
        .post(&url)
        .bearer_auth(&token)
        .json(&plain)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    let m = metrics(&gw.app).await;
    assert_eq!(
        value(&m, "switchyard_gateway_tokens_total", ep, "kind=\"prompt\""),
        Some(10.0),
        "7 streamed + 3 plain: {m}"
    );
    assert_eq!(
        value(
            &m,
            "switchyard_gateway_tokens_total",
            ep,
            "kind=\"completion\""
        ),
        Some((TOKENS + 1) as f64)
    );

    // A deleted endpoint's series leave /metrics (the next call through the gateway reads
    // the configuration without it and finds no route).
    let r = gw
        .app
        .delete(&format!("/api/v1/endpoints/{ep}"), &gw.admin)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = client()
        .post(&url)
        .bearer_auth(&token)
        .json(&plain)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let m = metrics(&gw.app).await;
    assert!(
        !m.contains(&format!("endpoint_id=\"{ep}\"")),
        "a deleted endpoint stays in /metrics: {m}"
    );
    gw.app.finish().await;
}

/// `/metrics` as a client on this host reads it.
pub(crate) async fn metrics(app: &TestApp) -> String {
    app.raw(crate::common::from_ip(
        axum::http::Request::get("/metrics")
            .body(axum::body::Body::empty())
            .unwrap(),
        "127.0.0.1",
    ))
    .await
    .text
}

/// The value of the series `name` of endpoint `ep` whose labels also contain `label`.
pub(crate) fn value(m: &str, name: &str, ep: &str, label: &str) -> Option<f64> {
    m.lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{"))
                && l.contains(&format!("endpoint_id=\"{ep}\""))
                && l.contains(label)
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn a_route_switch_under_load_fails_no_request(kind: Kind) {
    let a = upstreams::start("a").await;
    let b = upstreams::start("b").await;
    let range = ports();
    let gw = setup(
        TestApp::with_settings(kind, |c| c.gateway.ports = range).await,
        &[&a],
    )
    .await;
    let project = gw
        .app
        .get(&format!("/api/v1/endpoints/{}", gw.endpoint), &gw.admin)
        .await
        .body["project_id"]
        .clone();
    let next = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/endpoints",
        json!({"project_id": project, "name": "llama-v2", "targets": [b.address()]}),
    )
    .await);
    let routes = gw
        .app
        .get(&format!("/api/v1/routes?gateway_id={}", gw.prod), &gw.admin)
        .await;
    let route = id(&routes.body.as_array().unwrap()[0]);
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let url = format!("{}/v1/models", gw.prod_url);

    // Eight clients call without pause while the route is switched to the new endpoint.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..8 {
        let (url, token, stop) = (url.clone(), token.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let c = client();
            let (mut ok, mut failed, mut seen) = (0u32, 0u32, std::collections::HashSet::new());
            while !stop.load(Ordering::SeqCst) {
                match c.get(&url).bearer_auth(&token).send().await {
                    Ok(r) if r.status() == 200 => {
                        let b: Value = r.json().await.unwrap_or_default();
                        seen.insert(b["instance"].as_str().unwrap_or("?").to_string());
                        ok += 1;
                    }
                    _ => failed += 1,
                }
            }
            (ok, failed, seen)
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = gw
        .app
        .patch(
            &format!("/api/v1/routes/{route}"),
            &gw.admin,
            json!({"endpoint_id": next}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Once switched, every request goes to the new endpoint.
    assert_eq!(call(&url, Some(&token)).await.1["instance"], "b");
    stop.store(true, Ordering::SeqCst);
    let (mut ok, mut failed) = (0, 0);
    let mut seen = std::collections::HashSet::new();
    for h in load {
        let (o, f, s) = h.await.unwrap();
        ok += o;
        failed += f;
        seen.extend(s);
    }
    eprintln!("route switch under load: {ok} requests answered, {failed} failed");
    assert_eq!(failed, 0);
    assert!(seen.contains("a") && seen.contains("b"), "{seen:?}");
    gw.app.finish().await;
}

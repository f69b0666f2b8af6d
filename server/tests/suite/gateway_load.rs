//! The balancer: sessions keep their instance across a scale-out, sessions that share one key
//! do not pile onto one instance past the bound (1.25 times the mean load), a dead instance is
//! skipped, and one that dies under load costs only the requests it was answering.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{call, client, created, ports, setup, Gw};
use crate::upstreams::{self, Upstream};

both_stores!(
    sessions_keep_their_instance_across_a_scale_out,
    a_dead_instance_is_skipped_and_errors_say_where_they_come_from,
    a_hot_session_spills_past_the_bound_not_onto_one_instance,
    an_instance_that_dies_under_load_costs_only_its_requests_in_flight
);

/// Instances `a`, `b` and `c` of the endpoint behind the gateways, and a member's token for
/// `prod`.
async fn three_instances(kind: Kind) -> ([Upstream; 3], Gw, String) {
    let ups = [
        upstreams::start("a").await,
        upstreams::start("b").await,
        upstreams::start("c").await,
    ];
    let range = ports();
    let gw = setup(
        TestApp::with_settings(kind, |c| c.gateway.ports = range).await,
        &[&ups[0], &ups[1], &ups[2]],
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    (ups, gw, token)
}

async fn a_hot_session_spills_past_the_bound_not_onto_one_instance(kind: Kind) {
    let (ups, gw, token) = three_instances(kind).await;
    let url = format!("{}/v1/slow", gw.prod_url);
    // 30 requests at once, all of one session: consistent hashing alone would send all 30 to
    // one instance; the bound is ceil(1.25 × (in flight + 1) / 3), at most 13 here.
    const N: u64 = 30;
    let calls: Vec<_> = (0..N)
        .map(|_| {
            let (url, token) = (url.clone(), token.clone());
            tokio::spawn(async move {
                let r = client()
                    .get(&url)
                    .bearer_auth(&token)
                    .header("x-session-id", "one-hot-session")
                    .send()
                    .await
                    .unwrap();
                r.status().as_u16()
            })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap(), 200);
    }
    let most: Vec<u64> = ups
        .iter()
        .map(|u| u.seen.max_inflight.load(Ordering::SeqCst))
        .collect();
    let total: u64 = ups
        .iter()
        .map(|u| u.seen.requests.load(Ordering::SeqCst))
        .sum();
    eprintln!("one hot session, {N} at once: most in flight per instance {most:?}");
    assert_eq!(total, N);
    let bound = (1.25 * N as f64 / 3.0).ceil() as u64 + 1;
    assert!(most.iter().all(|&m| m <= bound), "{most:?} over {bound}");
    assert!(
        most.iter().filter(|&&m| m > 0).count() >= 3,
        "the hot session spilled to every instance: {most:?}"
    );
    gw.app.finish().await;
}

async fn an_instance_that_dies_under_load_costs_only_its_requests_in_flight(kind: Kind) {
    let (ups, gw, token) = three_instances(kind).await;
    let url = format!("{}/v1/models", gw.prod_url);
    const CLIENTS: usize = 8;
    let stop = Arc::new(AtomicBool::new(false));
    let killed_at: Arc<std::sync::Mutex<Option<Instant>>> = Default::default();
    let mut load = Vec::new();
    for c in 0..CLIENTS {
        let (url, token, stop, killed_at) =
            (url.clone(), token.clone(), stop.clone(), killed_at.clone());
        load.push(tokio::spawn(async move {
            let http = client();
            let (mut ok, mut failed_late, mut failed) = (0u32, 0u32, 0u32);
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let r = http
                    .get(&url)
                    .bearer_auth(&token)
                    .header("x-session-id", format!("c{c}-{n}"))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == 200 => ok += 1,
                    _ => {
                        failed += 1;
                        // A failure well after the kill: the dead instance was not ejected.
                        let late = killed_at
                            .lock()
                            .unwrap()
                            .is_some_and(|t| t.elapsed() > Duration::from_millis(500));
                        if late {
                            failed_late += 1;
                        }
                    }
                }
            }
            (ok, failed, failed_late)
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    ups[1].kill();
    *killed_at.lock().unwrap() = Some(Instant::now());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::SeqCst);
    let (mut ok, mut failed, mut late) = (0, 0, 0);
    for h in load {
        let (o, f, l) = h.await.unwrap();
        ok += o;
        failed += f;
        late += l;
    }
    eprintln!("instance killed under load: {ok} answered, {failed} failed ({late} after 0.5 s)");
    assert!(
        failed as usize <= CLIENTS,
        "more failures ({failed}) than requests in flight ({CLIENTS})"
    );
    assert_eq!(
        late, 0,
        "requests still failed after the instance was ejected"
    );
    assert!(ok > 100, "{ok}");
    gw.app.finish().await;
}

/// The instance that answers each of `sessions` (by `x-session-id`).
async fn instances(url: &str, token: &str, sessions: usize) -> Vec<String> {
    let c = client();
    let mut out = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let r = c
            .get(url)
            .bearer_auth(token)
            .header("x-session-id", format!("session-{s}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let b: Value = r.json().await.unwrap();
        out.push(b["instance"].as_str().unwrap().to_string());
    }
    out
}

async fn sessions_keep_their_instance_across_a_scale_out(kind: Kind) {
    let (_ups, gw, token) = three_instances(kind).await;
    let url = format!("{}/v1/models", gw.prod_url);
    const N: usize = 600;
    let before = instances(&url, &token, N).await;
    // The same session, the same instance, every time.
    assert_eq!(before, instances(&url, &token, N).await);
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for i in &before {
        *counts.entry(i.as_str()).or_default() += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&c| c >= N / 6),
        "sessions spread over the instances: {counts:?}"
    );

    // One instance more: only sessions that move to it move.
    let d = upstreams::start("d").await;
    created(
        &gw.app,
        &gw.admin,
        &format!("/api/v1/endpoints/{}/targets", gw.endpoint),
        json!({"address": d.address()}),
    )
    .await;
    let after = instances(&url, &token, N).await;
    let moved: Vec<usize> = (0..N).filter(|&i| before[i] != after[i]).collect();
    let elsewhere = moved.iter().filter(|&&i| after[i] != "d").count();
    assert_eq!(elsewhere, 0, "sessions moved between the old instances");
    let share = moved.len() as f64 / N as f64;
    eprintln!(
        "scale-out 3 → 4: {:.1} % of {N} sessions moved, all to the new instance",
        share * 100.0
    );
    assert!((0.12..=0.40).contains(&share), "{share}");
    gw.app.finish().await;
}

async fn a_dead_instance_is_skipped_and_errors_say_where_they_come_from(kind: Kind) {
    let a = upstreams::start("a").await;
    let b = upstreams::start("b").await;
    let range = ports();
    let gw = setup(
        TestApp::with_settings(kind, |c| c.gateway.ports = range).await,
        &[&a, &b],
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let url = format!("{}/v1/models", gw.prod_url);
    let before = instances(&url, &token, 100).await;
    assert!(before.iter().any(|i| i == "a") && before.iter().any(|i| i == "b"));

    // b dies: every session is served (by a), none fails.
    b.kill();
    let after = instances(&url, &token, 100).await;
    assert!(after.iter().all(|i| i == "a"), "{after:?}");

    // Both dead: 503 from the upstream side, nothing internal.
    a.kill();
    let (s, body) = call(&url, Some(&token)).await;
    assert!(s == 502 || s == 503, "{s} {body}");
    assert_eq!(body["source"], "upstream");
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");

    let _ = (&gw.dev, &gw.dev_url);
    gw.app.finish().await;
}

//! The balancer under load: sessions that share one key do not pile onto one instance past
//! the bound (1.25 times the mean load), and an instance that dies under load costs only the
//! requests it was answering.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{client, ports, setup};
use crate::upstreams;

both_stores!(
    a_hot_session_spills_past_the_bound_not_onto_one_instance,
    an_instance_that_dies_under_load_costs_only_its_requests_in_flight
);

async fn a_hot_session_spills_past_the_bound_not_onto_one_instance(kind: Kind) {
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

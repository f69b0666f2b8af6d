//! What depends on time, on a manual clock the test moves (the store's clock is the only one
//! the server reads): a session ends after its lifetime, an API token on its expiry day, a job
//! at its maximum runtime, and a throttled account's window slides open again.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use serde_json::json;

use crate::auth::web_session;
use crate::both_stores;
use crate::common::{login_request, Kind, TestApp, PASSWORD};
use crate::jobs::{setup, small_queue, submit, wait_state};

both_stores!(
    a_session_ends_when_its_lifetime_is_over,
    an_api_token_stops_working_when_it_expires,
    a_job_is_stopped_at_its_maximum_runtime,
    a_throttled_account_opens_again_when_its_window_passes
);

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

async fn a_session_ends_when_its_lifetime_is_over(kind: Kind) {
    let app = TestApp::with_manual_clock(kind).await;
    app.seed_tenant("acme").await;
    let cookie = web_session(&app, "member").await;
    let me = || {
        Request::get("/api/v1/me")
            .header(header::COOKIE, &cookie)
            .body(Body::empty())
            .unwrap()
    };
    let ttl = app.state.config.session_ttl_hours * HOUR;
    app.advance_clock(ttl - MINUTE);
    assert_eq!(app.raw(me()).await.status, StatusCode::OK);
    app.advance_clock(2 * MINUTE);
    assert_eq!(
        app.raw(me()).await.status,
        StatusCode::UNAUTHORIZED,
        "a session {} h old still works",
        app.state.config.session_ttl_hours
    );
    app.finish().await;
}

async fn an_api_token_stops_working_when_it_expires(kind: Kind) {
    let app = TestApp::with_manual_clock(kind).await;
    app.seed_tenant("acme").await;
    let session = app.login("acme", "member").await;
    let created = app
        .post(
            "/api/v1/tokens",
            &session,
            json!({"name": "ci", "expires_in_days": 1}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let token = created.body["token"].as_str().unwrap().to_string();
    app.advance_clock(24 * HOUR - MINUTE);
    assert_eq!(app.get("/api/v1/me", &token).await.status, StatusCode::OK);
    app.advance_clock(2 * MINUTE);
    assert_eq!(
        app.get("/api/v1/me", &token).await.status,
        StatusCode::UNAUTHORIZED,
        "a one-day token works after a day"
    );
    app.finish().await;
}

async fn a_job_is_stopped_at_its_maximum_runtime(kind: Kind) {
    let app = TestApp::with_scheduler_and_manual_clock(kind).await;
    let s = setup(&app, "acme").await;
    let queue = small_queue(&app, &s).await;
    // Simulated work of an hour (in real time) with a ten-minute limit (on the test's clock).
    let job = submit(
        &app,
        &s.member,
        json!({"queue_id": queue, "name": "long", "command": "sleep 3600", "gpu_milli": 1000,
               "duration_ms": 3_600_000, "max_runtime_ms": 10 * MINUTE}),
    )
    .await;
    wait_state(&app, &s.member, &job, "running").await;
    app.advance_clock(9 * MINUTE);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let still = crate::jobs::job(&app, &s.member, &job).await;
    assert_eq!(
        still["job"]["state"], "running",
        "stopped before its limit: {still}"
    );
    app.advance_clock(2 * MINUTE);
    let done = wait_state(&app, &s.member, &job, "failed").await;
    assert!(
        done["job"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("maximum runtime"),
        "{done}"
    );
    app.finish().await;
}

async fn a_throttled_account_opens_again_when_its_window_passes(kind: Kind) {
    let app = TestApp::with_manual_clock(kind).await;
    app.seed_tenant("acme").await;
    let policy = switchyard::identity::throttle::ThrottlePolicy::default();
    let budget = policy.max_per_account;
    for _ in 0..budget {
        let r = app.raw(login_request("acme", "member", "wrong")).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    }
    let locked = app.raw(login_request("acme", "member", PASSWORD)).await;
    assert_eq!(
        locked.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        locked.text
    );
    let window = policy.window_ms;
    app.advance_clock(window - MINUTE);
    let still = app.raw(login_request("acme", "member", PASSWORD)).await;
    assert_eq!(
        still.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        still.text
    );
    app.advance_clock(2 * MINUTE);
    let open = app.raw(login_request("acme", "member", PASSWORD)).await;
    assert_eq!(open.status, StatusCode::OK, "{}", open.text);
    app.finish().await;
}

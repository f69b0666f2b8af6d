//! The sign-in throttle under concurrency, its break-glass for platform admins, the length cap
//! on sign-in names, and the client address it counts against behind proxies.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};

use crate::both_stores;
use crate::common::{from_ip, login_request, Kind, Resp, TestApp, PASSWORD};

both_stores!(
    parallel_guesses_get_the_budget_and_no_more,
    sign_in_names_are_capped,
    forwarded_for_is_read_from_the_right
);

/// Sends `n` wrong-password sign-ins for `tenant/user` from `ip`, all at once; returns how many
/// were answered 401 and how many 429.
async fn guess_in_parallel(
    app: &TestApp,
    tenant: &str,
    user: &str,
    ip: &str,
    n: usize,
) -> (usize, usize) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let router = app.router.clone();
        let req = from_ip(
            login_request(tenant, user, &format!("wrong-guess-{i:04}")),
            ip,
        );
        tasks.push(tokio::spawn(async move {
            use tower::ServiceExt;
            router.oneshot(req).await.unwrap().status()
        }));
    }
    let (mut unauthorized, mut throttled) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::UNAUTHORIZED => unauthorized += 1,
            StatusCode::TOO_MANY_REQUESTS => throttled += 1,
            other => panic!("unexpected {other}"),
        }
    }
    (unauthorized, throttled)
}

async fn parallel_guesses_get_the_budget_and_no_more(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    app.seed_platform_admin().await;

    // 40 guesses at once at a tenant admin: 5 passwords are checked, 35 are turned away.
    let (unauthorized, throttled) =
        guess_in_parallel(&app, "acme", "admin", "203.0.113.5", 40).await;
    assert!(
        unauthorized <= 5,
        "{unauthorized} wrong passwords were checked"
    );
    assert_eq!(unauthorized + throttled, 40);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM audit_log WHERE action = 'auth.login_failed'")
            .await,
        unauthorized as i64
    );
    // An ordinary account's window is per account: locked from everywhere until it passes.
    let r = app
        .raw(from_ip(
            login_request("acme", "admin", PASSWORD),
            "198.51.100.7",
        ))
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);

    // The same at the platform admin, from another address.
    let (unauthorized, throttled) =
        guess_in_parallel(&app, "platform", "root", "203.0.113.6", 40).await;
    assert!(
        unauthorized <= 5,
        "{unauthorized} wrong passwords were checked"
    );
    assert_eq!(unauthorized + throttled, 40);
    let from = |ip: &'static str| app.raw(from_ip(login_request("platform", "root", PASSWORD), ip));
    assert_eq!(
        from("203.0.113.6").await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "the guesser's address stays locked"
    );
    // Break-glass: the stranger did not lock root out from anywhere else, nor from this host.
    let ok = from("198.51.100.7").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(from("127.0.0.1").await.status, StatusCode::OK);
    app.finish().await;
}

async fn sign_in_names_are_capped(kind: Kind) {
    let app = TestApp::new(kind).await;
    app.seed_tenant("acme").await;
    let before = app.count("SELECT COUNT(*) FROM audit_log").await;
    let huge = "u".repeat(900 * 1024);
    for (tenant, user, field) in [
        ("acme", huge.as_str(), "username"),
        (&*"t".repeat(65), "admin", "tenant"),
    ] {
        let r = app
            .raw(login_request(tenant, user, "whatever-password"))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert_eq!(r.body["errors"][0]["field"], field);
    }
    // The page's form: back to the sign-in page with a message, the name not echoed.
    let form = format!("tenant=acme&username={huge}&password=whatever-password");
    let r = app
        .raw(
            Request::post("/auth/login")
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    let loc = r.headers[header::LOCATION].to_str().unwrap();
    assert!(
        loc.contains("error=too_long") && loc.len() < 200,
        "{loc:.200}"
    );
    let page = app
        .raw(Request::get(loc).body(Body::empty()).unwrap())
        .await;
    assert!(page.text.contains("too long"), "the page says why");
    // Nothing was written, not even a failed sign-in.
    assert_eq!(app.count("SELECT COUNT(*) FROM audit_log").await, before);
    // Names up to the caps are still just wrong credentials.
    let r = app
        .raw(login_request(
            &"t".repeat(64),
            &"u".repeat(256),
            "whatever-password",
        ))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    app.finish().await;
}

async fn login_via(app: &TestApp, peer: &str, xff: &str, user: &str, password: &str) -> Resp {
    let mut req = from_ip(login_request("acme", user, password), peer);
    req.headers_mut()
        .insert("x-forwarded-for", xff.parse().unwrap());
    app.raw(req).await
}

async fn forwarded_for_is_read_from_the_right(kind: Kind) {
    // One proxy in front (no list: the connected peer is the proxy).
    let app = TestApp::with_settings(kind, |c| c.trust_forwarded_for = true).await;
    app.seed_tenant("acme").await;
    // 20 failures (the per-address budget) on different accounts, each with a different
    // made-up leftmost entry; the proxy appended the real client, 203.0.113.50.
    for i in 0..20 {
        let xff = format!("10.66.0.{i}, 203.0.113.50");
        let r = login_via(
            &app,
            "10.0.0.1",
            &xff,
            &format!("nobody{i}"),
            "wrong-password-1",
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{i}");
    }
    // A fresh spoofed entry does not make a fresh address.
    let r = login_via(
        &app,
        "10.0.0.1",
        "10.66.1.1, 203.0.113.50",
        "member",
        PASSWORD,
    )
    .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    let ips: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT source_ip FROM audit_log WHERE action = 'auth.login_failed'",
    )
    .fetch_all(&app.store().pool)
    .await
    .unwrap();
    assert_eq!(ips, vec!["203.0.113.50".to_string()]);
    // Another client behind the same proxy is not affected.
    let r = login_via(&app, "10.0.0.1", "203.0.113.51", "member", PASSWORD).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    app.finish().await;

    // With a list, a peer outside it is the client, whatever it forwards.
    let app = TestApp::with_settings(kind, |c| {
        c.trust_forwarded_for = true;
        c.trusted_proxies = vec![switchyard::config::IpNet::parse("10.0.0.0/8").unwrap()];
    })
    .await;
    app.seed_tenant("acme").await;
    let r = login_via(&app, "198.51.100.9", "203.0.113.99", "member", PASSWORD).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = login_via(
        &app,
        "10.0.0.1",
        "6.6.6.6, 203.0.113.77, 10.0.0.2",
        "member",
        PASSWORD,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let ips: Vec<String> = sqlx::query_scalar(
        "SELECT source_ip FROM audit_log WHERE action = 'auth.login' ORDER BY seq",
    )
    .fetch_all(&app.store().pool)
    .await
    .unwrap();
    assert_eq!(
        ips,
        vec!["198.51.100.9".to_string(), "203.0.113.77".to_string()]
    );
    app.finish().await;
}

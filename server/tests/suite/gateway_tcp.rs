//! Raw TCP routes against real TCP instances (`upstreams::start_tcp`: a greeting with the
//! instance's name, then an echo): a port of its own per route, tenant admins only, networks
//! checked at the field; bytes joined both ways, a source outside the networks closed at
//! once while an open connection stays, an endpoint switch taken by the next connection,
//! TLS with the gateway's certificate, and the counts in `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{created, id, metrics, ports, setup, Gw};
use crate::upstreams::{self, Upstream};

both_stores!(
    a_tcp_route_joins_allowed_clients_to_the_endpoint,
    routes_of_an_endpoint_a_member_may_not_see_are_hidden_from_them
);

/// Reads one line (the instance's greeting); `None` when the gateway closed the connection.
pub(crate) async fn line<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(_)) if b[0] == b'\n' => return Some(String::from_utf8(out).unwrap()),
            Ok(Ok(_)) => out.push(b[0]),
            Err(_) => panic!("no answer within 5 s"),
        }
    }
}

/// Sends `text` and reads it back.
pub(crate) async fn echo<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, text: &str) -> String {
    s.write_all(text.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; text.len()];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf))
        .await
        .expect("the echo in time")
        .expect("the connection is open");
    String::from_utf8(buf).unwrap()
}

/// Connects once the route's listener is up.
pub(crate) async fn connect(port: u64) -> TcpStream {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port as u16)).await {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "port {port} never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A gateway test whose HTTP and TCP routes take ports of their own, `targets` the
/// endpoint's instances; with the first port of its TCP range.
pub(crate) async fn with_tcp_ports(kind: Kind, targets: &[&Upstream]) -> (Gw, u64) {
    let mut app = TestApp::with_manual_clock(kind).await;
    let (range, tcp_range) = (ports(), ports());
    let tcp_first = u64::from(*tcp_range.start());
    app.reconfigure(|c| {
        c.gateway.ports = range;
        c.gateway.tcp_ports = tcp_range;
    });
    (setup(app, targets).await, tcp_first)
}

/// The series `name` of the TCP route `route`.
pub(crate) fn tcp_value(m: &str, name: &str, route: &str) -> f64 {
    m.lines()
        .find(|l| l.starts_with(&format!("{name}{{route_id=\"{route}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}

async fn a_tcp_route_joins_allowed_clients_to_the_endpoint(kind: Kind) {
    let (a, b) = (
        upstreams::start_tcp("tcp-a").await,
        upstreams::start_tcp("tcp-b").await,
    );
    let (gw, tcp_first) = with_tcp_ports(kind, &[&a]).await;
    let project = gw
        .app
        .get(&format!("/api/v1/endpoints/{}", gw.endpoint), &gw.admin)
        .await;
    let other = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/endpoints",
        json!({"project_id": project.body["project_id"], "name": "other", "targets": [b.address()]}),
    )
    .await);

    // Tenant admins only; the networks are checked at the field.
    let ask = |sources: serde_json::Value| json!({"gateway_id": gw.prod, "endpoint_id": gw.endpoint, "allowed_sources": sources});
    let r = gw
        .app
        .post(
            "/api/v1/tcp-routes",
            &gw.member,
            ask(json!(["127.0.0.0/8"])),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    for bad in [json!([]), json!(["localhost"]), json!(["10.0.0.0/33"])] {
        let r = gw
            .app
            .post("/api/v1/tcp-routes", &gw.admin, ask(bad.clone()))
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.text
        );
        assert!(r.text.contains("allowed_sources"), "{}", r.text);
    }
    let route = created(
        &gw.app,
        &gw.admin,
        "/api/v1/tcp-routes",
        ask(json!(["127.0.0.0/8"])),
    )
    .await;
    let (route_id, port) = (id(&route), route["port"].as_u64().unwrap());
    assert_eq!(port, tcp_first, "the first port of gateway_tcp_ports");
    assert_eq!(route["address"], format!("127.0.0.1:{port}"));
    let listed = gw.app.get("/api/v1/tcp-routes", &gw.member).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 1, "{}", listed.text);

    // Joined both ways.
    let mut open = connect(port).await;
    assert_eq!(line(&mut open).await.as_deref(), Some("tcp-a"));
    assert_eq!(echo(&mut open, "ping").await, "ping");

    // Only loopback's neighbours at 10/8 now: the next connection is closed at once, the open
    // one goes on.
    let r = gw
        .app
        .patch(
            &format!("/api/v1/tcp-routes/{route_id}"),
            &gw.admin,
            json!({"allowed_sources": ["10.0.0.0/8"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let t0 = Instant::now();
    loop {
        let mut refused = connect(port).await;
        match line(&mut refused).await {
            None => break,
            Some(_) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "still admitted");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert_eq!(echo(&mut open, "still here").await, "still here");

    // Switched to the other endpoint (and open again): the next connection reaches tcp-b.
    let r = gw
        .app
        .patch(
            &format!("/api/v1/tcp-routes/{route_id}"),
            &gw.admin,
            json!({"endpoint_id": other, "allowed_sources": ["127.0.0.1"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let t0 = Instant::now();
    loop {
        let mut next = connect(port).await;
        if line(&mut next).await.as_deref() == Some("tcp-b") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the switch was not taken"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(open);

    // TLS with the gateway's certificate (published by the API), no ALPN needed.
    let tls_route = created(
        &gw.app,
        &gw.admin,
        "/api/v1/tcp-routes",
        json!({"gateway_id": gw.prod, "endpoint_id": gw.endpoint, "tls": true, "allowed_sources": ["127.0.0.0/8", "::1"]}),
    )
    .await;
    let tls_port = tls_route["port"].as_u64().unwrap();
    assert_eq!(tls_port, tcp_first + 1);
    let tcp = connect(tls_port).await;
    let pem = gw
        .app
        .get(
            &format!("/api/v1/gateways/{}/certificate", gw.prod),
            &gw.member,
        )
        .await;
    assert_eq!(pem.status, StatusCode::OK, "{}", pem.text);
    let mut tls = tls_client(&pem.text)
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(line(&mut tls).await.as_deref(), Some("tcp-a"));
    assert_eq!(echo(&mut tls, "over tls").await, "over tls");
    drop(tls);

    // Counted: the plain route's connections, the refused ones and its bytes; closed ones
    // are no longer active.
    let t0 = Instant::now();
    loop {
        let m = metrics(&gw.app).await;
        let active = tcp_value(&m, "switchyard_gateway_tcp_active", &route_id);
        if active == 0.0 {
            assert!(
                tcp_value(&m, "switchyard_gateway_tcp_connections_total", &route_id) >= 2.0,
                "{m}"
            );
            assert!(
                tcp_value(&m, "switchyard_gateway_tcp_refused_total", &route_id) >= 1.0,
                "{m}"
            );
            // "ping" and "still here" in, the greeting and both echoes out.
            assert!(
                tcp_value(&m, "switchyard_gateway_tcp_bytes_in_total", &route_id) >= 14.0,
                "{m}"
            );
            assert!(
                tcp_value(&m, "switchyard_gateway_tcp_bytes_out_total", &route_id) >= 20.0,
                "{m}"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "connections stay active: {m}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Deleted: the port no longer accepts.
    let r = gw
        .app
        .delete(&format!("/api/v1/tcp-routes/{route_id}"), &gw.admin)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", port as u16)).await.is_ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the port still listens"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its series leave /metrics with it.
    let m = metrics(&gw.app).await;
    assert!(
        !m.contains(&format!("route_id=\"{route_id}\"")),
        "a deleted route stays in /metrics: {m}"
    );
    for action in ["tcp_route.create", "tcp_route.update", "tcp_route.delete"] {
        let audit = gw
            .app
            .get(&format!("/api/v1/audit?action={action}"), &gw.admin)
            .await;
        assert!(
            audit.text.contains(&route_id),
            "{action} not audited: {}",
            audit.text
        );
    }
    gw.app.finish().await;
}

fn tls_client(pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn routes_of_an_endpoint_a_member_may_not_see_are_hidden_from_them(kind: Kind) {
    let a = upstreams::start_tcp("tcp-a").await;
    let (gw, _) = with_tcp_ports(kind, &[&a]).await;
    // An endpoint in a project no rule of the member reaches, published both ways.
    let secret = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/projects",
        json!({"name": "secret"}),
    )
    .await);
    let hidden = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/endpoints",
        json!({"project_id": secret, "name": "hidden", "targets": [a.address()]}),
    )
    .await);
    let route = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/routes",
        json!({"gateway_id": gw.prod, "path_prefix": "/hidden", "endpoint_id": hidden}),
    )
    .await);
    let tcp = id(&created(
        &gw.app,
        &gw.admin,
        "/api/v1/tcp-routes",
        json!({"gateway_id": gw.prod, "endpoint_id": hidden, "allowed_sources": ["127.0.0.1"]}),
    )
    .await);
    for (list, one) in [
        ("/api/v1/routes", format!("/api/v1/routes/{route}")),
        ("/api/v1/tcp-routes", format!("/api/v1/tcp-routes/{tcp}")),
    ] {
        let admin_sees = gw.app.get(list, &gw.admin).await;
        assert!(
            admin_sees.text.contains(&hidden),
            "{list}: {}",
            admin_sees.text
        );
        let member_sees = gw.app.get(list, &gw.member).await;
        assert_eq!(member_sees.status, StatusCode::OK);
        assert!(
            !member_sees.text.contains(&hidden),
            "{list} names a hidden endpoint: {}",
            member_sees.text
        );
        assert_eq!(
            gw.app.get(&one, &gw.member).await.status,
            StatusCode::NOT_FOUND,
            "{one}"
        );
        assert_eq!(
            gw.app.get(&one, &gw.admin).await.status,
            StatusCode::OK,
            "{one}"
        );
    }
    // The member's own endpoint's route is still listed to them.
    let member_routes = gw.app.get("/api/v1/routes", &gw.member).await;
    assert!(
        member_routes.text.contains(&gw.endpoint),
        "{}",
        member_routes.text
    );
    gw.app.finish().await;
}

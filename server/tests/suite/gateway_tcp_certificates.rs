//! Client certificates on a raw TCP route with TLS: the route names the certificate
//! authorities (PEM) a client's certificate must chain to. A client with a certificate one of
//! them issued is joined to the instance; one without a certificate, or with one another
//! authority issued, is refused in the handshake and counted; the authorities are checked at
//! their field (they need TLS, and must be certificates); dropping them lets the next client in
//! without one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

use crate::both_stores;
use crate::common::Kind;
use crate::gateway_proxy::{created, id, metrics};
use crate::gateway_tcp::{connect, echo, line, tcp_value, with_tcp_ports};
use crate::upstreams;

both_stores!(a_tcp_route_with_client_authorities_admits_only_their_certificates);

/// A certificate authority of this test run.
fn authority() -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "switchyard test CA");
    (params.self_signed(&key).unwrap(), key)
}

/// A client certificate `ca` issued, with its key.
fn client_of(
    ca: &rcgen::Certificate,
    ca_key: &rcgen::KeyPair,
) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["client.test".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    (
        cert.der().clone(),
        PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    )
}

/// A TLS client trusting the gateway's certificate, presenting `cert` when given.
fn client(
    server_pem: &str,
    cert: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(server_pem.as_bytes()).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match cert {
        Some((c, k)) => builder.with_client_auth_cert(vec![c], k).unwrap(),
        None => builder.with_no_client_auth(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// The instance's greeting through the route, or `None` when the gateway refused the client
/// (with TLS 1.3 a refused client certificate may show only at the first read).
async fn greeting(port: u64, tls: &tokio_rustls::TlsConnector) -> Option<String> {
    let tcp = connect(port).await;
    let mut s = tls
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .ok()?;
    let hello = line(&mut s).await?;
    assert_eq!(echo(&mut s, "hi").await, "hi");
    Some(hello)
}

async fn a_tcp_route_with_client_authorities_admits_only_their_certificates(kind: Kind) {
    let a = upstreams::start_tcp("tcp-a").await;
    let (gw, _) = with_tcp_ports(kind, &[&a]).await;
    let (ca, ca_key) = authority();
    let (stranger, stranger_key) = authority();
    let ask = |tls: bool, ca: &str| {
        json!({"gateway_id": gw.prod, "endpoint_id": gw.endpoint, "allowed_sources": ["127.0.0.0/8"],
            "tls": tls, "client_ca": ca})
    };

    // Checked at their field: they need TLS, and must be certificates.
    for (tls, bad) in [
        (false, ca.pem()),
        (true, "not a certificate".to_string()),
        (
            true,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_string(),
        ),
    ] {
        let r = gw
            .app
            .post("/api/v1/tcp-routes", &gw.admin, ask(tls, &bad))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.text);
        assert!(r.text.contains("client_ca"), "{}", r.text);
    }
    let route = created(
        &gw.app,
        &gw.admin,
        "/api/v1/tcp-routes",
        ask(true, &ca.pem()),
    )
    .await;
    let (route_id, port) = (id(&route), route["port"].as_u64().unwrap());
    assert!(
        route["client_ca"]
            .as_str()
            .is_some_and(|p| p.contains("BEGIN CERTIFICATE")),
        "{route}"
    );
    drop(connect(port).await);
    let server_pem = gw
        .app
        .get(
            &format!("/api/v1/gateways/{}/certificate", gw.prod),
            &gw.member,
        )
        .await
        .text;

    // A certificate the route's authority issued: joined to the instance.
    let trusted = client(&server_pem, Some(client_of(&ca, &ca_key)));
    assert_eq!(greeting(port, &trusted).await.as_deref(), Some("tcp-a"));
    // None, or one of another authority: refused, and counted.
    assert_eq!(greeting(port, &client(&server_pem, None)).await, None);
    let foreign = client(&server_pem, Some(client_of(&stranger, &stranger_key)));
    assert_eq!(greeting(port, &foreign).await, None);
    // (The gateway counts a refusal once its side of the handshake has ended.)
    let t0 = Instant::now();
    let mut m = metrics(&gw.app).await;
    while tcp_value(&m, "switchyard_gateway_tcp_refused_total", &route_id) < 2.0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "refusals not counted: {m}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        m = metrics(&gw.app).await;
    }
    assert_eq!(
        tcp_value(&m, "switchyard_gateway_tcp_connections_total", &route_id),
        1.0,
        "{m}"
    );

    // Dropped: the next client gets in without a certificate (the port's listener restarts).
    let r = gw
        .app
        .patch(
            &format!("/api/v1/tcp-routes/{route_id}"),
            &gw.admin,
            json!({"client_ca": ""}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.body["client_ca"].is_null(), "{}", r.text);
    let plain = client(&server_pem, None);
    let t0 = Instant::now();
    while greeting(port, &plain).await.is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "a client without a certificate is still refused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let audit = gw
        .app
        .get("/api/v1/audit?action=tcp_route.update", &gw.admin)
        .await;
    assert!(
        audit.text.contains("\"to_client_certificates\":false"),
        "{}",
        audit.text
    );
    gw.app.finish().await;
}

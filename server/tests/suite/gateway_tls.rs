//! The gateway over TLS (a CA made per run, the operator's certificate or a self-signed one,
//! HTTP/2 by ALPN) and across replicas (PostgreSQL's change feed).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::both_stores;
use crate::common::{Kind, TestApp};
use crate::gateway_proxy::{call, client, created, ports, setup};
use crate::upstreams;

both_stores!(tls_with_the_operators_certificate_or_a_self_signed_one);

/// Two replicas on one PostgreSQL schema: the group removal made through one is refused by
/// the other's gateway (its snapshot follows the change feed, `LISTEN`/`NOTIFY`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_what_another_replica_revoked() {
    crate::common::bounded("a_replica_refuses_what_another_replica_revoked", || async {
        let up = upstreams::start("a").await;
        let range = ports();
        let gw = setup(
            TestApp::with_settings(Kind::Postgres, |c| c.gateway.ports = range).await,
            &[&up],
        )
        .await;
        let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
        // The second replica: its own store on the same schema, its own gateway listeners.
        let other = switchyard::store::Store::connect(&gw.app.db.url)
            .await
            .unwrap();
        let _feed = other
            .follow_replicas()
            .expect("PostgreSQL follows the replicas");
        let mut config = (*gw.app.state.config).clone();
        config.gateway.bind = std::net::IpAddr::from([127, 0, 0, 2]);
        let replica = switchyard::state(other.clone(), config);
        let _runtime = switchyard::gateway::start(replica.gateways.clone());
        let port = gw.prod_url.rsplit(':').next().unwrap().to_string();
        let url = format!("http://127.0.0.2:{port}/v1/models");
        let t0 = Instant::now();
        loop {
            if let Ok(r) = client().get(&url).bearer_auth(&token).send().await {
                if r.status() == 200 {
                    break;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the replica's gateway did not serve"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = gw
            .app
            .delete(
                &format!("/api/v1/groups/{}/members/{}", gw.team, gw.member_id),
                &gw.admin,
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
        // The notification crosses in milliseconds; allow a second.
        let t0 = Instant::now();
        loop {
            let (s, _) = call(&url, Some(&token)).await;
            if s == 403 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(1),
                "the other replica still serves a member removed from the group ({s})"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        other.pool.close().await;
        gw.app.finish().await;
    })
    .await;
}

/// A CA made for this test run and a certificate it signs for `localhost` and 127.0.0.1.
fn test_ca() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "switchyard test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca_cert, &ca_key)
            .unwrap();
    (ca_cert.pem(), leaf.pem(), key.serialize_pem())
}

/// A TLS connection to `port` (as `localhost`, trusting `ca_pem`) offering `alpn`.
async fn tls_connect(
    port: u16,
    ca_pem: &str,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap()
}

/// The protocol a TLS handshake with `port` agrees on when the client offers h2 first.
async fn alpn(port: u16, ca_pem: &str) -> Option<Vec<u8>> {
    let tls = tls_connect(port, ca_pem, &[b"h2", b"http/1.1"]).await;
    tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}

async fn tls_with_the_operators_certificate_or_a_self_signed_one(kind: Kind) {
    let up = upstreams::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = test_ca();
    // The operator's certificate for acme's prod gateway; dev has none.
    std::fs::write(dir.path().join("acme-prod.crt"), &crt).unwrap();
    std::fs::write(dir.path().join("acme-prod.key"), &key).unwrap();
    let range = ports();
    let tls_dir = dir.path().to_path_buf();
    let gw = setup(
        TestApp::with_settings(kind, |c| {
            c.gateway.ports = range;
            c.gateway.plain_http = false;
            c.gateway.tls_dir = Some(tls_dir);
        })
        .await,
        &[&up],
    )
    .await;
    let (token, _) = gw.token(&gw.member, &gw.prod, json!({"name": "t"})).await;
    let g = gw
        .app
        .get(&format!("/api/v1/gateways/{}", gw.prod), &gw.member)
        .await;
    let port = g.body["port"].as_u64().unwrap() as u16;
    assert_eq!(
        g.body["url"],
        format!("https://127.0.0.1:{port}"),
        "{}",
        g.text
    );
    assert_eq!(g.body["certificate"], "operator", "{}", g.text);

    // A client that trusts the CA reaches the endpoint over TLS; HTTP/2 is offered by ALPN.
    let trusting = |pem: &str| {
        reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    };
    let r = trusting(&ca)
        .get(format!("https://localhost:{port}/v1/models"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["instance"], "a");
    assert_eq!(alpn(port, &ca).await.as_deref(), Some(&b"h2"[..]));
    // Plain HTTP on a TLS listener gets no answer from the endpoint.
    let plain = client()
        .get(format!("http://127.0.0.1:{port}/v1/models"))
        .bearer_auth(&token)
        .send()
        .await;
    assert!(plain.map(|r| r.status() != 200).unwrap_or(true));

    // dev: a self-signed certificate, published to those who may see the gateway.
    let dev = gw
        .app
        .get(&format!("/api/v1/gateways/{}", gw.dev), &gw.member)
        .await;
    let dev_port = dev.body["port"].as_u64().unwrap();
    assert_eq!(dev.body["certificate"], "self_signed", "{}", dev.text);
    let pem = gw
        .app
        .get(
            &format!("/api/v1/gateways/{}/certificate", gw.dev),
            &gw.member,
        )
        .await;
    assert_eq!(pem.status, StatusCode::OK);
    assert!(
        pem.text.starts_with("-----BEGIN CERTIFICATE-----"),
        "{}",
        pem.text
    );
    let (dev_token, _) = gw.token(&gw.member, &gw.dev, json!({"name": "d"})).await;
    let r = trusting(&pem.text)
        .get(format!("https://127.0.0.1:{dev_port}/v1/models"))
        .bearer_auth(&dev_token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Without trusting it, the handshake fails: nothing is sent.
    assert!(trusting(&ca)
        .get(format!("https://127.0.0.1:{dev_port}/v1/models"))
        .send()
        .await
        .is_err());

    // The operator's files for a gateway that cannot be used (the certificate is not PEM): the
    // gateway says so (it said "operator" before), and its port stays closed rather than
    // presenting a certificate the operator did not choose.
    std::fs::write(dir.path().join("acme-staging.crt"), "not a certificate").unwrap();
    std::fs::write(dir.path().join("acme-staging.key"), &key).unwrap();
    let staging = created(
        &gw.app,
        &gw.admin,
        "/api/v1/gateways",
        json!({"name": "staging"}),
    )
    .await;
    assert_eq!(staging["certificate"], "unusable", "{staging}");
    let staging_port = staging["port"].as_u64().unwrap() as u16;
    let staging_id = staging["id"].as_str().unwrap().to_string();
    // Longer than the listeners take to follow a new gateway and to try again (2 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", staging_port))
        .await
        .is_err());
    // Fixed, the files are used within a few seconds, and the gateway says so.
    std::fs::write(dir.path().join("acme-staging.crt"), &crt).unwrap();
    let t0 = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", staging_port))
        .await
        .is_err()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the fixed certificate was not taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fixed = gw
        .app
        .get(&format!("/api/v1/gateways/{staging_id}"), &gw.member)
        .await;
    assert_eq!(fixed.body["certificate"], "operator", "{}", fixed.text);
    // An idle HTTP/1.1 connection over TLS is closed when its gateway goes.
    let conn = tls_connect(port, &ca, &[b"http/1.1"]).await;
    crate::gateway_wire::an_idle_connection_closes_with_its_gateway(&gw, &gw.prod, conn, &token)
        .await;
    gw.app.finish().await;
}

//! SAML response verification, the CPU work of the assertion consumer service: base64, the
//! one-assertion shape check, the XML signature (xmlsec, RSA-SHA256 over exclusive C14N), and
//! samael's issuer, audience, recipient, time and InResponseTo checks, then reading NameID and
//! attributes. The response is a real one: the test IdP (`end2end/idp/saml-idp.mjs`, needs
//! `npm ci`) signs it after its login form, for an AuthnRequest this SP made.
//!
//! `cargo bench -p switchyard --bench saml_verify` (SAML_VERIFY_N verifications, default 2000).
//! Prints the mean and percentiles per verification on one thread, and the throughput with one
//! blocking thread per core.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use app::model::SamlSettings;
use switchyard::config::Config;
use switchyard::identity::sso::saml;
use switchyard::identity::sso::ProviderRow;

fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).unwrap() + marker.len();
    let end = page[start..].find('"').unwrap() + start;
    page[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(run());
}

async fn run() {
    let n: usize = std::env::var("SAML_VERIFY_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let config = Config::default();
    let base = config.base_url();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("node")
        .arg("end2end/idp/saml-idp.mjs")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env("SAML_PORT", port.to_string())
        .env(
            "SAML_SPS",
            json!([{
                "entity_id": format!("{base}/auth/saml/bench/corp/metadata"),
                "acs_url": format!("{base}/auth/saml/bench/corp/acs"),
            }])
            .to_string(),
        )
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs the test SAML IdP");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(l) = lines.next_line().await.unwrap() {
        if l.contains("ready at") {
            break;
        }
    }
    let idp = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let metadata = http
        .get(format!("{idp}/metadata"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let facts = saml::parse_idp_metadata(&metadata).unwrap();
    let provider = ProviderRow {
        id: "bench".into(),
        tenant_id: "bench".into(),
        tenant_slug: "bench".into(),
        name: "corp".into(),
        display_name: "Bench".into(),
        kind: app::model::ProviderKind::Saml,
        enabled: true,
        oidc: None,
        ldap: None,
        saml: Some(SamlSettings {
            idp_entity_id: facts.entity_id,
            idp_sso_url: facts.sso_url,
            idp_certificates: facts.certificates,
            ..Default::default()
        }),
        sync: Default::default(),
        allowed_email_domains: Vec::new(),
        secret: None,
        created_at: 0,
        updated_at: 0,
    };
    let (url, request_id) = saml::authn_redirect(&config, &provider, "bench-relay").unwrap();
    let form = http.get(&url).send().await.unwrap().text().await.unwrap();
    let posted = http
        .post(format!("{idp}/sso/login"))
        .form(&[
            ("username", "alice"),
            ("password", "alice-pw"),
            ("SAMLRequest", hidden(&form, "SAMLRequest").as_str()),
            ("RelayState", hidden(&form, "RelayState").as_str()),
            ("binding", hidden(&form, "binding").as_str()),
        ])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let response = hidden(&posted, "SAMLResponse");
    drop(child);

    let one = saml::verify(&config, &provider, &response, &request_id, 0).unwrap();
    assert_eq!(one.login.username, "alice");
    println!(
        "SAML response: {} bytes base64, {} groups",
        response.len(),
        one.login.groups.len()
    );

    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = saml::verify(&config, &provider, &response, &request_id, 0).unwrap();
        times.push(t.elapsed());
        std::hint::black_box(v);
    }
    times.sort();
    let mean = times.iter().sum::<Duration>() / n as u32;
    let pct = |p: f64| times[((n as f64 * p) as usize).min(n - 1)];
    println!(
        "verify, one thread, {n} runs: mean {:.0} µs, p50 {:.0} µs, p99 {:.0} µs ({:.0}/s)",
        mean.as_secs_f64() * 1e6,
        pct(0.50).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6,
        1.0 / mean.as_secs_f64()
    );

    let threads = std::thread::available_parallelism().map_or(2, |p| p.get());
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..threads {
        let (config, provider, response, request_id) = (
            config.clone(),
            provider.clone(),
            response.clone(),
            request_id.clone(),
        );
        let per = n / threads;
        tasks.push(tokio::task::spawn_blocking(move || {
            for _ in 0..per {
                saml::verify(&config, &provider, &response, &request_id, 0).unwrap();
            }
            per
        }));
    }
    let mut done = 0;
    for task in tasks {
        done += task.await.unwrap();
    }
    println!(
        "verify, {threads} blocking threads: {:.0} verifications/s",
        done as f64 / t.elapsed().as_secs_f64()
    );
}

//! Static files: the precompressed copies that `cargo leptos build --release --precompress`
//! writes are served by `Accept-Encoding` with `Vary: Accept-Encoding`, files with a content
//! hash in their name are cached for a year as immutable, everything else briefly.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};

use crate::common::{Kind, Resp, TestApp};

const HASHED: &str = "switchyard.Vq3H1vK_Q0u6g2hZ9k3mXw";

/// A site root as a release build leaves it: hashed files under `pkg/` with `.br` and `.gz`
/// copies, public files at the top (one with copies, one without).
fn site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    for (name, body) in [
        (format!("pkg/{HASHED}.wasm"), "wasm"),
        (format!("pkg/{HASHED}.wasm.br"), "wasm in brotli"),
        (format!("pkg/{HASHED}.wasm.gz"), "wasm in gzip"),
        (format!("pkg/{HASHED}.js"), "js"),
        (format!("pkg/{HASHED}.js.br"), "js in brotli"),
        (format!("pkg/{HASHED}.js.gz"), "js in gzip"),
        ("echarts.min.js".to_string(), "echarts"),
        ("echarts.min.js.br".to_string(), "echarts in brotli"),
        ("echarts.min.js.gz".to_string(), "echarts in gzip"),
        ("favicon.svg".to_string(), "<svg/>"),
    ] {
        std::fs::write(dir.path().join(name), body).unwrap();
    }
    dir
}

async fn fetch(app: &TestApp, path: &str, accept: Option<&str>) -> Resp {
    let mut b = Request::builder().method(Method::GET).uri(path);
    if let Some(a) = accept {
        b = b.header(header::ACCEPT_ENCODING, a);
    }
    app.raw(b.body(Body::empty()).unwrap()).await
}

fn header(r: &Resp, name: header::HeaderName) -> Option<&str> {
    r.headers.get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_files_are_precompressed_and_cached_by_hash() {
    let root = site();
    let site_root = root.path().to_str().unwrap().to_string();
    let app = TestApp::with_settings(Kind::Sqlite, |c| c.site_root = site_root).await;

    for (path, original, kind, immutable) in [
        (
            format!("/pkg/{HASHED}.wasm"),
            "wasm",
            "application/wasm",
            true,
        ),
        (format!("/pkg/{HASHED}.js"), "js", "javascript", true),
        (
            "/echarts.min.js".to_string(),
            "echarts",
            "javascript",
            false,
        ),
    ] {
        for (accept, encoding, copy) in [
            (Some("gzip, deflate, br, zstd"), Some("br"), " in brotli"),
            (Some("br;q=1.0, gzip;q=0.8"), Some("br"), " in brotli"),
            (Some("gzip"), Some("gzip"), " in gzip"),
            (Some("gzip;q=0.5, br;q=0"), Some("gzip"), " in gzip"),
            (None, None, ""),
            (Some("identity"), None, ""),
        ] {
            let r = fetch(&app, &path, accept).await;
            assert_eq!(r.status, StatusCode::OK, "{path} {accept:?}");
            assert_eq!(
                header(&r, header::CONTENT_ENCODING),
                encoding,
                "{path} with Accept-Encoding {accept:?}"
            );
            assert_eq!(
                r.text,
                format!("{original}{copy}"),
                "{path} with Accept-Encoding {accept:?}"
            );
            let vary = header(&r, header::VARY).unwrap_or_default();
            assert!(
                vary.to_ascii_lowercase().contains("accept-encoding"),
                "{path}: Vary {vary:?}"
            );
            let content_type = header(&r, header::CONTENT_TYPE).unwrap_or_default();
            assert!(
                content_type.contains(kind),
                "{path}: the original's type, not {content_type:?}"
            );
            let cache = header(&r, header::CACHE_CONTROL).unwrap_or_default();
            if immutable {
                assert_eq!(cache, "public, max-age=31536000, immutable", "{path}");
            } else {
                assert!(
                    cache.starts_with("public, max-age=") && !cache.contains("immutable"),
                    "{path}: a short lifetime, not {cache:?}"
                );
                let age: u64 = cache["public, max-age=".len()..].parse().unwrap();
                assert!(age <= 3600, "{path}: {cache}");
            }
            // Static files keep the strict policy and the other security headers.
            assert_eq!(
                header(&r, header::CONTENT_SECURITY_POLICY),
                Some(switchyard::web::headers::OTHER_CSP)
            );
            assert_eq!(header(&r, header::X_CONTENT_TYPE_OPTIONS), Some("nosniff"));
        }
    }

    // A public file without copies is served as it is, still with Vary and a short lifetime.
    let r = fetch(&app, "/favicon.svg", Some("br, gzip")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, "<svg/>");
    assert_eq!(header(&r, header::CONTENT_ENCODING), None);
    assert!(header(&r, header::VARY).is_some());
    assert_eq!(
        header(&r, header::CACHE_CONTROL),
        Some(switchyard::routes::assets::SHORT_CACHE)
    );

    // Served before authentication: public files need no session (nor a session lookup).
    let req = Request::builder()
        .uri(format!("/pkg/{HASHED}.js"))
        .header(header::AUTHORIZATION, "Bearer not-a-token")
        .header(
            header::COOKIE,
            format!("{}=not-a-session", switchyard::web::auth::SESSION_COOKIE),
        )
        .body(Body::empty())
        .unwrap();
    let r = app.raw(req).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.text, "js");

    // A missing file is a 404 that no cache keeps.
    let r = fetch(
        &app,
        "/pkg/switchyard.AAAAAAAAAAAAAAAAAAAAAA.wasm",
        Some("br"),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(header(&r, header::CACHE_CONTROL), None);

    // Pages are not static files: never cached as immutable.
    let r = fetch(&app, "/login", Some("br, gzip")).await;
    assert_eq!(r.status, StatusCode::OK);
    let cache = header(&r, header::CACHE_CONTROL).unwrap_or_default();
    assert!(!cache.contains("immutable"), "{cache}");

    app.finish().await;
}

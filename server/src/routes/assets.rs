//! The built site's static files: `/pkg/…` (the WebAssembly, its JavaScript and the
//! stylesheet) and the public files at the site root (`/echarts.min.js`, `/favicon.svg`).
//!
//! They are served by tower-http's `ServeDir` with the precompressed siblings that
//! `cargo leptos build --release --precompress` writes (`NAME.br`, `NAME.gz`): brotli or gzip as
//! the request's `Accept-Encoding` allows, else the file itself, always with
//! `Vary: Accept-Encoding`. cargo-leptos (`hash-files = true`) puts a content hash in the names
//! of the files under `/pkg/`; those are cached for a year as immutable, everything else for
//! [`SHORT_CACHE`]. The hash file it writes beside the server binary tells the pages'
//! `<HydrationScripts>` and `<HashedStylesheet>` the hashed names ([`use_hash_file`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use leptos::config::LeptosOptions;
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// Files whose name carries their content hash.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Files whose name does not change with their content: browsers check again after 5 minutes
/// (a `Last-Modified` revalidation, answered `304` while unchanged).
pub const SHORT_CACHE: &str = "public, max-age=300";

/// The static files of one site root.
#[derive(Clone)]
pub struct Assets {
    /// `/pkg/`.
    pkg_prefix: String,
    /// The request paths of the files at the site root (`/favicon.svg`).
    public: Arc<HashSet<String>>,
    dir: ServeDir,
}

impl Assets {
    /// The files under `site_root` (`pkg_dir` beneath it). Files at the top are looked up once,
    /// here; a site root that does not exist serves nothing (the pages' own 404 answers).
    pub fn new(site_root: &str, pkg_dir: &str) -> Assets {
        let root = PathBuf::from(site_root);
        let pkg_dir = pkg_dir.trim_matches('/');
        let public = std::fs::read_dir(&root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| !is_variant(name))
            .map(|name| format!("/{name}"))
            .collect();
        Assets {
            pkg_prefix: format!("/{pkg_dir}/"),
            public: Arc::new(public),
            dir: ServeDir::new(root)
                .precompressed_br()
                .precompressed_gzip()
                .append_index_html_on_directories(false),
        }
    }

    fn serves(&self, path: &str) -> bool {
        path.starts_with(&self.pkg_prefix) || self.public.contains(path)
    }
}

/// A precompressed copy (`x.js.br`), served in place of its original, never by its own name.
fn is_variant(name: &str) -> bool {
    name.ends_with(".br") || name.ends_with(".gz")
}

/// Whether a file name carries a cargo-leptos content hash: a dot-separated part of 22
/// base64url characters (the unpadded MD5), as in `switchyard.Vq3H1vK_Q0u6g2hZ9k3mXw.wasm`.
pub fn is_hashed(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut parts = name.split('.');
    parts.next();
    let mut parts: Vec<&str> = parts.collect();
    parts.pop();
    parts.iter().any(|p| {
        p.len() == 22
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// Serves a static file when the request asks for one; passes everything else on.
pub async fn serve(State(assets): State<Assets>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !(req.method() == Method::GET || req.method() == Method::HEAD) || !assets.serves(path) {
        return next.run(req).await;
    }
    let immutable = path.starts_with(&assets.pkg_prefix) && is_hashed(path);
    let mut resp = match assets.dir.clone().oneshot(req).await {
        Ok(resp) => resp.into_response(),
        Err(never) => match never {},
    };
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if resp.status().is_success() || resp.status() == axum::http::StatusCode::NOT_MODIFIED {
        let cache = if immutable { IMMUTABLE } else { SHORT_CACHE };
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    }
    resp
}

/// Turns on hashed file names in `options` when cargo-leptos wrote its hash file beside the
/// running binary (or `LEPTOS_HASH_FILES` says so): Leptos then links the hashed names. Without
/// the file the pages link the plain names (a build without `hash-files`, the test binaries).
pub fn use_hash_file(options: &mut LeptosOptions) {
    if let Ok(name) = std::env::var("LEPTOS_HASH_FILE_NAME") {
        options.hash_file = name.into();
    }
    options.hash_files = match std::env::var("LEPTOS_HASH_FILES") {
        Ok(v) => v.trim() == "true" && hash_file(options).is_some_and(|p| p.exists()),
        Err(_) => hash_file(options).is_some_and(|p| p.exists()),
    };
}

/// Where Leptos looks for the hash file: beside the running binary.
fn hash_file(options: &LeptosOptions) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(
        exe.parent()
            .unwrap_or(Path::new(""))
            .join(&*options.hash_file),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names() {
        assert!(is_hashed("/pkg/switchyard.Vq3H1vK_Q0u6g2hZ9k3mXw.wasm"));
        assert!(is_hashed("/pkg/switchyard.VkpL5UXH7dTL-S4d-YIJLQ.css"));
        assert!(!is_hashed("/pkg/switchyard.wasm"));
        assert!(!is_hashed("/pkg/switchyard_bg.wasm"));
        assert!(!is_hashed("/pkg/Vq3H1vK_Q0u6g2hZ9k3mXw"));
        assert!(!is_hashed("/pkg/snippets/x/inline0.js"));
        assert!(!is_hashed("/pkg/switchyard.Vq3H1vK_Q0u6g2hZ9k3mX.wasm"));
    }

    #[test]
    fn variants_are_not_public_files() {
        assert!(is_variant("echarts.min.js.br"));
        assert!(is_variant("echarts.min.js.gz"));
        assert!(!is_variant("echarts.min.js"));
    }
}

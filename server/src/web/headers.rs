//! Security headers on every response: no framing (clickjacking), no MIME sniffing, no
//! referrer to other sites, HSTS when users reach Switchyard over HTTPS, and a content security
//! policy.
//!
//! Pages get a policy that still lets them work: Leptos hydrates from an inline module script
//! that imports `/pkg/switchyard.<hash>.js` and instantiates `/pkg/switchyard.<hash>.wasm`
//! (`'wasm-unsafe-eval'`; the names carry a content hash, see `routes::assets`), resources
//! resolved on the server arrive in inline scripts, and `/echarts.min.js` is served by us.
//! leptos_axum gives every rendered page a fresh nonce and puts it on each of those inline
//! scripts, so the page's policy allows scripts from this origin and inline scripts with that
//! nonce only ([`page_csp_context`]); a page rendered without one (none today) falls back to
//! `'unsafe-inline'`. ECharts and Leptos set inline styles, so styles may be inline. Every form
//! posts to this origin (SSO buttons are links; the server redirects to the IdP, and a SAML
//! IdP's post to our ACS is governed by the IdP page's policy, not ours). Everything else
//! (JSON, problem documents, static files) gets `default-src 'none'`.
//!
//! `Referrer-Policy: same-origin`, not `no-referrer`: a form posted without JavaScript to a
//! server function is answered with a redirect back to the page it came from, which leptos_axum
//! takes from the `Referer` header.

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;

/// A page's policy; `script` is what may run besides scripts from this origin.
fn page_csp(script: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' {script} 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'"
    )
}

/// Run inside Leptos's rendering context of every page (`leptos_routes_with_context`, the
/// fallback's 404 page): the page's policy allows inline scripts with this response's nonce.
pub fn page_csp_context() {
    let nonce = leptos::nonce::use_nonce();
    let res = leptos::prelude::use_context::<leptos_axum::ResponseOptions>();
    if let (Some(nonce), Some(res)) = (nonce, res) {
        if let Ok(v) = HeaderValue::from_str(&page_csp(&format!("'nonce-{}'", &*nonce))) {
            res.insert_header(header::CONTENT_SECURITY_POLICY, v);
        }
    }
}
pub const OTHER_CSP: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
pub const HSTS: &str = "max-age=31536000";

fn is_html(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/html"))
}

/// Adds the headers a handler did not set itself.
pub async fn security_headers(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    if !resp.headers().contains_key(header::CONTENT_SECURITY_POLICY) {
        let csp = if is_html(&resp) {
            HeaderValue::from_str(&page_csp("'unsafe-inline'"))
                .unwrap_or(HeaderValue::from_static(OTHER_CSP))
        } else {
            HeaderValue::from_static(OTHER_CSP)
        };
        resp.headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    let mut set = |name: HeaderName, value: &'static str| {
        resp.headers_mut()
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    };
    set(header::X_FRAME_OPTIONS, "DENY");
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(header::REFERRER_POLICY, "same-origin");
    if state.config.secure_cookies() {
        set(header::STRICT_TRANSPORT_SECURITY, HSTS);
    }
    resp
}

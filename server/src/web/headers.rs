//! Security headers on every response: no framing (clickjacking), no MIME sniffing, no
//! referrer to other sites, HSTS when users reach Switchyard over HTTPS, and a content security
//! policy.
//!
//! Pages get a policy that still lets them work: Leptos hydrates from an inline module script
//! that imports `/pkg/switchyard.js` and instantiates `/pkg/switchyard_bg.wasm`
//! (`'wasm-unsafe-eval'`), resources resolved on the server arrive in inline scripts,
//! `/echarts.min.js` is served by us, and ECharts and Leptos set inline styles. Every form
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

pub const PAGE_CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'";
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
    let csp = if is_html(&resp) { PAGE_CSP } else { OTHER_CSP };
    let mut set = |name: HeaderName, value: &'static str| {
        resp.headers_mut()
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    };
    set(header::CONTENT_SECURITY_POLICY, csp);
    set(header::X_FRAME_OPTIONS, "DENY");
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(header::REFERRER_POLICY, "same-origin");
    if state.config.secure_cookies() {
        set(header::STRICT_TRANSPORT_SECURITY, HSTS);
    }
    resp
}

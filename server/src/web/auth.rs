//! Authentication of every request (bearer token or session cookie), CSRF and origin checks,
//! the page sign-in redirect, and the sign-in/sign-out forms.

use axum::extract::{Form, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use serde::Deserialize;

use app::model::{Auth, Principal, RequestMeta};

use crate::http::error::{ApiError, AppError};
use crate::identity::login::{password_login, MAX_TENANT_CHARS, MAX_USERNAME_CHARS};
use crate::identity::secret::constant_time_eq;
use crate::identity::tokens;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "sy_session";

/// Pages that need a signed-in user (others: login, static files, API, health).
const PAGE_PREFIXES: [&str; 8] = [
    "/portal",
    "/jobs",
    "/history",
    "/catalog",
    "/policy",
    "/platform",
    "/audit",
    "/settings",
];

pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// A cross-site browser request: its Origin names another host, or Fetch Metadata says so.
fn cross_site(headers: &HeaderMap) -> bool {
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "cross-site")
    {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        host,
    ) {
        (Some("null"), _) => true,
        (Some(origin), Some(host)) => {
            let origin_host = origin.split("://").nth(1).unwrap_or(origin);
            origin_host != host
        }
        _ => false,
    }
}

/// Resolves the caller and puts [`Principal`] and [`RequestMeta`] into the request.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let meta = RequestMeta {
        source_ip: super::client_ip::client_ip(&req, &state.config),
        // Checked by `api::request_id::sanitize` before this runs.
        request_id: req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
    };
    let path = req.uri().path().to_string();
    let unsafe_method = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    // A SAML IdP posts its response cross-site by design (HTTP-POST binding); the response's
    // signature, InResponseTo and the browser-bound finish step protect that path instead.
    let saml_acs = path.starts_with("/auth/saml/") && path.ends_with("/acs");
    if unsafe_method && !saml_acs && cross_site(req.headers()) {
        return ApiError(AppError::Forbidden).into_response();
    }
    let now = state.store.now();
    // SCIM carries the tenant's SCIM token and `/metrics` the metrics token, each checked by
    // its own handlers.
    let own_token = path.starts_with("/scim/") || path == "/metrics";
    let principal = if own_token {
        None
    } else if let Some(authz) = req.headers().get(header::AUTHORIZATION) {
        let token = authz
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match token {
            Some(t) => match tokens::principal_from_token(&state.store, t, now).await {
                Ok(Some(p)) => Some(p),
                Ok(None) => return ApiError(AppError::Unauthorized).into_response(),
                Err(e) => return ApiError::from(e).into_response(),
            },
            None => return ApiError(AppError::Unauthorized).into_response(),
        }
    } else if let Some(session) = cookie(req.headers(), SESSION_COOKIE) {
        match tokens::principal_from_session(&state.store, &session, now).await {
            Ok(p) => p,
            Err(e) => return ApiError::from(e).into_response(),
        }
    } else {
        None
    };

    // Cookie-authenticated API writes must carry the session's CSRF token in a header.
    if let Some(Principal {
        auth: Auth::Session { csrf, .. },
        ..
    }) = &principal
    {
        if unsafe_method && path.starts_with("/api/") && path != "/api/v1/auth/login" {
            let sent = req
                .headers()
                .get("x-csrf-token")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !constant_time_eq(sent.as_bytes(), csrf.as_bytes()) {
                return ApiError(AppError::Forbidden).into_response();
            }
        }
    }

    let is_page = PAGE_PREFIXES
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")));
    if is_page && principal.is_none() {
        let next = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/portal");
        return Redirect::to(&format!("/login?next={}", urlencoding(next))).into_response();
    }
    let login_page = path == "/login" || (path.starts_with("/t/") && path.ends_with("/login"));
    if login_page && principal.is_some() && req.method() == Method::GET {
        return Redirect::to("/portal").into_response();
    }
    if let Some(p) = principal {
        req.extensions_mut().insert(p);
    }
    req.extensions_mut().insert(meta);
    let mut resp = next.run(req).await;
    if is_page || login_page {
        // Signed-in pages are private; never cache them.
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

fn urlencoding(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[derive(Deserialize)]
pub struct LoginForm {
    tenant: String,
    username: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// Only same-site absolute paths, so `next` cannot send the user elsewhere.
pub fn safe_next(next: &str) -> &str {
    if next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\") {
        next
    } else {
        "/portal"
    }
}

pub fn session_cookie(state: &AppState, value: &str, max_age_secs: i64) -> HeaderValue {
    let secure = if state.config.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub async fn login_form(
    State(state): State<AppState>,
    Extension(meta): Extension<RequestMeta>,
    Form(form): Form<LoginForm>,
) -> Response {
    let back = |error: &str| {
        // Echo back only what fits a sign-in; a megabyte name is not put into a Location header.
        let tenant = form.tenant.trim();
        let tenant = if tenant.chars().count() <= MAX_TENANT_CHARS {
            tenant
        } else {
            ""
        };
        let next = if form.next.len() <= 2048 {
            form.next.as_str()
        } else {
            ""
        };
        // The username too, so the form comes back filled without JavaScript (never the
        // password).
        let username = form.username.trim();
        let username = if username.chars().count() <= MAX_USERNAME_CHARS {
            username
        } else {
            ""
        };
        let q = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("error", error)
            .append_pair("tenant", tenant)
            .append_pair("username", username)
            .append_pair("next", next)
            .finish();
        Redirect::to(&format!("/login?{q}")).into_response()
    };
    let me = match password_login(
        &state.store,
        &state.throttle,
        &meta,
        &form.tenant,
        &form.username,
        &form.password,
    )
    .await
    {
        Ok(me) => me,
        Err(ApiError(AppError::TooManyRequests { .. })) => return back("throttled"),
        Err(ApiError(AppError::Unauthorized)) => return back("invalid"),
        Err(ApiError(AppError::Validation(_))) => return back("too_long"),
        Err(_) => return back("failed"),
    };
    let ttl_ms = state.config.session_ttl_hours * 3_600_000;
    match tokens::create_session(&state.store, &me, &meta, ttl_ms).await {
        Ok((session, _csrf)) => {
            let mut resp = Redirect::to(safe_next(&form.next)).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                session_cookie(&state, &session, ttl_ms / 1000),
            );
            resp
        }
        Err(_) => back("failed"),
    }
}

#[derive(Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

pub async fn logout_form(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
    Extension(meta): Extension<RequestMeta>,
    Form(form): Form<LogoutForm>,
) -> Response {
    if let Some(Extension(p)) = principal {
        if let Auth::Session { csrf, .. } = &p.auth {
            if !constant_time_eq(csrf.as_bytes(), form.csrf.as_bytes()) {
                return (StatusCode::FORBIDDEN, ApiError(AppError::Forbidden)).into_response();
            }
        }
        if let Err(e) = tokens::end_session(&state.store, &p, &meta).await {
            return e.into_response();
        }
    }
    let mut resp = Redirect::to("/login?signed_out=1").into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, session_cookie(&state, "", 0));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_site() {
        assert_eq!(safe_next("/audit?x=1"), "/audit?x=1");
        assert_eq!(safe_next("//evil.example"), "/portal");
        assert_eq!(safe_next("https://evil.example"), "/portal");
        assert_eq!(safe_next("/\\evil"), "/portal");
        assert_eq!(safe_next(""), "/portal");
    }

    #[test]
    fn cross_site_detection() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("sy.example:3000"));
        assert!(!cross_site(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://sy.example:3000"),
        );
        assert!(!cross_site(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(cross_site(&h));
        let mut h2 = HeaderMap::new();
        h2.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_site(&h2));
    }
}

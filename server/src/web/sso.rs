//! The browser side of single sign-on: `/auth/sso/{tenant}/{provider}` sends the browser to
//! the IdP (OIDC or SAML); `/auth/oidc/callback` finishes an OIDC sign-in; SAML posts to
//! `/auth/saml/{tenant}/{provider}/acs` and the browser finishes at `/auth/saml/finish`;
//! `/auth/saml/{tenant}/{provider}/metadata` serves the SP metadata;
//! `/auth/ldap/{tenant}/{provider}` takes the LDAP username/password form. Every failure lands
//! on the tenant's sign-in page with a message and leaves no session.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use serde::Deserialize;

use app::model::{ProviderKind, RequestMeta};

use super::auth::{cookie, safe_next, session_cookie};
use crate::identity::sso::ldap;
use crate::identity::sso::oidc;
use crate::identity::sso::requests::{self, REQUEST_TTL_MS};
use crate::identity::sso::saml;
use crate::identity::sso::{self, ExternalLogin, Finished, ProviderRow};
use crate::state::AppState;

/// Binds a sign-in in flight to the browser that started it (login CSRF protection).
pub const SSO_COOKIE: &str = "sy_sso";

fn sso_cookie(state: &AppState, value: &str, max_age_secs: i64) -> HeaderValue {
    let secure = if state.config.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{SSO_COOKIE}={value}; Path=/auth; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn to_login(tenant: &str, code: &str) -> Response {
    let q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("error", code)
        .finish();
    let path = if tenant.is_empty() {
        format!("/login?{q}")
    } else {
        format!("/t/{tenant}/login?{q}")
    };
    let mut resp = Redirect::to(&path).into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[derive(Deserialize)]
pub struct StartQuery {
    #[serde(default)]
    next: String,
}

pub async fn start(
    State(state): State<AppState>,
    Path((tenant, provider)): Path<(String, String)>,
    Query(q): Query<StartQuery>,
) -> Response {
    let tenant = tenant.to_lowercase();
    let row = match sso::provider_by_name(&state.store, &tenant, &provider).await {
        Ok(Some(r)) => r,
        Ok(None) => return to_login(&tenant, "sso_unknown"),
        Err(e) => {
            tracing::error!(error = %e, "sso start");
            return to_login(&tenant, "sso_failed");
        }
    };
    let started = match row.kind {
        ProviderKind::Oidc => oidc::start(
            &state.store,
            &state.oidc,
            &state.config,
            &row,
            safe_next(&q.next),
        )
        .await
        .map_err(|e| (e.code(), e.to_string())),
        ProviderKind::Saml => saml::start(&state.store, &state.config, &row, safe_next(&q.next))
            .await
            .map_err(|e| (e.code(), e.to_string())),
        ProviderKind::Ldap => return to_login(&tenant, "sso_unknown"),
    };
    match started {
        Ok((url, browser)) => {
            let mut resp = Redirect::to(&url).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                sso_cookie(&state, &browser, REQUEST_TTL_MS / 1000),
            );
            resp
        }
        Err((code, e)) => {
            tracing::warn!(error = %e, provider = %row.name, "sso start failed");
            to_login(&tenant, code)
        }
    }
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

pub async fn oidc_callback(
    State(state): State<AppState>,
    Extension(meta): Extension<RequestMeta>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let browser = cookie(&headers, SSO_COOKIE);
    let clear = sso_cookie(&state, "", 0);
    let mut resp = callback(&state, &meta, browser.as_deref(), q).await;
    resp.headers_mut().append(header::SET_COOKIE, clear);
    resp
}

async fn callback(
    state: &AppState,
    meta: &RequestMeta,
    browser: Option<&str>,
    q: CallbackQuery,
) -> Response {
    let Some(st) = q.state.as_deref().filter(|s| !s.is_empty()) else {
        return to_login("", "sso_state");
    };
    let pending = match requests::take_request(&state.store, st, browser).await {
        Ok(Some(p)) => p,
        Ok(None) => return to_login("", "sso_state"),
        Err(e) => {
            tracing::error!(error = %e, "sso callback");
            return to_login("", "sso_failed");
        }
    };
    let provider = match sso::provider_by_id(&state.store, &pending.provider_id).await {
        Ok(Some(p)) if p.enabled && p.kind == ProviderKind::Oidc && pending.verified.is_none() => p,
        _ => return to_login("", "sso_unknown"),
    };
    let tenant = provider.tenant_slug.clone();
    if let Some(err) = q.error {
        let detail = format!(
            "the IdP answered {err}: {}",
            q.error_description.unwrap_or_default()
        );
        sso::audit_failure(&state.store, &provider, meta, "unknown", &detail).await;
        return to_login(&tenant, "sso_provider");
    }
    let Some(code) = q.code.filter(|c| !c.is_empty()) else {
        return to_login(&tenant, "sso_provider");
    };
    let login = match oidc::finish(&state.oidc, &state.config, &provider, &pending, &code).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, provider = %provider.name, "oidc sign-in refused");
            sso::audit_failure(&state.store, &provider, meta, "unknown", &e.to_string()).await;
            return to_login(&tenant, e.code());
        }
    };
    signed_in(state, &provider, login, meta, &pending.next).await
}

/// The last step of every SSO protocol: the user, group sync and a session, then on to `next`.
async fn signed_in(
    state: &AppState,
    provider: &ProviderRow,
    login: ExternalLogin,
    meta: &RequestMeta,
    next: &str,
) -> Response {
    let ttl_ms = state.config.session_ttl_hours * 3_600_000;
    match sso::finish_login(&state.store, provider, login, meta, ttl_ms).await {
        Ok(Finished::Session { session, .. }) => {
            let mut resp = Redirect::to(safe_next(next)).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                session_cookie(state, &session, ttl_ms / 1000),
            );
            resp
        }
        Ok(Finished::Refused(r)) => to_login(&provider.tenant_slug, r.code()),
        Err(e) => {
            tracing::error!(error = ?e, "sso finish");
            to_login(&provider.tenant_slug, "sso_failed")
        }
    }
}

#[derive(Deserialize)]
pub struct AcsForm {
    #[serde(rename = "SAMLResponse", default)]
    saml_response: String,
    #[serde(rename = "RelayState", default)]
    relay_state: String,
}

/// The SAML assertion consumer service (HTTP-POST binding). The POST comes cross-site from
/// the IdP without the binding cookie, so a verified response moves on to
/// `/auth/saml/finish` by a top-level GET, which has it.
pub async fn saml_acs(
    State(state): State<AppState>,
    Extension(meta): Extension<RequestMeta>,
    Path((tenant, provider)): Path<(String, String)>,
    form: Result<axum::extract::Form<AcsForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let tenant = tenant.to_lowercase();
    // Not a form post at all: the same page as a post without a response.
    let form = form.map(|f| f.0).unwrap_or(AcsForm {
        saml_response: String::new(),
        relay_state: String::new(),
    });
    let row = match sso::provider_by_name(&state.store, &tenant, &provider).await {
        Ok(Some(r)) if r.kind == ProviderKind::Saml && r.enabled => r,
        Ok(_) => return to_login(&tenant, "sso_unknown"),
        Err(e) => {
            tracing::error!(error = %e, "saml acs");
            return to_login(&tenant, "sso_failed");
        }
    };
    if form.saml_response.is_empty() || form.relay_state.is_empty() {
        sso::audit_failure(
            &state.store,
            &row,
            &meta,
            "unknown",
            "the POST carried no SAMLResponse or no RelayState (unsolicited responses are refused)",
        )
        .await;
        return to_login(&tenant, "sso_state");
    }
    match saml::consume(
        &state.store,
        &state.config,
        &row,
        &form.saml_response,
        &form.relay_state,
    )
    .await
    {
        Ok(hop) => {
            let q = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("t", &hop)
                .finish();
            let mut resp = Redirect::to(&format!("/auth/saml/finish?{q}")).into_response();
            resp.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        Err(e) => {
            tracing::warn!(error = %e, provider = %row.name, "saml sign-in refused");
            sso::audit_failure(&state.store, &row, &meta, "unknown", &e.to_string()).await;
            to_login(&tenant, e.code())
        }
    }
}

#[derive(Deserialize)]
pub struct FinishQuery {
    #[serde(default)]
    t: String,
}

/// The browser's hop after the ACS: the binding cookie must be the one that started the
/// sign-in; then the verified login becomes a session.
pub async fn saml_finish(
    State(state): State<AppState>,
    Extension(meta): Extension<RequestMeta>,
    headers: HeaderMap,
    Query(q): Query<FinishQuery>,
) -> Response {
    let browser = cookie(&headers, SSO_COOKIE);
    let clear = sso_cookie(&state, "", 0);
    let mut resp = saml_finish_inner(&state, &meta, browser.as_deref(), &q.t).await;
    resp.headers_mut().append(header::SET_COOKIE, clear);
    resp
}

async fn saml_finish_inner(
    state: &AppState,
    meta: &RequestMeta,
    browser: Option<&str>,
    hop: &str,
) -> Response {
    if hop.is_empty() {
        return to_login("", "sso_state");
    }
    let pending = match requests::take_request(&state.store, hop, browser).await {
        Ok(Some(p)) => p,
        Ok(None) => return to_login("", "sso_state"),
        Err(e) => {
            tracing::error!(error = %e, "saml finish");
            return to_login("", "sso_failed");
        }
    };
    let provider = match sso::provider_by_id(&state.store, &pending.provider_id).await {
        Ok(Some(p)) if p.enabled && p.kind == ProviderKind::Saml => p,
        _ => return to_login("", "sso_unknown"),
    };
    let Some(login) = pending
        .verified
        .as_deref()
        .and_then(|v| serde_json::from_str::<ExternalLogin>(v).ok())
    else {
        return to_login(&provider.tenant_slug, "sso_state");
    };
    signed_in(state, &provider, login, meta, &pending.next).await
}

/// This SP's metadata for one provider, to register at the IdP.
pub async fn saml_metadata(
    State(state): State<AppState>,
    Path((tenant, provider)): Path<(String, String)>,
) -> Response {
    let tenant = tenant.to_lowercase();
    let row = match sso::provider_by_name(&state.store, &tenant, &provider).await {
        Ok(Some(r)) if r.kind == ProviderKind::Saml => r,
        Ok(_) => {
            return crate::http::error::ApiError(crate::http::error::AppError::NotFound)
                .into_response()
        }
        Err(e) => return crate::http::error::ApiError::from(e).into_response(),
    };
    match saml::sp_metadata(&state.config, &row) {
        Ok(xml) => (
            [
                (header::CONTENT_TYPE, "application/samlmetadata+xml"),
                (header::CACHE_CONTROL, "public, max-age=300"),
            ],
            xml,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "saml metadata");
            crate::http::error::ApiError(crate::http::error::AppError::Internal).into_response()
        }
    }
}

#[derive(Deserialize)]
pub struct LdapForm {
    username: String,
    password: String,
    #[serde(default)]
    next: String,
}

/// The LDAP form of a tenant's sign-in page: checks the password against the directory
/// (throttled like local passwords), then signs in as OIDC does.
pub async fn ldap_login(
    State(state): State<AppState>,
    Extension(meta): Extension<RequestMeta>,
    Path((tenant, provider)): Path<(String, String)>,
    axum::extract::Form(form): axum::extract::Form<LdapForm>,
) -> Response {
    let tenant = tenant.to_lowercase();
    let row = match sso::provider_by_name(&state.store, &tenant, &provider).await {
        Ok(Some(r)) if r.kind == ProviderKind::Ldap => r,
        Ok(_) => return to_login(&tenant, "sso_unknown"),
        Err(e) => {
            tracing::error!(error = %e, "ldap sign-in");
            return to_login(&tenant, "sso_failed");
        }
    };
    if crate::identity::login::check_sign_in_names(None, &form.username).is_err() {
        return to_login(&tenant, "too_long");
    }
    let account = format!(
        "{tenant}/ldap:{}/{}",
        row.name,
        form.username.trim().to_lowercase()
    );
    let source = meta.source_ip.as_str();
    let now = state.store.now();
    // Reserved (counted as a failure) before the directory is asked, as for local passwords.
    let reserved = state
        .throttle
        .lock()
        .map(|mut t| t.reserve(&account, source, now).is_ok())
        .unwrap_or(false);
    if !reserved {
        return to_login(&tenant, "throttled");
    }
    let allow_private = state.config.allow_private_idp_addresses;
    let login = match ldap::authenticate(&row, &form.username, &form.password, allow_private).await
    {
        Ok(l) => l,
        Err(e) => {
            if !matches!(e, ldap::LdapError::Invalid) {
                // The directory failed, not the password: the attempt does not count.
                if let Ok(mut t) = state.throttle.lock() {
                    t.release(&account, source, now);
                }
                tracing::warn!(error = %e, provider = %row.name, "ldap sign-in failed");
            }
            let who = form.username.trim().to_lowercase();
            sso::audit_failure(&state.store, &row, &meta, &who, &e.to_string()).await;
            return to_login(
                &tenant,
                match e {
                    ldap::LdapError::Invalid => "invalid",
                    ldap::LdapError::Directory(_) => "sso_provider",
                },
            );
        }
    };
    if let Ok(mut t) = state.throttle.lock() {
        t.success(&account, source, now);
    }
    let ttl_ms = state.config.session_ttl_hours * 3_600_000;
    match sso::finish_login(&state.store, &row, login, &meta, ttl_ms).await {
        Ok(Finished::Session { session, .. }) => {
            let mut resp = Redirect::to(safe_next(&form.next)).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                session_cookie(&state, &session, ttl_ms / 1000),
            );
            resp
        }
        Ok(Finished::Refused(r)) => to_login(&tenant, r.code()),
        Err(e) => {
            tracing::error!(error = ?e, "ldap finish");
            to_login(&tenant, "sso_failed")
        }
    }
}

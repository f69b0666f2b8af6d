//! `GET /metrics`: Prometheus text. It shows how many tenants, users and sessions there are, so
//! it is not public: with `metrics_token` set it takes `Authorization: Bearer <token>` (401
//! otherwise); without one it answers only clients on this host (404 to everyone else).

use std::net::IpAddr;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use app::model::RequestMeta;

use crate::identity::secret::{constant_time_eq, digest};
use crate::state::AppState;

/// The answer to a request that may not read the metrics (`None`: it may).
fn refusal(state: &AppState, headers: &HeaderMap, meta: &RequestMeta) -> Option<Response> {
    match &state.config.metrics_token {
        Some(expected) => {
            let sent = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .unwrap_or("");
            // Compared as digests, so the time taken does not even tell the token's length.
            let right = constant_time_eq(digest(sent).as_bytes(), digest(expected).as_bytes());
            if right && !expected.is_empty() {
                None
            } else {
                Some(
                    (
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, "Bearer")],
                        "metrics need the metrics token\n",
                    )
                        .into_response(),
                )
            }
        }
        None => {
            // The client address as resolved for the audit log: the peer, or with
            // `trust_forwarded_for` the forwarded client, so that a proxy on this host does not
            // make everyone local. (Behind a local proxy without it, set a token.)
            let local = meta
                .source_ip
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
            if local {
                None
            } else {
                Some(StatusCode::NOT_FOUND.into_response())
            }
        }
    }
}

pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
    meta: Option<Extension<RequestMeta>>,
) -> Response {
    let meta = meta.map(|m| m.0).unwrap_or_default();
    if let Some(refused) = refusal(&state, &headers, &meta) {
        return refused;
    }
    let mut gauges = Vec::new();
    for (name, help, sql) in [
        (
            "switchyard_tenants",
            "Tenants.",
            "SELECT COUNT(*) FROM tenants",
        ),
        (
            "switchyard_users",
            "Users across tenants.",
            "SELECT COUNT(*) FROM users",
        ),
        (
            "switchyard_groups",
            "Groups across tenants.",
            "SELECT COUNT(*) FROM groups",
        ),
        (
            "switchyard_projects",
            "Projects across tenants.",
            "SELECT COUNT(*) FROM projects",
        ),
        (
            "switchyard_active_sessions",
            "Unexpired browser sessions.",
            "SELECT COUNT(*) FROM sessions",
        ),
        (
            "switchyard_audit_entries",
            "Audit log entries.",
            "SELECT COUNT(*) FROM audit_log",
        ),
    ] {
        let v: i64 = sqlx::query_scalar(sql)
            .fetch_one(&state.store.pool)
            .await
            .unwrap_or(-1);
        gauges.push((name, help, v));
    }
    let mut text = state.metrics.render(&gauges);
    state.gateways.metrics.render(&mut text);
    state.gateways.tcp.render(&mut text);
    let mut resp = text.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

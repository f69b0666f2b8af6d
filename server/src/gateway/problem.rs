//! The answers the gateway gives itself (no route, a refused token, an instance that failed),
//! as `application/problem+json` with a stable type under
//! `https://switchyard.dev/problems/gateway/` and a `source` (`gateway` or `upstream`), on the
//! hyper path and on the HTTP/1.1 path alike. Nothing internal is shown.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Who produced an error.
#[derive(Clone, Copy)]
pub(super) enum Source {
    Gateway,
    Upstream,
}

/// A refusal or failure the gateway answers itself, as `application/problem+json`.
#[derive(Clone, Copy)]
pub(super) struct Problem {
    pub status: StatusCode,
    slug: &'static str,
    title: &'static str,
    source: Source,
}

const fn p(status: StatusCode, slug: &'static str, title: &'static str, source: Source) -> Problem {
    Problem {
        status,
        slug,
        title,
        source,
    }
}

pub(super) const UNAVAILABLE: Problem = p(
    StatusCode::SERVICE_UNAVAILABLE,
    "unavailable",
    "The gateway cannot serve requests right now",
    Source::Gateway,
);
pub(super) const NO_ROUTE: Problem = p(
    StatusCode::NOT_FOUND,
    "no-route",
    "No route on this gateway for this host and path",
    Source::Gateway,
);
pub(super) const TOKEN_MISSING: Problem = p(
    StatusCode::UNAUTHORIZED,
    "token-missing",
    "A gateway token is required",
    Source::Gateway,
);
pub(super) const TOKEN_INVALID: Problem = p(
    StatusCode::UNAUTHORIZED,
    "token-invalid",
    "This token is not valid on this gateway",
    Source::Gateway,
);
pub(super) const TOKEN_EXPIRED: Problem = p(
    StatusCode::UNAUTHORIZED,
    "token-expired",
    "This token has expired",
    Source::Gateway,
);
pub(super) const FORBIDDEN: Problem = p(
    StatusCode::FORBIDDEN,
    "forbidden",
    "This token may not call this endpoint",
    Source::Gateway,
);
pub(super) const BAD_BODY: Problem = p(
    StatusCode::BAD_REQUEST,
    "bad-body",
    "The request body could not be read",
    Source::Gateway,
);
pub(super) const UPSTREAM_FAILED: Problem = p(
    StatusCode::BAD_GATEWAY,
    "upstream-failed",
    "The endpoint's instance failed to answer",
    Source::Upstream,
);
pub(super) const UPSTREAM_TIMEOUT: Problem = p(
    StatusCode::GATEWAY_TIMEOUT,
    "upstream-timeout",
    "The endpoint's instance did not answer in time",
    Source::Upstream,
);
pub(super) const NO_INSTANCE: Problem = p(
    StatusCode::SERVICE_UNAVAILABLE,
    "no-instance",
    "The endpoint has no instance that answers",
    Source::Upstream,
);
pub(super) const UPSTREAM_UNREACHABLE: Problem = p(
    StatusCode::BAD_GATEWAY,
    "upstream-unreachable",
    "The endpoint's instances could not be reached",
    Source::Upstream,
);

impl Problem {
    /// The JSON document.
    pub(super) fn body(&self) -> String {
        json!({
            "type": format!("https://switchyard.dev/problems/gateway/{}", self.slug),
            "title": self.title,
            "status": self.status.as_u16(),
            "source": match self.source { Source::Gateway => "gateway", Source::Upstream => "upstream" },
        })
        .to_string()
    }

    pub(super) fn response(self) -> Response {
        let mut r = (self.status, self.body()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

//! SCIM error responses (RFC 7644 §3.12): every failure under `/scim/v2`, a bad body or an
//! unknown path included, answers `application/scim+json` with the `Error` message schema.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::ERROR_SCHEMA;

/// The `scimType` of a 400 or 409 (RFC 7644 §3.12, table 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScimType {
    InvalidFilter,
    InvalidSyntax,
    InvalidPath,
    InvalidValue,
    NoTarget,
    Mutability,
    Uniqueness,
}

impl ScimType {
    fn as_str(self) -> &'static str {
        match self {
            ScimType::InvalidFilter => "invalidFilter",
            ScimType::InvalidSyntax => "invalidSyntax",
            ScimType::InvalidPath => "invalidPath",
            ScimType::InvalidValue => "invalidValue",
            ScimType::NoTarget => "noTarget",
            ScimType::Mutability => "mutability",
            ScimType::Uniqueness => "uniqueness",
        }
    }
}

/// A SCIM error response (`application/scim+json`).
#[derive(Debug)]
pub struct ScimError {
    pub(super) status: StatusCode,
    pub(super) scim_type: Option<ScimType>,
    pub(super) detail: String,
}

impl ScimError {
    pub fn new(status: StatusCode, scim_type: Option<ScimType>, detail: impl Into<String>) -> Self {
        ScimError {
            status,
            scim_type,
            detail: detail.into(),
        }
    }
    /// A 400 with its `scimType`.
    pub fn bad(scim_type: ScimType, detail: impl Into<String>) -> Self {
        ScimError::new(StatusCode::BAD_REQUEST, Some(scim_type), detail)
    }
    pub fn not_found() -> Self {
        ScimError::new(StatusCode::NOT_FOUND, None, "Resource not found")
    }
    pub fn conflict(detail: impl Into<String>) -> Self {
        ScimError::new(StatusCode::CONFLICT, Some(ScimType::Uniqueness), detail)
    }
}

/// A unique-key violation is SCIM's 409 `uniqueness`; anything else a database error.
pub fn unique_or(e: sqlx::Error, what: &str) -> ScimError {
    if crate::store::is_unique_violation(&e) {
        ScimError::conflict(what)
    } else {
        e.into()
    }
}

impl From<sqlx::Error> for ScimError {
    fn from(e: sqlx::Error) -> Self {
        if crate::store::is_foreign_key_violation(&e) {
            return ScimError::new(
                StatusCode::CONFLICT,
                None,
                "it is still in use by other objects; remove those in Switchyard first",
            );
        }
        tracing::error!(error = %e, "scim: database error");
        ScimError::new(StatusCode::INTERNAL_SERVER_ERROR, None, "Internal error")
    }
}

impl IntoResponse for ScimError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "schemas": [ERROR_SCHEMA],
            "status": self.status.as_u16().to_string(),
            "detail": self.detail,
        });
        if let Some(t) = self.scim_type {
            body["scimType"] = json!(t.as_str());
        }
        scim_json(self.status, body)
    }
}

/// A SCIM response body.
pub fn scim_json(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/scim+json")],
        body.to_string(),
    )
        .into_response()
}

pub type ScimResult = Result<Response, ScimError>;

/// A JSON request body of any JSON media type (`application/scim+json` or
/// `application/json`, or none at all, as some IdPs send); anything that is not a JSON object
/// is a SCIM `invalidSyntax`, never axum's plain-text rejection.
pub struct ScimJson(pub Value);

impl<S: Send + Sync> FromRequest<S> for ScimJson {
    type Rejection = ScimError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let t = (e.status() == StatusCode::BAD_REQUEST).then_some(ScimType::InvalidSyntax);
            ScimError::new(e.status(), t, e.body_text())
        })?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.is_object() => Ok(ScimJson(v)),
            Ok(_) => Err(ScimError::bad(
                ScimType::InvalidSyntax,
                "the body must be a JSON object",
            )),
            Err(e) => Err(ScimError::bad(
                ScimType::InvalidSyntax,
                format!("the body is not valid JSON: {e}"),
            )),
        }
    }
}

/// Any path under `/scim/v2` that names no endpoint.
pub async fn unknown_endpoint() -> ScimError {
    ScimError::new(StatusCode::NOT_FOUND, None, "No such SCIM endpoint")
}

/// A method an endpoint does not answer (discovery documents are read-only).
pub async fn method_not_allowed() -> ScimError {
    ScimError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        "This endpoint does not support this method",
    )
}

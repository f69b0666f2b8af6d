//! API errors as RFC 9457 `application/problem+json`. The internal cause of a 500 is logged
//! with the request id and never sent to the client.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use app::error::{AppError, FieldError, Validator};

/// The error every handler returns.
#[derive(Debug)]
pub struct ApiError(pub AppError);

pub type ApiResult<T> = Result<T, ApiError>;

impl From<AppError> for ApiError {
    fn from(e: AppError) -> Self {
        ApiError(e)
    }
}

impl From<ApiError> for AppError {
    fn from(e: ApiError) -> Self {
        e.0
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        if crate::store::is_unique_violation(&e) {
            return ApiError(AppError::Conflict("That name is already taken".into()));
        }
        if crate::store::is_foreign_key_violation(&e) {
            // Deletes check what uses an object first (`store::in_use`); this is the net for
            // any reference they miss.
            tracing::warn!(error = %e, "foreign key violation");
            return ApiError(AppError::Conflict(
                "It is still in use by other objects; remove those first".into(),
            ));
        }
        tracing::error!(error = %e, "database error");
        ApiError(AppError::Internal)
    }
}

/// A unique-key violation becomes `instead` (a field error or a conflict); any other database
/// error stays an internal one.
pub fn unique_violation_as(e: sqlx::Error, instead: AppError) -> ApiError {
    if crate::store::is_unique_violation(&e) {
        ApiError(instead)
    } else {
        ApiError::from(e)
    }
}

impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> Self {
        tracing::error!(error = %e, "internal error");
        ApiError(AppError::Internal)
    }
}

/// The problem document.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A stable URI naming the kind of problem.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Per-field messages for validation problems.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ProblemField>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ProblemField {
    pub field: String,
    pub message: String,
}

fn title(e: &AppError) -> &'static str {
    match e {
        AppError::BadRequest(_) => "Bad request",
        AppError::Validation(_) => "Validation failed",
        AppError::Unauthorized => "Authentication required",
        AppError::Forbidden => "Forbidden",
        AppError::NotFound => "Not found",
        AppError::Conflict(_) => "Conflict",
        AppError::TooManyRequests { .. } => "Too many requests",
        AppError::PayloadTooLarge => "Payload too large",
        AppError::UnsupportedMediaType => "Unsupported media type",
        AppError::MethodNotAllowed => "Method not allowed",
        AppError::Internal => "Internal error",
        AppError::Transport(_) => "Bad gateway",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let errors = match &e {
            AppError::Validation(list) => list
                .iter()
                .map(|f| ProblemField {
                    field: f.field.clone(),
                    message: f.message.clone(),
                })
                .collect(),
            _ => Vec::new(),
        };
        let detail = match &e {
            AppError::Internal => None,
            other => Some(other.to_string()),
        };
        let problem = Problem {
            kind: format!("https://switchyard.dev/problems/{}", e.slug()),
            title: title(&e).to_string(),
            status: status.as_u16(),
            detail,
            errors,
        };
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut resp = (status, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let AppError::TooManyRequests { retry_after_secs } = e {
            if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if matches!(e, AppError::Unauthorized) {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"switchyard\""),
            );
        }
        resp
    }
}

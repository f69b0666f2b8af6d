//! The one error type seen by API clients and pages. Internal causes are logged on the server
//! and never carried here.

use serde::{Deserialize, Serialize};
use server_fn::codec::JsonEncoding;
use server_fn::error::{FromServerFnError, ServerFnErrorErr};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("Some fields are not valid")]
    Validation(Vec<FieldError>),
    #[error("Sign-in required")]
    Unauthorized,
    #[error("You are not allowed to do this")]
    Forbidden,
    #[error("Not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("Too many attempts; try again in {retry_after_secs} seconds")]
    TooManyRequests { retry_after_secs: u64 },
    #[error("Request body too large")]
    PayloadTooLarge,
    #[error("Expected a JSON body (Content-Type: application/json)")]
    UnsupportedMediaType,
    #[error("Method not allowed")]
    MethodNotAllowed,
    #[error("Something went wrong on our side; it has been logged")]
    Internal,
    /// The request could not reach the server or its answer could not be read.
    #[error("Could not reach the server: {0}")]
    Transport(String),
}

impl AppError {
    /// One field error.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        AppError::Validation(vec![FieldError {
            field: field.to_string(),
            message: message.into(),
        }])
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            AppError::BadRequest(_) => 400,
            AppError::Validation(_) => 422,
            AppError::Unauthorized => 401,
            AppError::Forbidden => 403,
            AppError::NotFound => 404,
            AppError::Conflict(_) => 409,
            AppError::TooManyRequests { .. } => 429,
            AppError::PayloadTooLarge => 413,
            AppError::UnsupportedMediaType => 415,
            AppError::MethodNotAllowed => 405,
            AppError::Internal => 500,
            AppError::Transport(_) => 502,
        }
    }

    /// The stable problem type slug (`/problems/{slug}`).
    pub fn slug(&self) -> &'static str {
        match self {
            AppError::BadRequest(_) => "bad-request",
            AppError::Validation(_) => "validation",
            AppError::Unauthorized => "unauthenticated",
            AppError::Forbidden => "forbidden",
            AppError::NotFound => "not-found",
            AppError::Conflict(_) => "conflict",
            AppError::TooManyRequests { .. } => "too-many-requests",
            AppError::PayloadTooLarge => "payload-too-large",
            AppError::UnsupportedMediaType => "unsupported-media-type",
            AppError::MethodNotAllowed => "method-not-allowed",
            AppError::Internal => "internal",
            AppError::Transport(_) => "transport",
        }
    }

    /// The message for one field, if this is a validation error naming it.
    pub fn message_for(&self, field: &str) -> Option<String> {
        match self {
            AppError::Validation(errors) => errors
                .iter()
                .find(|e| e.field == field)
                .map(|e| e.message.clone()),
            _ => None,
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::Args(msg) | ServerFnErrorErr::Deserialization(msg) => {
                AppError::BadRequest(msg)
            }
            other => AppError::Transport(other.to_string()),
        }
    }
}

/// Collects field errors while validating an input.
#[derive(Default)]
pub struct Validator(Vec<FieldError>);

impl Validator {
    pub fn check(&mut self, ok: bool, field: &str, message: &str) -> &mut Self {
        if !ok {
            self.0.push(FieldError {
                field: field.to_string(),
                message: message.to_string(),
            });
        }
        self
    }

    pub fn finish(&mut self) -> Result<(), AppError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(AppError::Validation(std::mem::take(&mut self.0)))
        }
    }
}

//! Extractors whose rejections are our problem documents instead of axum's plain text.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::{ApiError, AppError, FieldError};

/// `Json<T>` with problem+json rejections: 400 for bad syntax, 422 naming the field for wrong
/// types or missing fields, 413 for oversize bodies, 415 without a JSON content type.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::JsonDataError(e) => {
            // axum's message is "Failed to deserialize the JSON body into the target type:
            // <path>: <serde message>"; keep the useful tail and the field path.
            let text = e.body_text();
            let tail = text
                .split_once("target type: ")
                .map(|(_, t)| t.to_string())
                .unwrap_or(text);
            let (field, message) = match tail.split_once(": ") {
                Some((path, msg)) if !path.contains(' ') => (path.to_string(), msg.to_string()),
                _ => (
                    missing_field(&tail).unwrap_or_else(|| "body".into()),
                    tail.clone(),
                ),
            };
            ApiError(AppError::Validation(vec![FieldError { field, message }]))
        }
        JsonRejection::JsonSyntaxError(_) => {
            ApiError(AppError::BadRequest("The body is not valid JSON".into()))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError(AppError::UnsupportedMediaType),
        JsonRejection::BytesRejection(e) => {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError(AppError::PayloadTooLarge)
            } else {
                ApiError(AppError::BadRequest(
                    "Could not read the request body".into(),
                ))
            }
        }
        _ => ApiError(AppError::BadRequest("Invalid JSON body".into())),
    }
}

/// Extracts "name" out of serde's "missing field `name` at line …".
fn missing_field(msg: &str) -> Option<String> {
    let start = msg.find("field `")? + 7;
    let end = msg[start..].find('`')? + start;
    Some(msg[start..end].to_string())
}

/// `Query<T>` with a 400 problem for malformed parameters.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => Err(ApiError(
                AppError::BadRequest(format!("Invalid query parameters: {}", e.body_text())),
            )),
            Err(_) => Err(ApiError(AppError::BadRequest(
                "Invalid query parameters".into(),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_missing_field_names() {
        assert_eq!(
            missing_field("missing field `name` at line 1 column 2").as_deref(),
            Some("name")
        );
        assert_eq!(missing_field("something else"), None);
    }
}

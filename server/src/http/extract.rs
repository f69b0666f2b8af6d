//! Extractors whose rejections are our problem documents instead of axum's plain text.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::Value;

use app::model::{Principal, RequestMeta};

use super::error::{ApiError, AppError, FieldError};

/// `Json<T>` with problem+json rejections: 400 for bad syntax, 422 naming the field for wrong
/// types or missing fields (or a body that is not a JSON object), 413 for oversize bodies, 415
/// without a JSON content type. A number with no fractional part (`68.0`) is an integer, as in
/// JSON Schema.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let mut value = match axum::Json::<Value>::from_request(req, state).await {
            Ok(axum::Json(v)) => v,
            Err(rejection) => return Err(json_rejection(rejection)),
        };
        // Every body is an object: serde would otherwise read a struct from an array too
        // (`[]` or `[null, null]` as an empty update).
        if !value.is_object() {
            return Err(ApiError(AppError::Validation(vec![FieldError {
                field: "body".into(),
                message: "must be a JSON object".into(),
            }])));
        }
        integral_floats_as_integers(&mut value);
        serde_path_to_error::deserialize::<_, T>(value)
            .map(ApiJson)
            .map_err(|e| {
                let path = e.path().to_string();
                let message = e.into_inner().to_string();
                let field = if path.is_empty() || path == "." {
                    missing_field(&message).unwrap_or_else(|| "body".into())
                } else {
                    path
                };
                ApiError(AppError::Validation(vec![FieldError { field, message }]))
            })
    }
}

/// `68.0` → `68` (within i64/u64), so that integer fields take what JSON Schema calls an
/// integer. Fractions and out-of-range numbers stay floats (and are refused as such).
fn integral_floats_as_integers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 {
                    let as_int = if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0)
                        .contains(&f)
                    {
                        Some(serde_json::Number::from(f as i64))
                    } else if (0.0..18_446_744_073_709_551_616.0).contains(&f) {
                        Some(serde_json::Number::from(f as u64))
                    } else {
                        None
                    };
                    if let Some(i) = as_int {
                        *n = i;
                    }
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::JsonDataError(e) => {
            // Only a document too deeply nested gets here (the target is any JSON value).
            ApiError(AppError::Validation(vec![FieldError {
                field: "body".into(),
                message: e.body_text(),
            }]))
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
        // No parameter may carry control characters: PostgreSQL refuses a NUL in text (a 500
        // before this check, for `?cursor=%00`), and none belongs in a name, id or cursor.
        let query = parts.uri.query().unwrap_or("");
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            if value.chars().any(char::is_control) {
                return Err(ApiError(AppError::Validation(vec![FieldError {
                    field: name.chars().filter(|c| !c.is_control()).take(64).collect(),
                    message: "must not contain control characters".into(),
                }])));
            }
        }
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

/// The authenticated caller of an API handler (401 when there is none).
pub struct Caller(pub Principal, pub RequestMeta);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let p = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or(ApiError(AppError::Unauthorized))?;
        let meta = parts
            .extensions
            .get::<RequestMeta>()
            .cloned()
            .unwrap_or_default();
        Ok(Caller(p, meta))
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

    #[test]
    fn integral_floats_become_integers() {
        let mut v = serde_json::json!({"a": 68.0, "b": [1.5, -3.0, 1e300], "c": {"d": 1.8e19}});
        integral_floats_as_integers(&mut v);
        assert_eq!(v["a"], serde_json::json!(68));
        assert!(v["a"].is_i64());
        assert_eq!(v["b"][0], serde_json::json!(1.5));
        assert!(v["b"][1].is_i64());
        assert!(v["b"][2].is_f64());
        assert!(v["c"]["d"].is_u64());
    }
}

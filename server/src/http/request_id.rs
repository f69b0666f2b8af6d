//! The request id: the caller's `X-Request-Id` when it is a plain token, else a fresh one.
//!
//! The id ends up in logs, in the response and in the audit log, so a caller must not be able
//! to write anything else there (a megabyte, control characters, text posing as another
//! entry).

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

pub const HEADER: &str = "x-request-id";

/// At most 64 characters of `A-Z a-z 0-9 . _ -`.
pub fn acceptable(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Replaces a missing or unacceptable `X-Request-Id` with a fresh UUID before anything reads it
/// (the tracing span, the audit metadata, the response header).
pub async fn sanitize(mut req: Request, next: Next) -> Response {
    let headers = req.headers_mut();
    let values: Vec<&HeaderValue> = headers.get_all(HEADER).iter().collect();
    let keep = values.len() == 1 && acceptable(values[0].as_bytes());
    if !keep {
        let fresh = uuid::Uuid::new_v4().to_string();
        if let Ok(v) = HeaderValue::from_str(&fresh) {
            headers.insert(HEADER, v);
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::acceptable;

    #[test]
    fn only_short_plain_tokens() {
        assert!(acceptable(b"req-42.a_B"));
        assert!(acceptable(&[b'a'; 64]));
        assert!(!acceptable(&[b'a'; 65]));
        assert!(!acceptable(b""));
        assert!(!acceptable(b"a b"));
        assert!(!acceptable(b"a\tb"));
        assert!(!acceptable("é".as_bytes()));
        assert!(!acceptable(b"x\",\"action\":\"forged"));
    }
}

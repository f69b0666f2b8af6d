//! The error responses of the OpenAPI document, in one place: every operation lists the
//! problem documents it can answer with, as `application/problem+json` (handlers only declare
//! their success responses and any error they want to describe specially).

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response};

pub const PROBLEM_JSON: &str = "application/problem+json";

/// Adds the problem responses each operation can really return, by its shape.
pub struct ProblemResponses;

impl utoipa::Modify for ProblemResponses {
    fn modify(&self, openapi: &mut OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (unsafe_method, op) in [
                (false, item.get.as_mut()),
                (true, item.post.as_mut()),
                (true, item.put.as_mut()),
                (true, item.patch.as_mut()),
                (true, item.delete.as_mut()),
            ] {
                if let Some(op) = op {
                    add_problems(path, unsafe_method, op);
                }
            }
        }
    }
}

/// The statuses an operation can answer with, besides its own.
fn problem_statuses(path: &str, unsafe_method: bool, op: &Operation) -> Vec<u16> {
    let params = op.parameters.as_deref().unwrap_or_default();
    let has_query = params.iter().any(|p| p.parameter_in == ParameterIn::Query);
    let has_path = path.contains('{');
    let has_body = op.request_body.is_some();
    let public = op
        .security
        .as_ref()
        .is_some_and(|s| s.contains(&SecurityRequirement::default()));
    let sign_in = path.contains("/auth/");
    let mut statuses = vec![
        // A bad or expired bearer token is refused on every route, public ones included.
        401, 500,
    ];
    if has_body || has_query {
        // Malformed JSON or query string (400), a wrong type or value in a field (422).
        statuses.extend([400, 422]);
    }
    if has_body {
        statuses.extend([413, 415]);
    }
    // Permissions, and cross-site writes (refused on every unsafe method).
    if unsafe_method || !public {
        statuses.push(403);
    }
    if has_path {
        statuses.push(404);
    }
    // Name conflicts on writes; deletes of objects still in use.
    if unsafe_method && !sign_in {
        statuses.push(409);
    }
    if sign_in && unsafe_method && !path.ends_with("/logout") {
        statuses.push(429);
    }
    statuses
}

fn add_problems(path: &str, unsafe_method: bool, op: &mut Operation) {
    // Error responses a handler declared with `body = Problem` say `application/json`: the
    // server answers `application/problem+json`.
    for (status, response) in op.responses.responses.iter_mut() {
        let is_error = status.starts_with('4') || status.starts_with('5');
        if let (true, RefOr::T(r)) = (is_error, response) {
            if let Some(c) = r.content.shift_remove("application/json") {
                r.content.insert(PROBLEM_JSON.to_string(), c);
            }
        }
    }
    for status in problem_statuses(path, unsafe_method, op) {
        op.responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| RefOr::T(problem_response(status)));
    }
}

fn problem_response(status: u16) -> Response {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let mut r = Response::new(format!("{reason} (a problem document, RFC 9457)"));
    r.content.insert(
        PROBLEM_JSON.to_string(),
        Content::new(Some(Ref::from_schema_name("Problem"))),
    );
    r
}

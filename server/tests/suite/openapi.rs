//! The OpenAPI document is well formed for clients and validators: every array schema says
//! what its items are, and every operation documents the problem documents it can answer
//! with, as `application/problem+json`.

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::both_stores;
use crate::common::{Kind, TestApp};

both_stores!(openapi_schemas_and_problems_are_documented);

/// Every `type: array` schema (anywhere in the document) has an object `items`.
fn arrays_without_items(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let is_array = match map.get("type") {
                Some(Value::String(t)) => t == "array",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
                _ => false,
            };
            if is_array && !map.get("items").is_some_and(Value::is_object) {
                out.push(at.to_string());
            }
            for (k, child) in map {
                arrays_without_items(child, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                arrays_without_items(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

async fn openapi_schemas_and_problems_are_documented(kind: Kind) {
    let app = TestApp::new(kind).await;
    let r = app
        .call(Method::GET, "/api/v1/openapi.json", None, None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let doc = &r.body;

    let mut bad = Vec::new();
    arrays_without_items(doc, "#", &mut bad);
    assert!(bad.is_empty(), "array schemas without items: {bad:#?}");
    let slices = &doc["components"]["schemas"]["Job"]["properties"]["slices"];
    assert_eq!(slices["type"], "array", "{slices}");
    assert_eq!(slices["items"]["type"], "array", "{slices}");
    assert_eq!(slices["items"]["items"]["type"], "integer", "{slices}");
    assert_eq!(slices["items"]["minItems"], 2, "{slices}");
    assert_eq!(slices["items"]["maxItems"], 2, "{slices}");

    // Rules about one field are in the schema (schemathesis sends what the schema allows).
    let users = &doc["paths"]["/api/v1/users"]["get"]["parameters"];
    let limit = users
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .unwrap();
    assert_eq!(limit["schema"]["minimum"], 1, "{limit}");
    assert_eq!(limit["schema"]["maximum"], 500, "{limit}");
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["CreateGroup"]["properties"]["name"]["maxLength"],
        64
    );
    assert_eq!(schemas["PoolNode"]["properties"]["gpus"]["maximum"], 16);
    assert_eq!(
        schemas["SubmitJob"]["properties"]["duration_ms"]["maximum"],
        2_592_000_000_i64
    );

    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            let unsafe_method = method != "get";
            let has_body = op.get("requestBody").is_some();
            let mut expected = vec!["401", "500"];
            if unsafe_method {
                expected.push("403");
            }
            if path.contains('{') {
                expected.push("404");
            }
            if unsafe_method && !path.contains("/auth/") {
                expected.push("409");
            }
            if has_body {
                expected.extend(["400", "413", "415", "422"]);
            }
            if path.ends_with("/auth/login") {
                expected.push("429");
            }
            for status in expected {
                if !responses.contains_key(status) {
                    missing.push(format!("{} {path}: {status}", method.to_uppercase()));
                }
            }
            for (status, response) in responses {
                if !(status.starts_with('4') || status.starts_with('5')) {
                    continue;
                }
                let types: Vec<&String> = response["content"]
                    .as_object()
                    .map(|c| c.keys().collect())
                    .unwrap_or_default();
                assert_eq!(
                    types,
                    ["application/problem+json"],
                    "{} {path} {status}",
                    method.to_uppercase()
                );
                assert_eq!(
                    response["content"]["application/problem+json"]["schema"]["$ref"],
                    "#/components/schemas/Problem",
                    "{} {path} {status}",
                    method.to_uppercase()
                );
            }
        }
    }
    assert!(
        missing.is_empty(),
        "undocumented problem responses: {missing:#?}"
    );
    app.finish().await;
}

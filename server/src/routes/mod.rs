//! Router assembly, above every domain: the REST API under `/api/v1` (OpenAPI 3.1 at
//! `/api/v1/openapi.json`), health and metrics at the root, the pages, the middleware every
//! request passes, and starting and stopping the server (`serve`). Only this module imports
//! the domains' routers; they import the toolkit in [`crate::http`], never this. The state,
//! [`AppState`] (`crate::state`), is the top layer's: the domains' routers are generic over
//! it and take their parts by `FromRef`.

use std::time::Instant;

pub mod assets;
mod metrics;
pub mod serve;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::http::error::{self, ApiError, AppError};
use crate::http::{problems, request_id};
use crate::state::AppState;

#[derive(OpenApi)]
#[openapi(
    info(title = "Switchyard API", description = "Self-service AI infrastructure control plane. Authenticate with `Authorization: Bearer <token>` (from `POST /api/v1/auth/login` or `POST /api/v1/tokens`). Errors are RFC 9457 problem documents."),
    components(schemas(error::Problem, error::ProblemField)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
        };
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// The REST API router and its OpenAPI document.
pub fn rest() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest(
            "/api/v1",
            OpenApiRouter::new()
                .merge(crate::identity::api::router())
                .merge(crate::identity::sso::api::router())
                .merge(crate::access::api::router())
                .merge(crate::catalog::api::router())
                .merge(crate::gateway::api::router())
                .merge(crate::gateway::tcp_api::router())
                .merge(crate::tenancy::router())
                .merge(crate::audit::api::router())
                .merge(crate::scheduler::api::router())
                .merge(crate::policy::grants::router()),
        )
        .split_for_parts();
    // After the merge: the modifiers of `ApiDoc` run before the routes' paths are in it.
    let (router, mut openapi) = (router, openapi);
    utoipa::Modify::modify(&problems::ProblemResponses, &mut openapi);
    (router, openapi)
}

/// The whole application: API, health, metrics, pages, static files, middleware.
pub fn app(mut state: AppState) -> Router {
    // Static files: precompressed, cached by their hashed names (see `assets`).
    assets::use_hash_file(&mut state.leptos);
    let static_files = assets::Assets::new(&state.leptos.site_root, &state.leptos.site_pkg_dir);
    let (api, openapi) = rest();
    let openapi_json = serde_json::to_string(&openapi).unwrap_or_default();
    let max_body = state.config.max_body_bytes;
    let router = Router::new()
        .merge(api)
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let body = openapi_json.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        )
        .merge(crate::identity::scim::router())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::metrics));
    let router = crate::web::routes(router, &state)
        .method_not_allowed_fallback(|| async { ApiError(AppError::MethodNotAllowed) })
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(state.clone(), crate::web::auth::authenticate))
        // Outside authentication: the files are public, and a page's four requests for them
        // need no session lookup.
        .layer(middleware::from_fn_with_state(static_files, assets::serve))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(CatchPanicLayer::custom(|_| ApiError(AppError::Internal).into_response()))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::web::headers::security_headers,
        ))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                let id = req
                    .headers()
                    .get("x-request-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
            }),
        )
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        // Outermost: the caller's id is checked before anything reads it.
        .layer(middleware::from_fn(request_id::sanitize));
    router.with_state(state)
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.store.ping().await {
        "ready".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
    }
}

/// Counts and times every request by its route template (not its raw path, to bound series).
async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| {
            let path = req.uri().path();
            if path.starts_with("/pkg/") {
                "/pkg/*".to_string()
            } else {
                "unmatched".to_string()
            }
        });
    let started = Instant::now();
    let resp = next.run(req).await;
    state.metrics.observe(
        &method,
        &route,
        resp.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

//! The pages: Leptos SSR routes and server functions, static files, the sign-in and sign-out
//! form handlers, and the [`app::backend::Backend`] the server functions call.

pub mod auth;
mod backend;
pub mod client_ip;
pub mod form_echo;
mod gateway_backend;
pub mod headers;
pub mod sso;

use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};

use app::backend::SharedBackend;
use app::model::Principal;

use crate::http::error::{ApiError, AppError};
use crate::state::AppState;

pub fn routes(router: Router<AppState>, state: &AppState) -> Router<AppState> {
    let backend: SharedBackend = Arc::new(backend::WebBackend {
        state: state.clone(),
    });
    let leptos_routes = page_routes();
    let options = state.leptos.clone();
    // The pages and their server functions, with the no-JavaScript form echo around them.
    let pages = Router::new()
        .leptos_routes_with_context(
            state,
            leptos_routes,
            move || {
                provide_context(backend.clone());
                headers::page_csp_context();
            },
            move || app::shell(options.clone()),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            form_echo::FormEchoState::new(state.clone()),
            form_echo::echo_forms,
        ));
    router
        .route("/", get(home))
        .route("/auth/login", post(auth::login_form))
        .route("/auth/logout", post(auth::logout_form))
        .route("/auth/sso/{tenant}/{provider}", get(sso::start))
        .route("/auth/oidc/callback", get(sso::oidc_callback))
        .route("/auth/ldap/{tenant}/{provider}", post(sso::ldap_login))
        .route("/auth/saml/{tenant}/{provider}/acs", post(sso::saml_acs))
        .route(
            "/auth/saml/{tenant}/{provider}/metadata",
            get(sso::saml_metadata),
        )
        .route("/auth/saml/finish", get(sso::saml_finish))
        .merge(pages)
        .fallback(fallback)
}

/// The pages' routes, generated once per process.
///
/// `generate_route_list` renders the app once under leptos_server's `SuppressResourceLoad`
/// guard, which sets a process-wide flag: a `Resource` first polled while it is set, by any
/// request on any thread, waits forever, and the page waiting for it (`SsrMode::Async`) never
/// answers. Generated once, before the first router exists, the flag is never up while a page
/// renders. (The server builds one router; the tests build one per app, while other tests'
/// pages render: that was the integration suite's rare hang.)
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(app::App)).clone()
}

async fn home(principal: Option<axum::Extension<Principal>>) -> Redirect {
    if principal.is_some() {
        Redirect::to("/portal")
    } else {
        Redirect::to("/login")
    }
}

/// Unknown API paths answer a problem document; everything else is a static file or the
/// app's own 404 page.
async fn fallback(uri: Uri, State(state): State<AppState>, req: Request) -> Response {
    if uri.path().starts_with("/api/") || uri.path().starts_with("/_sf/") {
        return ApiError(AppError::NotFound).into_response();
    }
    let handler = leptos_axum::file_and_error_handler_with_context::<AppState, _>(
        headers::page_csp_context,
        app::shell,
    );
    handler(uri, State(state), req).await
}

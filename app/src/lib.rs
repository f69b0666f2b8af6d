//! Switchyard's pages and the types they share with the server.
//!
//! Every page renders on the server first, with its data (`SsrMode::Async`: the HTML is complete
//! without JavaScript, and forms are plain HTML forms posting to server functions), and is then
//! hydrated by `frontend` in the browser.

pub mod access;
pub mod api;
#[cfg(feature = "ssr")]
pub mod backend;
pub mod error;
pub mod form;
pub mod model;
mod pages;
#[cfg(feature = "ssr")]
pub mod schema;
pub mod secret;
pub mod time;
mod ui;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::{
    components::{ParentRoute, Route, Router, Routes},
    path, SsrMode,
};

use crate::model::SessionInfo;
use crate::pages::*;

/// The HTML document around the app (server side only).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                // ECharts for the charts (pages/chart.rs); deferred, so it is loaded
                // before the app hydrates and never blocks the first paint.
                <script src="/echarts.min.js" defer></script>
                // `/pkg/switchyard.css`, or its content-hashed name when cargo-leptos hashed the
                // files (`hash-files`), as the hydration scripts' names.
                <HashedStylesheet options=options.clone() id="leptos"/>
                <HydrationScripts options/>
                <MetaTags/>
                {form::echo_script()}
            </head>
            <body class="bg-slate-50 text-slate-900 antialiased">
                <App/>
            </body>
        </html>
    }
}

/// The browser session, loaded once per page and shared by the shell and the pages.
#[derive(Clone, Copy)]
pub struct SessionResource(pub Resource<Result<Option<SessionInfo>, error::AppError>>);

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let session = Resource::new(|| (), |_| api::get_session());
    provide_context(SessionResource(session));
    // Marks the document once the WebAssembly has taken over (the browser tests wait for it).
    Effect::new(|_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });

    view! {
        <Title formatter=|t: String| format!("{t} · Switchyard")/>
        <Router>
            <Routes fallback=|| view! { <NotFound/> }>
                <Route path=path!("/login") view=LoginPage ssr=SsrMode::Async/>
                <Route path=path!("/t/:tenant/login") view=TenantLoginPage ssr=SsrMode::Async/>
                <ParentRoute path=path!("") view=Shell ssr=SsrMode::Async>
                    <Route path=path!("/portal") view=PortalPage ssr=SsrMode::Async/>
                    <Route path=path!("/portal/jobs/:id") view=JobPage ssr=SsrMode::Async/>
                    <Route path=path!("/jobs") view=JobsPage ssr=SsrMode::Async/>
                    <Route path=path!("/history") view=HistoryPage ssr=SsrMode::Async/>
                    <Route path=path!("/policy") view=|| view! { <Gate path="/policy"><PolicyPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/platform") view=|| view! { <Gate path="/platform"><PlatformPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view=|| view! { <Gate path="/audit"><AuditPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/settings") view=|| view! { <Gate path="/settings"><SettingsPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/settings/groups/:id") view=|| view! { <Gate path="/settings"><GroupPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/settings/sso") view=|| view! { <Gate path="/settings"><SsoSettingsPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/catalog") view=CatalogPage ssr=SsrMode::Async/>
                    <Route path=path!("/settings/users/:id") view=|| view! { <Gate path="/settings"><UserPage/></Gate> } ssr=SsrMode::Async/>
                    <Route path=path!("/settings/users/:id/access") view=|| view! { <Gate path="/settings"><UserAccessPage/></Gate> } ssr=SsrMode::Async/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}

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
    path, Lazy, LazyRoute, SsrMode,
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
    // `frontend` marks the document (`body[data-hydrated]`) once the page has hydrated.

    view! {
        <Router>
            <Routes fallback=|| view! { <Title formatter=page_title/><NotFound/> }>
                <Route path=path!("/login") view=|| titled(view! { <LoginPage/> }) ssr=SsrMode::Async/>
                <Route path=path!("/t/:tenant/login") view=|| titled(view! { <TenantLoginPage/> }) ssr=SsrMode::Async/>
                <ParentRoute path=path!("") view=Shell ssr=SsrMode::Async>
                    <Route path=path!("/portal") view=|| titled(view! { <PortalPage/> }) ssr=SsrMode::Async/>
                    <Route path=path!("/portal/jobs/:id") view=|| titled(view! { <JobPage/> }) ssr=SsrMode::Async/>
                    <Route path=path!("/jobs") view={Lazy::<JobsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/history") view={Lazy::<HistoryRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/catalog") view={Lazy::<CatalogRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/endpoints") view={Lazy::<EndpointsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/endpoints/:id") view={Lazy::<EndpointRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/gateways") view={Lazy::<GatewaysRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/policy") view={Lazy::<PolicyRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/platform") view={Lazy::<PlatformRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view={Lazy::<AuditRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/settings") view={Lazy::<SettingsRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/settings/groups/:id") view={Lazy::<GroupRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/settings/sso") view={Lazy::<SsoRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/settings/users/:id") view={Lazy::<UserRoute>::new()} ssr=SsrMode::Async/>
                    <Route path=path!("/settings/users/:id/access") view={Lazy::<UserAccessRoute>::new()} ssr=SsrMode::Async/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}

/// "Jobs · Switchyard".
fn page_title(title: String) -> String {
    format!("{title} · Switchyard")
}

/// A page with its title's formatter. Each page brings it with its title: one in the app
/// around the pages would set an empty title while an administration page's code loads.
fn titled(page: impl IntoView + 'static) -> AnyView {
    view! { <Title formatter=page_title/> {page} }.into_any()
}

/// The administration pages (everything behind [`Gate`]). With `cargo leptos build --split`
/// their code is a WebAssembly chunk of its own that the browser loads when one of them is
/// first shown, so a builder's pages (portal, jobs, history, catalog) load without it. One
/// chunk for all of them, not one per page: split per page, the pages shared code in over a
/// hundred small chunks, and a page hydrated after fetching and instantiating each
/// (BENCHMARKS.md, "Bundle size"). The server renders them as any other page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AdminPage {
    Policy,
    Platform,
    Audit,
    Settings,
    Group,
    Sso,
    User,
    UserAccess,
    Gateways,
}

#[leptos::lazy]
fn admin_page(page: AdminPage) -> AnyView {
    match page {
        AdminPage::Policy => view! { <Gate path="/policy"><PolicyPage/></Gate> }.into_any(),
        AdminPage::Platform => view! { <Gate path="/platform"><PlatformPage/></Gate> }.into_any(),
        AdminPage::Audit => view! { <Gate path="/audit"><AuditPage/></Gate> }.into_any(),
        AdminPage::Settings => view! { <Gate path="/settings"><SettingsPage/></Gate> }.into_any(),
        AdminPage::Group => view! { <Gate path="/settings"><GroupPage/></Gate> }.into_any(),
        AdminPage::Sso => view! { <Gate path="/settings"><SsoSettingsPage/></Gate> }.into_any(),
        AdminPage::User => view! { <Gate path="/settings"><UserPage/></Gate> }.into_any(),
        AdminPage::UserAccess => {
            view! { <Gate path="/settings"><UserAccessPage/></Gate> }.into_any()
        }
        AdminPage::Gateways => view! { <Gate path="/gateways"><GatewaysPage/></Gate> }.into_any(),
    }
}

/// The jobs list, history, the catalog and the endpoints: read by builders now and then, not
/// on every visit (the portal lists a builder's own jobs), and the history's charts are most
/// of its code. A chunk of their own, as the administration pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BrowsePage {
    Jobs,
    History,
    Catalog,
    Endpoints,
    Endpoint,
}

#[leptos::lazy]
fn browse_page(page: BrowsePage) -> AnyView {
    match page {
        BrowsePage::Jobs => view! { <JobsPage/> }.into_any(),
        BrowsePage::History => view! { <HistoryPage/> }.into_any(),
        BrowsePage::Catalog => view! { <CatalogPage/> }.into_any(),
        BrowsePage::Endpoints => view! { <EndpointsPage/> }.into_any(),
        BrowsePage::Endpoint => view! { <EndpointPage/> }.into_any(),
    }
}

/// Loads the chunk of the page at `path` (a URL path; the prefixes are those of the lazy routes
/// in [`App`]), if it has one. `frontend` awaits it before
/// hydrating: the router hydrates a nested route's view as soon as it is built, so a chunk
/// still loading then would leave the server's HTML in place and add the page a second time.
#[cfg(feature = "hydrate")]
pub async fn load_page_chunk(path: &str) {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    if ["/policy", "/platform", "/audit", "/settings", "/gateways"]
        .into_iter()
        .any(under)
    {
        __preload_admin_page().await;
    } else if ["/jobs", "/history", "/catalog", "/endpoints"]
        .into_iter()
        .any(under)
    {
        __preload_browse_page().await;
    }
}

/// The route of each lazily loaded page: its view is its chunk's.
macro_rules! lazy_routes {
    ($($name:ident => $chunk:ident($page:expr);)*) => {$(
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        impl LazyRoute for $name {
            fn data() -> Self {
                $name
            }

            async fn view(_this: Self) -> AnyView {
                titled($chunk($page).await)
            }
        }
    )*};
}

lazy_routes! {
    JobsRoute => browse_page(BrowsePage::Jobs);
    HistoryRoute => browse_page(BrowsePage::History);
    CatalogRoute => browse_page(BrowsePage::Catalog);
    EndpointsRoute => browse_page(BrowsePage::Endpoints);
    EndpointRoute => browse_page(BrowsePage::Endpoint);
    PolicyRoute => admin_page(AdminPage::Policy);
    PlatformRoute => admin_page(AdminPage::Platform);
    AuditRoute => admin_page(AdminPage::Audit);
    SettingsRoute => admin_page(AdminPage::Settings);
    GroupRoute => admin_page(AdminPage::Group);
    SsoRoute => admin_page(AdminPage::Sso);
    UserRoute => admin_page(AdminPage::User);
    UserAccessRoute => admin_page(AdminPage::UserAccess);
    GatewaysRoute => admin_page(AdminPage::Gateways);
}

use leptos::prelude::*;
use leptos_router::components::{Outlet, A};

use crate::access::navigation;
use crate::model::SessionInfo;
use crate::SessionResource;

/// The frame of every signed-in page: the navigation (only what the user may use) and the
/// user's menu with sign-out.
#[component]
pub fn Shell() -> impl IntoView {
    let session = expect_context::<SessionResource>().0;
    view! {
        <div class="min-h-screen">
            <header class="bg-slate-900 text-slate-100">
                <div class="mx-auto flex max-w-7xl items-center gap-8 px-6 py-3">
                    <a href="/portal" class="flex items-center gap-2 text-base font-semibold tracking-tight">
                        <span class="inline-block h-3 w-3 rounded-sm bg-indigo-400"></span>
                        "Switchyard"
                    </a>
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            match session.await {
                                Ok(Some(s)) => view! { <Nav session=s/> }.into_any(),
                                _ => view! {
                                    <a href="/login" class="ml-auto text-sm">"Sign in"</a>
                                }.into_any(),
                            }
                        })}
                    </Transition>
                </div>
            </header>
            <main class="mx-auto max-w-7xl px-6 py-8">
                <Outlet/>
            </main>
        </div>
    }
}

#[component]
fn Nav(session: SessionInfo) -> impl IntoView {
    let items = navigation(&session.me);
    let me = session.me;
    view! {
        <nav class="flex items-center gap-1 text-sm" aria-label="Main">
            {items
                .into_iter()
                .map(|(href, label)| view! {
                    <A href=href attr:class="rounded-md px-3 py-1.5 text-slate-300 hover:bg-slate-800 hover:text-white aria-[current=page]:bg-slate-700 aria-[current=page]:text-white">
                        {label}
                    </A>
                })
                .collect_view()}
        </nav>
        <div class="ml-auto flex items-center gap-4 text-sm">
            <span class="text-slate-300" data-testid="whoami">
                <span class="font-medium text-white">{me.display_name}</span>
                " · " {me.tenant_name}
            </span>
            <form method="post" action="/auth/logout">
                <input type="hidden" name="csrf" value=session.csrf/>
                <button type="submit" class="rounded-md border border-slate-600 px-3 py-1 text-slate-200 hover:bg-slate-800">
                    "Sign out"
                </button>
            </form>
        </div>
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    {
        if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
            resp.set_status(http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <main class="mx-auto max-w-xl px-6 py-24 text-center">
            <h1 class="text-2xl font-semibold">"Page not found"</h1>
            <p class="mt-2 text-slate-600">"There is nothing at this address."</p>
            <a href="/portal" class="mt-6 inline-block text-indigo-700 underline">"Back to the portal"</a>
        </main>
    }
}

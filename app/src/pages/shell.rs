use leptos::prelude::*;
use leptos_router::components::{Outlet, A};

use leptos_meta::Title;

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
                <div class="mx-auto flex max-w-7xl flex-wrap items-center gap-x-6 gap-y-2 px-4 py-3 sm:px-6">
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
            <main class="mx-auto max-w-7xl px-4 py-6 sm:px-6 sm:py-8">
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
        <nav class="order-last flex w-full flex-wrap items-center gap-1 text-sm sm:order-none sm:w-auto" aria-label="Main">
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
                <span class="hidden sm:inline">" · " {me.tenant_name}</span>
            </span>
            <form method="post" action="/auth/logout">
                <input type="hidden" name="csrf" value=session.csrf/>
                <button type="submit" class="whitespace-nowrap rounded-md border border-slate-600 px-3 py-1 text-slate-200 hover:bg-slate-800">
                    "Sign out"
                </button>
            </form>
        </div>
    }
}

/// A page only some users may open (the ones [`navigation`] lists it for). Anyone else gets
/// 403 and a page that shows nothing of it; its data is not even asked for.
#[component]
pub fn Gate(path: &'static str, children: ChildrenFn) -> impl IntoView {
    let session = expect_context::<SessionResource>().0;
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let children = children.clone();
                Suspend::new(async move {
                    match session.await {
                        Ok(Some(s)) if navigation(&s.me).iter().any(|(href, _)| *href == path) => {
                            children().into_any()
                        }
                        _ => view! { <Forbidden/> }.into_any(),
                    }
                })
            }}
        </Suspense>
    }
}

/// The answer to a page the user may not open: status 403, and nothing of the page.
#[component]
pub fn Forbidden() -> impl IntoView {
    crate::ui::set_status(403);
    view! {
        <Title text="Not allowed"/>
        <div class="mx-auto max-w-xl py-16 text-center" data-testid="forbidden">
            <h1 class="text-2xl font-semibold">"Not allowed"</h1>
            <p class="mt-2 text-slate-600">"Your account may not open this page. Ask an administrator of your organization if you need it."</p>
            <a href="/portal" class="mt-6 inline-block text-indigo-700 underline">"Back to the portal"</a>
        </div>
    }
}

#[component]
pub fn NotFound() -> impl IntoView {
    crate::ui::set_status(404);
    view! {
        <Title text="Page not found"/>
        <header class="bg-slate-900 text-slate-100">
            <div class="mx-auto flex max-w-7xl items-center px-4 py-3 sm:px-6">
                <a href="/portal" class="flex items-center gap-2 text-base font-semibold tracking-tight">
                    <span class="inline-block h-3 w-3 rounded-sm bg-indigo-400"></span>
                    "Switchyard"
                </a>
            </div>
        </header>
        <main class="mx-auto max-w-xl px-6 py-24 text-center" data-testid="not-found">
            <h1 class="text-2xl font-semibold">"Page not found"</h1>
            <p class="mt-2 text-slate-600">"There is nothing at this address."</p>
            <a href="/portal" class="mt-6 inline-block text-indigo-700 underline">"Back to the portal"</a>
        </main>
    }
}

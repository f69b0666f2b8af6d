use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::ui::{BUTTON, INPUT, LABEL};

/// Sign-in with a local account. A plain form posting to `/auth/login` (the server sets the
/// session cookie and redirects), so it works with or without WebAssembly.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let error = move || {
        query.read().get("error").map(|code| match code.as_str() {
            "invalid" => "Wrong organization, username or password.",
            "throttled" => "Too many failed attempts. Wait a few minutes, then try again.",
            "expired" => "Your session has ended. Please sign in again.",
            _ => "Sign-in failed. Please try again.",
        })
    };
    // Read once, untracked, and rendered as plain `value` attributes: a reactive `prop:value`
    // would be re-applied at hydration and wipe whatever the user typed before the WASM loaded.
    let tenant = query.read_untracked().get("tenant").unwrap_or_default();
    let next = query.read_untracked().get("next").unwrap_or_default();
    let signed_out = move || query.read().get("signed_out").is_some();

    view! {
        <Title text="Sign in"/>
        <main class="flex min-h-screen items-center justify-center bg-slate-100 px-4">
            <div class="w-full max-w-sm">
                <div class="mb-6 text-center">
                    <div class="mx-auto mb-3 h-8 w-8 rounded bg-indigo-600"></div>
                    <h1 class="text-xl font-semibold">"Sign in to Switchyard"</h1>
                </div>
                <form method="post" action="/auth/login" class="space-y-4 rounded-lg border border-slate-200 bg-white p-6 shadow-sm">
                    {move || error().map(|e| view! {
                        <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800">{e}</div>
                    })}
                    {move || signed_out().then(|| view! {
                        <div role="status" class="rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-800">"You have signed out."</div>
                    })}
                    <input type="hidden" name="next" value=next/>
                    <div>
                        <label for="tenant" class=LABEL>"Organization"</label>
                        <input id="tenant" name="tenant" required autocomplete="organization" placeholder="acme" class=INPUT value=tenant/>
                    </div>
                    <div>
                        <label for="username" class=LABEL>"Username"</label>
                        <input id="username" name="username" required autocomplete="username" class=INPUT/>
                    </div>
                    <div>
                        <label for="password" class=LABEL>"Password"</label>
                        <input id="password" name="password" type="password" required autocomplete="current-password" class=INPUT/>
                    </div>
                    <button type="submit" class=format!("{BUTTON} w-full justify-center")>"Sign in"</button>
                </form>
            </div>
        </main>
    }
}

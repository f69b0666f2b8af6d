use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::load_sign_in_options;
use crate::ui::{BUTTON, INPUT, LABEL};

/// What went wrong, in words, for the `error` code the server redirects with.
fn error_message(code: &str) -> &'static str {
    match code {
        "invalid" => "Wrong organization, username or password.",
        "throttled" => "Too many failed attempts. Wait a few minutes, then try again.",
        "too_long" => "That organization or username is too long (at most 64 and 256 characters).",
        "expired" => "Your session has ended. Please sign in again.",
        "sso_state" => "That sign-in link has expired, was already used, or was started in another browser. Start again.",
        "sso_token" => "Your identity provider's answer could not be verified, so you were not signed in. Tell your administrator.",
        "sso_provider" => "Your identity provider did not complete the sign-in. Try again, or tell your administrator.",
        "sso_denied" => "Your account is not in a group that may use Switchyard. Ask your administrator for access.",
        "sso_account" => "A local account already uses your username. Ask your administrator to link it.",
        "sso_link" => "An account with your username exists but cannot be linked to this sign-in. Ask your administrator.",
        "sso_username" => "Your identity provider sent no usable username. Tell your administrator.",
        "sso_disabled" => "Your account is disabled.",
        "sso_unknown" => "That sign-in method is not available for this organization.",
        _ => "Sign-in failed. Please try again.",
    }
}

#[component]
fn Notices() -> impl IntoView {
    let query = use_query_map();
    let error = move || query.read().get("error").map(|c| error_message(&c));
    let signed_out = move || query.read().get("signed_out").is_some();
    view! {
        {move || error().map(|e| view! {
            <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800">{e}</div>
        })}
        {move || signed_out().then(|| view! {
            <div role="status" class="rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-800">"You have signed out."</div>
        })}
    }
}

/// The local-account form: a plain form posting to `/auth/login` (the server sets the session
/// cookie and redirects), so it works with or without WebAssembly. With `fixed_tenant` the
/// organization is not asked for. After a failed sign-in the server sends the organization and
/// username back in the address, and they are typed in again (never the password).
#[component]
fn PasswordForm(
    tenant: String,
    fixed_tenant: bool,
    next: String,
    #[prop(optional)] username: String,
) -> impl IntoView {
    // Rendered as plain `value` attributes: a reactive `prop:value` would be re-applied at
    // hydration and wipe whatever the user typed before the WASM loaded.
    view! {
        <form method="post" action="/auth/login" class="space-y-4">
            <input type="hidden" name="next" value=next/>
            {if fixed_tenant {
                view! { <input type="hidden" name="tenant" value=tenant/> }.into_any()
            } else {
                view! {
                    <div>
                        <label for="tenant" class=LABEL>"Organization"</label>
                        <input id="tenant" name="tenant" required maxlength="64" autocomplete="organization" placeholder="acme" class=INPUT value=tenant/>
                    </div>
                }.into_any()
            }}
            <div>
                <label for="username" class=LABEL>"Username"</label>
                <input id="username" name="username" required maxlength="256" autocomplete="username" class=INPUT value=username/>
            </div>
            <div>
                <label for="password" class=LABEL>"Password"</label>
                <input id="password" name="password" type="password" required autocomplete="current-password" class=INPUT/>
            </div>
            <button type="submit" class=format!("{BUTTON} w-full justify-center")>"Sign in"</button>
        </form>
    }
}

#[component]
fn Card(title: String, children: Children) -> impl IntoView {
    view! {
        <main class="flex min-h-screen items-center justify-center bg-slate-100 px-4">
            <div class="w-full max-w-sm">
                <div class="mb-6 text-center">
                    <div class="mx-auto mb-3 h-8 w-8 rounded bg-indigo-600"></div>
                    <h1 class="text-xl font-semibold">{title}</h1>
                </div>
                <div class="space-y-4 rounded-lg border border-slate-200 bg-white p-6 shadow-sm">
                    {children()}
                </div>
            </div>
        </main>
    }
}

/// Sign-in with a local account, asking for the organization.
#[component]
pub fn LoginPage() -> impl IntoView {
    let query = use_query_map();
    let tenant = query.read_untracked().get("tenant").unwrap_or_default();
    let next = query.read_untracked().get("next").unwrap_or_default();
    let username = query.read_untracked().get("username").unwrap_or_default();
    view! {
        <Title text="Sign in"/>
        <Card title="Sign in to Switchyard".to_string()>
            <Notices/>
            <PasswordForm tenant=tenant fixed_tenant=false next=next username=username/>
            <p class="text-center text-xs text-slate-500">
                "Single sign-on? Open your organization's page: /t/" <em>"organization"</em> "/login"
            </p>
        </Card>
    }
}

/// A tenant's sign-in page: its identity providers as buttons, and the password form when the
/// tenant allows passwords.
#[component]
pub fn TenantLoginPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let tenant = params.read_untracked().get("tenant").unwrap_or_default();
    let next = query.read_untracked().get("next").unwrap_or_default();
    let options = Resource::new(
        move || params.read().get("tenant").unwrap_or_default(),
        load_sign_in_options,
    );
    view! {
        <Title text="Sign in"/>
        <Suspense fallback=|| view! { <p class="p-8 text-center text-slate-500">"Loading…"</p> }>
            {move || {
                let tenant = tenant.clone();
                let next = next.clone();
                options.get().map(move |r| match r {
                    Err(_) => view! {
                        <Card title="Sign in to Switchyard".to_string()>
                            <div role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800">
                                "There is no organization named “" {tenant.clone()} "”."
                            </div>
                            <a href="/login" class="block text-center text-sm text-indigo-700 underline">"Sign in with a local account"</a>
                        </Card>
                    }.into_any(),
                    Ok(o) => {
                        let suffix = if next.is_empty() {
                            String::new()
                        } else {
                            format!("?next={}", urlencode(&next))
                        };
                        let has_providers = !o.providers.is_empty();
                        let password = o.password_login;
                        view! {
                            <Card title=format!("Sign in to {}", o.tenant_name)>
                                <Notices/>
                                <ul class="space-y-2" aria-label="Single sign-on">
                                    {o.providers.into_iter().map(|pr| {
                                        if pr.kind == crate::model::ProviderKind::Ldap {
                                            let id = format!("ldap-{}", pr.name);
                                            view! {
                                                <li>
                                                    <form method="post" action=pr.start_url.clone() class="space-y-3 rounded-md border border-slate-200 p-3" aria-label=format!("Sign in with {}", pr.display_name)>
                                                        <p class="text-sm font-medium text-slate-700">{pr.display_name.clone()}</p>
                                                        <input type="hidden" name="next" value=next.clone()/>
                                                        <div>
                                                            <label for=format!("{id}-username") class=LABEL>"Directory username"</label>
                                                            <input id=format!("{id}-username") name="username" required maxlength="256" autocomplete="username" class=INPUT/>
                                                        </div>
                                                        <div>
                                                            <label for=format!("{id}-password") class=LABEL>"Directory password"</label>
                                                            <input id=format!("{id}-password") name="password" type="password" required autocomplete="current-password" class=INPUT/>
                                                        </div>
                                                        <button type="submit" class=format!("{BUTTON} w-full justify-center")>
                                                            "Sign in with " {pr.display_name.clone()}
                                                        </button>
                                                    </form>
                                                </li>
                                            }.into_any()
                                        } else {
                                            let href = format!("{}{}", pr.start_url, suffix);
                                            view! {
                                                <li>
                                                    // `rel=external`: a full page load to the server's redirect,
                                                    // not a client-side route change.
                                                    <a href=href rel="external" class=format!("{BUTTON} w-full justify-center")>
                                                        "Sign in with " {pr.display_name}
                                                    </a>
                                                </li>
                                            }.into_any()
                                        }
                                    }).collect_view()}
                                </ul>
                                {(has_providers && password).then(|| view! {
                                    <p class="text-center text-xs uppercase tracking-wide text-slate-400">"or with a local account"</p>
                                })}
                                {password.then(|| view! {
                                    <PasswordForm tenant=o.tenant_slug.clone() fixed_tenant=true next=next.clone()/>
                                })}
                                {(!has_providers && !password).then(|| view! {
                                    <p class="text-sm text-slate-600">"This organization has no sign-in method enabled. Ask your administrator."</p>
                                })}
                            </Card>
                        }.into_any()
                    }
                })
            }}
        </Suspense>
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

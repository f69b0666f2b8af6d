use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::load_user_access;
use crate::ui::*;

/// "What can this user do": their groups and every resource they reach, with the permission
/// and where it comes from.
#[component]
pub fn UserAccessPage() -> impl IntoView {
    let params = use_params_map();
    let data = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        load_user_access,
    );
    view! {
        <Title text="What can this user do"/>
        <a href="/settings" class="text-sm text-indigo-700 hover:underline">"← Users and groups"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(a) => view! {
                        <div class="mb-6 mt-2">
                            <h1 class="text-2xl font-semibold tracking-tight">"What " <span class="font-mono">{a.username.clone()}</span> " can do"</h1>
                            <p class="mt-1 text-sm text-slate-600" data-testid="user-groups">
                                {if a.tenant_admin { "Tenant administrator: everything in the organization. ".to_string() } else { String::new() }}
                                {if a.groups.is_empty() { "In no groups.".to_string() } else { format!("Groups: {}", a.groups.join(", ")) }}
                            </p>
                        </div>
                        <Card title="Resources">
                            {if a.grants.is_empty() {
                                view! { <p class="text-sm text-slate-600">"Nothing: no group of theirs is granted anything."</p> }.into_any()
                            } else {
                                view! {
                                    <table class=TABLE data-testid="grants-table">
                                        <thead><tr><th class=TH>"Kind"</th><th class=TH>"Resource"</th><th class=TH>"Permission"</th><th class=TH>"Because of"</th></tr></thead>
                                        <tbody class="divide-y divide-slate-100">
                                            {a.grants.into_iter().map(|g| view! {
                                                <tr>
                                                    <td class=TD>{g.resource_kind.as_str()}</td>
                                                    <td class=format!("{TD} font-medium")>{g.resource_name}</td>
                                                    <td class=TD>{g.permission.as_str()}</td>
                                                    <td class=format!("{TD} text-slate-600")>{g.via.join(", ")}</td>
                                                </tr>
                                            }).collect_view()}
                                        </tbody>
                                    </table>
                                }.into_any()
                            }}
                        </Card>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

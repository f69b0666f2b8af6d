use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{load_group, AddMember, RemoveMember};
use crate::form::{done, echo_selected};
use crate::time::format_ms;
use crate::ui::*;

/// One group: its members, and adding or removing them.
#[component]
pub fn GroupPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let add = ServerAction::<AddMember>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let detail = Resource::new(
        move || (id(), add.version().get(), remove.version().get()),
        |(id, _, _)| load_group(id),
    );
    let add_value = move || add.value().get();
    let remove_value = move || remove.value().get();
    let added = done(add);
    let removed = done(remove);

    view! {
        <Title text="Group"/>
        <a href="/settings" class="text-sm text-indigo-700 hover:underline">"← Users and groups"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(d) => {
                        let group_id = d.group.id.clone();
                        let gid_add = group_id.clone();
                        view! {
                            <div class="mb-6 mt-2">
                                <h1 class="text-2xl font-semibold tracking-tight" data-testid="group-name">{d.group.name.clone()}</h1>
                                <p class="mt-1 text-sm text-slate-600">{d.group.description.clone()}</p>
                            </div>
                            <div class="grid grid-cols-1 gap-6 lg:grid-cols-3">
                                <div class="min-w-0 lg:col-span-2">
                                    <Card title="Members">
                                        {if d.members.is_empty() {
                                            view! { <p class="text-sm text-slate-600">"No members yet."</p> }.into_any()
                                        } else {
                                            view! {
                                                <table class=TABLE data-testid="members-table">
                                                    <thead><tr>
                                                        <th class=TH>"Username"</th><th class=TH>"Name"</th>
                                                        <th class=TH>"Added"</th><th class=TH></th>
                                                    </tr></thead>
                                                    <tbody class="divide-y divide-slate-100">
                                                        {d.members.into_iter().map(|m| {
                                                            let gid = group_id.clone();
                                                            view! {
                                                                <tr>
                                                                    <td class=format!("{TD} font-mono")>
                                                                        <a class="text-indigo-700 hover:underline" href=format!("/settings/users/{}/access", m.user_id) title="What can this user do">{m.username.clone()}</a>
                                                                    </td>
                                                                    <td class=TD>{m.display_name}</td>
                                                                    <td class=format!("{TD} text-slate-500")>{format_ms(m.added_at)}</td>
                                                                    <td class=format!("{TD} text-right")>
                                                                        <ActionForm action=remove>
                                                                            <CsrfField/>
                                                                            <input type="hidden" name="group_id" value=gid/>
                                                                            <input type="hidden" name="user_id" value=m.user_id/>
                                                                            <button type="submit" class=BUTTON_SMALL_DANGER aria-label=format!("Remove {}", m.username)>"Remove"</button>
                                                                        </ActionForm>
                                                                    </td>
                                                                </tr>
                                                            }
                                                        }).collect_view()}
                                                    </tbody>
                                                </table>
                                            }.into_any()
                                        }}
                                        <div class="mt-3">{form_error(remove_value)}</div>
                                        {move || removed().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Member removed."</p> })}
                                    </Card>
                                    <div class="mt-6">
                                        <Card title="Access rules">
                                            {if d.rules.is_empty() {
                                                view! { <p class="text-sm text-slate-600">"No access rules: members use the group's queues only. Rules are managed through /api/v1/access-rules."</p> }.into_any()
                                            } else {
                                                view! {
                                                    <table class=TABLE data-testid="rules-table">
                                                        <thead><tr><th class=TH>"Permission"</th><th class=TH>"On"</th><th class=TH>"Scope"</th><th class=TH>"Since"</th></tr></thead>
                                                        <tbody class="divide-y divide-slate-100">
                                                            {d.rules.into_iter().map(|r| {
                                                                let scope = match (&r.resource_id, &r.project_id) {
                                                                    (Some(id), _) => format!("one: {id}"),
                                                                    (None, Some(p)) => format!("project subtree: {p}"),
                                                                    (None, None) => "all".to_string(),
                                                                };
                                                                view! {
                                                                    <tr>
                                                                        <td class=format!("{TD} font-medium")>{r.permission.as_str()}</td>
                                                                        <td class=TD>{format!("{}s", r.resource_kind.as_str())}</td>
                                                                        <td class=format!("{TD} font-mono text-xs")>{scope}</td>
                                                                        <td class=format!("{TD} text-slate-500")>{format_ms(r.created_at)}</td>
                                                                    </tr>
                                                                }
                                                            }).collect_view()}
                                                        </tbody>
                                                    </table>
                                                }.into_any()
                                            }}
                                        </Card>
                                    </div>
                                </div>
                                <Card title="Add a member">
                                    {if d.candidates.is_empty() {
                                        view! { <p class="text-sm text-slate-600">"Every user of the tenant is already a member."</p> }.into_any()
                                    } else {
                                        view! {
                                            <ActionForm action=add>
                                                <CsrfField/>
                                                <input type="hidden" name="group_id" value=gid_add/>
                                                <label class=LABEL for="add-user">"User"</label>
                                                <select id="add-user" name="user_id" class=INPUT>
                                                    {d.candidates.into_iter().map(|u| view! {
                                                        <option selected={echo_selected::<AddMember>("user_id", &u.id)} value=u.id.clone()>{format!("{} ({})", u.display_name, u.username)}</option>
                                                    }).collect_view()}
                                                </select>
                                                {field_error(add_value, "user_id")}
                                                <div class="mt-4 flex items-center gap-4">
                                                    <button type="submit" class=BUTTON>"Add member"</button>
                                                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Member added."</span> })}
                                                </div>
                                                <div class="mt-3">{form_error(add_value)}</div>
                                            </ActionForm>
                                        }.into_any()
                                    }}
                                </Card>
                            </div>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{list_groups, list_users, SubmitGroup, SubmitUser};
use crate::form::{done, echo, echo_checked};
use crate::time::format_ms;
use crate::ui::*;

/// Tenant administration: users and groups.
#[component]
pub fn SettingsPage() -> impl IntoView {
    view! {
        <Title text="Settings"/>
        <PageHeader title="Users and groups" subtitle="Adding a user to a group grants everything the group may use; removing them takes it away."/>
        <p class="-mt-4 mb-6 text-sm"><a class="text-indigo-700 hover:underline" href="/settings/sso">"Single sign-on (OIDC, LDAP) →"</a></p>
        <div class="grid grid-cols-1 gap-6 lg:grid-cols-2">
            <UsersCard/>
            <GroupsCard/>
        </div>
    }
}

#[component]
fn UsersCard() -> impl IntoView {
    let create = ServerAction::<SubmitUser>::new();
    let users = Resource::new(move || create.version().get(), |_| list_users());
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(create.value().get(), Some(Ok(_))) {
            if let Some(f) = form.get() {
                f.reset();
            }
        }
    });
    let value = move || create.value().get();
    let added = done(create);

    view! {
        <Card title="Users">
            <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match users.await {
                        Ok(list) => view! {
                            <table class=TABLE data-testid="users-table">
                                <thead><tr>
                                    <th class=TH>"Username"</th><th class=TH>"Name"</th>
                                    <th class=TH>"Role"</th><th class=TH>"Created"</th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {list.into_iter().map(|u| view! {
                                        <tr>
                                            <td class=format!("{TD} font-mono")>
                                                <a class="text-indigo-700 hover:underline" href=format!("/settings/users/{}", u.id) title="Edit, disable, reset password or delete">{u.username}</a>
                                            </td>
                                            <td class=TD>{u.display_name}</td>
                                            <td class=TD>{if u.is_platform_admin { "platform admin" } else if u.is_tenant_admin { "admin" } else { "member" }}
                                                {u.disabled.then_some(" (disabled)")}</td>
                                            <td class=format!("{TD} text-slate-500")>{format_ms(u.created_at)}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                        Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    }
                })}
            </Transition>
            <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">"Add a user"</h3>
            <ActionForm action=create node_ref=form>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    <div>
                        <label class=LABEL for="new-username">"Username"</label>
                        <input id="new-username" name="username" class=INPUT required value={echo::<SubmitUser>("username")}/>
                        {field_error(value, "username")}
                    </div>
                    <div>
                        <label class=LABEL for="new-display-name">"Display name"</label>
                        <input id="new-display-name" name="display_name" class=INPUT value={echo::<SubmitUser>("display_name")}/>
                        {field_error(value, "display_name")}
                    </div>
                    <div>
                        <label class=LABEL for="new-email">"Email"</label>
                        <input id="new-email" name="email" type="email" class=INPUT value={echo::<SubmitUser>("email")}/>
                        {field_error(value, "email")}
                    </div>
                    <div>
                        <label class=LABEL for="new-password">"Password"</label>
                        <input id="new-password" name="password" type="password" class=INPUT placeholder="12+ characters, or empty for SSO only"/>
                        {field_error(value, "password")}
                    </div>
                </div>
                <label class="mt-3 flex items-center gap-2 text-sm">
                    <input type="checkbox" name="is_tenant_admin" value="on" checked={echo_checked::<SubmitUser>("is_tenant_admin", false)}/>
                    "Tenant administrator"
                </label>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Add user"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"User added."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

#[component]
fn GroupsCard() -> impl IntoView {
    let create = ServerAction::<SubmitGroup>::new();
    let groups = Resource::new(move || create.version().get(), |_| list_groups());
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(create.value().get(), Some(Ok(_))) {
            if let Some(f) = form.get() {
                f.reset();
            }
        }
    });
    let value = move || create.value().get();
    let created = done(create);

    view! {
        <Card title="Groups">
            <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match groups.await {
                        Ok(list) if list.is_empty() => view! { <p class="text-sm text-slate-600">"No groups yet."</p> }.into_any(),
                        Ok(list) => view! {
                            <table class=TABLE data-testid="groups-table">
                                <thead><tr>
                                    <th class=TH>"Group"</th><th class=TH>"Description"</th><th class=TH>"Members"</th>
                                </tr></thead>
                                <tbody class="divide-y divide-slate-100">
                                    {list.into_iter().map(|g| view! {
                                        <tr>
                                            <td class=TD>
                                                <a class="font-medium text-indigo-700 hover:underline" href=format!("/settings/groups/{}", g.id)>{g.name}</a>
                                            </td>
                                            <td class=format!("{TD} text-slate-600")>{g.description}</td>
                                            <td class=TD>{g.member_count}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                        Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    }
                })}
            </Transition>
            <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">"Create a group"</h3>
            <ActionForm action=create node_ref=form>
                <CsrfField/>
                <div class="grid grid-cols-2 gap-3">
                    <div>
                        <label class=LABEL for="group-name">"Name"</label>
                        <input id="group-name" name="name" class=INPUT required value={echo::<SubmitGroup>("name")}/>
                        {field_error(value, "name")}
                    </div>
                    <div>
                        <label class=LABEL for="group-description">"Description"</label>
                        <input id="group-description" name="description" class=INPUT value={echo::<SubmitGroup>("description")}/>
                        {field_error(value, "description")}
                    </div>
                </div>
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Create group"</button>
                    {move || created().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Group created."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{
    load_catalog, load_group, AddMember, CreateRuleForm, DeleteGroupForm, DeleteRuleForm,
    RemoveMember, UpdateGroupForm,
};
use crate::form::{done, done_for, echo_or, echo_selected, kept};
use crate::model::{Group, Member};
use crate::pages::confirm::confirm_delete;
use crate::pages::rules::RulesCard;
use crate::time::format_ms;
use crate::ui::*;

/// One group: its members, and adding or removing them.
#[component]
pub fn GroupPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let add = ServerAction::<AddMember>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let update = ServerAction::<UpdateGroupForm>::new();
    let delete = ServerAction::<DeleteGroupForm>::new();
    let add_rule = ServerAction::<CreateRuleForm>::new();
    let delete_rule = ServerAction::<DeleteRuleForm>::new();
    let detail = Resource::new(
        move || {
            (
                id(),
                add.version().get()
                    + remove.version().get()
                    + update.version().get()
                    + add_rule.version().get()
                    + delete_rule.version().get(),
            )
        },
        |(id, _)| load_group(id),
    );
    let catalog = Resource::new(|| (), |_| load_catalog());
    let deleted = done(delete);
    let add_value = move || add.value().get();
    let added = done(add);

    view! {
        <Title text="Group"/>
        <a href="/settings" class="text-sm text-indigo-700 hover:underline">"← Users and groups"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                if deleted() {
                    return view! {
                        <p role="status" class="mt-4 text-sm text-emerald-700" data-testid="group-deleted">
                            "The group was deleted: its members lost what it granted them."
                        </p>
                    }
                    .into_any();
                }
                let catalog = catalog.await.unwrap_or_default();
                match detail.await {
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(d) => {
                        let group_id = d.group.id.clone();
                        let gid_add = group_id.clone();
                        let gid_rules = group_id.clone();
                        view! {
                            <div class="mb-6 mt-2">
                                <h1 class="text-2xl font-semibold tracking-tight" data-testid="group-name">{d.group.name.clone()}</h1>
                                <p class="mt-1 text-sm text-slate-600">{d.group.description.clone()}</p>
                            </div>
                            <div class="grid grid-cols-1 gap-6 lg:grid-cols-3">
                                <div class="min-w-0 lg:col-span-2">
                                    <MembersCard group_id=group_id members=d.members remove=remove/>
                                    <div class="mt-6">
                                        <RulesCard group_id=gid_rules rules=d.rules catalog=catalog add=add_rule delete=delete_rule/>
                                    </div>
                                </div>
                                <div class="flex min-w-0 flex-col gap-6">
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
                                <GroupSettings group=d.group.clone() update=update delete=delete/>
                                </div>
                            </div>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// The group's name and description, and deleting it (confirmed).
#[component]
fn GroupSettings(
    group: Group,
    update: ServerAction<UpdateGroupForm>,
    delete: ServerAction<DeleteGroupForm>,
) -> impl IntoView {
    let query = use_query_map();
    let confirming = move || query.with(|q| q.get_str("confirm") == Some("group"));
    let value = move || update.value().get();
    let delete_value = move || delete.value().get();
    let saved = done(update);
    let (id, id2) = (group.id.clone(), group.id.clone());
    let label = format!("group {}", group.name);
    let here = format!("/settings/groups/{}", group.id);
    view! {
        <Card title="Name and description">
            <ActionForm action=update>
                <CsrfField/>
                <input type="hidden" name="id" value=id/>
                <label class=LABEL for="group-edit-name">"Name"</label>
                <input id="group-edit-name" name="name" class=INPUT required value={echo_or::<UpdateGroupForm>("name", &group.name)}/>
                {field_error(value, "name")}
                <label class=format!("{LABEL} mt-3") for="group-edit-description">"Description"</label>
                <input id="group-edit-description" name="description" class=INPUT value={echo_or::<UpdateGroupForm>("description", &group.description)}/>
                {field_error(value, "description")}
                <div class="mt-4 flex items-center gap-4">
                    <button type="submit" class=BUTTON>"Save"</button>
                    {move || saved().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
            <div class="mt-6 border-t border-slate-100 pt-4">
                {move || if confirming() {
                    confirm_delete!(delete, id2.clone(), label.clone(), here.clone(), delete_value)
                } else {
                    view! {
                        <p class="text-sm text-slate-600">"Deleting the group takes from its members everything it granted: queues, rules."</p>
                        <a class=format!("mt-3 inline-block {BUTTON_SMALL_DANGER}") href="?confirm=group" data-testid="delete-group">"Delete group…"</a>
                    }.into_any()
                }}
            </div>
        </Card>
    }
}

/// The members card of a group page: the table (each with Remove) and what the last removal said.
#[component]
fn MembersCard(
    group_id: String,
    members: Vec<Member>,
    remove: ServerAction<RemoveMember>,
) -> impl IntoView {
    let remove_value = move || remove.value().get();
    let removed = done(remove);
    // The member just removed leaves the table at once, not when the group is read again.
    let gone = done_for(remove, |s| s.user_id.clone());
    view! {
        <Card title="Members">
            {move || {
                let members = kept(&members, gone(), |m| m.user_id.as_str());
                if members.is_empty() {
                    view! { <p class="text-sm text-slate-600">"No members yet."</p> }.into_any()
                } else {
                    view! {
                        <table class=TABLE data-testid="members-table">
                            <thead><tr>
                                <th class=TH>"Username"</th><th class=TH>"Name"</th>
                                <th class=TH>"Added"</th><th class=TH></th>
                            </tr></thead>
                            <tbody class="divide-y divide-slate-100">
                                {members.into_iter().map(|m| {
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
                }
            }}
            <div class="mt-3">{form_error(remove_value)}</div>
            {move || removed().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Member removed."</p> })}
        </Card>
    }
}

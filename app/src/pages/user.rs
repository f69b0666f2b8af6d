use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::api::{load_user, DeleteUserForm, ResetPasswordForm, UpdateUserForm};
use crate::form::{done, echo_checked, echo_or};
use crate::model::User;
use crate::pages::confirm::confirm_delete;
use crate::time::format_ms;
use crate::ui::*;

/// One user: profile and role (tenant administrator, disabled), a password reset and delete.
#[component]
pub fn UserPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let update = ServerAction::<UpdateUserForm>::new();
    let reset = ServerAction::<ResetPasswordForm>::new();
    let delete = ServerAction::<DeleteUserForm>::new();
    let user = Resource::new(
        move || (id(), update.version().get()),
        |(id, _)| load_user(id),
    );
    let deleted = done(delete);

    view! {
        <Title text="User"/>
        <a href="/settings" class="text-sm text-indigo-700 hover:underline">"← Users and groups"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                if deleted() {
                    return view! {
                        <p role="status" class="mt-4 text-sm text-emerald-700" data-testid="user-deleted">
                            "The user was deleted: their sessions, tokens and group memberships are gone."
                        </p>
                    }
                    .into_any();
                }
                match user.await {
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(u) => view! { <UserView u=u update=update reset=reset delete=delete/> }.into_any(),
                }
            })}
        </Transition>
    }
}

fn role(u: &User) -> &'static str {
    if u.is_platform_admin {
        "platform admin"
    } else if u.is_tenant_admin {
        "tenant admin"
    } else {
        "member"
    }
}

#[component]
fn UserView(
    u: User,
    update: ServerAction<UpdateUserForm>,
    reset: ServerAction<ResetPasswordForm>,
    delete: ServerAction<DeleteUserForm>,
) -> impl IntoView {
    let query = use_query_map();
    let confirming = move || query.with(|q| q.get_str("confirm") == Some("delete"));
    let update_value = move || update.value().get();
    let reset_value = move || reset.value().get();
    let delete_value = move || delete.value().get();
    let saved = done(update);
    let password_set = done(reset);
    let reset_form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if matches!(reset.value().get(), Some(Ok(_))) {
            if let Some(f) = reset_form.get() {
                f.reset();
            }
        }
    });
    let status = if u.disabled {
        format!("{}, disabled", role(&u))
    } else {
        role(&u).to_string()
    };
    let (id, id2, id3) = (u.id.clone(), u.id.clone(), u.id.clone());
    let label = format!("user {}", u.username);
    let here = format!("/settings/users/{}", u.id);
    view! {
        <div class="mb-6 mt-2">
            <h1 class="text-2xl font-semibold tracking-tight"><span class="font-mono" data-testid="user-name">{u.username.clone()}</span></h1>
            <p class="mt-1 text-sm text-slate-600" data-testid="user-status">
                {format!("{} · {} · added {}", u.display_name, status, format_ms(u.created_at))}
            </p>
            <p class="mt-1 text-sm"><a class="text-indigo-700 hover:underline" href=format!("/settings/users/{}/access", u.id)>"What can this user do →"</a></p>
        </div>
        <div class="grid grid-cols-1 gap-6 lg:grid-cols-2">
            <Card title="Profile and role">
                <ActionForm action=update>
                    <CsrfField/>
                    <input type="hidden" name="id" value=id/>
                    <div class="grid grid-cols-1 gap-3 sm:grid-cols-2">
                        <div>
                            <label class=LABEL for="user-display-name">"Display name"</label>
                            <input id="user-display-name" name="display_name" class=INPUT required value={echo_or::<UpdateUserForm>("display_name", &u.display_name)}/>
                            {field_error(update_value, "display_name")}
                        </div>
                        <div>
                            <label class=LABEL for="user-email">"Email"</label>
                            <input id="user-email" name="email" type="email" class=INPUT value={echo_or::<UpdateUserForm>("email", u.email.as_deref().unwrap_or(""))}/>
                            {field_error(update_value, "email")}
                        </div>
                    </div>
                    <label class="mt-3 flex items-center gap-2 text-sm">
                        <input type="checkbox" name="is_tenant_admin" value="on" checked={echo_checked::<UpdateUserForm>("is_tenant_admin", u.is_tenant_admin)}/>
                        "Tenant administrator (manages users, groups, policies and audit)"
                    </label>
                    {field_error(update_value, "is_tenant_admin")}
                    <label class="mt-2 flex items-center gap-2 text-sm">
                        <input type="checkbox" name="disabled" value="on" checked={echo_checked::<UpdateUserForm>("disabled", u.disabled)}/>
                        "Disabled (signs them out everywhere and stops their tokens at once)"
                    </label>
                    {field_error(update_value, "disabled")}
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Save"</button>
                        {move || saved().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Saved."</span> })}
                    </div>
                    <div class="mt-3">{form_error(update_value)}</div>
                </ActionForm>
            </Card>
            <div class="flex min-w-0 flex-col gap-6">
                <Card title="Reset password">
                    <ActionForm action=reset node_ref=reset_form>
                        <CsrfField/>
                        <input type="hidden" name="id" value=id2/>
                        <label class=LABEL for="user-password">"New password"</label>
                        <input id="user-password" name="password" type="password" autocomplete="new-password" class=INPUT placeholder="12 or more characters"/>
                        {field_error(reset_value, "password")}
                        <div class="mt-4 flex items-center gap-4">
                            <button type="submit" class=BUTTON_SECONDARY>"Set password"</button>
                            {move || password_set().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Password set."</span> })}
                        </div>
                        <div class="mt-3">{form_error(reset_value)}</div>
                    </ActionForm>
                </Card>
                <Card title="Delete">
                    <p class="text-sm text-slate-600">"Deleting a user ends their sessions and tokens and removes them from every group. Their jobs stay, for the record. To keep the account, disable it instead."</p>
                    {move || if confirming() {
                        confirm_delete!(delete, id3.clone(), label.clone(), here.clone(), delete_value)
                    } else {
                        view! {
                            <a class=format!("mt-3 {BUTTON_SMALL_DANGER}") href="?confirm=delete" data-testid="delete-user">"Delete user…"</a>
                        }.into_any()
                    }}
                </Card>
            </div>
        </div>
    }
}

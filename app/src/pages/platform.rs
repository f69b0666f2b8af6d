use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{list_tenants, SubmitTenant};
use crate::form::{done, echo};
use crate::time::format_ms;
use crate::ui::*;

/// The Platform Management Center: tenants and their size, never their contents.
#[component]
pub fn PlatformPage() -> impl IntoView {
    let create = ServerAction::<SubmitTenant>::new();
    let tenants = Resource::new(move || create.version().get(), |_| list_tenants());
    let value = move || create.value().get();
    let created = done(create);
    view! {
        <Title text="Platform"/>
        <PageHeader title="Platform Management Center" subtitle="Tenants on this platform, with their size. Workloads inside tenants stay private to them."/>
        <div class="space-y-6">
            <Card title="Tenants">
                <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match tenants.await {
                            Ok(list) => view! {
                                <table class=TABLE data-testid="tenants-table">
                                    <thead><tr>
                                        <th class=TH>"Tenant"</th><th class=TH>"Slug"</th>
                                        <th class=format!("{TH} text-right")>"Users"</th>
                                        <th class=format!("{TH} text-right")>"Groups"</th>
                                        <th class=format!("{TH} text-right")>"Projects"</th>
                                        <th class=TH>"Created"</th>
                                    </tr></thead>
                                    <tbody class="divide-y divide-slate-100">
                                        {list.into_iter().map(|t| view! {
                                            <tr>
                                                <td class=format!("{TD} font-medium")>{t.name}</td>
                                                <td class=format!("{TD} font-mono text-slate-600")>{t.slug}</td>
                                                <td class=format!("{TD} text-right tabular-nums")>{t.users}</td>
                                                <td class=format!("{TD} text-right tabular-nums")>{t.groups}</td>
                                                <td class=format!("{TD} text-right tabular-nums")>{t.projects}</td>
                                                <td class=format!("{TD} text-slate-500")>{format_ms(t.created_at)}</td>
                                            </tr>
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            }.into_any(),
                            Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                        }
                    })}
                </Transition>
            </Card>
            <Card title="Create a tenant">
                <ActionForm action=create>
                    <CsrfField/>
                    <div class="grid max-w-xl grid-cols-2 gap-3">
                        <div>
                            <label class=LABEL for="tenant-slug">"Slug"</label>
                            <input id="tenant-slug" name="slug" class=INPUT required placeholder="initech" value={echo::<SubmitTenant>("slug")}/>
                            {field_error(value, "slug")}
                        </div>
                        <div>
                            <label class=LABEL for="tenant-name">"Name"</label>
                            <input id="tenant-name" name="name" class=INPUT required placeholder="Initech" value={echo::<SubmitTenant>("name")}/>
                            {field_error(value, "name")}
                        </div>
                    </div>
                    <div class="mt-4 flex items-center gap-4">
                        <button type="submit" class=BUTTON>"Create tenant"</button>
                        {move || created().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Tenant created."</span> })}
                    </div>
                    <div class="mt-3">{form_error(value)}</div>
                </ActionForm>
            </Card>
        </div>
    }
}

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::my_groups;
use crate::ui::{Card, ErrorBanner, PageHeader};
use crate::SessionResource;

/// The builder portal. Jobs, endpoints and tokens arrive with the scheduler and gateway work;
/// today it shows who you are and which groups your access comes from.
#[component]
pub fn PortalPage() -> impl IntoView {
    let session = expect_context::<SessionResource>().0;
    let groups = Resource::new(|| (), |_| my_groups());
    view! {
        <Title text="Portal"/>
        <PageHeader title="Builder portal" subtitle="Your GPUs, queues, endpoints and tokens, without a ticket."/>
        <div class="grid gap-6 md:grid-cols-2">
            <Card title="You">
                <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        session.await.ok().flatten().map(|s| view! {
                            <dl class="grid grid-cols-3 gap-2 text-sm">
                                <dt class="text-slate-500">"Name"</dt><dd class="col-span-2">{s.me.display_name}</dd>
                                <dt class="text-slate-500">"Username"</dt><dd class="col-span-2">{s.me.username}</dd>
                                <dt class="text-slate-500">"Organization"</dt><dd class="col-span-2">{s.me.tenant_name}</dd>
                            </dl>
                        })
                    })}
                </Transition>
            </Card>
            <Card title="Your groups">
                <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
                    {move || Suspend::new(async move {
                        match groups.await {
                            Ok(list) if list.is_empty() => view! {
                                <p class="text-sm text-slate-600">"You are in no group yet. Ask your administrator to add you to one."</p>
                            }.into_any(),
                            Ok(list) => view! {
                                <ul class="divide-y divide-slate-100 text-sm" data-testid="my-groups">
                                    {list.into_iter().map(|g| view! {
                                        <li class="py-2"><span class="font-medium">{g.name}</span>
                                        <span class="text-slate-500">" — " {g.description}</span></li>
                                    }).collect_view()}
                                </ul>
                            }.into_any(),
                            Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                        }
                    })}
                </Transition>
            </Card>
            <Card title="Coming next">
                <ul class="list-disc space-y-1 pl-5 text-sm text-slate-600">
                    <li>"Submit jobs to your group's queues and follow them"</li>
                    <li>"Deploy model endpoints and get their URLs and tokens"</li>
                    <li>"Your group's GPU quota and its use"</li>
                </ul>
            </Card>
        </div>
    }
}

/// The Policy Manager: a placeholder until pools, queues and quotas land.
#[component]
pub fn PolicyPage() -> impl IntoView {
    view! {
        <Title text="Policy Manager"/>
        <PageHeader title="Policy Manager" subtitle="Capacity, quotas and queues across your pools."/>
        <Card title="Coming next">
            <ul class="list-disc space-y-1 pl-5 text-sm text-slate-600">
                <li>"Capacity across pools: reserved, in use, idle and over-quota"</li>
                <li>"Per-group reservations and limits, and their use"</li>
                <li>"Queues with running and waiting jobs, wait times, and why a job waits"</li>
                <li>"Recent preemptions with their reasons"</li>
            </ul>
        </Card>
    }
}

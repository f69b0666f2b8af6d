//! One endpoint: where clients call it, its instances (up or down, ejected, requests,
//! failures, in flight; added and removed by those who manage it) and its counters since the
//! server started (requests by status class, time to first byte, bytes out), kept live; its
//! serving jobs (the newest 20) with their states, kept live too; and its traffic over time
//! ([`super::endpoint_traffic`]).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use super::chart::ChartScript;
use super::endpoint_traffic::TrafficSection;
use super::policy::live_tick;
use super::units::{bytes_text, latency_text};
use crate::access::Permission;
use crate::api::{load_endpoint, AddTargetForm, RemoveTargetForm};
use crate::error::AppError;
use crate::form::{done, done_for, echo};
use crate::model::{
    quantile_ms, EndpointCounters, EndpointDetail, InstanceHealth, JobState, PublishedRoute,
    ServingJob,
};
use crate::pages::confirm::{confirm_delete, opened};
use crate::time::format_ms;
use crate::ui::*;

#[component]
pub fn EndpointPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.read().get("id").unwrap_or_default();
    let add = ServerAction::<AddTargetForm>::new();
    let remove = ServerAction::<RemoveTargetForm>::new();
    let changed = move || add.version().get() + remove.version().get();
    // The page and its forms reload when an instance is added or removed; the numbers also
    // every few seconds (a form being typed into is not redrawn).
    let detail = Resource::new(move || (id(), changed()), |(id, _)| load_endpoint(id));
    let tick = live_tick(3);
    let live = Resource::new(
        move || (id(), changed(), tick.get()),
        |(id, _, _)| load_endpoint(id),
    );
    view! {
        <Title text="Endpoint"/>
        <ChartScript/>
        <a href="/endpoints" class="text-sm text-indigo-700 hover:underline">"← Endpoints"</a>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match detail.await {
                    Err(AppError::NotFound) => {
                        set_status(404);
                        view! {
                            <div class="mx-auto max-w-xl py-16 text-center" data-testid="not-found">
                                <h1 class="text-2xl font-semibold">"Endpoint not found"</h1>
                                <p class="mt-2 text-slate-600">"There is no such endpoint, or you may not see it."</p>
                            </div>
                        }.into_any()
                    }
                    Err(e) => view! { <div class="mt-4"><ErrorBanner error=e/></div> }.into_any(),
                    Ok(d) => view! { <EndpointView d=d live=live add=add remove=remove/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn EndpointView(
    d: EndpointDetail,
    live: Resource<Result<EndpointDetail, AppError>>,
    add: ServerAction<AddTargetForm>,
    remove: ServerAction<RemoveTargetForm>,
) -> impl IntoView {
    let e = d.summary.endpoint.clone();
    let manage = d.summary.permission >= Permission::Manage;
    let add_value = move || add.value().get();
    let remove_value = move || remove.value().get();
    let added = done(add);
    let removed = done(remove);
    let removed_one = done_for(remove, |s| {
        s.id.split_once(':')
            .map(|(_, target)| target.to_string())
            .unwrap_or_default()
    });
    let form = crate::form::emptied_on_save(add);
    let open = opened("confirm", "target:");
    let targets: Vec<(String, String)> = e
        .targets
        .iter()
        .map(|t| (t.id.clone(), t.address.clone()))
        .collect();
    let endpoint_id = e.id.clone();
    let traffic_id = e.id.clone();
    let back = format!("/endpoints/{}", e.id);
    view! {
        <div class="mb-6 mt-2">
            <h1 class="text-2xl font-semibold tracking-tight" data-testid="endpoint-name">{e.name.clone()}</h1>
            <p class="mt-1 text-sm text-slate-600">
                {format!("Project {} · you may {}", d.summary.project_name, d.summary.permission.as_str())}
                {e.public.then_some(" · public (no token needed)")}
            </p>
        </div>
        <div class="grid grid-cols-1 gap-6 xl:grid-cols-3">
            <div class="flex min-w-0 flex-col gap-6 xl:col-span-2">
                <Card title="Instances">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            match live.await {
                                Ok(d) => {
                                    // The instance just removed here stays out even when a reading
                                    // taken before its removal (the 3-second refresh) arrives last.
                                    let gone = removed_one();
                                    let rows: Vec<_> = d.instances.into_iter().filter(|r| gone.as_deref() != Some(r.target_id.as_str())).collect();
                                    view! { <InstancesTable rows=rows manage=manage endpoint_id=d.summary.endpoint.id/> }.into_any()
                                }
                                Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                            }
                        })}
                    </Transition>
                    <div id="instances">
                        {move || open().map(|tid| match targets.iter().find(|(id, _)| *id == tid) {
                            Some((_, address)) => confirm_delete!(remove, format!("{endpoint_id}:{tid}"), format!("instance {address}"), back.clone(), remove_value),
                            // Just removed here: the line below says so.
                            None if removed() => ().into_any(),
                            None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such instance: it may have been removed."</p> }.into_any(),
                        })}
                        {move || removed().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Instance removed: no new request goes to it."</p> })}
                    </div>
                    {manage.then(|| view! {
                        <h3 class="mb-3 mt-6 text-sm font-semibold text-slate-700">"Add an instance"</h3>
                        <ActionForm action=add node_ref=form>
                            <CsrfField/>
                            <input type="hidden" name="endpoint_id" value=e.id.clone()/>
                            <div class="flex flex-wrap items-start gap-3">
                                <div class="min-w-0 flex-1">
                                    <label class="sr-only" for="target-address">"Address (host:port)"</label>
                                    <input id="target-address" name="address" class=format!("{INPUT} mt-0 font-mono") required placeholder="host:port" value={echo::<AddTargetForm>("address")}/>
                                    {field_error(add_value, "address")}
                                </div>
                                <button type="submit" class=BUTTON>"Add instance"</button>
                            </div>
                            {move || added().then(|| view! { <p role="status" class="mt-2 text-sm text-emerald-700">"Instance added: it takes its share of new sessions."</p> })}
                            <div class="mt-3">{form_error(add_value)}</div>
                        </ActionForm>
                    })}
                </Card>
                <Card title="Serving jobs">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            live.await.ok().map(|d| view! { <ServingJobsTable jobs=d.serving_jobs/> })
                        })}
                    </Transition>
                </Card>
                <Card title="Traffic since the server started">
                    <Transition fallback=|| ()>
                        {move || Suspend::new(async move {
                            live.await.ok().map(|d| view! { <CountersTables c=d.counters/> })
                        })}
                    </Transition>
                </Card>
            </div>
            <div class="min-w-0">
                <RoutesCard routes=d.summary.routes/>
            </div>
        </div>
        <TrafficSection endpoint_id=traffic_id/>
    }
}

#[component]
fn InstancesTable(rows: Vec<InstanceHealth>, manage: bool, endpoint_id: String) -> impl IntoView {
    if rows.is_empty() {
        return view! { <p class="text-sm text-slate-600">"No instances registered: requests are answered 503 until one is."</p> }.into_any();
    }
    let badge = |text: &'static str, class: &'static str| {
        view! { <span class=format!("rounded px-2 py-0.5 text-xs font-medium {class}")>{text}</span> }
    };
    view! {
        <table class=TABLE data-testid="instances-table">
            <thead><tr>
                <th class=TH>"Address"</th><th class=TH>"Health"</th><th class=TH>"Ejected"</th>
                <th class=format!("{TH} text-right")>"Requests"</th><th class=format!("{TH} text-right")>"Failures"</th>
                <th class=format!("{TH} text-right")>"In flight"</th><th class=TH></th>
            </tr></thead>
            <tbody class="divide-y divide-slate-100">
                {rows.into_iter().map(|i| view! {
                    <tr data-instance=i.address.clone()>
                        <td class=format!("{TD} font-mono text-xs")>{i.address.clone()}</td>
                        <td class=TD data-testid="instance-health">{if i.up { badge("up", "bg-green-100 text-green-800") } else { badge("down", "bg-red-100 text-red-800") }}</td>
                        <td class=TD>{if i.ejected { badge("ejected", "bg-orange-100 text-orange-800") } else { badge("no", "bg-slate-100 text-slate-600") }}</td>
                        <td class=format!("{TD} text-right tabular-nums")>{i.requests}</td>
                        <td class=format!("{TD} text-right tabular-nums")>{i.failures}</td>
                        <td class=format!("{TD} text-right tabular-nums")>{i.in_flight}</td>
                        <td class=format!("{TD} text-right")>
                            {manage.then(|| view! {
                                <a class=BUTTON_SMALL_DANGER href=format!("/endpoints/{endpoint_id}?confirm=target:{}#instances", i.target_id) aria-label=format!("Remove instance {}", i.address)>"Remove"</a>
                            })}
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn CountersTables(c: EndpointCounters) -> impl IntoView {
    let total: u64 = c.by_class.iter().sum();
    let p50 = latency_text(quantile_ms(0.5, &c.bucket_ms, &c.cumulative));
    let p95 = latency_text(quantile_ms(0.95, &c.bucket_ms, &c.cumulative));
    view! {
        <div class="grid grid-cols-1 gap-6 md:grid-cols-2">
            <table class=format!("{TABLE} self-start") data-testid="status-table">
                <thead><tr><th class=TH>"Status"</th><th class=format!("{TH} text-right")>"Requests"</th></tr></thead>
                <tbody class="divide-y divide-slate-100">
                    {c.by_class.iter().enumerate().map(|(i, n)| view! {
                        <tr><td class=TD>{format!("{}xx", i + 1)}</td><td class=format!("{TD} text-right tabular-nums")>{*n}</td></tr>
                    }).collect_view()}
                    <tr class="font-medium"><td class=TD>"All"</td><td class=format!("{TD} text-right tabular-nums") data-testid="requests-total">{total}</td></tr>
                </tbody>
            </table>
            <table class=format!("{TABLE} self-start") data-testid="latency-table">
                <thead><tr><th class=TH>"Measure"</th><th class=format!("{TH} text-right")>"Value"</th></tr></thead>
                <tbody class="divide-y divide-slate-100">
                    <tr><td class=TD>"Time to first byte, p50"</td><td class=format!("{TD} text-right tabular-nums")>{p50}</td></tr>
                    <tr><td class=TD>"Time to first byte, p95"</td><td class=format!("{TD} text-right tabular-nums")>{p95}</td></tr>
                    <tr><td class=TD>"Bytes out"</td><td class=format!("{TD} text-right tabular-nums")>{bytes_text(c.bytes_out)}</td></tr>
                    <tr><td class=TD>"In flight"</td><td class=format!("{TD} text-right tabular-nums")>{c.in_flight}</td></tr>
                </tbody>
            </table>
        </div>
    }
}

/// A job state's badge colours (those of the portal).
fn state_class(state: JobState) -> &'static str {
    match state {
        JobState::Running => "bg-green-100 text-green-800",
        JobState::Queued => "bg-amber-100 text-amber-800",
        JobState::Admitted | JobState::Starting => "bg-sky-100 text-sky-800",
        JobState::Preempting | JobState::Preempted => "bg-orange-100 text-orange-800",
        JobState::Succeeded => "bg-slate-100 text-slate-700",
        JobState::Failed | JobState::Aborted | JobState::Lost => "bg-red-100 text-red-800",
    }
}

/// Columns left out on a phone, where the job, its state and queue fill the card.
const WIDE: &str = "hidden sm:table-cell";

#[component]
fn ServingJobsTable(jobs: Vec<ServingJob>) -> impl IntoView {
    if jobs.is_empty() {
        return view! { <p class="text-sm text-slate-600">"No serving job yet: deploy one with the New endpoint form, or submit a job with serve set to this endpoint."</p> }.into_any();
    }
    view! {
        <table class=TABLE data-testid="serving-jobs-table">
            <thead><tr>
                <th class=TH>"Job"</th><th class=TH>"State"</th><th class=TH>"Queue"</th>
                <th class=format!("{TH} {WIDE}")>"Submitted by"</th><th class=format!("{TH} {WIDE}")>"Submitted"</th>
            </tr></thead>
            <tbody class="divide-y divide-slate-100">
                {jobs.into_iter().map(|j| view! {
                    <tr data-job=j.id.clone()>
                        <td class=format!("{TD} whitespace-nowrap font-medium")>
                            <a class="text-indigo-700 hover:underline" href=format!("/portal/jobs/{}", j.id)>{j.name}</a>
                        </td>
                        <td class=TD data-testid="serving-job-state">
                            <span class=format!("rounded px-2 py-0.5 text-xs font-medium {}", state_class(j.state)) data-state=j.state.as_str()>{j.state.as_str()}</span>
                        </td>
                        <td class=format!("{TD} whitespace-nowrap text-slate-600")>{j.queue_name}</td>
                        <td class=format!("{TD} {WIDE} whitespace-nowrap text-slate-600")>{j.username}</td>
                        <td class=format!("{TD} {WIDE} whitespace-nowrap text-slate-500")>{format_ms(j.submitted_at)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
fn RoutesCard(routes: Vec<PublishedRoute>) -> impl IntoView {
    view! {
        <Card title="Where clients call it">
            {if routes.is_empty() {
                view! { <p class="text-sm text-slate-600">"No route leads to it yet: a tenant admin publishes it on the Gateways page."</p> }.into_any()
            } else {
                view! {
                    <table class=TABLE data-testid="routes-table">
                        <thead><tr><th class=TH>"Gateway"</th><th class=TH>"URL"</th></tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {routes.into_iter().map(|r| view! {
                                <tr>
                                    <td class=TD>{r.gateway_name}</td>
                                    <td class=format!("{TD} whitespace-nowrap font-mono text-xs")>{r.url}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                    <p class="mt-3 text-xs text-slate-500">"Clients send a gateway token (Authorization: Bearer syg_…); issue one on the Endpoints page."</p>
                }.into_any()
            }}
        </Card>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_say_them() {
        assert_eq!(latency_text(Some((6.25, false))), "6.2 ms");
        assert_eq!(latency_text(Some((180.4, false))), "180 ms");
        assert_eq!(latency_text(Some((1250.0, false))), "1.25 s");
        assert_eq!(latency_text(Some((30000.0, true))), "> 30.00 s");
        assert_eq!(latency_text(None), "—");
        assert_eq!(bytes_text(512), "512 B");
        assert_eq!(bytes_text(3 * 1024 + 400), "3.4 KiB");
        assert_eq!(bytes_text(12 * 1024 * 1024), "12.0 MiB");
    }
}

//! The endpoints page's "New endpoint" form: a project, a name, instance addresses, and
//! optionally a serving job deployed with it in one action (a queue the user may submit to, a
//! command, the port it listens on). The job becomes one of the endpoint's instances while it
//! runs, so addresses are not needed then.

use leptos::prelude::*;

use super::catalog::tree;
use crate::api::CreateEndpointForm;
use crate::form::emptied_on_save;
use crate::form::{done, echo, echo_or, echo_selected, echo_text};
use crate::model::EndpointsOverview;
use crate::ui::*;

/// The deploy part's fields: an error at one of them opens it.
const DEPLOY_FIELDS: [&str; 3] = ["queue_id", "command", "port"];

#[component]
pub(super) fn NewEndpointCard(
    d: EndpointsOverview,
    create: ServerAction<CreateEndpointForm>,
) -> impl IntoView {
    let value = move || create.value().get();
    let created = done(create);
    let projects = tree(&d.projects);
    let form = emptied_on_save(create);
    // Open while a refused deploy's errors are to be read: one that comes back without
    // JavaScript (what was typed is shown), or the last answer here (the page is drawn again
    // after it).
    let echoed = echo::<CreateEndpointForm>("command").is_some_and(|c| !c.trim().is_empty());
    let deploying = move || {
        echoed
            || value().is_some_and(|r| {
                r.err()
                    .is_some_and(|e| DEPLOY_FIELDS.iter().any(|f| e.message_for(f).is_some()))
            })
    };
    view! {
        <Card title="New endpoint">
            {if projects.is_empty() {
                view! { <p class="text-sm text-slate-600">"You may create endpoints in no project yet: ask a tenant admin for use on a project."</p> }.into_any()
            } else {
                view! {
                    <ActionForm action=create node_ref=form>
                        <CsrfField/>
                        <div class="space-y-3">
                            <div>
                                <label class=LABEL for="endpoint-project">"Project"</label>
                                <select id="endpoint-project" name="project_id" class=INPUT>
                                    {projects.iter().map(|(depth, p)| view! {
                                        <option value=p.id.clone() selected={echo_selected::<CreateEndpointForm>("project_id", &p.id)}>{format!("{}{}", "\u{a0}\u{a0}".repeat(*depth), p.name)}</option>
                                    }).collect_view()}
                                </select>
                                {field_error(value, "project_id")}
                            </div>
                            <div>
                                <label class=LABEL for="endpoint-name">"Name"</label>
                                <input id="endpoint-name" name="name" class=INPUT required placeholder="llama-3-8b" value={echo::<CreateEndpointForm>("name")}/>
                                {field_error(value, "name")}
                            </div>
                            <div>
                                <label class=LABEL for="endpoint-targets">"Instances (host:port, one per line)"</label>
                                <textarea id="endpoint-targets" name="targets" rows="3" class=format!("{INPUT} font-mono") placeholder="10.0.0.7:8000" aria-describedby="endpoint-targets-hint" inner_html={echo_text::<CreateEndpointForm>("targets")}></textarea>
                                <p id="endpoint-targets-hint" class="mt-1 text-xs text-slate-500">"Optional when you deploy a serving job below: it becomes an instance itself."</p>
                                {field_error(value, "targets")}
                            </div>
                            <DeployFields d=d value=value deploying=deploying/>
                        </div>
                        <div class="mt-4 flex flex-wrap items-center gap-4">
                            <button type="submit" class=BUTTON>"Create endpoint"</button>
                            {move || created().then(|| match value().and_then(|r| r.ok()) {
                                Some(c) => view! {
                                    <span role="status" class="text-sm text-emerald-700">
                                        "Created "<a class="underline" href=format!("/endpoints/{}", c.endpoint.id)>{c.endpoint.name}</a>
                                        {c.job.map(|j| view! { ", serving job "<a class="underline" href=format!("/portal/jobs/{}", j.id)>{j.name}</a>" submitted" })}
                                        "."
                                    </span>
                                }.into_any(),
                                None => view! { <span role="status" class="text-sm text-emerald-700">"Endpoint created."</span> }.into_any(),
                            })}
                        </div>
                        <div class="mt-3">{form_error(value)}</div>
                    </ActionForm>
                }.into_any()
            }}
        </Card>
    }
}

/// The optional part: a serving job submitted with the endpoint (only when a command is given).
#[component]
fn DeployFields<V, T, O>(d: EndpointsOverview, value: V, deploying: O) -> impl IntoView
where
    V: Fn() -> Option<Result<T, crate::error::AppError>> + Copy + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    O: Fn() -> bool + Send + Sync + 'static,
{
    view! {
        <details class="group rounded-md border border-slate-200" open=deploying data-testid="deploy">
            <summary class="cursor-pointer select-none rounded-md px-3 py-2 text-sm font-medium text-slate-700 hover:bg-slate-50">"Deploy a serving job (optional)"</summary>
            <div class="space-y-3 border-t border-slate-200 px-3 pb-3 pt-2">
                <p class="text-xs text-slate-500">"Submitted with the endpoint. While it runs, and once its port answers, it is one of the endpoint's instances. Leave the command empty to create the endpoint only."</p>
                {if d.queues.is_empty() {
                    view! { <p class="text-sm text-slate-600">"You may not submit to any queue yet: you are in no group with a queue."</p> }.into_any()
                } else {
                    view! {
                        <div>
                            <label class=LABEL for="deploy-queue">"Queue"</label>
                            <select id="deploy-queue" name="queue_id" class=INPUT>
                                {d.queues.iter().map(|q| view! {
                                    <option value=q.id.clone() selected={echo_selected::<CreateEndpointForm>("queue_id", &q.id)}>{format!("{} ({}, profile {})", q.name, q.group_name, q.profile_name)}</option>
                                }).collect_view()}
                            </select>
                            {field_error(value, "queue_id")}
                        </div>
                        <div>
                            <label class=LABEL for="deploy-command">"Command"</label>
                            <textarea id="deploy-command" name="command" rows="3" class=format!("{INPUT} font-mono") placeholder="vllm serve meta-llama/Llama-3.1-8B --port $PORT" inner_html={echo_text::<CreateEndpointForm>("command")}></textarea>
                            {field_error(value, "command")}
                        </div>
                        <div>
                            <label class=LABEL for="deploy-port">"Port ($PORT)"</label>
                            <div class="w-32"><input id="deploy-port" name="port" inputmode="numeric" class=INPUT value={echo_or::<CreateEndpointForm>("port", "8000")}/></div>
                            {field_error(value, "port")}
                        </div>
                    }.into_any()
                }}
            </div>
        </details>
    }
}

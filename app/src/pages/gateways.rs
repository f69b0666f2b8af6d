//! The gateways page (tenant admins): the organization's gateways (prod, dev, …) with their
//! port and URL, created and deleted; the routes that publish an endpoint on one (host, path
//! prefix → endpoint), switched to another endpoint in place (the URL stays), created and
//! deleted; and the raw TCP routes (`gateways_tcp`).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{
    load_gateways, CreateGatewayForm, CreateRouteForm, DeleteGatewayForm, DeleteRouteForm,
    UpdateRouteForm,
};
use crate::form::emptied_on_save;
use crate::form::{done, done_for, echo, echo_selected};
use crate::model::{CertificateSource, Gateway, GatewaysOverview, PublishedRoute};
use crate::pages::confirm::{confirm_delete, opened};
use crate::pages::gateways_tcp::{NewTcpRouteCard, TcpActions, TcpRoutesCard};
use crate::ui::*;

#[derive(Clone, Copy)]
struct Actions {
    add_gateway: ServerAction<CreateGatewayForm>,
    delete_gateway: ServerAction<DeleteGatewayForm>,
    add_route: ServerAction<CreateRouteForm>,
    delete_route: ServerAction<DeleteRouteForm>,
    tcp: TcpActions,
}

#[component]
pub fn GatewaysPage() -> impl IntoView {
    let a = Actions {
        add_gateway: ServerAction::new(),
        delete_gateway: ServerAction::new(),
        add_route: ServerAction::new(),
        delete_route: ServerAction::new(),
        tcp: TcpActions::default(),
    };
    let data = Resource::new(
        move || {
            a.add_gateway.version().get()
                + a.delete_gateway.version().get()
                + a.add_route.version().get()
                + a.delete_route.version().get()
                + a.tcp.version()
        },
        |_| load_gateways(),
    );
    view! {
        <Title text="Gateways"/>
        <PageHeader title="Gateways" subtitle="Your organization's gateways, each on its own port, and the routes that publish endpoints on them."/>
        <Transition fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Err(e) => view! { <ErrorBanner error=e/> }.into_any(),
                    Ok(d) => view! { <GatewaysView d=d a=a/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn GatewaysView(d: GatewaysOverview, a: Actions) -> impl IntoView {
    view! {
        <div class="grid grid-cols-1 gap-6 xl:grid-cols-3">
            <div class="min-w-0 xl:col-span-2"><GatewaysCard d=d.clone() a=a/></div>
            <div class="min-w-0"><NewGatewayCard a=a/></div>
            <div class="min-w-0 xl:col-span-2"><RoutesCard d=d.clone() a=a/></div>
            <div class="min-w-0"><NewRouteCard d=d.clone() a=a/></div>
            <div class="min-w-0 xl:col-span-2"><TcpRoutesCard d=d.clone() a=a.tcp/></div>
            <div class="min-w-0"><NewTcpRouteCard d=d a=a.tcp/></div>
        </div>
    }
}

/// Where the gateway's certificate comes from, with its PEM to download.
#[component]
fn Certificate(g: Gateway) -> impl IntoView {
    let label = match g.certificate {
        CertificateSource::Operator => "operator's",
        CertificateSource::SelfSigned => "self-signed",
        CertificateSource::Unusable => {
            return view! {
                <span class="text-rose-700" title="The operator's certificate files for this gateway cannot be used; it does not listen until they are fixed">
                    "operator's files unusable: not listening"
                </span>
            }
            .into_any()
        }
        CertificateSource::None => {
            return view! { <span class="text-slate-500">"none (plain HTTP)"</span> }.into_any()
        }
    };
    view! {
        {label}" · "
        <a class="text-indigo-700 underline" href=format!("/api/v1/gateways/{}/certificate", g.id) download=format!("{}.pem", g.name)>"PEM"</a>
    }
    .into_any()
}

#[component]
fn GatewaysCard(d: GatewaysOverview, a: Actions) -> impl IntoView {
    let open = opened("confirm", "gateway:");
    let deleted = done(a.delete_gateway);
    let gone = done_for(a.delete_gateway, |s| s.id.clone());
    let delete_value = move || a.delete_gateway.value().get();
    let names: Vec<(String, String)> = d
        .gateways
        .iter()
        .map(|g| (g.id.clone(), g.name.clone()))
        .collect();
    let routes_of = |id: &str| d.routes.iter().filter(|r| r.route.gateway_id == id).count();
    let rows: Vec<_> = d
        .gateways
        .iter()
        .map(|g| (g.clone(), routes_of(&g.id)))
        .collect();
    view! {
        <Card title="Gateways">
            {if d.gateways.is_empty() {
                view! { <p class="text-sm text-slate-600">"No gateways yet. Create one with the form: it listens on the next free port."</p> }.into_any()
            } else {
                view! {
                    <table class=TABLE data-testid="gateways-table">
                        <thead><tr>
                            <th class=TH>"Name"</th><th class=format!("{TH} hidden sm:table-cell")>"Port"</th><th class=TH>"URL"</th>
                            <th class=TH>"Certificate"</th>
                            <th class=format!("{TH} text-right")>"Routes"</th><th class=TH></th>
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {rows.into_iter().map(|(g, routes)| {
                                let id = g.id.clone();
                                view! {
                                <tr data-gateway=g.name.clone() class:hidden=move || gone().as_deref() == Some(id.as_str())>
                                    <td class=format!("{TD} font-medium")>{g.name.clone()}</td>
                                    <td class=format!("{TD} hidden sm:table-cell tabular-nums")>{g.port}</td>
                                    <td class=format!("{TD} whitespace-nowrap font-mono text-xs") data-testid="gateway-url">{g.url.clone()}</td>
                                    <td class=format!("{TD} whitespace-nowrap") data-testid="gateway-certificate"><Certificate g=g.clone()/></td>
                                    <td class=format!("{TD} text-right tabular-nums")>{routes}</td>
                                    <td class=format!("{TD} text-right")>
                                        <a class=BUTTON_SMALL_DANGER href=format!("?confirm=gateway:{}#gateways", g.id) aria-label=format!("Delete gateway {}", g.name)>"Delete"</a>
                                    </td>
                                </tr>
                            }}).collect_view()}
                        </tbody>
                    </table>
                    <p class="mt-3 text-xs text-slate-500">"Deleting a gateway stops its listener and removes its routes and tokens."</p>
                }.into_any()
            }}
            <div id="gateways">
                {move || open().map(|id| match names.iter().find(|(gid, _)| *gid == id) {
                    Some(_) if gone().as_deref() == Some(id.as_str()) => ().into_any(),
                    Some((_, name)) => confirm_delete!(a.delete_gateway, id.clone(), format!("gateway {name}"), "/gateways".to_string(), delete_value),
                    None if deleted() => ().into_any(),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such gateway: it may have been deleted."</p> }.into_any(),
                })}
                {move || deleted().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Gateway deleted: its listener stopped."</p> })}
            </div>
        </Card>
    }
}

#[component]
fn NewGatewayCard(a: Actions) -> impl IntoView {
    let value = move || a.add_gateway.value().get();
    let added = done(a.add_gateway);
    let form = emptied_on_save(a.add_gateway);
    view! {
        <Card title="New gateway">
            <ActionForm action=a.add_gateway node_ref=form>
                <CsrfField/>
                <label class=LABEL for="gateway-name">"Name"</label>
                <input id="gateway-name" name="name" class=INPUT required placeholder="prod" value={echo::<CreateGatewayForm>("name")}/>
                {field_error(value, "name")}
                <div class="mt-4 flex flex-wrap items-center gap-4">
                    <button type="submit" class=BUTTON>"Create gateway"</button>
                    {move || added().then(|| match value().and_then(|r| r.ok()) {
                        Some(g) => view! { <span role="status" class="text-sm text-emerald-700">{format!("Gateway {} listens at {}.", g.name, g.url)}</span> }.into_any(),
                        None => view! { <span role="status" class="text-sm text-emerald-700">"Gateway created."</span> }.into_any(),
                    })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        </Card>
    }
}

/// One route's row: where it is and, in a form of its own, the endpoint it leads to.
#[component]
fn RouteRow(
    r: PublishedRoute,
    endpoints: Vec<(String, String)>,
    /// Just deleted here (until the page's data is read again).
    hidden: Signal<bool>,
) -> impl IntoView {
    let switch = ServerAction::<UpdateRouteForm>::new();
    let value = move || switch.value().get();
    let switched = move || matches!(value(), Some(Ok(_)));
    let current = r.route.endpoint_id.clone();
    let (id, label) = (r.route.id.clone(), format!("Endpoint behind {}", r.url));
    view! {
        <tr data-route=r.url.clone() class:hidden=move || hidden.get()>
            <td class=TD>{r.gateway_name.clone()}</td>
            <td class=TD>{if r.route.host.is_empty() { "any".to_string() } else { r.route.host.clone() }}</td>
            <td class=format!("{TD} font-mono text-xs")>{r.route.path_prefix.clone()}</td>
            <td class=format!("{TD} whitespace-nowrap font-mono text-xs")>{r.url.clone()}</td>
            <td class=TD>
                <ActionForm action=switch attr:class="flex items-center gap-2">
                    <CsrfField/>
                    <input type="hidden" name="id" value=id/>
                    <select name="endpoint_id" class="rounded-md border border-slate-300 px-2 py-1 text-sm" aria-label=label>
                        {endpoints.into_iter().map(|(id, name)| {
                            let selected = id == current;
                            view! { <option value=id selected=selected>{name}</option> }
                        }).collect_view()}
                    </select>
                    <button type="submit" class="rounded border border-slate-300 px-2 py-1 text-xs font-medium text-slate-700 hover:bg-slate-50">"Switch"</button>
                    {move || switched().then(|| view! { <span role="status" class="text-xs text-emerald-700">"Switched."</span> })}
                </ActionForm>
                {field_error(value, "endpoint_id")}
                {form_error(value)}
            </td>
            <td class=format!("{TD} text-right")>
                <a class=BUTTON_SMALL_DANGER href=format!("?confirm=route:{}#routes", r.route.id) aria-label=format!("Delete route {}", r.url)>"Delete"</a>
            </td>
        </tr>
    }
}

#[component]
fn RoutesCard(d: GatewaysOverview, a: Actions) -> impl IntoView {
    let open = opened("confirm", "route:");
    let deleted = done(a.delete_route);
    let gone = done_for(a.delete_route, |s| s.id.clone());
    let delete_value = move || a.delete_route.value().get();
    let urls: Vec<(String, String)> = d
        .routes
        .iter()
        .map(|r| (r.route.id.clone(), r.url.clone()))
        .collect();
    view! {
        <Card title="Routes">
            {if d.routes.is_empty() {
                view! { <p class="text-sm text-slate-600">"No routes yet: a route publishes an endpoint on a gateway under a path prefix."</p> }.into_any()
            } else {
                view! {
                    <table class=TABLE data-testid="routes-table">
                        <thead><tr>
                            <th class=TH>"Gateway"</th><th class=TH>"Host"</th><th class=TH>"Prefix"</th>
                            <th class=TH>"URL"</th><th class=TH>"Leads to"</th><th class=TH></th>
                        </tr></thead>
                        <tbody class="divide-y divide-slate-100">
                            {d.routes.iter().map(|r| {
                                let id = r.route.id.clone();
                                let hidden = Signal::derive(move || gone().as_deref() == Some(id.as_str()));
                                view! { <RouteRow r=r.clone() endpoints=d.endpoints.clone() hidden=hidden/> }
                            }).collect_view()}
                        </tbody>
                    </table>
                    <p class="mt-3 text-xs text-slate-500">"Switching a route keeps its URL: clients notice nothing, and no request in flight fails."</p>
                }.into_any()
            }}
            <div id="routes">
                {move || open().map(|id| match urls.iter().find(|(rid, _)| *rid == id) {
                    Some(_) if gone().as_deref() == Some(id.as_str()) => ().into_any(),
                    Some((_, url)) => confirm_delete!(a.delete_route, id.clone(), format!("route {url}"), "/gateways".to_string(), delete_value),
                    None if deleted() => ().into_any(),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such route: it may have been deleted."</p> }.into_any(),
                })}
                {move || deleted().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Route deleted: its URL answers 404."</p> })}
            </div>
        </Card>
    }
}

#[component]
fn NewRouteCard(d: GatewaysOverview, a: Actions) -> impl IntoView {
    let value = move || a.add_route.value().get();
    let added = done(a.add_route);
    let form = emptied_on_save(a.add_route);
    let body = if d.gateways.is_empty() {
        view! { <p class="text-sm text-slate-600">"Create a gateway first."</p> }.into_any()
    } else if d.endpoints.is_empty() {
        view! { <p class="text-sm text-slate-600">"No endpoints yet: create one on the "<a class="text-indigo-700 underline" href="/endpoints">"Endpoints"</a>" page."</p> }.into_any()
    } else {
        view! {
            <ActionForm action=a.add_route node_ref=form>
                <CsrfField/>
                <div class="space-y-3">
                    <div>
                        <label class=LABEL for="route-gateway">"Gateway"</label>
                        <select id="route-gateway" name="gateway_id" class=INPUT>
                            {d.gateways.iter().map(|g| view! {
                                <option value=g.id.clone() selected={echo_selected::<CreateRouteForm>("gateway_id", &g.id)}>{g.name.clone()}</option>
                            }).collect_view()}
                        </select>
                        {field_error(value, "gateway_id")}
                    </div>
                    <div>
                        <label class=LABEL for="route-host">"Host (empty: any)"</label>
                        <input id="route-host" name="host" class=INPUT placeholder="api.example.com" value={echo::<CreateRouteForm>("host")}/>
                        {field_error(value, "host")}
                    </div>
                    <div>
                        <label class=LABEL for="route-prefix">"Path prefix"</label>
                        <input id="route-prefix" name="path_prefix" class=format!("{INPUT} font-mono") required placeholder="/v1" value={echo::<CreateRouteForm>("path_prefix")}/>
                        {field_error(value, "path_prefix")}
                    </div>
                    <div>
                        <label class=LABEL for="route-endpoint">"Endpoint"</label>
                        <select id="route-endpoint" name="endpoint_id" class=INPUT>
                            {d.endpoints.iter().map(|(id, name)| view! {
                                <option value=id.clone() selected={echo_selected::<CreateRouteForm>("endpoint_id", id)}>{name.clone()}</option>
                            }).collect_view()}
                        </select>
                        {field_error(value, "endpoint_id")}
                    </div>
                </div>
                <div class="mt-4 flex flex-wrap items-center gap-4">
                    <button type="submit" class=BUTTON>"Create route"</button>
                    {move || added().then(|| view! { <span role="status" class="text-sm text-emerald-700">"Route created."</span> })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        }.into_any()
    };
    view! { <Card title="New route">{body}</Card> }
}

//! The gateways page's raw TCP routes: each route's port and address, the endpoint it
//! forwards to, TLS, the networks that may connect and whether a client certificate is asked
//! for; opened with a form of their own and closed after a confirmation (also through
//! `/api/v1/tcp-routes`).

use leptos::prelude::*;

use crate::api::{CreateTcpRouteForm, DeleteTcpRouteForm};
use crate::form::{done, done_for, echo_checked, echo_selected, echo_text, emptied_on_save};
use crate::model::GatewaysOverview;
use crate::pages::confirm::{confirm_delete, opened};
use crate::ui::*;

/// Columns left out on a phone.
const WIDE: &str = "hidden sm:table-cell";

/// The TCP routes' two actions (the page reloads its data after either).
#[derive(Clone, Copy)]
pub struct TcpActions {
    pub add: ServerAction<CreateTcpRouteForm>,
    pub delete: ServerAction<DeleteTcpRouteForm>,
}

impl Default for TcpActions {
    fn default() -> Self {
        TcpActions {
            add: ServerAction::new(),
            delete: ServerAction::new(),
        }
    }
}

impl TcpActions {
    /// Moves when either has answered.
    pub fn version(&self) -> usize {
        self.add.version().get() + self.delete.version().get()
    }
}

#[component]
pub fn TcpRoutesCard(d: GatewaysOverview, a: TcpActions) -> impl IntoView {
    let open = opened("confirm", "tcp:");
    let deleted = done(a.delete);
    let gone = done_for(a.delete, |s| s.id.clone());
    let delete_value = move || a.delete.value().get();
    let gateway = |id: &str| {
        d.gateways
            .iter()
            .find(|g| g.id == id)
            .map_or_else(|| id.to_string(), |g| g.name.clone())
    };
    let endpoint = |id: &str| {
        d.endpoints
            .iter()
            .find(|(e, _)| e == id)
            .map_or_else(|| id.to_string(), |(_, n)| n.clone())
    };
    let rows: Vec<_> = d
        .tcp_routes
        .iter()
        .map(|r| (r.clone(), gateway(&r.gateway_id), endpoint(&r.endpoint_id)))
        .collect();
    let addresses: Vec<(String, String)> = d
        .tcp_routes
        .iter()
        .map(|r| (r.id.clone(), r.address.clone()))
        .collect();
    view! {
        <Card title="TCP routes">
            {if rows.is_empty() {
                view! { <p class="text-sm text-slate-600">"No TCP routes: a TCP route gives an endpoint a port of its own for raw TCP, open only to the networks it lists."</p> }.into_any()
            } else {
                view! {
                    <div class="overflow-x-auto">
                        <table class=TABLE data-testid="tcp-routes-table">
                            <thead><tr>
                                <th class=TH>"Address"</th><th class=format!("{TH} {WIDE}")>"Gateway"</th><th class=TH>"Leads to"</th>
                                <th class=format!("{TH} {WIDE}")>"TLS"</th><th class=TH>"Allowed networks"</th><th class=format!("{TH} {WIDE}")>"Client certificates"</th><th class=TH></th>
                            </tr></thead>
                            <tbody class="divide-y divide-slate-100">
                                {rows.into_iter().map(|(r, g, e)| {
                                    let id = r.id.clone();
                                    view! {
                                    <tr data-tcp-route=r.address.clone() class:hidden=move || gone().as_deref() == Some(id.as_str())>
                                        <td class=format!("{TD} whitespace-nowrap font-mono text-xs")>{r.address.clone()}</td>
                                        <td class=format!("{TD} {WIDE}")>{g}</td>
                                        <td class=TD>{e}</td>
                                        <td class=format!("{TD} {WIDE}")>{if r.tls { "TLS" } else { "plain" }}</td>
                                        <td class=format!("{TD} font-mono text-xs")>{r.allowed_sources.join(", ")}</td>
                                        <td class=format!("{TD} {WIDE}")>{if r.client_ca.is_some() { "required" } else { "—" }}</td>
                                        <td class=format!("{TD} text-right")>
                                            <a class=BUTTON_SMALL_DANGER href=format!("?confirm=tcp:{}#tcp-routes", r.id) aria-label=format!("Close TCP route {}", r.address)>"Close"</a>
                                        </td>
                                    </tr>
                                }}).collect_view()}
                            </tbody>
                        </table>
                    </div>
                    <p class="mt-3 text-xs text-slate-500">"Closing a TCP route stops its port from accepting; connections already open finish."</p>
                }.into_any()
            }}
            <div id="tcp-routes">
                {move || open().map(|id| match addresses.iter().find(|(rid, _)| *rid == id) {
                    Some(_) if gone().as_deref() == Some(id.as_str()) => ().into_any(),
                    Some((_, address)) => confirm_delete!(a.delete, id.clone(), format!("TCP route {address}"), "/gateways".to_string(), delete_value),
                    None if deleted() => ().into_any(),
                    None => view! { <p class="mt-4 text-sm text-slate-600" role="status">"No such TCP route: it may have been closed."</p> }.into_any(),
                })}
                {move || deleted().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"TCP route closed: its port no longer accepts."</p> })}
            </div>
        </Card>
    }
}

#[component]
pub fn NewTcpRouteCard(d: GatewaysOverview, a: TcpActions) -> impl IntoView {
    let value = move || a.add.value().get();
    let added = done(a.add);
    let form = emptied_on_save(a.add);
    let body = if d.gateways.is_empty() || d.endpoints.is_empty() {
        view! { <p class="text-sm text-slate-600">"A TCP route needs a gateway and an endpoint."</p> }.into_any()
    } else {
        view! {
            <ActionForm action=a.add node_ref=form>
                <CsrfField/>
                <div class="space-y-3">
                    <div>
                        <label class=LABEL for="tcp-gateway">"Gateway"</label>
                        <select id="tcp-gateway" name="gateway_id" class=INPUT>
                            {d.gateways.iter().map(|g| view! {
                                <option value=g.id.clone() selected={echo_selected::<CreateTcpRouteForm>("gateway_id", &g.id)}>{g.name.clone()}</option>
                            }).collect_view()}
                        </select>
                        {field_error(value, "gateway_id")}
                    </div>
                    <div>
                        <label class=LABEL for="tcp-endpoint">"Endpoint"</label>
                        <select id="tcp-endpoint" name="endpoint_id" class=INPUT>
                            {d.endpoints.iter().map(|(id, name)| view! {
                                <option value=id.clone() selected={echo_selected::<CreateTcpRouteForm>("endpoint_id", id)}>{name.clone()}</option>
                            }).collect_view()}
                        </select>
                        {field_error(value, "endpoint_id")}
                    </div>
                    <div>
                        <label class=LABEL for="tcp-sources">"Allowed networks (one per line)"</label>
                        <textarea id="tcp-sources" name="allowed_sources" rows="3" class=format!("{INPUT} font-mono") required placeholder="10.0.0.0/8" inner_html={echo_text::<CreateTcpRouteForm>("allowed_sources")}></textarea>
                        {field_error(value, "allowed_sources")}
                    </div>
                    <label class="flex items-center gap-2 text-sm text-slate-700">
                        <input type="checkbox" name="tls" value="on" class="h-4 w-4" checked={echo_checked::<CreateTcpRouteForm>("tls", false)}/>
                        "TLS with the gateway's certificate"
                    </label>
                    <div>
                        <label class=LABEL for="tcp-client-ca">"Client certificate authorities (PEM, optional; needs TLS)"</label>
                        <textarea id="tcp-client-ca" name="client_ca" rows="3" class=format!("{INPUT} font-mono text-xs") placeholder="-----BEGIN CERTIFICATE-----" inner_html={echo_text::<CreateTcpRouteForm>("client_ca")}></textarea>
                        {field_error(value, "client_ca")}
                    </div>
                </div>
                <div class="mt-4 flex flex-wrap items-center gap-4">
                    <button type="submit" class=BUTTON>"Open TCP route"</button>
                    {move || added().then(|| match value().and_then(|r| r.ok()) {
                        Some(r) => view! { <span role="status" class="text-sm text-emerald-700">{format!("TCP route open at {}.", r.address)}</span> }.into_any(),
                        None => view! { <span role="status" class="text-sm text-emerald-700">"TCP route open."</span> }.into_any(),
                    })}
                </div>
                <div class="mt-3">{form_error(value)}</div>
            </ActionForm>
        }.into_any()
    };
    view! { <Card title="New TCP route">{body}</Card> }
}

//! The gateways page's raw TCP routes: each route's port and address, the endpoint it
//! forwards to, TLS, and the networks that may connect (created, switched and closed through
//! `/api/v1/tcp-routes`).

use leptos::prelude::*;

use crate::model::GatewaysOverview;
use crate::ui::*;

/// Columns left out on a phone.
const WIDE: &str = "hidden sm:table-cell";

#[component]
pub fn TcpRoutesCard(d: GatewaysOverview) -> impl IntoView {
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
    view! {
        <Card title="TCP routes">
            {if rows.is_empty() {
                view! { <p class="text-sm text-slate-600">"No TCP routes: a TCP route gives an endpoint a port of its own for raw TCP (POST /api/v1/tcp-routes), open only to the networks it lists."</p> }.into_any()
            } else {
                view! {
                    <div class="overflow-x-auto">
                        <table class=TABLE data-testid="tcp-routes-table">
                            <thead><tr>
                                <th class=TH>"Address"</th><th class=format!("{TH} {WIDE}")>"Gateway"</th><th class=TH>"Leads to"</th>
                                <th class=format!("{TH} {WIDE}")>"TLS"</th><th class=TH>"Allowed networks"</th>
                            </tr></thead>
                            <tbody class="divide-y divide-slate-100">
                                {rows.into_iter().map(|(r, g, e)| view! {
                                    <tr>
                                        <td class=format!("{TD} whitespace-nowrap font-mono text-xs")>{r.address.clone()}</td>
                                        <td class=format!("{TD} {WIDE}")>{g}</td>
                                        <td class=TD>{e}</td>
                                        <td class=format!("{TD} {WIDE}")>{if r.tls { "TLS" } else { "plain" }}</td>
                                        <td class=format!("{TD} font-mono text-xs")>{r.allowed_sources.join(", ")}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
        </Card>
    }
}
